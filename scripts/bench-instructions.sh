#!/usr/bin/env bash
# bench-instructions.sh: user-space instructions tokenmeter executes per forwarded chunk, counted
# by valgrind's callgrind. Unlike CPU time, the count does not depend on what else the machine is
# doing, so two builds can be compared on a shared, noisy machine (it says nothing about the
# kernel's share, cache misses or stalls: bench-proxies.sh measures time). Starts tokenmeter-sim;
# for each tokenmeter binary and each config (full metering, bare), starts the binary under
# callgrind with instrumentation off, sends a warm-up load, then counts instructions over a fixed
# load (REQUESTS streams of OUTPUT_TOKENS chunks, CONCURRENCY at a time) and prints
# instructions / chunks delivered. Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-instructions.sh [BUILD_DIR] [-- OTHER_TOKENMETER_BINARY ...]

  BUILD_DIR  a Release build (default: build-release/) with tokenmeter, tokenmeter-sim and
             tokenmeter-load; its tokenmeter is measured, then every binary after --, e.g. one
             built from another commit, with the same load.

Needs valgrind (apt-get install valgrind). About a minute per binary and config.

Environment:
  CONCURRENCY=10     streams at once
  REQUESTS=40        streams counted (after 20 for warm-up)
  OUTPUT_TOKENS=200  chunks per stream (one token each)
  ITL_MS=20          the simulator's gap between chunks
  CONFIGS="full bare"  full: usage injection, the o200k_base reference tokenizer and a native
                     cl100k_base tokenizer (as bench-proxies.sh); bare: neither
  KEEP_PROFILES=DIR  keep each run's callgrind output in DIR (runN-CONFIG.callgrind), to read
                     with callgrind_annotate --inclusive=yes
  EXTRA_CONFIG=YAML  appended to both configs, e.g. $'upstream_pool:\n  max_idle_connections: 1024'
  NGINX=1            also count nginx (apt-get install nginx) under the same load: one worker,
                     master_process off, proxy_buffering off, upstream keep-alive (as
                     bench-proxies.sh configures it)
  CACHE_SIM=1        simulate the caches too (callgrind --cache-sim=yes, about 3x slower) and
                     print first-level and last-level data-cache misses per chunk: with many
                     streams (CONCURRENCY=1000 ITL_MS=500 OUTPUT_TOKENS=40) each chunk finds its
                     stream's state cold, which an instruction count does not show
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script_name=bench-instructions
# shellcheck source=scripts/lib/bench_args.sh
source "$root/scripts/lib/bench_args.sh"
parse_bench_args "$@"
require_release_build
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "$script_name: needs valgrind (apt-get install valgrind)" >&2
  exit 2
fi

concurrency=${CONCURRENCY:-10}
requests=${REQUESTS:-40}
output_tokens=${OUTPUT_TOKENS:-200}
itl_ms=${ITL_MS:-20}
configs=${CONFIGS:-full bare}

# shellcheck source=scripts/lib/stack.sh
source "$root/scripts/lib/stack.sh"
sim_bin=$(find_binary tokenmeter-sim tests/sim/tokenmeter-sim)
load_bin=$(find_binary tokenmeter-load tests/bench/tokenmeter-load)
binaries=("$(find_binary tokenmeter proxy/tokenmeter)" "${extra[@]}")

# shellcheck source=scripts/lib/bench_configs.sh
source "$root/scripts/lib/bench_configs.sh"
printf '%s%s\n' "$bench_full_metering" "${EXTRA_CONFIG:-}" >"$work/full.yaml"
printf '%s%s\n' "$bench_bare" "${EXTRA_CONFIG:-}" >"$work/bare.yaml"

"$sim_bin" --listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
server_pids+=("$sim_pid")
sim_line=$(wait_for_line "$work/sim.out" '^listening on ' "$sim_pid" tokenmeter-sim)
sim_addr=${sim_line#listening on }

load() {
  "$load_bin" --target "http://$1" --concurrency "$2" --requests "$3" --output-tokens "$output_tokens" \
    --itl-ms "$itl_ms" --ttft-ms 10 --models bench-model
}

cache_sim=()
if [[ -n ${CACHE_SIM:-} ]]; then
  cache_sim=(--cache-sim=yes)
  printf '%-10s %-6s %10s %16s %18s %12s %12s\n' binary config chunks instructions \
    "instructions/chunk" "D1 miss/chunk" "LL miss/chunk"
else
  printf '%-10s %-6s %10s %16s %18s\n' binary config chunks instructions "instructions/chunk"
fi

# Counts one started server (pid, address): a warm-up, then the load with instrumentation on.
count() {
  local name=$1 pid=$2 addr=$3 label=$4 config=$5
  load "$addr" "$concurrency" 20 >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  load "$addr" "$concurrency" "$requests" >"$work/$name.load"
  callgrind_control -i off "$pid" >/dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local chunks events totals
  chunks=$(grep -o '[0-9]* content chunks' "$work/$name.load" | cut -d' ' -f1)
  events=$(sed -n 's/^events: //p' "$work/$name.callgrind" | head -1)
  totals=$(sed -n 's/^totals: //p' "$work/$name.callgrind" | head -1)
  if [[ -z $chunks || $chunks == 0 || -z $totals ]]; then
    echo "$script_name: no count for $label ($config); load output:" >&2
    cat "$work/$name.load" >&2
    exit 1
  fi
  # The events line names the columns of totals (Ir, then the cache events when simulated).
  read -r -a names <<<"$events"
  read -r -a values <<<"$totals"
  local -A by_name=()
  for i in "${!names[@]}"; do
    by_name[${names[$i]}]=${values[$i]:-0}
  done
  local ir=${by_name[Ir]}
  if ((${#cache_sim[@]} > 0)); then
    local d1=$((${by_name[D1mr]:-0} + ${by_name[D1mw]:-0}))
    local ll=$((${by_name[DLmr]:-0} + ${by_name[DLmw]:-0}))
    printf '%-10s %-6s %10s %16s %18s %12s %12s\n' "$label" "$config" "$chunks" "$ir" \
      "$((ir / chunks))" "$((d1 / chunks))" "$((ll / chunks))"
  else
    printf '%-10s %-6s %10s %16s %18s\n' "$label" "$config" "$chunks" "$ir" "$((ir / chunks))"
  fi
  if [[ -n ${KEEP_PROFILES:-} ]]; then
    mkdir -p "$KEEP_PROFILES"
    cp "$work/$name.callgrind" "$KEEP_PROFILES/"
  fi
}

index=0
for bin in "${binaries[@]}"; do
  index=$((index + 1))
  for config in $configs; do
    name=run$index-$config
    valgrind --tool=callgrind "${cache_sim[@]}" --instr-atstart=no \
      --callgrind-out-file="$work/$name.callgrind" \
      "$bin" --config "$work/$config.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
      --upstream "http://$sim_addr" --threads 1 >"$work/$name.out" 2>"$work/$name.err" &
    pid=$!
    server_pids+=("$pid")
    # Under valgrind start-up (loading the tokenizers, and a binary's debug information) takes a
    # while: up to three minutes.
    for _ in $(seq 1 1800); do
      grep -q 'proxy=' "$work/$name.out" 2>/dev/null && break
      kill -0 "$pid" 2>/dev/null || { cat "$work/$name.err" >&2; exit 1; }
      sleep 0.1
    done
    addr=$(sed -n 's/.* proxy=\([^ ]*\).*/\1/p' "$work/$name.out")
    [[ -n $addr ]] || { echo "$script_name: $bin did not start under valgrind" >&2; exit 1; }
    count "$name" "$pid" "$addr" "#$index" "$config"
  done
done

if [[ -n ${NGINX:-} ]]; then
  if ! command -v nginx >/dev/null; then
    echo "$script_name: NGINX=1 needs nginx (apt-get install nginx)" >&2
    exit 2
  fi
  nginx_dir=$work/nginx
  nginx_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # shellcheck source=scripts/lib/nginx_conf.sh
  source "$root/scripts/lib/nginx_conf.sh"
  write_nginx_conf "$nginx_dir" "127.0.0.1:$nginx_port" "$sim_addr" $((2 * concurrency + 1000))
  name=nginx
  valgrind --tool=callgrind "${cache_sim[@]}" --instr-atstart=no \
    --callgrind-out-file="$work/$name.callgrind" \
    nginx -p "$nginx_dir" -c "$nginx_dir/nginx.conf" -g 'daemon off; master_process off;' \
    >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  server_pids+=("$pid")
  for _ in $(seq 1 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$nginx_port") 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/$name.err" >&2; exit 1; }
    sleep 0.1
  done
  count "$name" "$pid" "127.0.0.1:$nginx_port" nginx -
fi

for i in "${!binaries[@]}"; do
  echo "#$((i + 1)) = ${binaries[$i]}"
done
