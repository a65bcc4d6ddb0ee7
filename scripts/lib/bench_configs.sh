# shellcheck shell=bash
# bench_configs.sh: the two tokenmeter configurations the benchmarks compare, so every benchmark
# measures the same thing under the same name.
# shellcheck disable=SC2034

# What users run: usage injection, the o200k_base reference tokenizer and a native cl100k_base
# tokenizer for the benchmark's model.
bench_full_metering="log:
  level: warn
reference_tokenizer: o200k_base
usage_injection: true
models:
  bench-model:
    tokenizer: cl100k_base
"

# The configuration of the memory goal ("peak RSS at 1,000 streams with the
# reference tokenizer loaded"): usage injection and the o200k_base reference tokenizer, no native
# tokenizer for the model (so its timing and counts come from the reference tokenizer).
bench_reference_only="log:
  level: warn
reference_tokenizer: o200k_base
usage_injection: true
"

# The relay and the meter alone: no reference tokenizer, no usage injection.
bench_bare="log:
  level: warn
reference_tokenizer: none
usage_injection: false
"
