#!/usr/bin/env bash
# bench-proxies.sh: the one command that puts tokenmeter beside the proxies users would pick
# instead. Starts tokenmeter-sim, then in front of it, each on its own loopback port:
#   tokenmeter       full metering: usage injection, the o200k_base reference tokenizer and a
#                    native cl100k_base tokenizer for the model (the config users run)
#   tokenmeter-ref   usage injection and the o200k_base reference tokenizer only (its peak RSS
#                    is the proxy's with the reference tokenizer loaded)
#   tokenmeter-bare  no reference tokenizer, no usage injection (what metering itself costs)
#   tokenmeter-otel  the tokenmeter config with OTLP export on (every request a sampled span,
#                    the GenAI metrics every 5 s) to a local collector that accepts every post
#   nginx            Debian's nginx, 1 worker, proxy_buffering off, upstream keep-alive
#   haproxy          Debian's haproxy, 1 thread, option http-no-delay
#   tokenmeter-tls   the tokenmeter config with TLS on its listener
#   nginx-tls        the nginx config with TLS on its listener, the same certificate and key
# and runs `tokenmeter-load bench` over all of them in one run: CPU per forwarded chunk, latency
# added per chunk (p50/p99) against the simulator direct, peak RSS, RSS per open stream, errors
# and chunks delivered, with every ratio to nginx. tokenmeter runs one worker thread, like
# nginx's one worker and haproxy's one thread. With a -tls target, the certificate is an ECDSA
# P-256 one the openssl CLI makes in the temporary directory, and a handshake phase follows the
# bench (see the handshakes below). scripts/bench-tls.sh runs the TLS targets beside the plain
# ones. Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-proxies.sh [BUILD_DIR] [-- extra tokenmeter-load bench flags]

  BUILD_DIR  a Release build (default: build-release/ in the repository), made with
               cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release
               cmake --build build-release --target tokenmeter tokenmeter-sim tokenmeter-load

Needs nginx and haproxy (apt-get install nginx haproxy); either can be left out with
NO_NGINX=1 or NO_HAPROXY=1 (then ratios are to the first one present, or none). The -tls
targets need the openssl CLI (apt-get install openssl).

Environment (defaults: 1,000 streams of 200 chunks; about 7 minutes on 2 cores):
  CONCURRENCY=1000    streams at once in each round
  REQUESTS=2000       requests per round per target
  OUTPUT_TOKENS=200   tokens per response, one per chunk
  ITL_MS=20           simulator's gap between chunks
  TTFT_MS=20          simulator's time to first token
  ROUNDS=3            rounds over every target, order rotated; medians are reported
  HOLD_STREAMS=       streams held open in the memory phase (default CONCURRENCY)
  THREADS=1           tokenmeter --threads, nginx worker_processes and haproxy nbthread
  WORKERS="1 2"       worker counts side by side in one run (default: THREADS alone): the
                      first count's targets keep their names; for each further count N the
                      tokenmeter, nginx and haproxy targets run again as tokenmeter-wN,
                      nginx-wN and haproxy-wN with N workers (threads for tokenmeter and
                      haproxy, worker processes for nginx, whose CPU and RSS are summed over
                      its master and workers)
  TARGETS="tokenmeter tokenmeter-ref tokenmeter-bare nginx haproxy"   which to run; also
                      tokenmeter-tls and nginx-tls (TLS on the listener), and tokenmeter-otel
                      (OTLP export on; the collector needs python3)
  HANDSHAKE_SECONDS=5 with -tls targets: seconds per `openssl s_time` run in the handshake
                      phase (0: none); HANDSHAKE_ROUNDS=3 rounds of them
  JSON=1              print the report as JSON
  BASE_BINARY=PATH    also run PATH (another build's tokenmeter) as target tokenmeter-base,
                      with the full-metering config: an A/B of two builds in the same run;
                      several paths, separated by spaces, run as tokenmeter-base,
                      tokenmeter-base2, ...
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
read -r -a worker_counts <<<"${WORKERS:-$threads}"
for count in "${worker_counts[@]}"; do
  if ! [[ $count =~ ^[1-9][0-9]*$ ]]; then
    echo "bench-proxies: WORKERS=\"${WORKERS:-}\" holds '$count', not a worker count" >&2
    exit 2
  fi
done
threads=${worker_counts[0]}
targets=${TARGETS:-tokenmeter tokenmeter-ref tokenmeter-bare nginx haproxy}
wants() { [[ " $targets " == *" $1 "* ]]; }
if [[ ${NO_NGINX:-0} == 1 ]]; then targets=${targets//nginx-tls/}; targets=${targets//nginx/}; fi
if [[ ${NO_HAPROXY:-0} == 1 ]]; then targets=${targets//haproxy/}; fi

handshake_seconds=${HANDSHAKE_SECONDS:-5}
handshake_rounds=${HANDSHAKE_ROUNDS:-3}
tls=0
if [[ " $targets " == *"-tls "* ]]; then tls=1; fi

require_release_build
for tool in nginx haproxy; do
  if { wants "$tool" || wants "$tool-tls"; } && ! command -v "$tool" >/dev/null && [[ ! -x /usr/sbin/$tool ]]; then
    echo "bench-proxies: $tool is not installed (apt-get install $tool), or set NO_${tool^^}=1" >&2
    exit 2
  fi
done
if ((tls)) && ! command -v openssl >/dev/null; then
  echo "bench-proxies: the -tls targets need the openssl CLI (apt-get install openssl)" >&2
  exit 2
fi
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

"$sim_bin" --listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
server_pids+=("$sim_pid")
sim_line=$(wait_for_line "$work/sim.out" '^listening on ' "$sim_pid" tokenmeter-sim)
sim_addr=${sim_line#listening on }
sim_port=${sim_addr##*:}

via=()
baseline=
declare -A server_port server_pid_list  # by target name, for the handshake phase

# One CA and a server certificate it signs, both ECDSA P-256, naming 127.0.0.1 and localhost.
if ((tls)); then
  mkdir -p "$work/tls"
  (
    cd "$work/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=tokenmeter bench CA" -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
      -keyout server.key -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile server.ext -out server.pem
  ) >"$work/tls.log" 2>&1 || {
    echo "bench-proxies: making the test certificate failed:" >&2
    cat "$work/tls.log" >&2
    exit 1
  }
fi

start_tokenmeter() {
  local name=$1 config=$2 scheme=${3:-http} bin=${4:-$proxy_bin} count=${5:-$threads} line addr pid
  printf '%s' "$config" >"$work/$name.yaml"
  "$bin" --config "$work/$name.yaml" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
    --upstream "http://$sim_addr" --threads "$count" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  server_pids+=("$pid")
  line=$(wait_for_line "$work/$name.out" '^tokenmeter listening: ' "$pid" "$name")
  addr=$(sed -n 's/.* proxy=\([^ ]*\).*/\1/p' <<<"$line")
  via+=(--via "$name=$scheme://$addr,$pid")
  server_port[$name]=${addr##*:}
  server_pid_list[$name]=$pid
}

# shellcheck source=scripts/lib/bench_configs.sh
source "$root/scripts/lib/bench_configs.sh"
# shellcheck source=scripts/lib/nginx_conf.sh
source "$root/scripts/lib/nginx_conf.sh"
full_metering=$bench_full_metering
if wants tokenmeter; then
  start_tokenmeter tokenmeter "$full_metering"
fi
# The same full-metering config on other builds (an A/B of two commits in one run): the first
# is target tokenmeter-base, the next tokenmeter-base2, and so on.
base_index=0
for base_binary in ${BASE_BINARY:-}; do
  base_index=$((base_index + 1))
  base_name=tokenmeter-base
  if ((base_index > 1)); then base_name+=$base_index; fi
  start_tokenmeter "$base_name" "$full_metering" http "$base_binary"
done
if wants tokenmeter-tls; then
  start_tokenmeter tokenmeter-tls "${full_metering}tls:
  cert_file: $work/tls/server.pem
  key_file: $work/tls/server.key
" https
fi
if wants tokenmeter-otel; then
  # A collector that answers every OTLP post with 200; its CPU is not counted as the proxy's.
  python3 -c '
import http.server
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
server.serve_forever()
' >"$work/otlp-sink.out" 2>"$work/otlp-sink.err" &
  otlp_pid=$!
  server_pids+=("$otlp_pid")
  otlp_line=$(wait_for_line "$work/otlp-sink.out" '^listening on ' "$otlp_pid" otlp-sink)
  start_tokenmeter tokenmeter-otel "${full_metering}otel:
  endpoint: http://${otlp_line#listening on }
  sampling_ratio: 1.0
"
fi
if wants tokenmeter-ref; then
  start_tokenmeter tokenmeter-ref "$bench_reference_only"
fi
if wants tokenmeter-bare; then
  start_tokenmeter tokenmeter-bare "$bench_bare"
fi

# start_nginx NAME [tls] [WORKERS]: an nginx of its own per target, so each one's memory phase
# starts fresh.
start_nginx() {
  local name=$1 with_tls=${2:-} count=${3:-$threads} port pid workers listen_options=""
  local tls_lines="" scheme=http
  port=$(free_port)
  if [[ $with_tls == tls ]]; then
    listen_options=" ssl"
    scheme=https
    # The protocols and the session cache and tickets as tokenmeter's TLS profile has them.
    tls_lines="ssl_certificate $work/tls/server.pem;
    ssl_certificate_key $work/tls/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_tickets on;"
  fi
  write_nginx_conf "$work/$name" "127.0.0.1:$port$listen_options" "127.0.0.1:$sim_port" \
    $((2 * hold_streams + 1000)) "$tls_lines" "$count"
  nginx -p "$work/$name" -c "$work/$name/nginx.conf" -g 'daemon off; master_process on;' \
    >"$work/$name.out" 2>>"$work/$name.err" &
  pid=$!
  server_pids+=("$pid")
  wait_port "$port" "$pid" "$name"
  workers=$(pgrep -P "$pid" | paste -sd+ -)
  via+=(--via "$name=$scheme://127.0.0.1:$port,$pid+$workers")
  server_port[$name]=$port
  server_pid_list[$name]="$pid ${workers//+/ }"
  baseline=${baseline:-$name}
}

if wants nginx; then
  start_nginx nginx
fi
if wants nginx-tls; then
  start_nginx nginx-tls tls
fi

# start_haproxy NAME [THREADS]
start_haproxy() {
  local name=$1 count=${2:-$threads} port pid
  port=$(free_port)
  cat >"$work/$name.cfg" <<EOF
global
  nbthread $count
  maxconn $((hold_streams + 500))
defaults
  mode http
  option http-no-delay
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  http-reuse always
frontend bench
  bind 127.0.0.1:$port
  backlog 4096
  default_backend model
backend model
  server sim 127.0.0.1:$sim_port
EOF
  haproxy -db -f "$work/$name.cfg" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  server_pids+=("$pid")
  wait_port "$port" "$pid" "$name"
  via+=(--via "$name=http://127.0.0.1:$port,$pid")
  baseline=${baseline:-$name}
}

if wants haproxy; then
  start_haproxy haproxy
fi

# The further worker counts of WORKERS, each beside the first count's targets.
for count in "${worker_counts[@]:1}"; do
  if wants tokenmeter; then
    start_tokenmeter "tokenmeter-w$count" "$full_metering" http "$proxy_bin" "$count"
  fi
  if wants nginx; then
    start_nginx "nginx-w$count" "" "$count"
  fi
  if wants haproxy; then
    start_haproxy "haproxy-w$count" "$count"
  fi
done

if ((${#via[@]} == 0)); then
  echo "bench-proxies: no targets (TARGETS=\"$targets\")" >&2
  exit 2
fi

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), kernel $(uname -r)" >&2
echo "versions: $(nginx -v 2>&1 | sed 's/.*version: //') $(haproxy -v 2>/dev/null | head -n1 | cut -d' ' -f1-3); build $build_dir" >&2
if ((tls)); then
  echo "tls: $(openssl version), certificate ECDSA P-256 from $work/tls" >&2
fi

json_flag=()
if [[ ${JSON:-0} == 1 ]]; then
  json_flag=(--json)
fi
baseline_flag=()
if [[ -n $baseline ]]; then
  baseline_flag=(--baseline "$baseline")
fi
tls_flag=()
if ((tls)); then
  tls_flag=(--ca-file "$work/tls/ca.pem")
fi

status=0
"$load_bin" bench --direct "http://$sim_addr" "${via[@]}" "${baseline_flag[@]}" \
  --concurrency "$concurrency" --requests "$requests" --output-tokens "$output_tokens" \
  --itl-ms "$itl_ms" --ttft-ms "$ttft_ms" --rounds "$rounds" --hold-streams "$hold_streams" \
  "${tls_flag[@]}" "${json_flag[@]}" "${extra[@]}" || status=$?

# Handshakes: `openssl s_time` opens one connection after another to each -tls target for
# HANDSHAKE_SECONDS, in rounds that alternate the targets' order. Kinds: -new (a full handshake
# each) and -reuse (each resuming the first one's session), TLS 1.3 and 1.2, with no request;
# TLS 1.3 resumes from a ticket the server sends after the handshake, which s_time reads only
# when it fetches a page, so TLS 1.3 -reuse runs with `-www /` (a GET / over HTTP/1.0, proxied
# to the simulator) and so does a TLS 1.3 -new run to compare it with. The server's utime+stime
# (/proc/PID/stat, all its processes) after − before the run, over the connections s_time made,
# is its CPU per connection.
cpu_ticks() {
  local total=0 pid fields
  local -a stat
  for pid in "$@"; do
    fields=$(sed 's/.*) //' "/proc/$pid/stat") || return 1
    read -r -a stat <<<"$fields"
    # After the command name, utime and stime (fields 14 and 15 of proc(5)) are at 11 and 12.
    total=$((total + stat[11] + stat[12]))
  done
  echo "$total"
}

tls_targets=()
for name in tokenmeter-tls nginx-tls; do
  if wants "$name"; then tls_targets+=("$name"); fi
done
if ((tls && handshake_seconds > 0 && ${#tls_targets[@]} > 0)); then
  tick=$(getconf CLK_TCK)
  echo "handshakes: openssl s_time, $handshake_seconds s per run, $handshake_rounds rounds" >&2
  : >"$work/handshakes.tsv"
  for ((round = 1; round <= handshake_rounds; round++)); do
    order=("${tls_targets[@]}")
    if ((round % 2 == 0)); then
      order=()
      for ((i = ${#tls_targets[@]} - 1; i >= 0; i--)); do order+=("${tls_targets[i]}"); done
    fi
    for name in "${order[@]}"; do
      read -r -a pids <<<"${server_pid_list[$name]}"
      for kind in tls1_3:new tls1_3:new:www tls1_3:reuse:www tls1_2:new tls1_2:reuse; do
        IFS=: read -r version mode page <<<"$kind"
        www=()
        if [[ -n $page ]]; then www=(-www /); fi
        before=$(cpu_ticks "${pids[@]}")
        out=$(openssl s_time -connect "127.0.0.1:${server_port[$name]}" "-$mode" "-$version" \
          "${www[@]}" -time "$handshake_seconds" -CAfile "$work/tls/ca.pem" 2>&1) || true
        after=$(cpu_ticks "${pids[@]}")
        connections=$(sed -n 's/^\([0-9]*\) connections in [0-9.]* real seconds.*/\1/p' <<<"$out" | tail -n1)
        # s_time prints a character per connection: 'r' resumed, '*' a full handshake.
        resumed=$(grep -E '^[*r]+$' <<<"$out" | tr -cd 'r' | wc -c)
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$version" "$mode${page:+ + GET /}" \
          "${connections:-0}" "$resumed" "$((after - before))" >>"$work/handshakes.tsv"
      done
    done
  done
  # Medians over the rounds, per target, version and mode.
  printf '%-16s %-7s %-13s %12s %9s %20s\n' target version kind connections resumed \
    'server CPU us/conn'
  sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3 "$work/handshakes.tsv" | awk -F '\t' -v tick="$tick" '
    function median(values, count,   i, j, swap) {
      for (i = 1; i <= count; i++) {
        for (j = i + 1; j <= count; j++) {
          if (values[j] < values[i]) { swap = values[i]; values[i] = values[j]; values[j] = swap }
        }
      }
      return count % 2 ? values[(count + 1) / 2] : (values[count / 2] + values[count / 2 + 1]) / 2
    }
    function flush() {
      if (count > 0) {
        printf "%-16s %-7s %-13s %12d %9d %20.0f\n", target, version, mode, median(conns, count),
          median(resumed, count), median(micros, count)
      }
      count = 0
    }
    $1 != target || $2 != version || $3 != mode { flush(); target = $1; version = $2; mode = $3 }
    {
      count++
      conns[count] = $4
      resumed[count] = $5
      micros[count] = $4 > 0 ? $6 / tick / $4 * 1e6 : 0
    }
    END { flush() }'
fi

servers_alive || status=1
exit "$status"
