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

# A file that passed is not checked again while nothing it is made of has changed: the key is its
# preprocessed text (every header it includes, with the checkout's own path taken out, so another
# clone of the same tree hits), its compile command, .clang-tidy, the clang-tidy version and the
# header filter's directories. Only clean results are kept. TOKENMETER_TIDY_CACHE names the
# directory (default ~/.cache/tokenmeter/tidy); TOKENMETER_TIDY_CACHE=off checks every file.
cache_dir="${TOKENMETER_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenmeter/tidy}"
[[ $cache_dir != off ]] || cache_dir=""
commands=""
if [[ -n $cache_dir ]]; then
    mkdir -p "$cache_dir"
    commands="$(mktemp)"
    trap 'rm -f "$commands"' EXIT
    # One line per file: the file, the directory to run in, and its compile command turned into a
    # preprocessing one (-E, no object file) that keeps the comments (-C): a NOLINT is in one.
    python3 - "$db" "$root" >"$commands" <<'PY'
import json, shlex, sys
db, root = sys.argv[1], sys.argv[2]
for entry in json.load(open(db)):
    words = entry.get("arguments") or shlex.split(entry["command"])
    if "-o" in words:
        i = words.index("-o")
        del words[i:i + 2]
    if "-c" not in words:
        continue
    words[words.index("-c")] = "-E"
    words.insert(1, "-C")
    name = entry["file"][len(root) + 1:] if entry["file"].startswith(root + "/") else entry["file"]
    print(name, entry["directory"], shlex.join(words), sep="\t")
PY
fi
static_key="$("$tidy" --version | tr -d '\n'; sha256sum <.clang-tidy; printf '%s\n' "${filter[@]#"$root/"}")"
export root build_dir tidy header_filter cache_dir commands static_key

tidy_one() {
    local file="$1" key="" dir cmd
    if [[ -n $cache_dir ]]; then
        IFS=$'\t' read -r _ dir cmd < <(awk -F'\t' -v f="$file" '$1 == f' "$commands")
        if [[ -n $cmd ]]; then
            key="$({
                printf '%s\n%s\n' "$static_key" "$cmd"
                (cd "$dir" && eval "$cmd" 2>/dev/null)
            } | sed "s|$root/||g" | sha256sum | cut -d' ' -f1)"
            [[ ! -f $cache_dir/$key ]] || return 0
        fi
    fi
    # GCC-only warning flags in the compile commands are unknown to clang: not a finding.
    "$tidy" -p "$build_dir" --quiet --header-filter="$header_filter" \
        --extra-arg=-Wno-unknown-warning-option "$file" || return 1
    [[ -z $key ]] || : >"$cache_dir/$key"
}
export -f tidy_one

echo "tidy: ${#checked[@]} files, $jobs at a time ($tidy${cache_dir:+; clean results kept in $cache_dir})" >&2
# shellcheck disable=SC2016 # $1 is the inner shell's
printf '%s\0' "${checked[@]}" | xargs -0 -P "$jobs" -n 1 bash -c 'tidy_one "$1"' _
