// Exemplars of the latency histograms: the slots, where a value lands, the OpenMetrics and
// protobuf lines that carry them, and the Prometheus text that must not change.
#include "metrics/exemplars.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "meter/stream_meter.hpp"
#include "metrics/openmetrics.hpp"
#include "metrics/registry.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;

exemplar_source source(std::uint8_t seed, std::int64_t unix_ms = 1'764'300'000'123) {
    exemplar_source s;
    for (std::size_t i = 0; i < s.trace.size(); ++i) {
        s.trace[i] = static_cast<std::uint8_t>(seed + i);
    }
    for (std::size_t i = 0; i < s.span.size(); ++i) {
        s.span[i] = static_cast<std::uint8_t>(0xa0 + seed + i);
    }
    s.unix_ms = unix_ms;
    return s;
}

TEST(ExemplarBuckets, OneSlotPerBucketTheLatestKept) {
    exemplar_buckets kept(3);
    EXPECT_TRUE(kept.snapshot()[1].empty());
    kept.offer(1, source(1), 0.5);
    kept.offer(1, source(2), 0.6);
    kept.offer(3, source(3), 9.0);  // past the last bucket: ignored
    const auto slots = kept.snapshot();
    ASSERT_EQ(slots.size(), 3U);
    EXPECT_TRUE(slots[0].empty());
    EXPECT_FALSE(slots[1].empty());
    EXPECT_EQ(slots[1].trace, source(2).trace);
    EXPECT_EQ(slots[1].span, source(2).span);
    EXPECT_DOUBLE_EQ(slots[1].value, 0.6);
    EXPECT_TRUE(slots[2].empty());
}

TEST(ExemplarBuckets, AValueLandsInTheBucketPrometheusCountsItIn) {
    const std::vector<double> bounds{0.1, 0.5, 1.0};
    EXPECT_EQ(bucket_of(bounds, 0.0), 0U);
    EXPECT_EQ(bucket_of(bounds, 0.1), 0U) << "le: a bound holds its own value";
    EXPECT_EQ(bucket_of(bounds, 0.10001), 1U);
    EXPECT_EQ(bucket_of(bounds, 1.0), 2U);
    EXPECT_EQ(bucket_of(bounds, 7.0), 3U) << "+Inf";
}

TEST(ExemplarStore, ASeriesIsFoundByItsLabelsInAnyOrder) {
    exemplar_store store;
    exemplar_buckets& made = store.series("h", {{"model", "m"}, {"api", "a"}}, 4);
    EXPECT_EQ(&made, &store.series("h", {{"api", "a"}, {"model", "m"}}, 4));
    EXPECT_EQ(store.find("h", {{"api", "a"}, {"model", "m"}}), &made);
    EXPECT_EQ(store.find("h", {{"api", "a"}, {"model", "other"}}), nullptr);
    EXPECT_EQ(store.find("g", {{"api", "a"}, {"model", "m"}}), nullptr);
    // Lengths keep label sets apart whatever their bytes.
    store.series("h", {{"a", "b,c=d"}}, 1);
    EXPECT_EQ(store.find("h", {{"a", "b"}, {"c", "d"}}), nullptr);
}

TEST(OpenMetricsExemplars, ABucketLineEndsInItsExemplar) {
    prometheus::MetricFamily f;
    f.name = "tokenmeter_request_duration_seconds";
    f.help = "help";
    f.type = prometheus::MetricType::Histogram;
    prometheus::ClientMetric m;
    m.label = {{"api", "openai_chat"}};
    m.histogram.sample_count = 2;
    m.histogram.sample_sum = 1.25;
    m.histogram.bucket = {{1, 0.5}, {2, 1.0}, {2, std::numeric_limits<double>::infinity()}};
    f.metric.push_back(m);
    exemplar_store store;
    store.series(f.name, {{"api", "openai_chat"}}, 3).offer(1, source(0x10), 0.75);
    EXPECT_EQ(serialize_openmetrics({f}, &store),
              "# TYPE tokenmeter_request_duration_seconds histogram\n"
              "# UNIT tokenmeter_request_duration_seconds seconds\n"
              "# HELP tokenmeter_request_duration_seconds help\n"
              "tokenmeter_request_duration_seconds_bucket{api=\"openai_chat\",le=\"0.5\"} 1\n"
              "tokenmeter_request_duration_seconds_bucket{api=\"openai_chat\",le=\"1\"} 2 # "
              "{trace_id=\"101112131415161718191a1b1c1d1e1f\",span_id=\"b0b1b2b3b4b5b6b7\"} "
              "0.75 1764300000.123\n"
              "tokenmeter_request_duration_seconds_bucket{api=\"openai_chat\",le=\"+Inf\"} 2\n"
              "tokenmeter_request_duration_seconds_count{api=\"openai_chat\"} 2\n"
              "tokenmeter_request_duration_seconds_sum{api=\"openai_chat\"} 1.25\n"
              "# EOF\n");
}

// A streamed request: TTFT 100 ms, gaps of 5 ms and 30 ms, the end at 150 ms.
meter::request_summary streamed(const registry& r, std::chrono::milliseconds first = 100ms) {
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, "llama", true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk chunk;
    chunk.content = "a";
    m.on_chunk(chunk, core::time_point{} + first);
    m.on_chunk(chunk, core::time_point{} + first + 5ms);
    m.on_chunk(chunk, core::time_point{} + first + 35ms);
    return m.finish(meter::end_reason::upstream_complete, core::time_point{} + first + 50ms);
}

struct exemplar_line {
    std::string family;
    double le;
    std::string trace;
    std::string span;
    double value;
    double seconds;
};

std::vector<exemplar_line> exemplar_lines(const std::string& exposition) {
    static const std::regex line(
        R"re(^(\w+)_bucket\{.*le="([^"]+)"\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\} (\S+) (\S+)$)re");
    std::vector<exemplar_line> out;
    std::istringstream in(exposition);
    for (std::string text; std::getline(in, text);) {
        std::smatch match;
        if (std::regex_match(text, match, line)) {
            out.push_back(
                {match[1],
                 match[2] == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(match[2]),
                 match[3], match[4], std::stod(match[5]), std::stod(match[6])});
        } else {
            EXPECT_EQ(text.find(" # {"), std::string::npos)
                << "an exemplar in an odd place: " << text;
        }
    }
    return out;
}

TEST(RegistryExemplars, ASampledRequestMarksTheBucketsOfEachLatencyHistogram) {
    registry r{registry_options{}};
    const exemplar_source trace = source(0x20);
    r.record(streamed(r), meter::billed(streamed(r)), &trace);
    const auto lines = exemplar_lines(r.expose_openmetrics());
    std::map<std::string, int> per_family;
    for (const auto& l : lines) {
        ++per_family[l.family];
        EXPECT_EQ(l.trace, "202122232425262728292a2b2c2d2e2f");
        EXPECT_EQ(l.span, "c0c1c2c3c4c5c6c7");
        EXPECT_DOUBLE_EQ(l.seconds, 1764300000.123);
        EXPECT_LE(l.value, l.le) << l.family;
    }
    EXPECT_EQ(per_family["tokenmeter_time_to_first_token_seconds"], 1);
    EXPECT_EQ(per_family["tokenmeter_inter_token_latency_seconds"], 2) << "5 ms and 30 ms apart";
    EXPECT_EQ(per_family["tokenmeter_time_per_output_token_seconds"], 1);
    EXPECT_EQ(per_family["tokenmeter_request_duration_seconds"], 1);
    EXPECT_EQ(per_family.size(), 4U) << "no other histogram carries exemplars";
    for (const auto& l : lines) {
        if (l.family == "tokenmeter_time_to_first_token_seconds") {
            EXPECT_DOUBLE_EQ(l.value, 0.1);
        }
        if (l.family == "tokenmeter_inter_token_latency_seconds") {
            EXPECT_TRUE(std::abs(l.value - 0.005) < 1e-6 || std::abs(l.value - 0.03) < 1e-6)
                << l.value;
        }
        if (l.family == "tokenmeter_request_duration_seconds") {
            EXPECT_DOUBLE_EQ(l.value, 0.15);
        }
    }
}

// Each exemplar lies inside its own bucket: above the bound before it, at most its own.
TEST(RegistryExemplars, AnExemplarsValueIsInsideItsBucket) {
    registry r{registry_options{}};
    const exemplar_source trace = source(0x30);
    for (const auto first : {3ms, 50ms, 100ms, 777ms, 2500ms}) {
        r.record(streamed(r, first), meter::billed(streamed(r, first)), &trace);
    }
    const std::string om = r.expose_openmetrics();
    std::istringstream in(om);
    std::map<std::string, double> previous_le;  // by series (the line up to le)
    for (std::string text; std::getline(in, text);) {
        const auto le_at = text.find("le=\"");
        if (le_at == std::string::npos) {
            continue;
        }
        const std::string series = text.substr(0, le_at);
        const std::string le_text = text.substr(le_at + 4, text.find('"', le_at + 4) - le_at - 4);
        const double le =
            le_text == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le_text);
        const auto mark = text.find(" # {");
        if (mark != std::string::npos) {
            const auto value_at = text.find("} ", mark) + 2;
            const double value = std::stod(text.substr(value_at));
            EXPECT_LE(value, le) << text;
            if (previous_le.contains(series)) {
                EXPECT_GT(value, previous_le[series]) << text;
            }
        }
        previous_le[series] = le;
    }
}

TEST(RegistryExemplars, OnlyTheLatestPerBucketAndNoneWithoutATrace) {
    registry r{registry_options{}};
    r.record(streamed(r));
    EXPECT_TRUE(exemplar_lines(r.expose_openmetrics()).empty()) << "an unsampled request";
    const exemplar_source first = source(0x01, 1'000'000);
    const exemplar_source second = source(0x02, 2'000'000);
    r.record(streamed(r), meter::billed(streamed(r)), &first);
    r.record(streamed(r), meter::billed(streamed(r)), &second);
    r.record(streamed(r));  // unsampled: replaces nothing
    const auto lines = exemplar_lines(r.expose_openmetrics());
    ASSERT_EQ(lines.size(), 5U);
    for (const auto& l : lines) {
        EXPECT_EQ(l.trace, "02030405060708090a0b0c0d0e0f1011") << l.family;
        EXPECT_DOUBLE_EQ(l.seconds, 2000.0);
    }
}

// The Prometheus text format has no exemplars: what it writes is the same with them kept.
TEST(RegistryExemplars, ThePrometheusTextIsByteForByteTheSame) {
    registry with{registry_options{}};
    registry without{registry_options{}};
    const exemplar_source trace = source(0x40);
    for (const auto first : {20ms, 100ms, 400ms}) {
        with.record(streamed(with, first), meter::billed(streamed(with, first)), &trace);
        without.record(streamed(without, first));
    }
    const std::string text = with.expose();
    EXPECT_EQ(text, without.expose());
    EXPECT_EQ(text.find("trace_id"), std::string::npos);
    EXPECT_EQ(text.find(" # "), std::string::npos);
    // And its bucket lines are prometheus-cpp's, as before: name, labels, le, count.
    EXPECT_NE(text.find("tokenmeter_time_to_first_token_seconds_bucket{api=\"openai_chat\","
                        "model=\"llama\",prompt_class=\"unknown\",le=\"0.1051\"} 2\n"),
              std::string::npos)
        << text;
    // The OpenMetrics samples are the same too, exemplars aside.
    EXPECT_NE(with.expose_openmetrics(), without.expose_openmetrics());
    const std::regex exemplar(" # \\{[^}]*\\} \\S+ \\S+");
    EXPECT_EQ(std::regex_replace(with.expose_openmetrics(), exemplar, ""),
              without.expose_openmetrics());
}

TEST(RegistryExemplars, TheProtobufBucketsCarryThemToo) {
    registry_options options;
    options.native_histograms = true;
    registry r(options);
    const exemplar_source trace = source(0x50);
    r.record(streamed(r), meter::billed(streamed(r)), &trace);
    const std::string bytes = r.expose_protobuf();
    // The trace id's hex digits and the label names, in the bucket messages.
    EXPECT_NE(bytes.find("505152535455565758595a5b5c5d5e5f"), std::string::npos);
    EXPECT_NE(bytes.find("span_id"), std::string::npos);
}

}  // namespace
}  // namespace tokenmeter::metrics
