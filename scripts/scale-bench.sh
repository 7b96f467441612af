#!/usr/bin/env bash
# Scale measurements of docs/scaling.md on a synthetic corpus of N documents
# (one 512-character chunk each) made reproducibly from the AP protocols.
# Each stage is one scalebench process running the streaming library code,
# timed by GNU time (wall, peak RSS): synth, chunk (chunk.Walk), bm25
# (bm25.BuildStream into bleve shards), encode (encode.EncodeToRAG2, tiny
# BERT), faiss (dense.BuildRAG2: IVF-PQ trained on a sample, added shard by
# shard), search (latency p50/p99 and recall@10 against Flat per nprobe).
# Prints one Markdown table row per stage, then the search report.
#
#   scripts/scale-bench.sh N [WORKDIR]      e.g. scripts/scale-bench.sh 10000
#
# Environment: SHARED (default ../shared), ENCODER (default
# $SHARED/fixtures/bert-tiny: 2 layers, hidden 64, 128 positions), STAGES
# (default "synth chunk bm25 encode faiss search"), BM25_SHARD (100000
# chunks), FACTORY (default IVF<√N rounded up to a power of 2>,PQ32np),
# TRAIN_ROWS (100000), NPROBE (8,16,32,64), VECTORS (an encode output to use
# instead of WORKDIR/enc, e.g. scalebench inflate's), NICE (a prefix such as
# "nice -n 10"), GOMLX_BACKEND (default go), OMP_NUM_THREADS (default 1:
# FAISS's OpenMP threads spin, and on a shared, oversubscribed machine the
# IVF-PQ build ran 5× slower with two threads than with one).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:?usage: $0 N [WORKDIR]}
W=${2:-/tmp/ragforge-scale-$N}
SHARED=${SHARED:-../shared}
ENCODER=${ENCODER:-$SHARED/fixtures/bert-tiny}
STAGES=${STAGES:-synth chunk bm25 encode faiss search}
BM25_SHARD=${BM25_SHARD:-100000}
TRAIN_ROWS=${TRAIN_ROWS:-100000}
NPROBE=${NPROBE:-8,16,32,64}
NICE=${NICE:-}
export GOMLX_BACKEND=${GOMLX_BACKEND:-go} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [ -z "${FACTORY:-}" ]; then
  nlist=1; while [ $((nlist * nlist)) -lt "$N" ]; do nlist=$((nlist * 2)); done
  FACTORY="IVF$nlist,PQ32np"
fi
VECTORS=${VECTORS:-$W/enc}
has() { [[ " $STAGES " == *" $1 "* ]]; }
# WORKDIR is emptied only by the synth stage, and only when this script made it.
if has synth; then
  if [ -e "$W" ] && [ ! -e "$W/.scale-bench" ]; then
    echo "$W exists and was not made by $0; pass a new WORKDIR" >&2; exit 1
  fi
  rm -rf "$W"; mkdir -p "$W"; touch "$W/.scale-bench"
fi
go build -o "$W/scalebench" ./scripts/scalebench

measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$W/$name.time" $NICE "$@" >"$W/$name.out" 2>"$W/$name.err" ||
    { echo "$name failed:"; tail -5 "$W/$name.err"; exit 1; }
  read -r secs kb <"$W/$name.time"
  printf '| %d | %s | %s s | %d MB | %s |\n' "$N" "$name" "$secs" $((kb / 1024)) "$(tr -d '\n' <"$W/$name.out")"
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%FT%TZ))"
echo "| chunks | stage | wall | peak RSS | report |"
echo "|---|---|---|---|---|"
B="$W/scalebench"
has synth && measure synth "$B" synth -n "$N" -o "$W/corpus.jsonl" -ap "$SHARED/data/ap_protocols" -id-prefix "n${N}_"
has chunk && measure chunk "$B" chunk -corpus "$W/corpus.jsonl"
has bm25 && { rm -rf "$W/bm25"; measure bm25 "$B" bm25 -corpus "$W/corpus.jsonl" -out "$W/bm25" -shard-size "$BM25_SHARD"; }
has encode && { rm -rf "$W/enc"; measure encode "$B" encode -corpus "$W/corpus.jsonl" -encoder "$ENCODER" -out "$W/enc" -max-length 128 -batch-size 64; }
has faiss && { rm -rf "$W/ivf"; measure "faiss $FACTORY" "$B" faiss -encoded "$VECTORS" -factory "$FACTORY" -train-rows "$TRAIN_ROWS" -out "$W/ivf"; }
has search && measure search "$B" search -encoded "$VECTORS" -index "$W/ivf" -nprobe "$NPROBE" -queries 1000
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%FT%TZ))"
