#!/usr/bin/env bash
# bench-tokenizer.sh: tokenmeter's tokenizer engine against the reference implementations, on
# the same documents in one run: tokenmeter-tokenizer-bench (C++, single thread) and
# tests/parity/bench.mjs (tiktoken's WASM build, a native build of tiktoken's Rust core, Hugging
# Face tokenizers' native addon; single thread), then a side-by-side table of median throughput
# and the ratios. A benchmark, not a
# test: run it on an otherwise idle machine.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/bench-tokenizer.sh [--no-build] [BUILD_DIR]

  BUILD_DIR   a Release build directory (default: build-release/ in the repository); configured
              with -DCMAKE_BUILD_TYPE=Release if it does not exist yet
  --no-build  use the tokenmeter-tokenizer-bench that BUILD_DIR holds; do not build it

Environment:
  ROUNDS=7       measured rounds per tokenizer (after one warm-up round); medians are reported
  REPEAT=4       passes over the corpus (tests/parity/corpus/*.txt) per round
  TOKENIZERS=o200k_base,cl100k_base,llama3,qwen3,gemma3,llama2
  DELTA=24       bytes per delta for the streaming column (tokenizer::stream)
  JSON=1         print the raw JSON lines instead of the table
  TOKENMETER_TOKENIZER_DIR   tokenizer files (default .cache/tokenizers; fetched if missing)
USAGE
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-release
build=1
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "bench-tokenizer: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) build_dir=$arg ;;
  esac
done

rounds=${ROUNDS:-7}
repeat=${REPEAT:-4}
tokenizers=${TOKENIZERS:-o200k_base,cl100k_base,llama3,qwen3,gemma3,llama2}
delta=${DELTA:-24}
tokenizer_dir=${TOKENMETER_TOKENIZER_DIR:-$root/.cache/tokenizers}
export TOKENMETER_TOKENIZER_DIR=$tokenizer_dir

"$root/scripts/fetch-tokenizers.sh" "$tokenizer_dir" >&2
if [[ ! -d $root/tests/parity/node_modules/tiktoken ]]; then
  (cd "$root/tests/parity" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

if ((build == 1)); then
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    generator=()
    if command -v ninja >/dev/null 2>&1; then
      generator=(-G Ninja)
    fi
    cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >&2
  fi
  cmake --build "$build_dir" --target tokenmeter-tokenizer-bench >&2
fi
bench_bin=$build_dir/tests/parity/tokenmeter-tokenizer-bench
if [[ ! -x $bench_bin ]]; then
  echo "bench-tokenizer: $bench_bin not found (build it, or drop --no-build)" >&2
  exit 2
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [[ $build_type != Release ]]; then
  echo "bench-tokenizer: warning: $build_dir is a '${build_type:-unknown}' build; numbers are meant for Release" >&2
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT

echo "bench-tokenizer: tokenmeter (C++), $rounds rounds x $repeat passes over tests/parity/corpus" >&2
"$bench_bin" --dir "$tokenizer_dir" --corpus "$root/tests/parity/corpus" --tokenizers "$tokenizers" \
  --rounds "$rounds" --repeat "$repeat" --delta "$delta" >>"$results"
echo "bench-tokenizer: references (node $(node --version)), same rounds and documents" >&2
(cd "$root/tests/parity" && UV_THREADPOOL_SIZE=1 TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 \
  node bench.mjs --tokenizers "$tokenizers" --rounds "$rounds" --repeat "$repeat") >>"$results"

if [[ ${JSON:-0} == 1 ]]; then
  cat "$results"
  exit 0
fi

node - "$results" <<'NODE'
const fs = require("node:fs");
const rows = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => JSON.parse(l));
const ours = new Map(rows.filter((r) => r.impl === "tokenmeter").map((r) => [r.tokenizer, r]));
const refs = rows.filter((r) => r.impl !== "tokenmeter");
// Throughput from CPU time is the headline (single-threaded work; on a shared machine wall time
// also counts time spent waiting for a core); the wall-time figures are shown next to it.
const head = ["tokenizer", "reference", "ref MB/s", "ours MB/s", "ratio", "ref Mtok/s", "ours Mtok/s",
  "stream MB/s", "stream ratio", "cold MB/s", "cold ratio", "wall: ref", "ours", "ratio", "ids equal"];
const table = [head];
const x = (a, b) => `${(a / b).toFixed(2)}x`;
for (const ref of refs) {
  const name = ref.tokenizer;
  const us = ours.get(name);
  if (!us) {
    table.push([name, ref.impl, ref.cpu_mb_s.toFixed(2), "-", "-", (ref.cpu_tokens_s / 1e6).toFixed(2), "-", "-", "-",
      "-", "-", ref.mb_s.toFixed(2), "-", "-", "-"]);
    continue;
  }
  table.push([
    name,
    ref.impl,
    ref.cpu_mb_s.toFixed(2),
    us.cpu_mb_s.toFixed(2),
    x(us.cpu_mb_s, ref.cpu_mb_s),
    (ref.cpu_tokens_s / 1e6).toFixed(2),
    (us.cpu_tokens_s / 1e6).toFixed(2),
    us.stream_cpu_mb_s.toFixed(2),
    x(us.stream_cpu_mb_s, ref.cpu_mb_s),
    us.cold_cpu_mb_s.toFixed(2),
    x(us.cold_cpu_mb_s, ref.cpu_mb_s),
    ref.mb_s.toFixed(2),
    us.mb_s.toFixed(2),
    x(us.mb_s, ref.mb_s),
    // Same documents, so the token totals must agree (the parity tests check each id).
    us.tokens === ref.tokens && us.stream_tokens === ref.tokens ? "yes" : `NO (${us.tokens}/${us.stream_tokens} vs ${ref.tokens})`,
  ]);
}
const widths = head.map((_, i) => Math.max(...table.map((r) => String(r[i]).length)));
for (const [i, r] of table.entries()) {
  console.log(r.map((c, j) => (j < 2 ? String(c).padEnd(widths[j]) : String(c).padStart(widths[j]))).join("  "));
  if (i === 0) {
    console.log(widths.map((w) => "-".repeat(w)).join("  "));
  }
}
const any = rows[0];
console.log(`\n${any.bytes} bytes per round, median of ${any.rounds} rounds, single thread. MB/s from process CPU time;`);
console.log("ratio = tokenmeter / reference; stream = tokenmeter::stream fed in small deltas; cold = one pass with a");
console.log("freshly loaded encoder per round (no memo of earlier calls); wall = from wall-clock time.");
NODE
