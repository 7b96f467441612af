#!/usr/bin/env bash
# Scale measurements of docs/scaling.md on a synthetic corpus of N documents
# (one 512-character chunk each) made reproducibly from the AP protocols:
# chunking + BM25 index (pipeline build), encoding with a tiny BERT (encode),
# FAISS Flat and IVF-PQ build, search latency and recall@10 (scalebench
# search). Prints one Markdown table row per stage: wall time and peak RSS
# (GNU time's %e and %M).
#
#   scripts/scale-bench.sh N [WORKDIR]      e.g. scripts/scale-bench.sh 10000
#
# Environment: SHARED (default ../shared), ENCODER (default
# $SHARED/fixtures/bert-tiny: 2 layers, hidden 64, 128 positions), FACTORY
# (default IVF<4·√N rounded to a power of 2>,PQ16), GOMLX_BACKEND (default go).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:?usage: $0 N [WORKDIR]}
W=${2:-/tmp/ragforge-scale-$N}
SHARED=${SHARED:-../shared}
ENCODER=${ENCODER:-$SHARED/fixtures/bert-tiny}
export GOMLX_BACKEND=${GOMLX_BACKEND:-go}
if [ -z "${FACTORY:-}" ]; then
  nlist=1; while [ $((nlist * nlist)) -lt $((16 * N)) ]; do nlist=$((nlist * 2)); done
  FACTORY="IVF$nlist,PQ16"
fi
# WORKDIR is emptied only when this script made it (it holds .scale-bench).
if [ -e "$W" ] && [ ! -e "$W/.scale-bench" ]; then
  echo "$W exists and was not made by $0; pass a new WORKDIR" >&2; exit 1
fi
rm -rf "$W"; mkdir -p "$W"; touch "$W/.scale-bench"
go build -o "$W/ragforge" ./cmd/ragforge
go build -o "$W/scalebench" ./scripts/scalebench

measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$W/$name.time" "$@" >"$W/$name.out" 2>"$W/$name.err" ||
    { echo "$name failed:"; tail -5 "$W/$name.err"; exit 1; }
  read -r secs kb <"$W/$name.time"
  printf '| %d | %s | %s s | %d MB |\n' "$N" "$name" "$secs" $((kb / 1024))
}

echo "| chunks | stage | wall | peak RSS |"
echo "|---|---|---|---|"
measure synth "$W/scalebench" synth -n "$N" -o "$W/corpus.jsonl" -ap "$SHARED/data/ap_protocols"
measure "chunk+bm25" "$W/ragforge" --db "$W/runs.db" pipeline build --corpus "$W/corpus.jsonl" --out "$W/pipe-bm25"
grep -ao 'chunk: done [^ ]* in [^ ]*' "$W/chunk+bm25.err" | tail -1 | sed 's/^/  (chunking alone: /; s/$/)/'
measure "chunk+encode" "$W/ragforge" --db "$W/runs.db" encode --corpus "$W/corpus.jsonl" --encoder "$ENCODER" --max-length 128 --batch-size 64 --out "$W/enc"
measure "faiss $FACTORY + Flat, 1000 searches" "$W/scalebench" search -encoded "$W/enc" -factory "$FACTORY" -nprobe 16 -queries 1000
echo
cat "$W/faiss $FACTORY + Flat, 1000 searches.out"
