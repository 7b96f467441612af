#!/usr/bin/env python3
"""PyTorch + transformers peer of `ragforge bench models` on a CUDA GPU.

Times a T5ForConditionalGeneration training step (forward, cross-entropy,
backward, AdamW) and a scoring call (encoder + one decoder step) on the two
shapes of `ragforge bench models` (mini, Flan-T5-small), in fp32 or bf16
autocast, and prints, for each shape, encoder tokens/s and MFU beside the
figures of a `ragforge bench models --json` file when one is given.

MFU = achieved FLOP/s / peak FLOP/s, with the training step counted as
6 · parameters · encoder tokens (the usual dense-transformer estimate; the
2-token decoder is negligible) and the GPU's dense peak for the dtype
(H100/H200: 989 TFLOP/s bf16, 495 TFLOP/s TF32 for fp32 matmuls).
"""
import argparse, json, statistics, sys, time

SHAPES = {  # the same as cmd/ragforge/bench.go
    "mini": dict(d_model=256, d_ff=1024, num_layers=4, num_heads=4, d_kv=64, vocab_size=2100, batch=8, enc_len=256),
    "small": dict(d_model=512, d_ff=1024, num_layers=8, num_heads=6, d_kv=64, vocab_size=32128, batch=4, enc_len=512),
}
PEAK = {"bf16": {"H200": 989e12, "H100": 989e12, "A100": 312e12}, "fp32": {"H200": 495e12, "H100": 495e12, "A100": 156e12}}


def peak_for(gpu, dtype):
    for k, v in PEAK[dtype].items():
        if k in gpu:
            return v
    return None


def bench(name, s, dtype, steps=10, warmup=3):
    import torch
    from transformers import T5Config, T5ForConditionalGeneration
    torch.manual_seed(0)
    cfg = T5Config(d_model=s["d_model"], d_ff=s["d_ff"], num_layers=s["num_layers"], num_decoder_layers=s["num_layers"],
                   num_heads=s["num_heads"], d_kv=s["d_kv"], vocab_size=s["vocab_size"], feed_forward_proj="gated-gelu",
                   tie_word_embeddings=False, dropout_rate=0.1)
    m = T5ForConditionalGeneration(cfg).cuda()
    torch.backends.cuda.matmul.allow_tf32 = dtype == "fp32"
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, L = s["batch"], s["enc_len"]
    ids = torch.randint(2, s["vocab_size"], (B, L), device="cuda")
    labels = torch.randint(2, s["vocab_size"], (B, 2), device="cuda")
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if dtype == "bf16" else torch.autocast("cuda", enabled=False)
    times = []
    m.train()
    for i in range(warmup + steps):
        torch.cuda.synchronize(); t = time.perf_counter()
        with ctx:
            loss = m(input_ids=ids, labels=labels).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t)
    m.eval()
    dec = torch.zeros((B, 1), dtype=torch.long, device="cuda")
    itimes = []
    with torch.no_grad():
        for i in range(warmup + steps):
            torch.cuda.synchronize(); t = time.perf_counter()
            with ctx:
                m(input_ids=ids, decoder_input_ids=dec).logits
            torch.cuda.synchronize()
            if i >= warmup:
                itimes.append(time.perf_counter() - t)
    params = sum(p.numel() for p in m.parameters())
    med = statistics.median(times)
    return dict(name=name, dtype=dtype, params=params, tokens=B * L, step_median_ms=1e3 * med,
                enc_tokens_per_s=B * L / med, infer_examples_per_s=B / statistics.median(itimes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--gpu-name", default="")
    ap.add_argument("--ragforge", help="output of `ragforge bench models --json` on the same GPU")
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("hf_t5_bench: torch sees no CUDA device")
    gpu = a.gpu_name or torch.cuda.get_device_name()
    peak = peak_for(gpu, a.dtype)
    rf = {}
    if a.ragforge:
        try:
            rf = {r["name"]: r for r in json.load(open(a.ragforge))}
        except Exception as e:  # the ragforge step may have failed; still report PyTorch
            print(f"hf_t5_bench: cannot read {a.ragforge}: {e}", file=sys.stderr)
    print("shape  dtype  torch_ms/step  torch_tok/s  torch_MFU  ragforge_ms/step  ragforge_tok/s  ragforge_MFU(fp32)")
    for name, s in SHAPES.items():
        r = bench(name, s, a.dtype, steps=a.steps)
        mfu = lambda tok_s, pk: f"{6 * r['params'] * tok_s / pk:.3%}" if pk else "n/a"
        g = rf.get(name, {}).get("result", {})
        g_tok = g.get("train_tokens_per_sec")
        print(f"{name:6} {a.dtype:6} {r['step_median_ms']:13.1f} {r['enc_tokens_per_s']:12.0f} {mfu(r['enc_tokens_per_s'], peak):>10}"
              f" {g.get('ms_per_step_median', float('nan')):17.1f} {g_tok or float('nan'):15.0f}"
              f" {mfu(g_tok, peak_for(gpu, 'fp32')) if g_tok else 'n/a':>18}")
        print(json.dumps(r), file=sys.stderr)


if __name__ == "__main__":
    main()
