#!/usr/bin/env python3
"""PyTorch + transformers + peft peer of `ragforge bench models --only qwen2.5-0.5b-lora`.

Times the same LoRA SFT update: a randomly initialised Qwen2ForCausalLM of
Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads / 2 KV heads,
intermediate 4864, vocab 151,936, tied embeddings), LoraConfig(r=8,
lora_alpha=16, lora_dropout=0, target_modules="all-linear"), batch 2 x 512
random tokens with the first 256 of each row labelled -100, fp32, then
clip_grad_norm_(1.0) and torch.optim.AdamW(lr 1e-5) on the LoRA parameters.
Prints one JSON line: ms/step (min, median after one warm-up step), tokens/s,
trainable parameters, AdamW state floats and peak memory (the process's
max RSS on CPU, torch.cuda.max_memory_allocated on CUDA).

Run it in the same sitting as ragforge, with as many threads as ragforge's
GOMAXPROCS:  python3 scripts/hf_lora_bench.py --threads 2
"""
import argparse, json, resource, statistics, time

CONFIG = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
              num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6,
              rope_theta=1e6, tie_word_embeddings=True, use_sliding_window=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch's default)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=24)
    a = ap.parse_args()
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = Qwen2Config(**{**CONFIG, "num_hidden_layers": a.layers}, attn_implementation="eager")
    model = get_peft_model(Qwen2ForCausalLM(cfg), LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    model.to(a.device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    B, L = 2, 512
    ids = torch.randint(3, cfg.vocab_size, (B, L), device=a.device)
    labels = ids.clone()
    labels[:, : L // 2] = -100
    mask = torch.ones_like(ids)
    times = []
    for i in range(a.steps + 1):
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - t))
    timed = times[1:]
    state = sum(v.numel() for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
    peak = (torch.cuda.max_memory_allocated() if a.device.startswith("cuda")
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    print(json.dumps(dict(name="qwen2.5-0.5b-lora", torch=torch.__version__, device=a.device, threads=torch.get_num_threads(),
                          layers=a.layers, first_step_ms=times[0], ms_per_step_min=min(timed),
                          ms_per_step_median=statistics.median(timed), train_tokens_per_sec=B * L / (statistics.median(timed) / 1e3),
                          trainable_params=sum(p.numel() for p in params), optimizer_floats=state, peak_bytes=peak)))


if __name__ == "__main__":
    main()
