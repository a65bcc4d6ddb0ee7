#!/usr/bin/env bash
# bench-proxies.sh: the one command that puts tokenmeter beside the proxies users would pick
# instead. Starts tokenmeter-sim, then in front of it, each on its own loopback port:
#   tokenmeter       full metering: usage injection, the o200k_base reference tokenizer and a
#                    native cl100k_base tokenizer for the model (the config users run)
#   tokenmeter-bare  no reference tokenizer, no usage injection (what metering itself costs)
#   nginx            Debian's nginx, 1 worker, proxy_buffering off, upstream keep-alive
#   haproxy          Debian's haproxy, 1 thread, option http-no-delay
# and runs `tokenmeter-load bench` over all of them in one run: CPU per forwarded chunk, latency
# added per chunk (p50/p99) against the simulator direct, peak RSS, RSS per open stream, errors
# and chunks delivered, with every ratio to nginx. tokenmeter runs one worker thread, like
# nginx's one worker and haproxy's one thread. Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-proxies.sh [BUILD_DIR] [-- extra tokenmeter-load bench flags]

  BUILD_DIR  a Release build (default: build-release/ in the repository), made with
               cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release
               cmake --build build-release --target tokenmeter tokenmeter-sim tokenmeter-load

Needs nginx and haproxy (apt-get install nginx haproxy); either can be left out with
NO_NGINX=1 or NO_HAPROXY=1 (then ratios are to the first one present, or none).

Environment (defaults: the headroom issue's load; about 6 minutes on 2 cores):
  CONCURRENCY=1000    streams at once in each round
  REQUESTS=2000       requests per round per target
  OUTPUT_TOKENS=200   tokens per response, one per chunk
  ITL_MS=20           simulator's gap between chunks
  TTFT_MS=20          simulator's time to first token
  ROUNDS=3            rounds over every target, order rotated; medians are reported
  HOLD_STREAMS=       streams held open in the memory phase (default CONCURRENCY)
  THREADS=1           tokenmeter --threads
  TARGETS="tokenmeter tokenmeter-bare nginx haproxy"   which proxies to run
  JSON=1              print the report as JSON
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script_name=bench-proxies
# shellcheck source=scripts/lib/bench_args.sh
source "$root/scripts/lib/bench_args.sh"
parse_bench_args "$@"

concurrency=${CONCURRENCY:-1000}
requests=${REQUESTS:-2000}
output_tokens=${OUTPUT_TOKENS:-200}
itl_ms=${ITL_MS:-20}
ttft_ms=${TTFT_MS:-20}
rounds=${ROUNDS:-3}
hold_streams=${HOLD_STREAMS:-$concurrency}
threads=${THREADS:-1}
targets=${TARGETS:-tokenmeter tokenmeter-bare nginx haproxy}
wants() { [[ " $targets " == *" $1 "* ]]; }
if [[ ${NO_NGINX:-0} == 1 ]]; then targets=${targets//nginx/}; fi
if [[ ${NO_HAPROXY:-0} == 1 ]]; then targets=${targets//haproxy/}; fi

require_release_build
for tool in nginx haproxy; do
  if wants "$tool" && ! command -v "$tool" >/dev/null && [[ ! -x /usr/sbin/$tool ]]; then
    echo "bench-proxies: $tool is not installed (apt-get install $tool), or set NO_${tool^^}=1" >&2
    exit 2
  fi
done
export PATH=$PATH:/usr/sbin

# Every stream is a socket on each side of each proxy: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (($(ulimit -n) < 2 * hold_streams + 100)); then
  echo "bench-proxies: the open-files limit $(ulimit -n) is too small for $hold_streams streams" >&2
  exit 2
fi

# shellcheck source=scripts/lib/stack.sh
source "$root/scripts/lib/stack.sh"

sim_bin=$(find_binary tokenmeter-sim tests/sim/tokenmeter-sim)
proxy_bin=$(find_binary tokenmeter proxy/tokenmeter)
load_bin=$(find_binary tokenmeter-load tests/bench/tokenmeter-load)

# A loopback port nobody uses (nginx and haproxy take a fixed port). Below the kernel's ephemeral
# range, so no outgoing connection holds it; a race with another process taking it in between is
# possible but harmless: that server then fails to start and the script says so.
free_port() {
  local port low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  for _ in $(seq 1 50); do
    port=$((10000 + RANDOM % (low - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  echo "bench-proxies: no free port found" >&2
  return 1
}

wait_port() {
  local port=$1 pid=$2 what=$3
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "bench-proxies: $what exited before it was listening; its output:" >&2
      cat "$work/$what".* >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "bench-proxies: $what is not listening on $port after 10 s" >&2
  return 1
}

"$sim_bin" --listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
server_pids+=("$sim_pid")
sim_line=$(wait_for_line "$work/sim.out" '^listening on ' "$sim_pid" tokenmeter-sim)
sim_addr=${sim_line#listening on }
sim_port=${sim_addr##*:}

via=()
baseline=

start_tokenmeter() {
  local name=$1 config=$2 line addr pid
  printf '%s' "$config" >"$work/$name.yaml"
  "$proxy_bin" --config "$work/$name.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
    --upstream "http://$sim_addr" --threads "$threads" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  server_pids+=("$pid")
  line=$(wait_for_line "$work/$name.out" '^tokenmeter listening: ' "$pid" "$name")
  addr=$(sed -n 's/.* proxy=\([^ ]*\).*/\1/p' <<<"$line")
  via+=(--via "$name=http://$addr,$pid")
}

if wants tokenmeter; then
  start_tokenmeter tokenmeter "log:
  level: warn
reference_tokenizer: o200k_base
usage_injection: true
models:
  bench-model:
    tokenizer: cl100k_base
"
fi
if wants tokenmeter-bare; then
  start_tokenmeter tokenmeter-bare "log:
  level: warn
reference_tokenizer: none
usage_injection: false
"
fi

if wants nginx; then
  nginx_port=$(free_port)
  mkdir -p "$work/nginx"
  cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $(ulimit -n);
pid $work/nginx/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections $((2 * hold_streams + 1000)); }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  upstream model { server 127.0.0.1:$sim_port; keepalive 1024; }
  server {
    listen 127.0.0.1:$nginx_port backlog=4096;
    keepalive_requests 100000;
    location / {
      proxy_pass http://model;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
EOF
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off; master_process on;' \
    >"$work/nginx.out" 2>>"$work/nginx.err" &
  nginx_pid=$!
  server_pids+=("$nginx_pid")
  wait_port "$nginx_port" "$nginx_pid" nginx
  nginx_workers=$(pgrep -P "$nginx_pid" | paste -sd+ -)
  via+=(--via "nginx=http://127.0.0.1:$nginx_port,$nginx_pid+$nginx_workers")
  baseline=nginx
fi

if wants haproxy; then
  haproxy_port=$(free_port)
  cat >"$work/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn $((hold_streams + 500))
defaults
  mode http
  option http-no-delay
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  http-reuse always
frontend bench
  bind 127.0.0.1:$haproxy_port
  backlog 4096
  default_backend model
backend model
  server sim 127.0.0.1:$sim_port
EOF
  haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.out" 2>"$work/haproxy.err" &
  haproxy_pid=$!
  server_pids+=("$haproxy_pid")
  wait_port "$haproxy_port" "$haproxy_pid" haproxy
  via+=(--via "haproxy=http://127.0.0.1:$haproxy_port,$haproxy_pid")
  baseline=${baseline:-haproxy}
fi

if ((${#via[@]} == 0)); then
  echo "bench-proxies: no targets (TARGETS=\"$targets\")" >&2
  exit 2
fi

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), kernel $(uname -r)" >&2
echo "versions: $(nginx -v 2>&1 | sed 's/.*version: //') $(haproxy -v 2>/dev/null | head -n1 | cut -d' ' -f1-3); build $build_dir" >&2

json_flag=()
if [[ ${JSON:-0} == 1 ]]; then
  json_flag=(--json)
fi
baseline_flag=()
if [[ -n $baseline ]]; then
  baseline_flag=(--baseline "$baseline")
fi

status=0
"$load_bin" bench --direct "http://$sim_addr" "${via[@]}" "${baseline_flag[@]}" \
  --concurrency "$concurrency" --requests "$requests" --output-tokens "$output_tokens" \
  --itl-ms "$itl_ms" --ttft-ms "$ttft_ms" --rounds "$rounds" --hold-streams "$hold_streams" \
  "${json_flag[@]}" "${extra[@]}" || status=$?

for pid in "${server_pids[@]}"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "bench-proxies: process $pid died during the run; outputs in $work:" >&2
    tail -n 20 "$work"/*.err >&2 || true
    status=1
  fi
done
exit "$status"
