#!/usr/bin/env bash
# Installs what tokenmeter needs on Debian 12, skipping what is already there.
# Usage: scripts/install-deps.sh [--with-node] [--with-ci]   (as root, or with sudo available)
#   --with-ci also installs scripts/apt-packages-ci.txt (clang and its sanitizer/fuzzer runtime,
#   for the fuzz and ThreadSanitizer stages of scripts/test.sh; Chromium for the status page test).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

with_node=0
with_ci=0
for arg in "$@"; do
    case "$arg" in
        --with-node) with_node=1 ;;
        --with-ci) with_ci=1 ;;
        *) echo "install-deps: unknown argument $arg" >&2; exit 2 ;;
    esac
done

lists=("$here/apt-packages.txt")
if [[ $with_ci == 1 ]]; then
    lists+=("$here/apt-packages-ci.txt")
fi
mapfile -t wanted < <(cat "${lists[@]}" | grep -v '^\s*#' | sed '/^\s*$/d')
if [[ $with_node == 1 ]] && ! command -v node >/dev/null 2>&1; then
    wanted+=(nodejs npm)
fi

missing=()
for pkg in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all ${#wanted[@]} packages present"
    exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo_cmd=(sudo)
    else
        echo "install-deps: need root to install: ${missing[*]}" >&2
        exit 1
    fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
