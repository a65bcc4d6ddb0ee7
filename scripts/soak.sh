#!/usr/bin/env bash
# soak.sh: a long run of mixed normal and hostile traffic through the built proxy, which must
# leave the process up with flat RSS (30 minutes by default). Not a test, and not run by ctest. Builds nothing: it uses BUILD_DIR/proxy/tokenmeter and
# BUILD_DIR/tests/sim/tokenmeter-sim as they are.
#
#   scripts/soak.sh [--minutes N] [--build DIR] [--concurrency N] [--only REGEX] [--skip REGEX]
#                   [--rss-growth PERCENT]
#
#   --minutes N          how long to run (default 30)
#   --build DIR          build directory (default build/ in the repository)
#   --concurrency N      concurrent normal streams (default 8)
#   --only / --skip RE   take only / leave out the adversarial cases whose name matches RE
#   --rss-growth P       fail when the main proxy's RSS grows more than P % after the first
#                        minute (default 20)
#
# The driver, tests/integration/adversarial/soak.mjs, starts the simulator and the proxy on
# loopback ports the OS chooses and, until the time is up:
#   - keeps --concurrency streams of normal traffic going (OpenAI chat and completions,
#     Anthropic Messages, Ollama, streamed and not) through the main proxy to the simulator;
#   - replays on the same proxy the client bytes of every case in
#     tests/integration/adversarial/*.json that needs no scripted upstream (bad request lines,
#     smuggling attempts, deep JSON, ...);
#   - replays every case, scripted upstream bytes included (1xx, malformed responses, ...),
#     against proxies in front of a recording upstream, checking each outcome as the adversarial
#     test does;
#   - samples the main proxy's VmRSS from /proc/PID/status every 10 s.
# At the end it prints the requests sent, errors by kind, the cases whose outcome differed from
# the expectation, whether every proxy stayed up, and RSS first / after one minute / last / max.
# Exit status: 0 when every proxy stayed up and RSS grew at most the limit after the first
# minute; 1 otherwise; 2 for bad arguments or missing binaries. A proxy or simulator that dies is
# restarted so that the run goes on; a proxy death still fails the run.
#
# A quick check of the command itself: scripts/soak.sh --minutes 1
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
minutes=30
driver_args=()

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

while (($# > 0)); do
  case $1 in
    --minutes) minutes=${2:?--minutes needs a value}; shift 2 ;;
    --minutes=*) minutes=${1#*=}; shift ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    --concurrency | --only | --skip | --rss-growth)
      driver_args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --concurrency=* | --only=* | --skip=* | --rss-growth=*)
      driver_args+=("$1"); shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "soak.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

if ! [[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || [[ $minutes =~ ^0+([.]0*)?$ ]]; then
  echo "soak.sh: --minutes must be a positive number, not '$minutes'" >&2
  exit 2
fi
bin=$build/proxy/tokenmeter
sim=$build/tests/sim/tokenmeter-sim
for file in "$bin" "$sim"; do
  if [[ ! -x $file ]]; then
    echo "soak.sh: $file is missing; build it first (scripts/build.sh)" >&2
    exit 2
  fi
done
if ! command -v node >/dev/null 2>&1; then
  echo "soak.sh: node (18 or newer) is needed for the driver" >&2
  exit 2
fi

echo "soak.sh: $minutes min against $bin (simulator $sim)"
export TOKENMETER_BIN=$bin TOKENMETER_SIM=$sim
exec node "$root/tests/integration/adversarial/soak.mjs" --minutes "$minutes" "${driver_args[@]}"
