#!/usr/bin/env python3
"""PyTorch peer of `ragforge bench models --only bge-large|bge-m3|bge-small --skip-train`.

Times the same encoding in plain PyTorch (Debian's python3-torch; no
transformers needed): a randomly initialised BERT-family encoder written as
HF's BertModel / XLMRobertaModel compute it (word + position + token-type
embeddings and LayerNorm, post-LN self-attention with the additive
(1 - mask) * float32_min key mask, exact-erf GELU feed-forward; XLM-R's
positions counted from padding_idx + 1), CLS pooling and L2 normalisation,
over --batch passages of --length random tokens (never the pad id), under
torch.no_grad. One warm-up call, then --steps timed calls. Prints one JSON
line with the fields of `bench models --json`: name, backend,
retriever.{steps, compile_ms, encode_passages_per_sec, encode_length,
encode_dtype, encode_weight_bytes}, peak_rss_bytes, and threads (torch's
intra-op threads; ragforge's gomaxprocs).

--dtype bfloat16 holds the weights in bfloat16 as HF's
from_pretrained(torch_dtype=torch.bfloat16) does, so PyTorch also computes
in bfloat16; ragforge holds them in bfloat16 and computes in float32.

--check DIR (the repository's ../shared/fixtures) first replays the
bert-tiny and xlmr-tiny fixtures (last_hidden_state and the normalised CLS
embedding within the README's tolerances) to show this is the same
computation.

  /usr/bin/python3 scripts/torch_bert_bench.py --check ../shared/fixtures --name tiny --threads 2
  /usr/bin/python3 scripts/torch_bert_bench.py --name bge-large --threads 2 --steps 3
  /usr/bin/python3 scripts/torch_bert_bench.py --name bge-m3 --dtype bfloat16 --threads 2 --steps 3
"""
from safetensors_np import read_safetensors  # beside this script
import argparse, json, math, os, resource, sys, time

# The shapes of `bench models` (bert.LargeConfig, xlmr.BGEM3Config,
# bert.BGESmallConfig) and tiny ones for proving the script quickly.
SHAPES = {
    "bge-large": dict(arch="bert", hidden=1024, layers=24, heads=16, inter=4096, vocab=30522, max_pos=512, types=2, pad=0, eps=1e-12),
    "bge-m3": dict(arch="xlm-roberta", hidden=1024, layers=24, heads=16, inter=4096, vocab=250002, max_pos=8194, types=1, pad=1, eps=1e-5),
    "bge-small": dict(arch="bert", hidden=384, layers=12, heads=12, inter=1536, vocab=30522, max_pos=512, types=2, pad=0, eps=1e-12),
    "tiny": dict(arch="bert", hidden=128, layers=2, heads=2, inter=512, vocab=1000, max_pos=512, types=2, pad=0, eps=1e-12),
    "tiny-xlmr": dict(arch="xlm-roberta", hidden=128, layers=2, heads=2, inter=512, vocab=1000, max_pos=514, types=1, pad=1, eps=1e-5),
}


def names(s):
    """HF parameter names (BertModel / XLMRobertaModel, no prefix) and shapes."""
    h, i = s["hidden"], s["inter"]
    out = {"embeddings.word_embeddings.weight": (s["vocab"], h),
           "embeddings.position_embeddings.weight": (s["max_pos"], h),
           "embeddings.token_type_embeddings.weight": (s["types"], h),
           "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for l in range(s["layers"]):
        p = f"encoder.layer.{l}."
        for m, shape in [("attention.self.query", (h, h)), ("attention.self.key", (h, h)), ("attention.self.value", (h, h)),
                         ("attention.output.dense", (h, h)), ("intermediate.dense", (i, h)), ("output.dense", (h, i))]:
            out[p + m + ".weight"], out[p + m + ".bias"] = shape, shape[:1]
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            out[p + ln + ".weight"], out[p + ln + ".bias"] = (h,), (h,)
    return out


def random_weights(torch, s, dtype):
    """HF's _init_weights: N(0, 0.02) for linears and embeddings (padding rows 0), LayerNorm 1/0, biases 0."""
    g = torch.Generator().manual_seed(1)
    w = {}
    for n, shape in names(s).items():
        if n.endswith("LayerNorm.weight"):
            t = torch.ones(shape)
        elif n.endswith(".bias"):
            t = torch.zeros(shape)
        else:
            t = torch.randn(shape, generator=g) * 0.02
            if n == "embeddings.word_embeddings.weight" or (s["arch"] == "xlm-roberta" and n == "embeddings.position_embeddings.weight"):
                t[s["pad"]] = 0
        w[n] = t.to(dtype)  # one tensor at a time: never the whole model in float32
    return w


def encode(torch, s, w, ids, mask, types=None):
    """last_hidden_state [B, L, H] of BertModel / XLMRobertaModel (eval mode)."""
    F = torch.nn.functional
    B, L = ids.shape
    h, nh = s["hidden"], s["heads"]
    hd = h // nh
    if s["arch"] == "xlm-roberta":
        real = (ids != s["pad"]).long()
        pos = torch.cumsum(real, 1) * real + s["pad"]
    else:
        pos = torch.arange(L).unsqueeze(0).expand(B, L)
    if types is None:
        types = torch.zeros_like(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][pos] + w["embeddings.token_type_embeddings.weight"][types]
    x = F.layer_norm(x, (h,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], s["eps"])
    dt = x.dtype
    bias = ((1.0 - mask.to(dt)) * torch.finfo(dt).min).view(B, 1, 1, L)
    lin = lambda x, n: F.linear(x, w[n + ".weight"], w[n + ".bias"])
    for l in range(s["layers"]):
        p = f"encoder.layer.{l}."
        split = lambda t: t.view(B, L, nh, hd).transpose(1, 2)
        q, k, v = (split(lin(x, p + "attention.self." + m)) for m in ("query", "key", "value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + bias, -1)
        ctx = (probs @ v).transpose(1, 2).reshape(B, L, h)
        x = F.layer_norm(x + lin(ctx, p + "attention.output.dense"), (h,), w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], s["eps"])
        ff = lin(F.gelu(lin(x, p + "intermediate.dense")), p + "output.dense")
        x = F.layer_norm(x + ff, (h,), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], s["eps"])
    return x


def embed(torch, s, w, ids, mask):
    """CLS pooling, L2-normalised (bge)."""
    return torch.nn.functional.normalize(encode(torch, s, w, ids, mask)[:, 0].float(), dim=-1)


def check(torch, fixtures):
    """Replay bert-tiny and xlmr-tiny: the same math as the fixtures' reference."""
    for name, arch in (("bert-tiny", "bert"), ("xlmr-tiny", "xlm-roberta")):
        d = os.path.join(fixtures, name)
        cfg = json.load(open(os.path.join(d, "config.json")))
        s = dict(arch=arch, hidden=cfg["hidden_size"], layers=cfg["num_hidden_layers"], heads=cfg["num_attention_heads"],
                 inter=cfg["intermediate_size"], vocab=cfg["vocab_size"], max_pos=cfg["max_position_embeddings"],
                 types=cfg["type_vocab_size"], pad=cfg["pad_token_id"], eps=cfg["layer_norm_eps"])
        w = {k: torch.from_numpy(v) for k, v in read_safetensors(os.path.join(d, "model.safetensors")).items()}
        w = {k[len("roberta."):] if k.startswith("roberta.") else k: v for k, v in w.items()}
        ex = {k: torch.from_numpy(v) for k, v in read_safetensors(os.path.join(d, "expected.safetensors")).items()}
        ids, mask = ex["inputs.input_ids"], ex["inputs.attention_mask"]
        with torch.no_grad():
            hidden = encode(torch, s, w, ids, mask, ex.get("inputs.token_type_ids"))
            cls = torch.nn.functional.normalize(hidden[:, 0], dim=-1)
        for got, want, atol in ((hidden, ex["outputs.last_hidden_state"], 1e-4), (cls, ex["outputs.cls_normalized"], 1e-5)):
            bad = ((got - want).abs() > atol + 1e-4 * want.abs()).sum().item()
            if bad:
                sys.exit(f"check {name}: {bad} values outside the README tolerance (max |diff| {(got - want).abs().max().item():.3g})")
        print(f"check {name}: last_hidden_state and cls_normalized within tolerance", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="bge-large", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=8, help="passages per call (bench models: 8)")
    ap.add_argument("--length", type=int, default=256, help="tokens per passage (bench models: 256)")
    ap.add_argument("--steps", type=int, default=3, help="timed calls after one warm-up")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (use ragforge's GOMAXPROCS)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="dtype the weights are held (and computed) in")
    ap.add_argument("--check", metavar="DIR", help="replay the bert-tiny and xlmr-tiny fixtures under DIR first")
    a = ap.parse_args()
    if a.batch < 1 or a.length < 2 or a.steps < 1 or a.threads < 1:
        sys.exit("--batch, --length, --steps and --threads must be positive (--length at least 2)")
    import torch
    torch.set_num_threads(a.threads)
    if a.check:
        check(torch, a.check)
    s = SHAPES[a.name]
    if a.length > s["max_pos"] - (s["pad"] + 1 if s["arch"] == "xlm-roberta" else 0):
        sys.exit(f"--length {a.length} exceeds {a.name}'s positions")
    dtype = getattr(torch, a.dtype)
    w = random_weights(torch, s, dtype)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, s["vocab"] - 1, (a.batch, a.length), generator=g)
    ids[ids >= s["pad"]] += 1  # never the pad id (XLM-R counts positions from it)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        t0 = time.perf_counter()
        embed(torch, s, w, ids, mask)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(a.steps):
            embed(torch, s, w, ids, mask)
        total = time.perf_counter() - t0
    print(json.dumps({
        "name": a.name,
        "backend": f"pytorch {torch.__version__}",
        "retriever": {
            "steps": a.steps,
            "compile_ms": round(first * 1e3, 3),
            "encode_passages_per_sec": a.batch * a.steps / total,
            "encode_length": a.length,
            "encode_dtype": a.dtype,
            "encode_weight_bytes": sum(t.numel() * t.element_size() for t in w.values()),
        },
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "threads": a.threads,
    }))


if __name__ == "__main__":
    main()
