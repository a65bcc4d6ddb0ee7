#!/usr/bin/env bash
# bench.sh: what tokenmeter costs, measured from outside. Starts tokenmeter-sim and a fresh
# tokenmeter in front of it on loopback ports, then runs `tokenmeter-load bench`: rounds straight
# to the simulator and through the proxy, interleaved, reporting the latency the proxy adds per
# chunk, its CPU per million forwarded chunks and its RSS per open stream. Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench.sh [BUILD_DIR] [-- extra tokenmeter-load bench flags]

  BUILD_DIR  a Release build (default: build-release/ in the repository), made with
               cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release
               cmake --build build-release --target tokenmeter tokenmeter-sim tokenmeter-load

Environment (defaults chosen to finish in about a minute on 2 cores):
  CONCURRENCY=64      streams open at once, and streams held for the memory figure
  REQUESTS=1000       requests per round
  OUTPUT_TOKENS=100   tokens per response, one per chunk
  ITL_MS=5            simulator's gap between chunks
  TTFT_MS=10          simulator's time to first token
  ROUNDS=3            rounds each way (direct, proxy), interleaved; medians are reported
  JSON=1              print the report as JSON
  PROXY_ARGS=...      extra tokenmeter flags, e.g. "--threads 1"

Extra flags after -- go to `tokenmeter-load bench` (see `tokenmeter-load --help`).
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script_name=bench
# shellcheck source=scripts/lib/bench_args.sh
source "$root/scripts/lib/bench_args.sh"
parse_bench_args "$@"

concurrency=${CONCURRENCY:-64}
requests=${REQUESTS:-1000}
output_tokens=${OUTPUT_TOKENS:-100}
itl_ms=${ITL_MS:-5}
ttft_ms=${TTFT_MS:-10}
rounds=${ROUNDS:-3}

require_release_build

# shellcheck source=scripts/lib/stack.sh
source "$root/scripts/lib/stack.sh"
# A fresh proxy on every run: the memory figure is only meaningful before the allocator has
# seen any streams (see docs/BENCHMARKS.md).
start_stack

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), kernel $(uname -r)" >&2
echo "sim http://$sim_addr (pid $sim_pid), proxy http://$proxy_addr (pid $proxy_pid), build $build_dir" >&2

json_flag=()
if [[ ${JSON:-0} == 1 ]]; then
  json_flag=(--json)
fi

status=0
"$load_bin" bench --direct "http://$sim_addr" --proxy "http://$proxy_addr" --proxy-pid "$proxy_pid" \
  --concurrency "$concurrency" --requests "$requests" --output-tokens "$output_tokens" \
  --itl-ms "$itl_ms" --ttft-ms "$ttft_ms" --rounds "$rounds" "${json_flag[@]}" "${extra[@]}" || status=$?

if ! kill -0 "$proxy_pid" 2>/dev/null; then
  echo "bench: the proxy died during the run; its stderr:" >&2
  cat "$work/proxy.err" >&2 || true
  status=1
fi
exit "$status"
