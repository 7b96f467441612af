#!/usr/bin/env bash
# Peak resident memory of `ragforge serve` (the README's tiny pipeline) under
# heavy requests: a 64-snippet /v1/filter call (3,400-character snippets), a
# k=1000 /v1/pipeline call, and 32 concurrent clients of each. Each scenario
# runs on a fresh server; the figure is the server's VmHWM (peak RSS) from
# /proc after it. Not a test: it prints a table for docs/benchmarks.md.
#
#   scripts/bench-serve-rss.sh [WORKDIR]    (default work/bench-rss)
set -euo pipefail
W=${1:-work/bench-rss}
RF=${RF:-./ragforge}
SHARED=${SHARED:-../shared}
PORT=${PORT:-18080}
mkdir -p "$W"
[ -x "$RF" ] || go build -o "$RF" ./cmd/ragforge
export RAGFORGE_DB="$W/runs.db"
if [ ! -f "$W/pipeline/pipeline.json" ]; then
  [ -d "$W/bert" ] || $RF models init --arch bert --size tiny --tokenizer "$SHARED/fixtures/bert-tiny/vocab.txt" --out "$W/bert" >/dev/null
  [ -d "$W/t5" ] || $RF models init --arch t5 --size tiny --tokenizer "$SHARED/fixtures/tokenizer/spiece.model" --out "$W/t5" >/dev/null
  [ -d "$W/filter" ] || $RF models init --arch t5 --size tiny --tokenizer "$SHARED/fixtures/tokenizer/spiece.model" --add-tokens '[HELPFUL],[NOT_HELPFUL]' --out "$W/filter" >/dev/null
  $RF pipeline build --corpus ap="$SHARED/data/ap_protocols" --retriever "$W/bert" --filter "$W/filter" --generator "$W/t5" --out "$W/pipeline" >/dev/null
fi
URL=http://127.0.0.1:$PORT
SNIP=$(python3 -c 'print(("Fix the specimen in neutral buffered formalin for 6 to 72 hours before processing. " * 42)[:3400])')
python3 - "$SNIP" > "$W/filter64.json" <<'PY'
import json, sys
print(json.dumps({"question": "Which fixative is used for breast specimens?", "snippets": [sys.argv[1]] * 64}))
PY
echo '{"question": "Which fixative is used for breast specimens?", "k": 1000}' > "$W/k1000.json"

start() {
  $RF serve --pipeline "$W/pipeline" --addr 127.0.0.1:$PORT --open-read --no-workbench "$@" 2>"$W/serve.log" &
  SRV=$!
  for _ in $(seq 600); do curl -sf $URL/healthz >/dev/null && return; sleep 0.1; done
  echo "server did not start" >&2; cat "$W/serve.log" >&2; exit 1
}
stop() { kill -TERM $SRV; wait $SRV || true; }
hwm() { awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' /proc/$SRV/status; }
post() { curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$2" $URL$1 || true; }

printf '| scenario | statuses | wall | server peak RSS |\n|---|---|---|---|\n'
run() { # name path body clients [serve flags...]
  local name=$1 path=$2 body=$3 n=$4; shift 4
  start "$@"
  local base; base=$(hwm)
  local t0; t0=$(date +%s.%N)
  local codes=""
  if [ "$n" = 1 ]; then codes=$(post "$path" "$body")
  else
    local pids=()
    for i in $(seq "$n"); do (post "$path" "$body"; echo) > "$W/code.$i" & pids+=($!); done
    wait "${pids[@]}"
    codes=$(cat "$W"/code.* | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}'); rm -f "$W"/code.*
  fi
  local t1; t1=$(date +%s.%N)
  printf '| %s | %s | %.1f s | %s (idle %s) |\n' "$name" "$codes" "$(echo "$t1 - $t0" | bc)" "$(hwm)" "$base"
  stop
}
run "filter, 64 snippets × 3,400 chars" /v1/filter "$W/filter64.json" 1
run "pipeline, k=1000" /v1/pipeline "$W/k1000.json" 1
run "filter 64 snippets, 32 clients" /v1/filter "$W/filter64.json" 32
run "pipeline k=1000, 32 clients" /v1/pipeline "$W/k1000.json" 32

# CPU after a timeout: server CPU seconds (utime+stime) used in the second
# after the 503, and the exit time of SIGTERM during such work.
cpu() { awk '{printf "%.2f", ($14+$15)/100}' /proc/$SRV/stat; }
start --request-timeout 5s
t0=$(date +%s.%N); code=$(post /v1/pipeline "$W/k1000.json"); t1=$(date +%s.%N)
c0=$(cpu); sleep 1; c1=$(cpu)
printf '\nk=1000 with --request-timeout 5s: HTTP %s after %.1f s; server CPU in the next second: %s s\n' "$code" "$(echo "$t1 - $t0" | bc)" "$(echo "$c1 - $c0" | bc)"
stop
start --shutdown-timeout 10s
post /v1/pipeline "$W/k1000.json" > "$W/code.term" & CP=$!
sleep 3; t0=$(date +%s.%N); kill -TERM $SRV; rc=0; wait $SRV || rc=$?; t1=$(date +%s.%N); wait $CP || true
printf 'SIGTERM 3 s into a k=1000 request (--shutdown-timeout 10s): server exited %d after %.1f s; the client got HTTP %s\n' "$rc" "$(echo "$t1 - $t0" | bc)" "$(cat "$W/code.term")"
rm -f "$W/code.term"
