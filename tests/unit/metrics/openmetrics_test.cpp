// The OpenMetrics exposition: each type's shape, escaping, units and # EOF on hand-made
// families, and on the real registry the same samples, line for line, as the Prometheus text.
#include "metrics/openmetrics.hpp"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "meter/stream_meter.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily family(std::string name, MetricType type, std::string help = "help") {
    MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = type;
    return f;
}

TEST(OpenMetrics, ACounterIsNamedWithoutItsTotalAndItsSampleWith) {
    MetricFamily f = family("tokenmeter_requests_total", MetricType::Counter);
    ClientMetric m;
    m.label = {{"model", "llama"}};
    m.counter.value = 3;
    f.metric.push_back(m);
    EXPECT_EQ(serialize_openmetrics({f}),
              "# TYPE tokenmeter_requests counter\n"
              "# HELP tokenmeter_requests help\n"
              "tokenmeter_requests_total{model=\"llama\"} 3\n"
              "# EOF\n");
}

TEST(OpenMetrics, ACounterWithoutTotalKeepsItsNameAsUnknown) {
    MetricFamily f = family("odd_counter", MetricType::Counter);
    ClientMetric m;
    m.counter.value = 1.5;
    f.metric.push_back(m);
    EXPECT_EQ(serialize_openmetrics({f}),
              "# TYPE odd_counter unknown\n# HELP odd_counter help\nodd_counter 1.5\n# EOF\n");
}

TEST(OpenMetrics, AHistogramHasBucketsToInfinityACountAndASum) {
    MetricFamily f = family("tokenmeter_request_duration_seconds", MetricType::Histogram);
    ClientMetric m;
    m.label = {{"api", "openai_chat"}};
    m.histogram.sample_count = 3;
    m.histogram.sample_sum = 0.75;
    m.histogram.bucket = {{1, 0.1}, {2, 1.0}, {3, std::numeric_limits<double>::infinity()}};
    f.metric.push_back(m);
    EXPECT_EQ(serialize_openmetrics({f}),
              "# TYPE tokenmeter_request_duration_seconds histogram\n"
              "# UNIT tokenmeter_request_duration_seconds seconds\n"
              "# HELP tokenmeter_request_duration_seconds help\n"
              "tokenmeter_request_duration_seconds_bucket{api=\"openai_chat\",le=\"0.1\"} 1\n"
              "tokenmeter_request_duration_seconds_bucket{api=\"openai_chat\",le=\"1\"} 2\n"
              "tokenmeter_request_duration_seconds_bucket{api=\"openai_chat\",le=\"+Inf\"} 3\n"
              "tokenmeter_request_duration_seconds_count{api=\"openai_chat\"} 3\n"
              "tokenmeter_request_duration_seconds_sum{api=\"openai_chat\"} 0.75\n"
              "# EOF\n");
}

TEST(OpenMetrics, GaugesSummariesAndUntypedFamilies) {
    MetricFamily gauge = family("process_resident_memory_bytes", MetricType::Gauge);
    ClientMetric g;
    g.gauge.value = -std::numeric_limits<double>::infinity();
    g.timestamp_ms = 1500;
    gauge.metric.push_back(g);
    MetricFamily summary = family("rpc_seconds", MetricType::Summary, "");
    ClientMetric s;
    s.summary.sample_count = 2;
    s.summary.sample_sum = 3;
    s.summary.quantile = {{0.5, 1.0}};
    summary.metric.push_back(s);
    MetricFamily untyped = family("loose", MetricType::Untyped);
    ClientMetric u;
    u.untyped.value = std::nan("");
    untyped.metric.push_back(u);
    EXPECT_EQ(serialize_openmetrics({gauge, summary, untyped, family("empty", MetricType::Gauge)}),
              "# TYPE process_resident_memory_bytes gauge\n"
              "# UNIT process_resident_memory_bytes bytes\n"
              "# HELP process_resident_memory_bytes help\n"
              "process_resident_memory_bytes -Inf 1.5\n"
              "# TYPE rpc_seconds summary\n"
              "# UNIT rpc_seconds seconds\n"
              "rpc_seconds{quantile=\"0.5\"} 1\n"
              "rpc_seconds_count 2\n"
              "rpc_seconds_sum 3\n"
              "# TYPE loose unknown\n"
              "# HELP loose help\n"
              "loose NaN\n"
              "# EOF\n");
}

TEST(OpenMetrics, HelpAndLabelValuesAreEscaped) {
    MetricFamily f = family("x_total", MetricType::Counter, "a \"b\" \\ c\nd");
    ClientMetric m;
    m.label = {{"model", "q\"\\\nz"}};
    f.metric.push_back(m);
    EXPECT_EQ(serialize_openmetrics({f}),
              "# TYPE x counter\n"
              "# HELP x a \\\"b\\\" \\\\ c\\nd\n"
              "x_total{model=\"q\\\"\\\\\\nz\"} 0\n"
              "# EOF\n");
}

TEST(OpenMetrics, AUnitIsAWholeSuffixOfTheName) {
    EXPECT_EQ(openmetrics_unit("tokenmeter_time_to_first_token_seconds"), "seconds");
    EXPECT_EQ(openmetrics_unit("tokenmeter_slo_objective_ratio"), "ratio");
    EXPECT_EQ(openmetrics_unit("tokenmeter_output_tokens_per_second"), "");
    EXPECT_EQ(openmetrics_unit("nanoseconds"), "");
    EXPECT_EQ(openmetrics_unit("seconds"), "");
    EXPECT_EQ(openmetrics_unit("tokenmeter_streams_active"), "");
}

// The sample lines of an exposition (comments and the empty line left out).
std::multiset<std::string> samples(const std::string& text) {
    std::multiset<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] != '#') {
            out.insert(line);
        }
    }
    return out;
}

TEST(OpenMetrics, TheRegistrySamplesAreThoseOfThePrometheusText) {
    registry r{registry_options{}};
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, "llama \"q\"", true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk chunk;
    chunk.content = "a";
    m.on_chunk(chunk, core::time_point{} + 100ms);
    m.on_chunk(chunk, core::time_point{} + 130ms);
    r.record(m.finish(meter::end_reason::upstream_complete, core::time_point{} + 150ms));
    r.upstream_error("connect_refused");

    const std::string om = r.expose_openmetrics();
    EXPECT_EQ(samples(om), samples(r.expose())) << "the same series, names, labels and values";
    // One family per name: a counter's name without _total never meets another family's.
    std::set<std::string> names;
    std::istringstream in(om);
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("# TYPE ")) {
            const std::string name = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_TRUE(names.insert(name).second) << name;
        }
    }
    EXPECT_TRUE(om.ends_with("\n# EOF\n"));
}

}  // namespace
}  // namespace tokenmeter::metrics
