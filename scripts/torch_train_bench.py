#!/usr/bin/env python3
"""PyTorch peer of `ragforge bench train`.

One training step (forward, backward, torch.optim.AdamW update) of the same
shapes at random init, in plain PyTorch (Debian's python3-torch; no
transformers): the three architectures written as HF computes them in
float32, in train mode (dropout 0.1 as their configs):

  flan-t5-large  T5ForConditionalGeneration (d_model 1024, 24+24 layers, 16
                 heads, d_kv 64, gated-gelu d_ff 2816, vocab 32128, untied
                 lm_head; RMS layer norms, bucketed relative position bias
                 from block 0, unscaled attention); the RAG² filter step:
                 batch 4 x 512 input tokens, 2 target tokens, cross-entropy,
                 AdamW lr 3e-5.
  bge-large      BertModel (1024/24/16/4096, vocab 30522, post-LN, erf GELU).
  bge-m3         XLMRobertaModel (the same stack, vocab 250002, positions from
                 padding_idx + 1, one token type, LayerNorm eps 1e-5).
                 Both: the SL-HyDE InfoNCE step (CLS pooled, normalised,
                 tau 0.02, in-batch and hard negatives) of 4 queries x (1
                 positive + 7 hard negatives) x 512 tokens with GradCache
                 passes of --sub-batch-tokens (4096: 8 rows, as ragforge),
                 clip_grad_norm_(1.0), AdamW lr 1e-5, weight decay 0.01.

--gradient-checkpointing wraps every transformer block in
torch.utils.checkpoint.checkpoint (use_reentrant=False; the RNG state is
preserved, as HF's gradient_checkpointing). Two steps run: the first is
reported as compile_seconds (PyTorch has nothing to compile; it is the
warm-up), the second as seconds_per_step. Prints the fields `ragforge bench
train` prints, then exits; peak_rss_mib is ru_maxrss. The --layers,
--hidden, --heads, --ffn, --vocab overrides mean what they mean there.

  /usr/bin/python3 scripts/torch_train_bench.py --shape bge-large --threads 2
  /usr/bin/python3 scripts/torch_train_bench.py --shape flan-t5-large --gradient-checkpointing --threads 2
"""
import argparse, json, math, resource, time

SHAPES = {
    "flan-t5-large": dict(hidden=1024, layers=24, heads=16, ffn=2816, vocab=32128),
    "bge-large": dict(hidden=1024, layers=24, heads=16, ffn=4096, vocab=30522, max_pos=512, pad=0, eps=1e-12, type_vocab=2),
    "bge-m3": dict(hidden=1024, layers=24, heads=16, ffn=4096, vocab=250002, max_pos=8194, pad=1, eps=1e-5, type_vocab=1),
}


def checkpointed(torch, on, fn, *args):
    if on:
        return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)
    return fn(*args)


class T5:
    """T5 v1.1 / Flan-T5 (gated-gelu) as HF modeling_t5, in train mode."""

    def __init__(self, torch, s, ckpt, p=0.1, buckets=32, max_dist=128):
        nn = torch.nn
        self.t, self.s, self.ckpt, self.p, self.buckets, self.max_dist = torch, s, ckpt, p, buckets, max_dist
        d, f, h, L = s["hidden"], s["ffn"], s["heads"], s["layers"]
        self.inner = d  # heads x d_kv, d_kv = hidden / heads
        lin = lambda i, o: nn.Linear(i, o, bias=False)
        attn = lambda: nn.ModuleDict(dict(q=lin(d, d), k=lin(d, d), v=lin(d, d), o=lin(d, d)))
        ff = lambda: nn.ModuleDict(dict(wi_0=lin(d, f), wi_1=lin(d, f), wo=lin(f, d)))
        norm = lambda: nn.Parameter(torch.ones(d))
        self.m = nn.ModuleDict(dict(
            shared=nn.Embedding(s["vocab"], d),
            enc=nn.ModuleList([nn.ModuleDict(dict(sa=attn(), ff=ff())) for _ in range(L)]),
            dec=nn.ModuleList([nn.ModuleDict(dict(sa=attn(), ca=attn(), ff=ff())) for _ in range(L)]),
            enc_bias=nn.Embedding(buckets, h), dec_bias=nn.Embedding(buckets, h),
            lm_head=lin(d, s["vocab"]),
        ))
        self.norms = nn.ParameterDict({k: norm() for k in
                                       [f"e{i}_{j}" for i in range(L) for j in range(2)] +
                                       [f"d{i}_{j}" for i in range(L) for j in range(3)] + ["ef", "df"]})

    def params(self):
        return list(self.m.parameters()) + list(self.norms.parameters())

    def rms(self, x, w):
        return w * (x * self.t.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def drop(self, x):
        return self.t.nn.functional.dropout(x, self.p, True)

    def bucket(self, rel, bidirectional):
        t, n, ret = self.t, self.buckets, 0
        if bidirectional:
            n //= 2
            ret = (rel > 0).long() * n
            rel = rel.abs()
        else:
            rel = -t.clamp(rel, max=0)
        exact = n // 2
        large = exact + (t.log(rel.float() / exact) / math.log(self.max_dist / exact) * (n - exact)).long()
        large = t.clamp(large, max=n - 1)
        return ret + t.where(rel < exact, rel, large)

    def pos_bias(self, emb, q, k, bidirectional):
        t = self.t
        rel = t.arange(k)[None, :] - t.arange(q)[:, None]
        return emb(self.bucket(rel, bidirectional)).permute(2, 0, 1)[None]  # [1, H, q, k]

    def attention(self, a, x, kv, bias):
        B, Lq, _ = x.shape
        H = self.s["heads"]
        split = lambda y: y.view(B, -1, H, self.inner // H).transpose(1, 2)
        q, k, v = split(a["q"](x)), split(a["k"](kv)), split(a["v"](kv))
        scores = q @ k.transpose(-1, -2) + bias  # T5: no 1/sqrt(d_kv)
        w = self.drop(scores.float().softmax(-1))
        return a["o"]((w @ v).transpose(1, 2).reshape(B, Lq, self.inner))

    def ff(self, f, x):
        g = self.t.nn.functional.gelu(f["wi_0"](x), approximate="tanh")  # gelu_new
        return f["wo"](self.drop(g * f["wi_1"](x)))

    def enc_block(self, i, h, bias):
        b = self.m["enc"][i]
        n = self.rms(h, self.norms[f"e{i}_0"])
        h = h + self.drop(self.attention(b["sa"], n, n, bias))
        return h + self.drop(self.ff(b["ff"], self.rms(h, self.norms[f"e{i}_1"])))

    def dec_block(self, i, h, enc, self_bias, cross_bias):
        b = self.m["dec"][i]
        n = self.rms(h, self.norms[f"d{i}_0"])
        h = h + self.drop(self.attention(b["sa"], n, n, self_bias))
        n = self.rms(h, self.norms[f"d{i}_1"])
        h = h + self.drop(self.attention(b["ca"], n, enc, cross_bias))
        return h + self.drop(self.ff(b["ff"], self.rms(h, self.norms[f"d{i}_2"])))

    def loss(self, ids, mask, dec_ids, labels):
        t, L = self.t, ids.shape[1]
        pad = (1.0 - mask[:, None, None, :].float()) * t.finfo(t.float32).min
        h = self.drop(self.m["shared"](ids))
        bias = self.pos_bias(self.m["enc_bias"], L, L, True) + pad
        for i in range(self.s["layers"]):
            h = checkpointed(t, self.ckpt, lambda h, i=i: self.enc_block(i, h, bias), h)
        enc = self.drop(self.rms(h, self.norms["ef"]))
        T = dec_ids.shape[1]
        causal = t.triu(t.full((T, T), t.finfo(t.float32).min), 1)[None, None]
        self_bias = self.pos_bias(self.m["dec_bias"], T, T, False) + causal
        h = self.drop(self.m["shared"](dec_ids))
        for i in range(self.s["layers"]):
            h = checkpointed(t, self.ckpt, lambda h, i=i: self.dec_block(i, h, enc, self_bias, pad), h)
        h = self.drop(self.rms(h, self.norms["df"]))
        logits = self.m["lm_head"](h)  # untied: no d_model^-1/2 rescale
        return t.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


class Encoder:
    """BertModel / XLMRobertaModel (post-LN, erf GELU) in train mode."""

    def __init__(self, torch, s, ckpt, p=0.1):
        nn = torch.nn
        self.t, self.s, self.ckpt, self.p = torch, s, ckpt, p
        d, f = s["hidden"], s["ffn"]
        ln = lambda: nn.LayerNorm(d, eps=s["eps"])
        self.m = nn.ModuleDict(dict(
            word=nn.Embedding(s["vocab"], d), pos=nn.Embedding(s["max_pos"], d), token_type=nn.Embedding(s["type_vocab"], d), ln=ln(),
            layers=nn.ModuleList([nn.ModuleDict(dict(q=nn.Linear(d, d), k=nn.Linear(d, d), v=nn.Linear(d, d), o=nn.Linear(d, d), ln1=ln(),
                                                     i=nn.Linear(d, f), out=nn.Linear(f, d), ln2=ln())) for _ in range(s["layers"])]),
        ))

    def params(self):
        return list(self.m.parameters())

    def drop(self, x):
        return self.t.nn.functional.dropout(x, self.p, True)

    def block(self, i, x, key_bias):
        b, B, L, H = self.m["layers"][i], x.shape[0], x.shape[1], self.s["heads"]
        split = lambda y: y.view(B, L, H, -1).transpose(1, 2)
        q, k, v = split(b["q"](x)), split(b["k"](x)), split(b["v"](x))
        w = self.drop(((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]) + key_bias).softmax(-1))
        x = b["ln1"](x + self.drop(b["o"]((w @ v).transpose(1, 2).reshape(B, L, -1))))
        ff = b["out"](self.t.nn.functional.gelu(b["i"](x)))
        return b["ln2"](x + self.drop(ff))

    def embed(self, ids):
        t, s = self.t, self.s
        mask = (ids != s["pad"]).long() if s["pad"] == 1 else t.ones_like(ids)
        pos = t.cumsum(mask, 1) * mask + s["pad"] if s["pad"] == 1 else t.arange(ids.shape[1])[None]
        x = self.m["word"](ids) + self.m["pos"](pos) + self.m["token_type"](t.zeros_like(ids))
        x = self.drop(self.m["ln"](x))
        key_bias = t.zeros(ids.shape[0], 1, 1, ids.shape[1])
        for i in range(s["layers"]):
            x = checkpointed(t, self.ckpt, lambda x, i=i: self.block(i, x, key_bias), x)
        return t.nn.functional.normalize(x[:, 0], dim=-1)  # CLS, normalised


def infonce(torch, q, d, negatives, tau=0.02):
    """q [Q, H]; d [Q*(1+negatives), H], query i's positive at row i*(1+negatives)."""
    scores = q @ d.T / tau
    target = torch.arange(q.shape[0]) * (1 + negatives)
    return torch.nn.functional.cross_entropy(scores, target)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--batch", type=int, default=4, help="flan-t5-large: windows; bge-*: queries")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--target-tokens", type=int, default=2)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--sub-batch-tokens", type=int, default=4096, help="bge-*: padded tokens per GradCache pass")
    for k in ["layers", "hidden", "heads", "ffn", "vocab"]:
        ap.add_argument("--" + k, type=int, default=0, help="override (0: the shape's)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    a = ap.parse_args()

    import torch
    import torch.utils.checkpoint  # noqa: F401 (a submodule: torch.utils.checkpoint.checkpoint)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    s = dict(SHAPES[a.shape])
    for k in ["layers", "hidden", "heads", "ffn", "vocab"]:
        if getattr(a, k) > 0:
            s[k] = getattr(a, k)
    if s["hidden"] % s["heads"]:
        raise SystemExit(f"hidden {s['hidden']} is not a multiple of heads {s['heads']}")
    ids = lambda n, L: torch.randint(2, s["vocab"], (n, L))
    if a.shape == "flan-t5-large":
        model = T5(torch, s, a.gradient_checkpointing)
        opt = torch.optim.AdamW(model.params(), lr=3e-5, weight_decay=0.0)
        x, y = ids(a.batch, a.seq), ids(a.batch, a.target_tokens)
        dec = torch.cat([torch.zeros(a.batch, 1, dtype=torch.long), y[:, :-1]], 1)  # shift right, start id 0
        step_name = f"{a.batch}×{a.seq}/{a.target_tokens}"

        def step():
            opt.zero_grad(set_to_none=True)
            model.loss(x, torch.ones_like(x), dec, y).backward()
            opt.step()
    else:
        model = Encoder(torch, s, a.gradient_checkpointing)
        decay = [p for p in model.params() if p.dim() > 1]
        rest = [p for p in model.params() if p.dim() <= 1]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=1e-5)
        texts = ids(a.batch * (2 + a.negatives), a.seq)
        rows = max(1, a.sub_batch_tokens // a.seq)
        step_name = f"{a.batch}×(1+{a.negatives})×{a.seq}"

        def step():
            # GradCache: embeddings without graph, the loss's gradient
            # with respect to them, then each pass again with its gradient.
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                emb = torch.cat([model.embed(texts[i:i + rows]) for i in range(0, len(texts), rows)])
            emb.requires_grad_(True)
            loss = infonce(torch, emb[:a.batch], emb[a.batch:], a.negatives)
            loss.backward()
            for i in range(0, len(texts), rows):
                model.embed(texts[i:i + rows]).backward(emb.grad[i:i + rows])
            torch.nn.utils.clip_grad_norm_(model.params(), 1.0)
            opt.step()

    params = sum(p.numel() for p in model.params())
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    step()
    sec = time.perf_counter() - t0
    out = dict(shape=a.shape, gradient_checkpointing=a.gradient_checkpointing, step=step_name, params=params,
               seconds_per_step=round(sec, 3), compile_seconds=round(first, 3),
               peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
               threads=torch.get_num_threads(), torch=torch.__version__)
    print(" ".join(f"{k}={v}" for k, v in out.items()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
