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

Extra flags after -- go to `tokenmeter-load bench` (see `tokenmeter-load --help`).
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-release
extra=()
while (($# > 0)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "bench: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) build_dir=$1 ;;
  esac
  shift
done

concurrency=${CONCURRENCY:-64}
requests=${REQUESTS:-1000}
output_tokens=${OUTPUT_TOKENS:-100}
itl_ms=${ITL_MS:-5}
ttft_ms=${TTFT_MS:-10}
rounds=${ROUNDS:-3}

if [[ ! -d $build_dir ]]; then
  echo "bench: build directory $build_dir does not exist; this script builds nothing. Make it with:" >&2
  echo "  cmake -S $root -B $build_dir -DCMAKE_BUILD_TYPE=Release" >&2
  echo "  cmake --build $build_dir --target tokenmeter tokenmeter-sim tokenmeter-load" >&2
  exit 2
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [[ $build_type != Release ]]; then
  echo "bench: warning: $build_dir is a '${build_type:-unknown}' build; numbers are meant for Release" >&2
fi

find_binary() {
  local name=$1 usual=$2 found
  if [[ -x $build_dir/$usual ]]; then
    printf '%s\n' "$build_dir/$usual"
    return 0
  fi
  found=$(find "$build_dir" -type f -name "$name" -perm -u+x -print -quit 2>/dev/null)
  if [[ -z $found ]]; then
    echo "bench: $name not found under $build_dir (cmake --build $build_dir --target $name)" >&2
    return 1
  fi
  printf '%s\n' "$found"
}

sim_bin=$(find_binary tokenmeter-sim tests/sim/tokenmeter-sim)
proxy_bin=$(find_binary tokenmeter proxy/tokenmeter)
load_bin=$(find_binary tokenmeter-load tests/bench/tokenmeter-load)

work=$(mktemp -d "${TMPDIR:-/tmp}/tokenmeter-bench.XXXXXX")
server_pids=()
# shellcheck disable=SC2317  # called through the EXIT trap, which shellcheck cannot follow here
cleanup() {
  local pid
  for pid in "${server_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${server_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_for_line() {
  local file=$1 pattern=$2 pid=$3 what=$4 line i
  for ((i = 0; i < 100; i++)); do
    if line=$(grep -m1 -E "$pattern" "$file" 2>/dev/null); then
      printf '%s\n' "$line"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "bench: $what exited before it was listening; its output:" >&2
      cat "$file" "${file%.out}.err" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "bench: $what printed no listening line within 10 s" >&2
  return 1
}

"$sim_bin" --listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
server_pids+=("$sim_pid")
sim_line=$(wait_for_line "$work/sim.out" '^listening on ' "$sim_pid" tokenmeter-sim)
sim_addr=${sim_line#listening on }

# A fresh proxy on every run: the memory figure is only meaningful before the allocator has
# seen any streams (see docs/BENCHMARKS.md).
"$proxy_bin" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream "http://$sim_addr" \
  >"$work/proxy.out" 2>"$work/proxy.err" &
proxy_pid=$!
server_pids+=("$proxy_pid")
proxy_line=$(wait_for_line "$work/proxy.out" '^tokenmeter listening: ' "$proxy_pid" tokenmeter)
proxy_addr=$(sed -n 's/.* proxy=\([^ ]*\).*/\1/p' <<<"$proxy_line")
if [[ -z $proxy_addr ]]; then
  echo "bench: cannot read the proxy address from: $proxy_line" >&2
  exit 1
fi

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
