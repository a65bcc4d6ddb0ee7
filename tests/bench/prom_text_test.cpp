#include "prom_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "metrics_summary.hpp"

namespace tokenmeter::load {
namespace {

// Shaped like prometheus-cpp's TextSerializer output for tokenmeter's families.
constexpr std::string_view scrape =
    R"(# HELP tokenmeter_time_to_first_token_seconds Time to first token
# TYPE tokenmeter_time_to_first_token_seconds histogram
tokenmeter_time_to_first_token_seconds_count{api="chat_completions",model="demo-small"} 10
tokenmeter_time_to_first_token_seconds_sum{api="chat_completions",model="demo-small"} 0.55
tokenmeter_time_to_first_token_seconds_bucket{api="chat_completions",model="demo-small",le="0.025"} 0
tokenmeter_time_to_first_token_seconds_bucket{api="chat_completions",model="demo-small",le="0.05"} 4
tokenmeter_time_to_first_token_seconds_bucket{api="chat_completions",model="demo-small",le="0.1"} 10
tokenmeter_time_to_first_token_seconds_bucket{api="chat_completions",model="demo-small",le="+Inf"} 10
# TYPE tokenmeter_inter_token_latency_seconds histogram
tokenmeter_inter_token_latency_seconds_count{api="chat_completions",model="demo-small"} 4
tokenmeter_inter_token_latency_seconds_sum{api="chat_completions",model="demo-small"} 0.02
tokenmeter_inter_token_latency_seconds_bucket{api="chat_completions",model="demo-small",le="0.005"} 2
tokenmeter_inter_token_latency_seconds_bucket{api="chat_completions",model="demo-small",le="0.01"} 4
tokenmeter_inter_token_latency_seconds_bucket{api="chat_completions",model="demo-small",le="+Inf"} 4
# TYPE tokenmeter_requests_total counter
tokenmeter_requests_total{api="chat_completions",code="200",model="demo-small",outcome="complete"} 9
tokenmeter_requests_total{api="chat_completions",code="200",model="demo-small",outcome="client_cancel"} 1
tokenmeter_requests_total{api="none",code="404",model="none",outcome="rejected"} 2 1700000000000
# TYPE tokenmeter_tokens_total counter
tokenmeter_tokens_total{api="chat_completions",model="demo-small",type="input"} 120
tokenmeter_tokens_total{api="chat_completions",model="demo-small",type="output"} 320
tokenmeter_streams_active 0
)";

TEST(prom_text, parses_samples_labels_types_and_timestamps) {
    exposition_result result = parse_exposition(scrape);
    ASSERT_TRUE(result.value) << result.error;
    EXPECT_EQ(result.value->types.at("tokenmeter_requests_total"), "counter");
    EXPECT_EQ(result.value->samples.size(), 17U);
    EXPECT_EQ(total_requests(*result.value), 12);
    const prom_sample& last = result.value->samples.back();
    EXPECT_EQ(last.name, "tokenmeter_streams_active");
    EXPECT_TRUE(last.labels.empty());
}

TEST(prom_text, label_values_unescape_and_sort) {
    exposition_result result = parse_exposition("m{z=\"1\",a=\"say \\\"hi\\\"\\n\\\\\",} 3.5e-3\n");
    ASSERT_TRUE(result.value) << result.error;
    const prom_sample& sample = result.value->samples.at(0);
    ASSERT_EQ(sample.labels.size(), 2U);
    EXPECT_EQ(sample.labels[0].first, "a");
    EXPECT_EQ(sample.labels[0].second, "say \"hi\"\n\\");
    EXPECT_DOUBLE_EQ(sample.value, 0.0035);
}

TEST(prom_text, special_values) {
    exposition_result result = parse_exposition("a +Inf\nb -Inf\nc NaN\r\nd +2\n");
    ASSERT_TRUE(result.value) << result.error;
    EXPECT_TRUE(std::isinf(result.value->samples[0].value));
    EXPECT_LT(result.value->samples[1].value, 0);
    EXPECT_TRUE(std::isnan(result.value->samples[2].value));
    EXPECT_EQ(result.value->samples[3].value, 2);
}

TEST(prom_text, reports_the_bad_line) {
    exposition_result result = parse_exposition("ok 1\nbad{x=\"1\" 2\n");
    EXPECT_FALSE(result.value);
    EXPECT_NE(result.error.find("line 2"), std::string::npos) << result.error;
    EXPECT_FALSE(parse_exposition("m notanumber\n").value);
    EXPECT_FALSE(parse_exposition("m{x=\"unterminated} 1\n").value);
}

TEST(prom_text, histogram_family_groups_by_labels_without_le) {
    exposition_result result = parse_exposition(scrape);
    ASSERT_TRUE(result.value);
    auto series = histogram_family(*result.value, "tokenmeter_time_to_first_token_seconds");
    ASSERT_EQ(series.size(), 1U);
    EXPECT_EQ(series[0].buckets.size(), 4U);
    EXPECT_EQ(series[0].count, 10);
    EXPECT_DOUBLE_EQ(series[0].sum, 0.55);
    EXPECT_EQ(label_value(series[0].labels, "model"), "demo-small");
    EXPECT_EQ(label_value(series[0].labels, "le"), "");
}

TEST(histogram_quantile, interpolates_like_prometheus) {
    std::vector<histogram_bucket> buckets = {{0.025, 0}, {0.05, 4}, {0.1, 10}, {INFINITY, 10}};
    // rank 5 lies 1/6 of the way into (0.05, 0.1].
    EXPECT_NEAR(histogram_quantile(0.5, buckets), 0.05 + 0.05 / 6, 1e-12);
    // rank 2 is half way into (0.025, 0.05].
    EXPECT_NEAR(histogram_quantile(0.2, buckets), 0.0375, 1e-12);
    EXPECT_NEAR(histogram_quantile(1.0, buckets), 0.1, 1e-12);
}

TEST(histogram_quantile, first_bucket_starts_at_zero) {
    EXPECT_NEAR(histogram_quantile(0.5, {{1, 10}, {INFINITY, 10}}), 0.5, 1e-12);
}

TEST(histogram_quantile, rank_in_inf_bucket_gives_highest_finite_bound) {
    EXPECT_EQ(histogram_quantile(0.99, {{1, 1}, {2, 2}, {INFINITY, 10}}), 2);
}

TEST(histogram_quantile, undefined_cases_are_nan) {
    EXPECT_TRUE(std::isnan(histogram_quantile(0.5, {})));
    EXPECT_TRUE(std::isnan(histogram_quantile(0.5, {{1, 0}, {INFINITY, 0}})));
    EXPECT_TRUE(std::isnan(histogram_quantile(0.5, {{1, 3}, {2, 5}})));  // no +Inf bucket
    EXPECT_TRUE(std::isinf(histogram_quantile(1.5, {{1, 3}, {INFINITY, 3}})));
}

TEST(histogram_quantile, unsorted_and_non_monotonic_input) {
    // Buckets out of order, and one count lower than the bucket before it (a racy scrape).
    std::vector<histogram_bucket> buckets = {{INFINITY, 10}, {0.1, 9}, {0.05, 10}, {0.025, 0}};
    EXPECT_NEAR(histogram_quantile(0.5, buckets), 0.025 + 0.025 * 0.5, 1e-12);
}

TEST(metrics_summary, one_row_per_model_and_api) {
    exposition_result result = parse_exposition(scrape);
    ASSERT_TRUE(result.value);
    std::vector<model_summary> rows = summarize_metrics(*result.value);
    ASSERT_EQ(rows.size(), 2U);
    const model_summary& small = rows[0];
    EXPECT_EQ(small.model, "demo-small");
    EXPECT_EQ(small.requests_by_outcome.at("complete"), 9);
    EXPECT_EQ(small.requests_by_outcome.at("client_cancel"), 1);
    EXPECT_NEAR(small.time_to_first_token_p50, 0.05 + 0.05 / 6, 1e-12);
    EXPECT_NEAR(small.inter_token_latency_mean, 0.005, 1e-12);
    EXPECT_NEAR(small.time_to_first_token_mean, 0.055, 1e-12);
    EXPECT_EQ(small.tokens_in, 120);
    EXPECT_EQ(small.tokens_out, 320);
    EXPECT_TRUE(std::isnan(small.time_per_output_token_p50));
    EXPECT_EQ(rows[1].model, "none");

    std::string table = format_summary_table(rows);
    EXPECT_NE(table.find("demo-small"), std::string::npos);
    EXPECT_NE(table.find("1 client_cancel"), std::string::npos) << table;
    nlohmann::json json = summary_json(rows);
    EXPECT_TRUE(json[0]["time_per_output_token_seconds"]["p50"].is_null());
}

}  // namespace
}  // namespace tokenmeter::load
