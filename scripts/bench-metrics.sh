#!/usr/bin/env bash
# bench-metrics.sh: how long a Prometheus scrape of tokenmeter's /metrics takes at a realistic
# high cardinality. Starts tokenmeter-sim and tokenmeter (one worker thread, tenants from a header),
# sends one short request per (model, tenant) pair so every per-model and per-tenant series
# exists, then times SCRAPES scrapes of /metrics (curl, one connection each) and prints the
# series count, the body size and the median, p90 and max scrape time. The admin listener runs
# on the main thread, not on a worker's event loop, so a scrape never delays a stream; the same
# scrapes are repeated while streams run to show that (chunk gaps are printed by the load).
# Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-metrics.sh [BUILD_DIR]

  BUILD_DIR  a Release build (default: build-release/), with tokenmeter, tokenmeter-sim and
             tokenmeter-load built.

Environment:
  MODELS=64     distinct model names (metrics.models.max_models is set to this)
  TENANTS=40    distinct tenants (tenants.max_tenants is set to this)
  SCRAPES=50    scrapes timed
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-release
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) build_dir=$1 ;;
esac
models=${MODELS:-64}
tenants=${TENANTS:-40}
scrapes=${SCRAPES:-50}
command -v curl >/dev/null || { echo "bench-metrics: needs curl" >&2; exit 2; }

script_name=bench-metrics
# shellcheck source=scripts/lib/stack.sh
source "$root/scripts/lib/stack.sh"
cat >"$work/config.yaml" <<EOF
log:
  level: warn
metrics:
  models:
    max_models: $models
tenants:
  source: header
  header: x-tenant-id
  max_tenants: $tenants
EOF
PROXY_ARGS="--config $work/config.yaml --threads 1" start_stack

model_list=$(seq -f "model-%g" 1 "$models" | paste -sd, -)
echo "populating: $models models x $tenants tenants, one request each" >&2
for t in $(seq 1 "$tenants"); do
  "$load_bin" --target "http://$proxy_addr" --concurrency 8 --requests "$models" \
    --models "$model_list" --output-tokens 4 --ttft-ms 0 --itl-ms 0 \
    --header "x-tenant-id: tenant-$t" >/dev/null
done

scrape_times() {
  local i
  for ((i = 0; i < scrapes; i++)); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://$admin_addr/metrics"
  done | sort -n | awk '{ v[NR] = $1 } END {
    printf "median %.1f ms, p90 %.1f ms, max %.1f ms (%d scrapes)\n",
      v[int((NR + 1) / 2)] * 1000, v[int(NR * 0.9 + 0.5)] * 1000, v[NR] * 1000, NR }'
}

curl -s "http://$admin_addr/metrics" >"$work/metrics.txt"
series=$(grep -cv '^#' "$work/metrics.txt")
bytes=$(wc -c <"$work/metrics.txt")
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "/metrics: $series series, $bytes bytes"
echo "idle proxy:         $(scrape_times)"

# The same scrapes while 200 streams run through the proxy: the load's chunk gaps show whether
# scraping delays streams (it runs on the main thread, not on the worker).
"$load_bin" --target "http://$proxy_addr" --concurrency 200 --duration-s 15 \
  --output-tokens 100 --ttft-ms 20 --itl-ms 20 --models model-1 >"$work/load.txt" &
load_pid=$!
sleep 2
echo "200 streams running: $(scrape_times)"
wait "$load_pid" || true
grep -E 'chunk gap' "$work/load.txt" | sed 's/^ */load: /'
