#!/usr/bin/env bash
# measure-idle-rss.sh: the resident memory (VmRSS) of an idle proxy, for each tokenizer set of the
# sizing table in deploy/README.md: started with 2 worker threads and no traffic on loopback ports
# the OS chooses, read from /proc once it prints its "listening" line, then stopped. The median
# of ROUNDS starts, in MiB.
#
# Usage: scripts/measure-idle-rss.sh [BUILD_DIR]     (default: build/, as scripts/demo.sh builds)
# Environment: ROUNDS=3, TOKENMETER_TOKENIZER_DIR (default .cache/tokenizers, which
# scripts/fetch-tokenizers.sh fills; rows whose tokenizer file is missing are skipped)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$root/build}"
bin="$build_dir/proxy/tokenmeter"
rounds="${ROUNDS:-3}"
tokenizers="${TOKENMETER_TOKENIZER_DIR:-$root/.cache/tokenizers}"
[[ -x $bin ]] || { echo "measure-idle-rss: no $bin (build it first)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One start: prints VmRSS in KiB.
idle_rss_kib() {
    local config=$1 out=$work/out pid rss=""
    : >"$out"
    TOKENMETER_TOKENIZER_DIR="$tokenizers" "$bin" --config "$config" --listen 127.0.0.1:0 \
        --admin 127.0.0.1:0 --threads 2 --log-level warn >"$out" 2>"$work/err" &
    pid=$!
    for _ in $(seq 200); do
        if grep -q 'tokenmeter listening' "$out"; then
            rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
            break
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [[ -n $rss ]] || { echo "measure-idle-rss: the proxy did not start: $(cat "$work/err")" >&2; exit 1; }
    echo "$rss"
}

printf '| tokenizers | idle RSS |\n|---|---|\n'
# label | config (YAML) | file it needs under $tokenizers ("-": none)
while IFS='|' read -r label config needs; do
    if [[ $needs != - && ! -e $tokenizers/$needs ]]; then
        echo "measure-idle-rss: $label skipped ($tokenizers/$needs missing)" >&2
        continue
    fi
    printf '%b' "$config" >"$work/config.yaml"
    samples=()
    for _ in $(seq "$rounds"); do
        samples+=("$(idle_rss_kib "$work/config.yaml")")
    done
    median=$(printf '%s\n' "${samples[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
    printf '| %s | %s MiB |\n' "$label" "$(awk -v k="$median" 'BEGIN { printf "%.0f", k / 1024 }')"
done <<'ROWS'
none (`reference_tokenizer: none`, no native tokenizer)|reference_tokenizer: none\n|-
o200k_base (default reference)||-
o200k_base + llama2 (native, 32k vocabulary)|models:\n  m:\n    tokenizer: llama2\n|llama2
o200k_base + cl100k_base (native)|models:\n  m:\n    tokenizer: cl100k_base\n|-
o200k_base + llama3 (native)|models:\n  m:\n    tokenizer: llama3\n|llama3
o200k_base + qwen3 (native)|models:\n  m:\n    tokenizer: qwen3\n|qwen3
o200k_base + gemma3 (native, 262k vocabulary)|models:\n  m:\n    tokenizer: gemma3\n|gemma3
ROWS
