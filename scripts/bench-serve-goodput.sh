#!/usr/bin/env bash
# Goodput (served requests per second) of `ragforge serve` under overload,
# before and after admission control: heavy /v1/filter requests (32
# snippets each, as in issue 30) from 1, 4, 16 and 64 closed-loop clients
# (`ragforge bench serve`, which waits Retry-After after a refusal), one
# fresh server per row, on the README's tiny pipeline over the AP protocols.
# "before" is a server built from commit $BEFORE (default 1276f5d, main
# before admission control) in a temporary directory; "after" is the
# working tree. Not a
# test: it prints a table for docs/benchmarks.md.
#
#   scripts/bench-serve-goodput.sh [WORKDIR]    (default work/bench-goodput)
#   env: BEFORE=commit  CLIENTS="1 4 16 64"  DURATION=20s  TIMEOUT=10s  SNIPPETS=32
set -euo pipefail
W=${1:-work/bench-goodput}
SHARED=${SHARED:-../shared}
PORT=${PORT:-18081}
CLIENTS=${CLIENTS:-"1 4 16 64"}
DURATION=${DURATION:-20s}
TIMEOUT=${TIMEOUT:-10s}
SNIPPETS=${SNIPPETS:-32}
BEFORE=${BEFORE:-1276f5db6ebe50b53b9aef4fe93fea3c6eeb7489}
mkdir -p "$W"
W=$(cd "$W" && pwd)
RF=$W/ragforge-after
go build -o "$RF" ./cmd/ragforge
if [ ! -x "$W/ragforge-before" ] || [ "$(cat "$W/before.commit" 2>/dev/null)" != "$BEFORE" ]; then
  SRC=$(mktemp -d)
  git archive "$BEFORE" | tar -x -C "$SRC"
  (cd "$SRC" && go build -o "$W/ragforge-before" ./cmd/ragforge)
  rm -rf "$SRC"
  echo "$BEFORE" > "$W/before.commit"
fi
export RAGFORGE_DB="$W/runs.db"
if [ ! -f "$W/pipeline/pipeline.json" ]; then
  [ -d "$W/bert" ] || $RF models init --arch bert --size tiny --tokenizer "$SHARED/fixtures/bert-tiny/vocab.txt" --out "$W/bert" >/dev/null
  [ -d "$W/filter" ] || $RF models init --arch t5 --size tiny --tokenizer "$SHARED/fixtures/tokenizer/spiece.model" --add-tokens '[HELPFUL],[NOT_HELPFUL]' --out "$W/filter" >/dev/null
  $RF pipeline build --corpus ap="$SHARED/data/ap_protocols" --retriever "$W/bert" --filter "$W/filter" --out "$W/pipeline" >/dev/null
fi
python3 - "$SNIPPETS" > "$W/filter.json" <<'PY'
import json, sys
snip = ("Fix the specimen in neutral buffered formalin for 6 to 72 hours before processing. " * 6)[:480]
print(json.dumps({"question": "Which fixative is used for breast specimens?", "snippets": [snip] * int(sys.argv[1])}))
PY
URL=http://127.0.0.1:$PORT

start() { # binary [serve flags...]
  local bin=$1; shift
  $bin serve --pipeline "$W/pipeline" --addr 127.0.0.1:$PORT --open-read --no-workbench --request-timeout "$TIMEOUT" "$@" 2>"$W/serve.log" &
  SRV=$!
  for _ in $(seq 600); do curl -sf $URL/healthz >/dev/null && return; sleep 0.1; done
  echo "server did not start" >&2; cat "$W/serve.log" >&2; exit 1
}
stop() { kill -TERM $SRV; wait $SRV || true; }

echo "before: $BEFORE; after: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +dirty); $SNIPPETS snippets per request, --request-timeout $TIMEOUT, $DURATION per row"
printf '| server | clients | served | served/s | refused (Retry-After) | errors (timeouts) | p50 ms | p99 ms |\n|---|---|---|---|---|---|---|---|\n'
for side in before after; do
  for n in $CLIENTS; do
    start "$W/ragforge-$side"
    $RF bench serve --url $URL --endpoints filter --filter-body "$W/filter.json" --concurrency "$n" --duration "$DURATION" --json > "$W/$side.$n.json"
    stop
    python3 - "$side" "$n" "$W/$side.$n.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[3]))["endpoints"][0]
print(f"| {sys.argv[1]} | {sys.argv[2]} | {e['served']} | {e['goodput_rps']:.2f} | {e['refused']} | {e['errors']} | {e['p50_ms']:.0f} | {e['p99_ms']:.0f} |")
PY
  done
done
