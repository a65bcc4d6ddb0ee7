#!/usr/bin/env bash
# bench-websocket.sh: WebSocket tunnels through tokenmeter beside nginx's WebSocket proxying, in
# one run. Starts a `ws` upstream (tests/bench/ws_upstream.mjs: echoes text messages, streams
# realtime-style deltas on request), then in front of it, each on its own loopback port:
#   tokenmeter  the full-metering config of bench-proxies.sh, one worker thread
#   nginx       Debian's nginx, 1 worker, proxy_http_version 1.1, Upgrade and Connection passed
#               on, proxy_buffering off
# and runs tests/bench/websocket_bench.mjs (a Node process of its own) over the upstream direct
# and every target: RSS idle and with the tunnels open, then in rounds with the targets' order
# rotated, a ping-pong phase (round trip per message) and a stream phase (delivery latency per
# delta); the proxies' CPU per relayed message, added latency p50/p99, peak RSS and RSS per open
# tunnel, medians over the rounds, and every ratio to nginx. Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-websocket.sh [BUILD_DIR] [-- extra websocket_bench.mjs flags]

  BUILD_DIR  a Release build (default: build-release/ in the repository) holding
             proxy/tokenmeter; TOKENMETER_BIN=PATH runs that binary instead

Needs node and nginx (apt-get install nodejs npm nginx); the `ws` package is the one
tests/integration pins (npm ci there, done here when it is missing). NO_NGINX=1 leaves nginx out.

Environment (defaults: about 3 minutes on 2 cores):
  CONNECTIONS=200   WebSocket connections per target, open at once
  PINGS=100         ping-pong messages per connection per round, each after the previous echo
  PING_GAP_MS=50    gap between one connection's pings
  MESSAGES=500      deltas (JSON text frames of about 110 bytes) the upstream streams per connection
  GAP_MS=20         gap between one connection's deltas (0: all at once)
  ROUNDS=3          rounds over every target and the upstream direct, order rotated; medians
  THREADS=1         tokenmeter --threads
  TARGETS="tokenmeter nginx"   also tokenmeter-bare (no reference tokenizer, no usage injection)
  TOKENMETER_BIN=   the tokenmeter binary (default BUILD_DIR/proxy/tokenmeter)
  JSON=1            print the report as JSON
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script_name=bench-websocket
# shellcheck source=scripts/lib/bench_args.sh
source "$root/scripts/lib/bench_args.sh"
parse_bench_args "$@"

connections=${CONNECTIONS:-200}
threads=${THREADS:-1}
targets=${TARGETS:-tokenmeter nginx}
if [[ ${NO_NGINX:-0} == 1 ]]; then targets=${targets//nginx/}; fi
wants() { [[ " $targets " == *" $1 "* ]]; }

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "$script_name: $tool is not installed (apt-get install nodejs npm)" >&2
    exit 2
  fi
done
export PATH=$PATH:/usr/sbin
if wants nginx && ! command -v nginx >/dev/null; then
  echo "$script_name: nginx is not installed (apt-get install nginx), or set NO_NGINX=1" >&2
  exit 2
fi
if [[ ! -d $root/tests/integration/node_modules/ws ]]; then
  (cd "$root/tests/integration" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

# Every connection is a socket on each side of each proxy, and one in the client.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (($(ulimit -n) < 3 * connections + 100)); then
  echo "$script_name: the open-files limit $(ulimit -n) is too small for $connections connections" >&2
  exit 2
fi

# shellcheck source=scripts/lib/stack.sh
source "$root/scripts/lib/stack.sh"
# shellcheck source=scripts/lib/bench_configs.sh
source "$root/scripts/lib/bench_configs.sh"
# shellcheck source=scripts/lib/nginx_conf.sh
source "$root/scripts/lib/nginx_conf.sh"

if [[ -n ${TOKENMETER_BIN:-} ]]; then
  proxy_bin=$TOKENMETER_BIN
else
  require_release_build
  proxy_bin=$(find_binary tokenmeter proxy/tokenmeter)
fi

node "$root/tests/bench/ws_upstream.mjs" >"$work/upstream.out" 2>"$work/upstream.err" &
upstream_pid=$!
server_pids+=("$upstream_pid")
upstream_line=$(wait_for_line "$work/upstream.out" '^listening on ' "$upstream_pid" ws-upstream)
upstream_addr=${upstream_line#listening on }

via=()
baseline=

# A tunnel cap above what the run opens: the benchmark measures the relay, not the cap.
tunnel_config="websocket:
  max_tunnels: $((2 * connections + 1024))
"
start_tokenmeter() {
  local name=$1 config=$2 line addr pid
  printf '%s' "$config$tunnel_config" >"$work/$name.yaml"
  "$proxy_bin" --config "$work/$name.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
    --upstream "http://$upstream_addr" --threads "$threads" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  server_pids+=("$pid")
  line=$(wait_for_line "$work/$name.out" '^tokenmeter listening: ' "$pid" "$name")
  addr=$(sed -n 's/.* proxy=\([^ ]*\).*/\1/p' <<<"$line")
  via+=(--via "$name=ws://$addr,$pid")
}
if wants tokenmeter; then
  start_tokenmeter tokenmeter "$bench_full_metering"
fi
if wants tokenmeter-bare; then
  start_tokenmeter tokenmeter-bare "$bench_bare"
fi

if wants nginx; then
  nginx_port=$(free_port)
  write_nginx_conf "$work/nginx" "127.0.0.1:$nginx_port" "$upstream_addr" $((2 * connections + 1000)) \
    "" 1 "$nginx_websocket_headers"
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off; master_process on;' \
    >"$work/nginx.out" 2>>"$work/nginx.err" &
  nginx_pid=$!
  server_pids+=("$nginx_pid")
  wait_port "$nginx_port" "$nginx_pid" nginx
  # Its worker does the relaying: its CPU and memory must be counted.
  for _ in $(seq 1 50); do
    nginx_workers=$(pgrep -P "$nginx_pid" | paste -sd+ -) && break
    sleep 0.1
  done
  if [[ -z $nginx_workers ]]; then
    echo "$script_name: nginx started no worker" >&2
    exit 1
  fi
  via+=(--via "nginx=ws://127.0.0.1:$nginx_port,$nginx_pid+$nginx_workers")
  baseline=nginx
fi

if ((${#via[@]} == 0)); then
  echo "$script_name: no targets (TARGETS=\"$targets\")" >&2
  exit 2
fi

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "versions: node $(node --version), ws $(node -p 'require("'"$root"'/tests/integration/node_modules/ws/package.json").version'), $(nginx -v 2>&1 | sed 's/.*version: //'); tokenmeter $proxy_bin" >&2

flags=(--direct "ws://$upstream_addr" "${via[@]}" --clock-ticks "$(getconf CLK_TCK)"
  --connections "$connections" --pings "${PINGS:-100}" --ping-gap-ms "${PING_GAP_MS:-50}"
  --messages "${MESSAGES:-500}" --gap-ms "${GAP_MS:-20}" --rounds "${ROUNDS:-3}")
if [[ -n $baseline ]]; then flags+=(--baseline "$baseline"); fi
if [[ ${JSON:-0} == 1 ]]; then flags+=(--json); fi

# The client runs in the background so that a signal ends it and the servers at once (bash
# runs a trap only after the foreground command ends).
status=0
node "$root/tests/bench/websocket_bench.mjs" "${flags[@]}" "${extra[@]}" &
client_pid=$!
trap 'kill "$client_pid" 2>/dev/null || true; exit 130' INT
trap 'kill "$client_pid" 2>/dev/null || true; exit 143' TERM
wait "$client_pid" || status=$?

servers_alive || status=1
exit "$status"
