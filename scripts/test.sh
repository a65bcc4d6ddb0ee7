#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (ctest:
# unit tests, integration tests against the real proxy and simulator, the npm SDK tests).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${TOKENMETER_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh" --with-node
"$root/scripts/build.sh" "$build_dir"
# The SDK tests use pinned npm packages (package-lock.json); npm ci makes the install exact.
if [[ -f "$root/tests/e2e/package-lock.json" ]]; then
    (cd "$root/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi
cd "$build_dir"
ctest --output-on-failure --timeout 300 -j"$(nproc 2>/dev/null || echo 2)"
