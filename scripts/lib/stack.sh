# shellcheck shell=bash
# The sourcing script sets script_name and build_dir and uses the binaries and addresses set here.
# shellcheck disable=SC2154,SC2034
# stack.sh: starts tokenmeter-sim and tokenmeter in front of it on OS-chosen loopback ports and
# stops both when the sourcing script exits. Sourced by demo.sh and bench.sh.
#
# Before sourcing, set: script_name (for messages), build_dir.
# After start_stack: sim_bin proxy_bin load_bin, sim_addr sim_pid, proxy_addr admin_addr proxy_pid,
# and work (a temporary directory removed at exit; the servers' output is in it).

# The usual place in a CMake build tree first, then anywhere below it (other generators).
find_binary() {
  local name=$1 usual=$2 found
  if [[ -x $build_dir/$usual ]]; then
    printf '%s\n' "$build_dir/$usual"
    return 0
  fi
  found=$(find "$build_dir" -type f -name "$name" -perm -u+x -print -quit 2>/dev/null)
  if [[ -z $found ]]; then
    echo "$script_name: $name not found under $build_dir (cmake --build $build_dir --target $name)" >&2
    return 1
  fi
  printf '%s\n' "$found"
}

server_pids=()
work=$(mktemp -d "${TMPDIR:-/tmp}/tokenmeter-$script_name.XXXXXX")

stop_stack() {
  local pid
  for pid in "${server_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${server_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap stop_stack EXIT
# Turning the signals into exits makes the EXIT trap do the cleanup.
trap 'exit 130' INT
trap 'exit 143' TERM

# Prints the first line of FILE matching PATTERN once PID has written it.
wait_for_line() {
  local file=$1 pattern=$2 pid=$3 what=$4 line i
  for ((i = 0; i < 100; i++)); do
    if line=$(grep -m1 -E "$pattern" "$file" 2>/dev/null); then
      printf '%s\n' "$line"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$script_name: $what exited before it was listening; its output:" >&2
      cat "$file" "${file%.out}.err" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "$script_name: $what printed no listening line within 10 s" >&2
  return 1
}

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
  echo "$script_name: no free port found" >&2
  return 1
}

# wait_port PORT PID WHAT: waits until PORT accepts a connection; fails when PID (whose output
# is in $work/WHAT.*) exits first or after 10 s.
wait_port() {
  local port=$1 pid=$2 what=$3
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$script_name: $what exited before it was listening; its output:" >&2
      cat "$work/$what".* >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "$script_name: $what is not listening on $port after 10 s" >&2
  return 1
}

# servers_alive: fails, with the tails of their error output, when a started server has exited.
servers_alive() {
  local pid alive=0
  for pid in "${server_pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$script_name: process $pid died during the run; outputs in $work:" >&2
      tail -n 20 "$work"/*.err >&2 || true
      alive=1
    fi
  done
  return "$alive"
}

# start_stack: starts both servers and waits until they listen. PROXY_ARGS (environment) adds
# flags to tokenmeter's command line, e.g. PROXY_ARGS="--threads 1".
start_stack() {
  local sim_line proxy_line
  local -a proxy_args=()
  read -ra proxy_args <<<"${PROXY_ARGS:-}"
  sim_bin=$(find_binary tokenmeter-sim tests/sim/tokenmeter-sim)
  proxy_bin=$(find_binary tokenmeter proxy/tokenmeter)
  load_bin=$(find_binary tokenmeter-load tests/bench/tokenmeter-load)

  "$sim_bin" --listen 127.0.0.1:0 >"$work/sim.out" 2>"$work/sim.err" &
  sim_pid=$!
  server_pids+=("$sim_pid")
  sim_line=$(wait_for_line "$work/sim.out" '^listening on ' "$sim_pid" tokenmeter-sim)
  sim_addr=${sim_line#listening on }

  # The reference tokenizer (normalized counts) comes from the cache scripts/fetch-tokenizers.sh
  # fills; without it the proxy warns and runs without normalized counts.
  TOKENMETER_TOKENIZER_DIR="${TOKENMETER_TOKENIZER_DIR:-$root/.cache/tokenizers}" \
    "$proxy_bin" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --upstream "http://$sim_addr" "${proxy_args[@]}" \
    >"$work/proxy.out" 2>"$work/proxy.err" &
  proxy_pid=$!
  server_pids+=("$proxy_pid")
  proxy_line=$(wait_for_line "$work/proxy.out" '^tokenmeter listening: ' "$proxy_pid" tokenmeter)
  proxy_addr=$(sed -n 's/.* proxy=\([^ ]*\).*/\1/p' <<<"$proxy_line")
  admin_addr=$(sed -n 's/.* admin=\([^ ]*\).*/\1/p' <<<"$proxy_line")
  if [[ -z $proxy_addr || -z $admin_addr ]]; then
    echo "$script_name: cannot read the addresses from: $proxy_line" >&2
    return 1
  fi
}
