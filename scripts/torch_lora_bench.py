#!/usr/bin/env python3
"""PyTorch peer of `ragforge bench models --only qwen2.5-0.5b-lora`.

Times the same LoRA SFT update in plain PyTorch (Debian's python3-torch; no
transformers or peft needed): a randomly initialised Qwen2ForCausalLM of
Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads / 2 KV heads,
intermediate 4864, vocab 151,936, tied embeddings, q/k/v biases), written
as HF's modeling_qwen2 computes it in float32 (RMSNorm, rotate_half RoPE,
repeat_kv GQA, eager softmax attention, SwiGLU), with PEFT's LoRA on every
projection (r 8, lora_alpha 16: y = W x + b + 2·B(A x), base frozen), batch
2 x 512 random tokens with the first 256 of each row labelled -100, loss
cross_entropy(logits[:, :-1], labels[:, 1:]), clip_grad_norm_(1.0) and
torch.optim.AdamW(lr 1e-5) on the LoRA parameters. Prints one JSON line:
ms/step (min, median after one warm-up step), tokens/s, trainable
parameters, AdamW state floats and the process's peak RSS.

--check DIR (the repository's ../shared/fixtures) first replays update 1's
loss of train-qwen2-lora (qwen2-tiny + init.safetensors) to show this is the
same computation.

--perplexity instead times the peer of `ragforge bench models --only
qwen2.5-0.5b`'s perplexity call: continuation log-probs, mean NLL and
perplexity of 8 (prompt 448, continuation 64) random pairs in one batch,
no LoRA, under torch.no_grad (one warm-up call, then --steps timed calls;
generation is not timed).

  /usr/bin/python3 scripts/torch_lora_bench.py --threads 2 --check ../shared/fixtures
  /usr/bin/python3 scripts/torch_lora_bench.py --threads 2 --perplexity --steps 2
"""
from safetensors_np import read_safetensors  # beside this script
import argparse, json, math, os, resource, statistics, time

SHAPE = dict(hidden=896, inter=4864, layers=24, heads=14, kv=2, vocab=151936, theta=1e6, eps=1e-6, tied=True, bias=True)
MODULES = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


class Model:
    """Qwen2 weights as a dict of HF names; LoRA A/B under <module>.lora_{A,B}.weight."""

    def __init__(self, torch, s, weights, lora, r=8, alpha=16):
        self.t, self.s, self.w, self.lora, self.scaling = torch, s, weights, lora, alpha / r
        self.D = s["hidden"] // s["heads"]
        inv = 1.0 / (s["theta"] ** (torch.arange(0, self.D, 2, dtype=torch.int64).float() / self.D))
        self.inv_freq = inv

    def linear(self, name, x):
        F = self.t.nn.functional
        y = F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))
        if name + ".lora_A.weight" in self.lora:
            y = y + self.scaling * F.linear(F.linear(x, self.lora[name + ".lora_A.weight"]), self.lora[name + ".lora_B.weight"])
        return y

    def continuation_logprobs(self, ids, prompt_len):
        """Log-probs of ids[:, prompt_len:] given everything before, the
        rows' mean NLL and perplexity; lm_head and the log-sum-exp only at
        the continuation's positions (as ragforge's ContinuationLogProbs)."""
        h = self.hidden(ids, self.t.ones_like(ids))[:, prompt_len - 1 : -1]
        lp = self.t.log_softmax(self.t.nn.functional.linear(h, self.head()), -1)
        tok = lp.gather(-1, ids[:, prompt_len:, None])[..., 0]
        nll = -tok.mean(-1)
        return tok, nll, nll.exp()

    def rms(self, x, w):
        return w * (x * self.t.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.s["eps"]))

    def hidden(self, ids, mask):
        """The final-norm hidden states (B, L, hidden)."""
        t, s, D = self.t, self.s, self.D
        B, L = ids.shape
        h = self.w["model.embed_tokens.weight"][ids]
        pos = t.arange(L).float()
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = t.cat([freqs, freqs], -1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        rot = lambda x: t.cat([-x[..., D // 2:], x[..., : D // 2]], -1)
        causal = t.triu(t.ones(L, L, dtype=t.bool), 1)
        bias = t.zeros(B, 1, L, L).masked_fill(causal[None, None] | (mask[:, None, None, :] == 0), t.finfo(t.float32).min)
        rep = s["heads"] // s["kv"]
        for i in range(s["layers"]):
            p = f"model.layers.{i}."
            x = self.rms(h, self.w[p + "input_layernorm.weight"])
            q = self.linear(p + "self_attn.q_proj", x).view(B, L, s["heads"], D).transpose(1, 2)
            k = self.linear(p + "self_attn.k_proj", x).view(B, L, s["kv"], D).transpose(1, 2)
            v = self.linear(p + "self_attn.v_proj", x).view(B, L, s["kv"], D).transpose(1, 2)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            a = t.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + bias, -1) @ v
            h = h + self.linear(p + "self_attn.o_proj", a.transpose(1, 2).reshape(B, L, -1))
            x = self.rms(h, self.w[p + "post_attention_layernorm.weight"])
            h = h + self.linear(p + "mlp.down_proj", t.nn.functional.silu(self.linear(p + "mlp.gate_proj", x)) * self.linear(p + "mlp.up_proj", x))
        return self.rms(h, self.w["model.norm.weight"])

    def head(self):
        return self.w["model.embed_tokens.weight"] if self.s["tied"] else self.w["lm_head.weight"]

    def loss(self, ids, mask, labels):
        logits = self.t.nn.functional.linear(self.hidden(ids, mask)[:, :-1], self.head())
        return self.t.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


def check(torch, fixtures):
    """Update 1's loss of train-qwen2-lora (expected.json per_step.loss[0])."""
    base = read_safetensors(os.path.join(fixtures, "qwen2-tiny", "model.safetensors"))
    init = read_safetensors(os.path.join(fixtures, "train-qwen2-lora", "init.safetensors"))
    exp = read_safetensors(os.path.join(fixtures, "train-qwen2-lora", "expected.safetensors"))
    want = json.load(open(os.path.join(fixtures, "train-qwen2-lora", "expected.json")))["per_step"]["loss"][0]
    s = dict(hidden=64, inter=160, layers=2, heads=4, kv=2, vocab=512, theta=1e4, eps=1e-6, tied=False, bias=True)
    w = {k: torch.from_numpy(v) for k, v in base.items()}
    lora = {k.removeprefix("base_model.model."): torch.from_numpy(v) for k, v in init.items()}
    # B = 0 at init: give B the final weights so the LoRA term counts in the check.
    final = {k.removeprefix("final.base_model.model."): torch.from_numpy(v) for k, v in exp.items() if k.startswith("final.")}
    m = Model(torch, s, w, lora)
    ids, mask, labels = (torch.from_numpy(exp["inputs." + n]).long() for n in ("input_ids", "attention_mask", "labels"))
    got = m.loss(ids, mask, labels).item()
    m.lora = final
    got_final = m.loss(ids, mask, labels).item()
    want_final = json.load(open(os.path.join(fixtures, "train-qwen2-lora", "expected.json")))["final_loss_after_step_8"]
    ok = abs(got - want) < 1e-5 and abs(got_final - want_final) < 1e-5
    print(json.dumps(dict(check="train-qwen2-lora", loss_init=got, want=want, loss_final=got_final, want_final=want_final, ok=ok)))
    if not ok:
        raise SystemExit("torch_lora_bench: the replay does not match the fixture")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--check", metavar="FIXTURES", help="first replay train-qwen2-lora from this fixtures directory")
    ap.add_argument("--perplexity", action="store_true",
                    help="time the continuation log-probs of 8 (prompt 448, continuation 64) pairs under no_grad instead of the LoRA step")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    if a.check:
        check(torch, a.check)
    torch.manual_seed(0)
    s = dict(SHAPE, layers=a.layers)
    H, I, V, KVD = s["hidden"], s["inter"], s["vocab"], s["kv"] * (s["hidden"] // s["heads"])
    w = {"model.embed_tokens.weight": torch.randn(V, H) * 0.02, "model.norm.weight": torch.ones(H)}
    shapes = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (KVD, H), "self_attn.v_proj": (KVD, H), "self_attn.o_proj": (H, H),
              "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
    lora = {}
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"], w[p + "post_attention_layernorm.weight"] = torch.ones(H), torch.ones(H)
        for m, (o, n) in shapes.items():
            w[p + m + ".weight"] = torch.randn(o, n) * 0.02
            if m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                w[p + m + ".bias"] = torch.zeros(o)
            lora[p + m + ".lora_A.weight"] = (torch.rand(8, n) * 2 - 1) / math.sqrt(n)
            lora[p + m + ".lora_B.weight"] = torch.zeros(o, 8)
    for v in lora.values():
        v.requires_grad_(True)
    if a.perplexity:
        return perplexity(torch, s, w, a.steps)
    model = Model(torch, s, w, lora)
    params = list(lora.values())
    opt = torch.optim.AdamW(params, lr=1e-5)
    B, L = 2, 512
    ids = torch.randint(3, V, (B, L))
    labels = ids.clone()
    labels[:, : L // 2] = -100
    mask = torch.ones_like(ids)
    times = []
    for _ in range(a.steps + 1):
        t0 = time.perf_counter()
        loss = model.loss(ids, mask, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(1e3 * (time.perf_counter() - t0))
    timed = times[1:]
    state = sum(v.numel() for st in opt.state.values() for v in st.values() if torch.is_tensor(v) and v.dim() > 0)
    print(json.dumps(dict(name="qwen2.5-0.5b-lora", torch=torch.__version__, threads=torch.get_num_threads(), layers=s["layers"],
                          first_step_ms=times[0], ms_per_step_min=min(timed), ms_per_step_median=statistics.median(timed),
                          train_tokens_per_sec=B * L / (statistics.median(timed) / 1e3), trainable_params=sum(p.numel() for p in params),
                          frozen_params=sum(v.numel() for v in w.values()), optimizer_floats=state,
                          peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)))


def perplexity(torch, s, w, steps, pairs=8, prompt_len=448, cont_len=64):
    """The peer of `ragforge bench models --only qwen2.5-0.5b`'s perplexity
    call: one batch of pairs × (prompt_len + cont_len) random tokens, no
    LoRA, no_grad; one warm-up call, then steps timed calls."""
    model = Model(torch, s, w, {})
    ids = torch.randint(3, s["vocab"], (pairs, prompt_len + cont_len))
    times = []
    with torch.no_grad():
        for _ in range(steps + 1):
            t0 = time.perf_counter()
            _, _, ppl = model.continuation_logprobs(ids, prompt_len)
            times.append(1e3 * (time.perf_counter() - t0))
    timed = times[1:]
    print(json.dumps(dict(name="qwen2.5-0.5b-perplexity", torch=torch.__version__, threads=torch.get_num_threads(), layers=s["layers"],
                          pairs=pairs, prompt_len=prompt_len, continuation=cont_len, steps=steps,
                          first_call_ms=times[0], perplexity_ms_min=min(timed), perplexity_ms_median=statistics.median(timed),
                          tokens_per_sec=pairs * (prompt_len + cont_len) / (statistics.median(timed) / 1e3),
                          parameters=sum(v.numel() for v in w.values()), mean_perplexity=ppl.mean().item(),
                          peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)))


if __name__ == "__main__":
    main()
