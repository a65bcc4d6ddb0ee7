#!/usr/bin/env bash
# bench-burst-memory.sh: the resident memory (VmRSS) of a proxy with many workers before and after
# a burst of streamed requests, and once its workers have been idle long enough to give back what
# the burst left them (each worker's idle trim runs every 5 s; see docs/architecture.md,
# Threads). The proxy (o200k_base reference tokenizer, usage injection) runs in front of the
# bundled simulator on loopback ports the OS chooses; the burst is tokenmeter-load with one
# connection per request, all at once.
#
# Usage: scripts/bench-burst-memory.sh [BUILD_DIR]        (default: build/)
# Environment: THREADS="64 2" (worker counts, one run each), REQUESTS=640 (the burst),
#              OUTPUT_TOKENS=50, ITL_MS=10, IDLE_S=12 (the wait after the burst)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$root/build}"
bin="$build_dir/proxy/tokenmeter"
sim="$build_dir/tests/sim/tokenmeter-sim"
load="$build_dir/tests/bench/tokenmeter-load"
for f in "$bin" "$sim" "$load"; do
    [[ -x $f ]] || { echo "bench-burst-memory: no $f (build it first: scripts/build.sh)" >&2; exit 1; }
done
requests=${REQUESTS:-640}
idle_s=${IDLE_S:-12}

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

wait_for() {  # FILE PATTERN: the line of FILE matching PATTERN, within 10 s
    for _ in $(seq 100); do
        if grep -q "$2" "$1"; then grep -m1 "$2" "$1"; return 0; fi
        sleep 0.1
    done
    echo "bench-burst-memory: no '$2' in $1" >&2
    cat "$1" >&2
    return 1
}
rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

"$sim" --listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.err" &
pids+=($!)
sim_addr=$(wait_for "$work/sim.out" '^listening on ' | sed 's/^listening on //')
printf 'log:\n  level: warn\nreference_tokenizer: o200k_base\nusage_injection: true\n' >"$work/config.yaml"

printf '%-8s %10s %12s %16s  %s\n' workers "idle MiB" "after burst" "after ${idle_s} s idle" "requests"
for threads in ${THREADS:-64 2}; do
    "$bin" --config "$work/config.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
        --upstream "http://$sim_addr" --threads "$threads" >"$work/proxy.out" 2>"$work/proxy.err" &
    pid=$!
    pids+=("$pid")
    addr=$(wait_for "$work/proxy.out" 'tokenmeter listening: ' | sed -n 's/.* proxy=\([^ ]*\).*/\1/p')
    before=$(rss_mib "$pid")
    "$load" --target "http://$addr" --concurrency "$requests" --requests "$requests" \
        --output-tokens "${OUTPUT_TOKENS:-50}" --itl-ms "${ITL_MS:-10}" --ttft-ms 10 --json \
        >"$work/load.json" 2>"$work/load.err"
    burst=$(rss_mib "$pid")
    sleep "$idle_s"
    after=$(rss_mib "$pid")
    ok=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["requests"]; print(r["ok"], "ok,", r["failed"], "failed")' "$work/load.json" 2>/dev/null || echo "?")
    printf '%-8s %10s %12s %16s  %s\n' "$threads" "$before" "$burst" "$after" "$ok"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done
