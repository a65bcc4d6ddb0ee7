#!/usr/bin/env bash
# bench-tokenizer-memory.sh: what each tokenizer costs the proxy to hold: the time to load it and
# the resident memory it adds, each measured in a fresh `tokenmeter tokenize --verbose` process
# (the same numbers the proxy's start-up log prints per tokenizer: steady-clock time around
# tokenizer::load; VmRSS after minus before the load, after malloc_trim so that memory freed by
# parsing is not counted), the median of ROUNDS runs, against the targets in the table below.
#
# Usage: scripts/bench-tokenizer-memory.sh [BUILD_DIR]     (default: build/)
# Environment: ROUNDS=5, TOKENMETER_TOKENIZER_DIR (default .cache/tokenizers; fetched if missing)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$root/build}
bin=$build_dir/proxy/tokenmeter
rounds=${ROUNDS:-5}
dir=${TOKENMETER_TOKENIZER_DIR:-$root/.cache/tokenizers}
[[ -x $bin ]] || { echo "bench-tokenizer-memory: no $bin (build it first)" >&2; exit 2; }
"$root/scripts/fetch-tokenizers.sh" "$dir" >&2

# spec | label | target MiB | target ms   ("-" = no target)
cases=(
  "o200k_base|o200k_base (built in)|10|100"
  "cl100k_base|cl100k_base (built in)|-|-"
  "$dir/o200k_base.json|o200k_base.json (file)|-|-"
  "$dir/llama3/tokenizer.json|Llama 3 tokenizer.json|40|500"
  "$dir/qwen3/tokenizer.json|Qwen3 tokenizer.json|-|-"
  "$dir/gemma3/tokenizer.json|Gemma 3 tokenizer.json|60|1000"
  "$dir/llama2/tokenizer.json|Llama 2 tokenizer.json|-|-"
)

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '| tokenizer | load ms (median of %s) | resident MiB | target | met |\n' "$rounds"
printf '|---|---|---|---|---|\n'
status=0
for entry in "${cases[@]}"; do
  IFS='|' read -r spec label max_mib max_ms <<<"$entry"
  ms=()
  mib=()
  for ((i = 0; i < rounds; i++)); do
    # Nothing in the search path: a bare name is the built-in table.
    line=$(env TOKENMETER_TOKENIZER_DIR= "$bin" tokenize --tokenizer "$spec" --verbose \
      --tokenizer-dir /nonexistent </dev/null 2>&1 >/dev/null | grep 'loaded in')
    if [[ $label == *"built in"* && $line != *"from embedded"* ]]; then
      echo "bench-tokenizer-memory: $spec did not come from the built-in table: $line" >&2
      exit 2
    fi
    ms+=("$(sed -E 's/.*loaded in ([0-9.]+) ms.*/\1/' <<<"$line")")
    mib+=("$(sed -E 's/.*resident \+([0-9.-]+) MiB.*/\1/' <<<"$line")")
  done
  m_ms=$(printf '%s\n' "${ms[@]}" | median)
  m_mib=$(printf '%s\n' "${mib[@]}" | median)
  target="-"
  met="-"
  if [[ $max_mib != "-" ]]; then
    target="≤ $max_mib MiB, ≤ $max_ms ms"
    if awk -v a="$m_mib" -v b="$max_mib" -v c="$m_ms" -v d="$max_ms" 'BEGIN { exit !(a <= b && c <= d) }'; then
      met="yes"
    else
      met="**no**"
      status=1
    fi
  fi
  printf '| %s | %s | %s | %s | %s |\n' "$label" "$m_ms" "$m_mib" "$target" "$met"
done
exit "$status"
