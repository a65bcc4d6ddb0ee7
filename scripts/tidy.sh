#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy at the repository root) on tokenmeter's sources with the build's
# compile_commands.json. Every finding is an error: the exit status is 1 if there is any.
# Usage: scripts/tidy.sh [--build-dir DIR] [-j N] [PATH...]
#   PATH  a directory (its .cpp files, recursively) or a .cpp file; default proxy/.
#         Headers are checked through the .cpp files that include them, and reported when they
#         lie under one of the PATHs (a header-only module such as proxy/core is checked by
#         naming it next to a module whose sources include it).
#   --build-dir  a configured build directory (default: build; scripts/build.sh configures one)
#   -j N         parallel clang-tidy processes (default: the number of cores)
# CLANG_TIDY selects the binary (default clang-tidy-14, Debian 12's).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$root/build"
jobs="$(nproc 2>/dev/null || echo 2)"
paths=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --build-dir) build_dir="$2"; shift 2 ;;
        -j) jobs="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) paths+=("$1"); shift ;;
    esac
done
[[ ${#paths[@]} -gt 0 ]] || paths=(proxy)
tidy="${CLANG_TIDY:-clang-tidy-14}"
command -v "$tidy" >/dev/null || { echo "tidy: $tidy not found (apt-get install clang-tidy-14)" >&2; exit 2; }
db="$build_dir/compile_commands.json"
[[ -f $db ]] || { echo "tidy: no $db; configure first: scripts/build.sh $build_dir" >&2; exit 2; }

cd "$root"
files=()
filter=()
for path in "${paths[@]}"; do
    path="${path%/}"
    [[ -e $path ]] || { echo "tidy: no such path: $path" >&2; exit 2; }
    if [[ -d $path ]]; then
        mapfile -t -O "${#files[@]}" files < <(find "$path" -name '*.cpp' | LC_ALL=C sort)
        filter+=("$root/$path/")
    else
        files+=("$path")
        filter+=("$root/$(dirname "$path")/")
    fi
done
# Only files the build compiles: clang-tidy would guess the flags of any other.
checked=()
for f in "${files[@]}"; do
    if grep -qF "\"file\": \"$root/$f\"" "$db"; then
        checked+=("$f")
    else
        echo "tidy: skipping $f (not in $db)" >&2
    fi
done
[[ ${#checked[@]} -gt 0 ]] || { echo "tidy: no compiled .cpp file under ${paths[*]}" >&2; exit 2; }
header_filter="^($(printf '%s\n' "${filter[@]}" | sed 's/[.+]/\\&/g' | paste -sd '|'))"

echo "tidy: ${#checked[@]} files, $jobs at a time ($tidy)" >&2
# GCC-only warning flags in the compile commands are unknown to clang: not a finding.
printf '%s\0' "${checked[@]}" |
    xargs -0 -P "$jobs" -n 1 "$tidy" -p "$build_dir" --quiet \
        --header-filter="$header_filter" --extra-arg=-Wno-unknown-warning-option
