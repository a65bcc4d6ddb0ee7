#!/usr/bin/env bash
# Configures and builds tokenmeter, its tests and tools.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...] [--target TARGET...]
#   (default BUILD_DIR: build; without --target everything is built)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$root/build}"
shift || true
cmake_args=()
targets=()
while [[ $# -gt 0 ]]; do
    if [[ $1 == --target ]]; then
        shift
        targets=("$@")
        break
    fi
    cmake_args+=("$1")
    shift
done
set -- "${cmake_args[@]}"

# ccache: paths relative to the source tree and no working directory in the hash, so a second
# clone or worktree on the same machine reuses the first one's objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

generator=()
if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [[ $# -gt 0 ]]; then
    cmake "$build_dir" "$@"
fi
jobs="$(nproc 2>/dev/null || echo 2)"
if [[ ${#targets[@]} -gt 0 ]]; then
    cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}"
else
    cmake --build "$build_dir" -j"$jobs"
fi
