#!/usr/bin/env bash
# bench-usage.sh: what usage records cost. Runs the same load through three fresh proxies in
# front of one simulator, interleaved per round: no spool; a spool without holding responses
# (hold_until_durable: false); a spool with the default holds (first byte after the open entry
# is on disk, last bytes after the close entry). Prints req/s, request duration and client
# TTFT per configuration, medians over the rounds. Builds nothing.
#   scripts/bench-usage.sh [BUILD_DIR]   (default build/)
# Environment: CONCURRENCY=64 REQUESTS=4000 OUTPUT_TOKENS=5 TTFT_MS=0 ITL_MS=0 ROUNDS=3
#              SPOOL_PARENT=/tmp (put it on the disk you mean to measure)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
concurrency=${CONCURRENCY:-64}
requests=${REQUESTS:-4000}
output_tokens=${OUTPUT_TOKENS:-5}
ttft_ms=${TTFT_MS:-0}
itl_ms=${ITL_MS:-0}
rounds=${ROUNDS:-3}
work=$(mktemp -d "${SPOOL_PARENT:-/tmp}/tokenmeter-bench-usage-XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

"$build/tests/sim/tokenmeter-sim" --listen 127.0.0.1:0 --port-file "$work/sim.port" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/sim.port ]] && break; sleep 0.05; done
sim_port=$(cat "$work/sim.port")

printf '' >"$work/off.yaml"
printf 'usage:\n  spool_dir: %s/spool-nohold\n  hold_until_durable: false\n' "$work" >"$work/nohold.yaml"
printf 'usage:\n  spool_dir: %s/spool-hold\n' "$work" >"$work/hold.yaml"

run_one() {  # config name -> one line of numbers
  local name=$1 out="$work/proxy-$1.out"
  rm -rf "$work/spool-$name" "$out" "$out.err"
  "$build/proxy/tokenmeter" --config "$work/$name.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
    --upstream "http://127.0.0.1:$sim_port" >"$out" 2>"$out.err" &
  local pid=$!
  local port=""
  for _ in $(seq 200); do
    port=$(sed -n 's/^tokenmeter listening: proxy=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out" 2>/dev/null)
    [[ -n $port ]] && break
    sleep 0.05
  done
  "$build/tests/bench/tokenmeter-load" --target "http://127.0.0.1:$port" \
    --concurrency "$concurrency" --requests "$requests" --output-tokens "$output_tokens" \
    --ttft-ms "$ttft_ms" --itl-ms "$itl_ms" --json 2>>"$work/load.err" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); r=d["request_duration_seconds"]; t=d["client_ttft_seconds"]
f=lambda x: -1 if x is None else x*1e3
print(d["requests"]["ok"]/d["wall_seconds"], f(r["p50"]), f(r["p99"]), f(t["p50"]), d["requests"]["failed"], file=sys.stdout)
d["errors"] and print(d["errors"], file=sys.stderr)'
  if ! kill "$pid" 2>/dev/null; then echo "bench-usage: the $name proxy had exited:" >&2; cat "$out.err" >&2; fi
  wait "$pid" 2>/dev/null || true
}

for _ in $(seq "$rounds"); do
  for name in off nohold hold; do
    line=$(run_one "$name")
    [[ -n $line ]] || { echo "bench-usage: the $name run produced no report" >&2; exit 1; }
    echo "$name $line" >>"$work/results"
  done
done
echo "concurrency=$concurrency requests=$requests output_tokens=$output_tokens ttft_ms=$ttft_ms itl_ms=$itl_ms rounds=$rounds"
python3 - "$work/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, *v = line.split()
    rows.setdefault(name, []).append([float(x) for x in v])
print(f"{'config':8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'ttft p50':>9} {'failed':>7}")
for name in ("off", "nohold", "hold"):
    cols = list(zip(*rows[name]))
    med = [statistics.median(c) for c in cols]
    print(f"{name:8} {med[0]:8.0f} {med[1]:8.1f} {med[2]:8.1f} {med[3]:9.1f} {int(sum(cols[4])):7d}")
PY
