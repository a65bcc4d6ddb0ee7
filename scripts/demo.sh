#!/usr/bin/env bash
# demo.sh: tokenmeter's main job in one command. A simulated model server, tokenmeter in front of
# it, a short burst of streamed chat completions over three models with different speeds, and
# then what the proxy measured, read back from its /metrics.
#
# Everything listens on OS-chosen loopback ports and is stopped on exit.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/demo.sh [--keep] [--no-build] [BUILD_DIR]

  BUILD_DIR   CMake build directory (default: build/ in the repository)
  --no-build  skip installing packages (scripts/install-deps.sh) and building tokenmeter,
              tokenmeter-sim and tokenmeter-load; use what BUILD_DIR already holds
  --keep      leave the simulator and proxy running after the burst, until Ctrl-C, so that
              /metrics can be scraped by hand (curl http://127.0.0.1:ADMIN/metrics)

Exit status: 0 when every request succeeded and the summary could be read, non-zero otherwise.
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keep=0
build=1
build_dir=$root/build
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --no-build) build=0 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "demo: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) build_dir=$arg ;;
  esac
done

if ((build == 1)); then
  "$root/scripts/install-deps.sh"
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    generator=()
    if command -v ninja >/dev/null 2>&1; then
      generator=(-G Ninja)
    fi
    cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$build_dir" -j"$(nproc 2>/dev/null || echo 2)" --target tokenmeter tokenmeter-sim tokenmeter-load
  echo
elif [[ ! -d $build_dir ]]; then
  echo "demo: build directory $build_dir does not exist" >&2
  exit 2
fi

# Tokenizer files (o200k_base is the default reference tokenizer): pinned, checksummed, cached.
"$root/scripts/fetch-tokenizers.sh"

script_name=demo
# shellcheck source=scripts/lib/stack.sh
source "$root/scripts/lib/stack.sh"
start_stack

echo "tokenmeter-sim  http://$sim_addr  (pid $sim_pid)"
echo "tokenmeter      http://$proxy_addr -> http://$sim_addr, admin http://$admin_addr  (pid $proxy_pid)"
echo

# Three models, three speeds, 20 requests each over 2 connections: 60 requests, 6 at a time.
# The simulator takes its timing from the x-sim-* headers the load tool sends.
models=(demo-small demo-medium demo-large)
ttft_ms=(40 100 250)
itl_ms=(8 15 30)
output_tokens=(24 32 24)
requests_per_model=20
total_requests=$((requests_per_model * ${#models[@]}))

echo "sending $total_requests streamed chat completions through the proxy, 6 concurrent:"
load_pids=()
for i in "${!models[@]}"; do
  echo "  ${models[i]}: TTFT ${ttft_ms[i]} ms, ITL ${itl_ms[i]} ms, ${output_tokens[i]} tokens"
  "$load_bin" --target "http://$proxy_addr" --models "${models[i]}" --requests "$requests_per_model" \
    --concurrency 2 --ttft-ms "${ttft_ms[i]}" --itl-ms "${itl_ms[i]}" --output-tokens "${output_tokens[i]}" \
    >"$work/load-${models[i]}.txt" 2>&1 &
  load_pids+=("$!")
done

failed=0
for i in "${!load_pids[@]}"; do
  if ! wait "${load_pids[i]}"; then
    failed=1
    echo "demo: load for ${models[i]} failed:" >&2
    cat "$work/load-${models[i]}.txt" >&2
  fi
done
echo

echo "client side (what tokenmeter-load saw):"
for model in "${models[@]}"; do
  echo "  $model"
  grep -E '^  (requests|client TTFT)' "$work/load-$model.txt" | sed 's/^  /    /' || true
done
echo

echo "proxy side (tokenmeter /metrics, summarised by tokenmeter-load summary):"
if ! "$load_bin" summary --metrics "http://$admin_addr/metrics" --wait-requests "$total_requests" --timeout-s 10; then
  echo "demo: could not read the proxy's metrics" >&2
  failed=1
fi
echo
echo "a few of the raw series on http://$admin_addr/metrics:"
curl -fsS "http://$admin_addr/metrics" 2>/dev/null |
  grep -E '^tokenmeter_(requests_total|tokens_total|time_to_first_token_seconds_(sum|count))\{' |
  sed 's/^/  /' || echo "  (could not read /metrics)"
echo
echo "live status page (windowed p50/p99, tokens/s, SLO burn, tenants, upstream errors; docs/status.md):"
echo "  http://$admin_addr/         (open in a browser; its data: http://$admin_addr/status.json)"
if ! curl -fsS "http://$admin_addr/status.json" >/dev/null 2>&1; then
  echo "demo: the status page's /status.json did not answer" >&2
  failed=1
fi
if ((keep == 0)); then
  echo "(the proxy stops when this script ends; run scripts/demo.sh --keep to leave it up and curl it)"
fi

if ((failed != 0)); then
  exit 1
fi

if ((keep == 1)); then
  echo
  echo "--keep: tokenmeter stays up at http://$proxy_addr (metrics http://$admin_addr/metrics, status page http://$admin_addr/); Ctrl-C to stop."
  trap 'exit 0' INT
  wait "$proxy_pid"
  echo "demo: tokenmeter exited on its own" >&2
  exit 1
fi
