// metrics_summary: one scrape of tokenmeter's /metrics turned into a per-model table of what the
// proxy measured (TTFT, ITL, TPOT, TPS, tokens, outcomes).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "prom_text.hpp"

namespace tokenmeter::load {

struct model_summary {
    std::string model;
    std::string api;
    std::map<std::string, double> requests_by_outcome;
    // Quantiles are estimates from histogram buckets, in seconds or tokens per second.
    double time_to_first_token_p50 = 0;
    double time_to_first_token_p90 = 0;
    double time_to_first_token_p99 = 0;
    double time_to_first_token_mean =
        0;  // exact: _sum / _count; quantiles are only as fine as the buckets
    double inter_token_latency_p50 = 0;
    double inter_token_latency_p99 = 0;
    double inter_token_latency_mean = 0;  // exact: _sum / _count
    double time_per_output_token_p50 = 0;
    double output_tokens_per_second_p50 = 0;
    double decode_tokens_per_second_p50 = 0;
    double tokens_in = 0;              // reported by the server
    double tokens_out = 0;             // reported by the server
    double normalized_tokens_out = 0;  // counted with the reference tokenizer
    double normalized_tokens_per_second_p50 = 0;
};

std::vector<model_summary> summarize_metrics(const exposition& metrics);
// Sum of tokenmeter_requests_total over every label.
double total_requests(const exposition& metrics);

std::string format_summary_table(const std::vector<model_summary>& rows);
nlohmann::json summary_json(const std::vector<model_summary>& rows);

}  // namespace tokenmeter::load
