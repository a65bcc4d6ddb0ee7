#include "metrics_summary.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "text_table.hpp"

namespace tokenmeter::load {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
using row_key = std::pair<std::string, std::string>;  // model, api

row_key key_of(const label_set& labels) {
    return {std::string(label_value(labels, "model")), std::string(label_value(labels, "api"))};
}

model_summary& row_for(std::map<row_key, model_summary>& rows, const row_key& key) {
    auto [it, inserted] = rows.try_emplace(key);
    if (inserted) {
        model_summary& row = it->second;
        row.model = key.first;
        row.api = key.second;
        row.time_to_first_token_p50 = row.time_to_first_token_p90 = row.time_to_first_token_p99 =
            nan;
        row.time_to_first_token_mean = nan;
        row.inter_token_latency_p50 = row.inter_token_latency_p99 = row.inter_token_latency_mean =
            nan;
        row.time_per_output_token_p50 = nan;
        row.output_tokens_per_second_p50 = row.decode_tokens_per_second_p50 = nan;
        row.normalized_tokens_per_second_p50 = nan;
    }
    return it->second;
}

// Series of one family merged per (model, api): request_duration also splits by outcome, and a
// future label must not make the table drop rows.
std::map<row_key, histogram_series> merged_family(const exposition& metrics,
                                                  std::string_view family) {
    std::map<row_key, histogram_series> merged;
    for (const histogram_series& series : histogram_family(metrics, family)) {
        auto [it, inserted] = merged.try_emplace(key_of(series.labels), series);
        if (!inserted) {
            merge_into(it->second, series);
        }
    }
    return merged;
}

double ms(double seconds) {
    return seconds * 1000;
}

}  // namespace

std::vector<model_summary> summarize_metrics(const exposition& metrics) {
    std::map<row_key, model_summary> rows;
    for (const prom_sample& sample : metrics.samples) {
        if (sample.name == "tokenmeter_requests_total") {
            model_summary& row = row_for(rows, key_of(sample.labels));
            row.requests_by_outcome[std::string(label_value(sample.labels, "outcome"))] +=
                sample.value;
        } else if (sample.name == "tokenmeter_tokens_total") {
            model_summary& row = row_for(rows, key_of(sample.labels));
            // Billed tokens: each counted once, whatever its source.
            std::string_view type = label_value(sample.labels, "type");
            if (type == "input") {
                row.tokens_in += sample.value;
            } else if (type == "output") {
                row.tokens_out += sample.value;
            }
        } else if (sample.name == "tokenmeter_normalized_tokens_total" &&
                   label_value(sample.labels, "type") == "output") {
            row_for(rows, key_of(sample.labels)).normalized_tokens_out += sample.value;
        }
    }
    for (auto& [key, series] : merged_family(metrics, "tokenmeter_time_to_first_token_seconds")) {
        model_summary& row = row_for(rows, key);
        row.time_to_first_token_p50 = histogram_quantile(0.50, series.buckets);
        row.time_to_first_token_p90 = histogram_quantile(0.90, series.buckets);
        row.time_to_first_token_p99 = histogram_quantile(0.99, series.buckets);
        row.time_to_first_token_mean = series.count > 0 ? series.sum / series.count : nan;
    }
    for (auto& [key, series] : merged_family(metrics, "tokenmeter_inter_token_latency_seconds")) {
        model_summary& row = row_for(rows, key);
        row.inter_token_latency_p50 = histogram_quantile(0.50, series.buckets);
        row.inter_token_latency_p99 = histogram_quantile(0.99, series.buckets);
        row.inter_token_latency_mean = series.count > 0 ? series.sum / series.count : nan;
    }
    for (auto& [key, series] : merged_family(metrics, "tokenmeter_time_per_output_token_seconds")) {
        row_for(rows, key).time_per_output_token_p50 = histogram_quantile(0.50, series.buckets);
    }
    for (auto& [key, series] : merged_family(metrics, "tokenmeter_output_tokens_per_second")) {
        row_for(rows, key).output_tokens_per_second_p50 = histogram_quantile(0.50, series.buckets);
    }
    for (auto& [key, series] : merged_family(metrics, "tokenmeter_decode_tokens_per_second")) {
        row_for(rows, key).decode_tokens_per_second_p50 = histogram_quantile(0.50, series.buckets);
    }
    for (auto& [key, series] :
         merged_family(metrics, "tokenmeter_normalized_output_tokens_per_second")) {
        row_for(rows, key).normalized_tokens_per_second_p50 =
            histogram_quantile(0.50, series.buckets);
    }
    std::vector<model_summary> result;
    for (auto& [key, row] : rows) {
        result.push_back(std::move(row));
    }
    return result;
}

double total_requests(const exposition& metrics) {
    double total = 0;
    for (const prom_sample& sample : metrics.samples) {
        if (sample.name == "tokenmeter_requests_total") {
            total += sample.value;
        }
    }
    return total;
}

std::string format_summary_table(const std::vector<model_summary>& rows) {
    std::vector<text_column> columns = {
        {"", "model", true},
        {"", "api", true},
        {"requests", "ok", false},
        {"requests", "other", true},
        {"TTFT ms", "p50", false},
        {"TTFT ms", "p90", false},
        {"TTFT ms", "p99", false},
        {"TTFT ms", "mean", false},
        {"ITL ms", "p50", false},
        {"ITL ms", "p99", false},
        {"ITL ms", "mean", false},
        {"TPOT ms", "p50", false},
        {"output tok/s", "p50", false},
        {"decode tok/s", "p50", false},
        {"tokens", "in", false},
        {"tokens", "out", false},
        {"normalized", "out", false},
        {"normalized", "tok/s p50", false},
    };
    std::vector<std::vector<std::string>> cells;
    for (const model_summary& row : rows) {
        double ok = 0;
        std::string other;
        for (const auto& [outcome, count] : row.requests_by_outcome) {
            if (outcome == "complete") {
                ok += count;
            } else if (count > 0) {
                // Appended piece by piece: "literal" + std::string trips GCC 12's -Wrestrict at
                // -O3.
                if (!other.empty()) {
                    other += ',';
                }
                other += format_number(count, 0);
                other += ' ';
                other += outcome;
            }
        }
        cells.push_back({
            row.model,
            row.api,
            format_number(ok, 0),
            other.empty() ? "-" : other,
            format_short(ms(row.time_to_first_token_p50)),
            format_short(ms(row.time_to_first_token_p90)),
            format_short(ms(row.time_to_first_token_p99)),
            format_short(ms(row.time_to_first_token_mean)),
            format_short(ms(row.inter_token_latency_p50)),
            format_short(ms(row.inter_token_latency_p99)),
            format_short(ms(row.inter_token_latency_mean)),
            format_short(ms(row.time_per_output_token_p50)),
            format_short(row.output_tokens_per_second_p50),
            format_short(row.decode_tokens_per_second_p50),
            format_number(row.tokens_in, 0),
            format_number(row.tokens_out, 0),
            format_number(row.normalized_tokens_out, 0),
            format_short(row.normalized_tokens_per_second_p50),
        });
    }
    return render_table(columns, cells) +
           "(quantiles estimated from histogram buckets by linear interpolation, as "
           "histogram_quantile does, "
           "so they are only as fine as the bucket bounds; the means are exact)\n";
}

nlohmann::json summary_json(const std::vector<model_summary>& rows) {
    // NaN is not JSON; an estimate that does not exist is null.
    auto number = [](double value) -> nlohmann::json {
        return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
    };
    nlohmann::json out = nlohmann::json::array();
    for (const model_summary& row : rows) {
        out.push_back({
            {"model", row.model},
            {"api", row.api},
            {"requests_by_outcome", row.requests_by_outcome},
            {"time_to_first_token_seconds",
             {{"p50", number(row.time_to_first_token_p50)},
              {"p90", number(row.time_to_first_token_p90)},
              {"p99", number(row.time_to_first_token_p99)},
              {"mean", number(row.time_to_first_token_mean)}}},
            {"inter_token_latency_seconds",
             {{"p50", number(row.inter_token_latency_p50)},
              {"p99", number(row.inter_token_latency_p99)},
              {"mean", number(row.inter_token_latency_mean)}}},
            {"time_per_output_token_seconds", {{"p50", number(row.time_per_output_token_p50)}}},
            {"output_tokens_per_second", {{"p50", number(row.output_tokens_per_second_p50)}}},
            {"decode_tokens_per_second", {{"p50", number(row.decode_tokens_per_second_p50)}}},
            {"tokens", {{"input", row.tokens_in}, {"output", row.tokens_out}}},
            {"normalized_output_tokens", row.normalized_tokens_out},
            {"normalized_output_tokens_per_second",
             {{"p50", number(row.normalized_tokens_per_second_p50)}}},
        });
    }
    return out;
}

}  // namespace tokenmeter::load
