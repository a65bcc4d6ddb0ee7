#!/usr/bin/env bash
# bench-tls.sh: what TLS on the listener costs, tokenmeter beside nginx with the same certificate.
# A preset of bench-proxies.sh: the targets tokenmeter, tokenmeter-tls, nginx and nginx-tls in one
# run with rounds interleaved (CPU per forwarded chunk, latency added per chunk, RSS), then the
# handshake phase (server CPU per full and per resumed TLS handshake, by `openssl s_time`).
# Builds nothing.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-tls.sh [BUILD_DIR] [-- extra tokenmeter-load bench flags]

BUILD_DIR (default build-release/, a Release build of the targets tokenmeter, tokenmeter-sim and
tokenmeter-load) and the flags after -- are those of scripts/bench-proxies.sh.

Needs nginx and the openssl CLI (apt-get install nginx openssl). The certificate is an ECDSA
P-256 one, signed by a CA made for the run, both in the run's temporary directory; nginx gets
the same certificate and key, ssl_protocols TLSv1.2 TLSv1.3 and a session cache, like
tokenmeter's TLS profile.

Environment: as scripts/bench-proxies.sh --help says, with these defaults (about 4 minutes on
2 cores):
  TARGETS="tokenmeter tokenmeter-tls nginx nginx-tls"
  CONCURRENCY=200 REQUESTS=400 OUTPUT_TOKENS=100 ITL_MS=20 TTFT_MS=20 ROUNDS=3
  HANDSHAKE_SECONDS=5 HANDSHAKE_ROUNDS=3
USAGE
}

for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --) break ;;
  esac
done

export TARGETS=${TARGETS:-tokenmeter tokenmeter-tls nginx nginx-tls}
export CONCURRENCY=${CONCURRENCY:-200}
export REQUESTS=${REQUESTS:-400}
export OUTPUT_TOKENS=${OUTPUT_TOKENS:-100}
export ITL_MS=${ITL_MS:-20}
export TTFT_MS=${TTFT_MS:-20}
export ROUNDS=${ROUNDS:-3}
export HANDSHAKE_SECONDS=${HANDSHAKE_SECONDS:-5}
export HANDSHAKE_ROUNDS=${HANDSHAKE_ROUNDS:-3}
exec "$(dirname "${BASH_SOURCE[0]}")/bench-proxies.sh" "$@"
