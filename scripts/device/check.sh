#!/usr/bin/env bash
# GPU check for ragforge, for a machine with an NVIDIA GPU, JAX's CUDA PJRT
# plugin and PyTorch + transformers, without Go and without network:
#   1. forward and generation fixture parity (T5 ×3, BERT, the Llama/Qwen2/Qwen3
#      decoders with LoRA) through XLA/CUDA;
#   2. the training-step fixtures (train-t5-filter, train-bert-infonce) through XLA/CUDA;
#   3. `ragforge bench models` on XLA/CUDA beside PyTorch + transformers on the
#      same shapes, fp32 and bf16, with tokens/s and MFU.
# Made by scripts/device/bundle.sh; run from the unpacked bundle:
#   tar xJf dist/device.tar.xz -C /tmp && /tmp/device/check.sh
# The plugin is $PJRT_PLUGIN_LIBRARY_PATH's pjrt_c_api_cuda_plugin.so or
# xla_cuda_plugin.so, else the one of the installed jax_plugins.xla_cuda1x.
# Results go to $OUT (default ./device-results). Fails fast, naming what is
# missing, when there is no GPU or no plugin.
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/device-results}
mkdir -p "$out"
start=$(date +%s)
fail() { echo "device-check: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null || fail "no NVIDIA GPU: nvidia-smi not found"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$gpu" ] || fail "no NVIDIA GPU: nvidia-smi lists no device"

plugin=""
for d in ${PJRT_PLUGIN_LIBRARY_PATH//:/ }; do
  for n in pjrt_c_api_cuda_plugin.so xla_cuda_plugin.so; do [ -f "$d/$n" ] && plugin="$d/$n" && break 2; done
done
if [ -z "$plugin" ] && command -v python3 >/dev/null; then
  plugin=$(python3 - <<'PY' 2>/dev/null
import glob, importlib, os
for m in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
    try:
        d = os.path.dirname(importlib.import_module(m).__file__)
    except Exception:
        continue
    for f in glob.glob(os.path.join(d, "*.so")):
        if "plugin" in os.path.basename(f):
            print(f); raise SystemExit
PY
)
fi
[ -n "$plugin" ] || fail "no CUDA PJRT plugin: set PJRT_PLUGIN_LIBRARY_PATH to the directory of pjrt_c_api_cuda_plugin.so (or install jax-cuda12-pjrt / jax-cuda13-pjrt)"
echo "device-check: $gpu; plugin $plugin"

export GOMLX_NO_AUTO_INSTALL=1 RAGFORGE_SHARED="$dir/shared" RAGFORGE_TEST_BACKEND="xla:$plugin"
# CUDA libraries shipped as Python wheels (nvidia-*), for the plugin.
nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null || true)
[ -n "$nv" ] && export LD_LIBRARY_PATH="$(ls -d "$nv"/nvidia/*/lib 2>/dev/null | tr '\n' :)${LD_LIBRARY_PATH:-}"
# The bundled loader and libraries (Debian's glibc), whatever the host's.
run=("$dir/lib/ld-linux-x86-64.so.2" --library-path "$dir/lib:${LD_LIBRARY_PATH:-}")

status=0
step() { # name, timeout seconds, command...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  if timeout "$limit" "$@" >"$out/$name.log" 2>&1; then echo "   ok ($(( $(date +%s) - start )) s so far)"
  else echo "   FAILED (rc $?; last lines below, whole log in $out/$name.log)"; tail -15 "$out/$name.log"; status=1; fi
}
step parity-t5 120 "${run[@]}" "$dir/bin/models_t5.test" -test.v -test.count=1 -test.run '^(TestFixtureForward|TestFixtureGenerate)$'
step parity-decoder 120 "${run[@]}" "$dir/bin/models_decoder.test" -test.v -test.count=1 -test.run '^(TestForwardRightPadding|TestForwardLeftPadding|TestContinuationLogProbs|TestGenerateGreedy|TestGenerateKVCacheEqualsRecompute|TestLoRAForwardLoss)$'
step parity-bert 60 "${run[@]}" "$dir/bin/models_bert.test" -test.v -test.count=1 -test.run '^TestFixture'
step train-t5-filter 120 "${run[@]}" "$dir/bin/train_filter.test" -test.v -test.count=1 -test.run '^TestTrainingParityT5Filter$'
step train-bert-infonce 120 "${run[@]}" "$dir/bin/train_retriever.test" -test.v -test.count=1 -test.run '^TestTrainingParityBERTInfoNCE$'
step bench-ragforge 300 bash -c '"$@" >"$0"' "$out/ragforge-bench.json" "${run[@]}" "$dir/bin/ragforge" --backend "xla:$plugin" bench models --json --steps 5
for dt in fp32 bf16; do
  step "bench-torch-$dt" 120 python3 "$dir/hf_t5_bench.py" --dtype "$dt" --gpu-name "$gpu" --ragforge "$out/ragforge-bench.json"
done
echo "== summary"
cat "$out"/bench-torch-*.log 2>/dev/null | grep -E '^(shape|mini|small)' || true
echo "device-check: done in $(( $(date +%s) - start )) s, status $status"
exit $status
