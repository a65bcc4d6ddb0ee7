#!/usr/bin/env bash
# Builds the fuzz targets with clang in their own build directory and runs the SSE parser
# fuzzer for a while. New inputs go to the build directory; the checked-in seeds stay as they are.
#
#   tests/fuzz/run.sh [seconds=30] [extra libFuzzer flags...]
#   e.g. tests/fuzz/run.sh 300 -jobs=2 -workers=2
#
# Environment: TOKENMETER_FUZZ_TARGET (sse_parser_fuzz, the default, ndjson_parser_fuzz,
# dialect_stream_fuzz, tokenizer_fuzz, request_fuzz, response_head_fuzz, json_walk_fuzz,
# body_decoder_fuzz, ws_frame_fuzz, openai_chunk_fuzz, spool_fuzz, resp_fuzz or
# realtime_event_fuzz),
# TOKENMETER_FUZZ_BUILD_DIR (default build-fuzz), CXX_FUZZ (default clang++-14 or clang++).
set -euo pipefail

seconds=${1:-30}
if [[ $# -gt 0 ]]; then
    shift
fi
if ! [[ $seconds =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [seconds] [libFuzzer flags...]" >&2
    exit 2
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${TOKENMETER_FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${CXX_FUZZ:-$(command -v clang++-14 || command -v clang++ || true)}
if [[ -z $cxx ]]; then
    echo "clang++ not found: apt-get install clang-14 libclang-rt-14-dev libfuzzer-14-dev" >&2
    exit 1
fi

generator=()
if command -v ninja >/dev/null; then
    generator=(-G Ninja)
fi

# The fuzz directory configures on its own, so a fuzz run needs none of the proxy's libraries
# and is not held up by unrelated parts of the tree.
cmake -S "$root/tests/fuzz" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
target=${TOKENMETER_FUZZ_TARGET:-sse_parser_fuzz}
case "$target" in
    sse_parser_fuzz) seeds=sse; dict=(-dict="$root/tests/fuzz/sse_parser_fuzz.dict") ;;
    tokenizer_fuzz) seeds=tokenizer; dict=() ;;
    ndjson_parser_fuzz) seeds=ndjson; dict=() ;;
    dialect_stream_fuzz) seeds=dialects; dict=() ;;
    request_fuzz) seeds=request; dict=() ;;
    response_head_fuzz) seeds=response_head; dict=() ;;
    json_walk_fuzz) seeds=json_walk; dict=() ;;
    body_decoder_fuzz) seeds=body_decoder; dict=() ;;
    openai_chunk_fuzz) seeds=openai_chunk; dict=() ;;
    ws_frame_fuzz) seeds=ws_frame; dict=() ;;
    spool_fuzz) seeds=spool; dict=() ;;
    resp_fuzz) seeds=resp; dict=() ;;
    realtime_event_fuzz) seeds=realtime; dict=() ;;
    *) echo "unknown TOKENMETER_FUZZ_TARGET $target" >&2; exit 2 ;;
esac
cmake --build "$build" --target "$target" -j2

corpus=$build/corpus/$seeds
artifacts=$build/artifacts/
mkdir -p "$corpus" "$artifacts"

"$build/$target" \
    -max_total_time="$seconds" \
    -max_len=4096 \
    "${dict[@]}" \
    -artifact_prefix="$artifacts" \
    -print_final_stats=1 \
    "$@" \
    "$corpus" "$root/tests/fuzz/corpus/$seeds"
