// usage/plan: `tokenmeter usage --plan`, a capacity plan from the usage records: per model, the
// observed mix of input and output tokens, tokens per second, concurrency and requests per second
// per one-minute window (p50, p99, peak), and the provisioned-throughput band the peak needs,
// beside the band the same request rate would need at the reference mix (2,048 in, 256 out).
// Every definition is in docs/usage-records.md (Capacity planning). No I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "usage/record.hpp"
#include "usage/report.hpp"

namespace tokenmeter::usage {

struct plan_options {
    double band_size = 100;  // tokens per second; a band is a whole multiple of it
    std::uint64_t reference_input = 2048;
    std::uint64_t reference_output = 256;
    std::optional<double> ttft_target_seconds;
    std::optional<double> tpot_target_seconds;
};

// Over requests with a known count; nearest-rank percentiles (a value some request had).
struct token_distribution {
    std::uint64_t requests = 0;
    double mean = 0;
    std::uint64_t p50 = 0;
    std::uint64_t p95 = 0;
};

// Over the one-minute windows of the period; nearest-rank percentiles.
struct window_distribution {
    double p50 = 0;
    double p99 = 0;
    double peak = 0;
    std::int64_t peak_minute_unix_ms = 0;  // start of the (first) peak minute
};

struct target_share {
    double target_seconds = 0;
    std::uint64_t judged = 0;  // requests the target applies to
    std::uint64_t good = 0;    // ... that met it
};

struct model_plan {
    std::string model;
    std::uint64_t requests = 0;
    std::int64_t first_minute_unix_ms = 0;
    std::uint64_t minutes = 0;  // windows from the first request's minute to the last one's end
    token_distribution input;
    token_distribution output;
    window_distribution tokens_per_second;
    window_distribution concurrency;
    window_distribution requests_per_second;
    double band_tokens_per_second = 0;       // peak tokens/s rounded up to the band size
    double reference_tokens_per_second = 0;  // peak requests/s x (reference in + out)
    double reference_band_tokens_per_second = 0;
    std::optional<target_share> ttft;
    std::optional<target_share> tpot;
};

// One plan per model, by model name; records sharing an id count once (as build_report).
std::vector<model_plan> build_plan(const std::vector<usage_record>& records,
                                   const report_filter& filter, const plan_options& options);

// The plans as the CLI prints them (text), or as JSON.
std::string format_plan(const std::vector<model_plan>& plans, const plan_options& options);
std::string plan_json(const std::vector<model_plan>& plans, const plan_options& options);

}  // namespace tokenmeter::usage
