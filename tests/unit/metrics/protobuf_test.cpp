// Native histograms and the protobuf exposition: bucket indexes at their edges, and the bytes
// decoded by protoc against proxy/metrics/metrics.proto (the schema Prometheus reads).
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "meter/stream_meter.hpp"
#include "metrics/native_histogram.hpp"
#include "metrics/registry.hpp"
#include "metrics/slo.hpp"

namespace tokenmeter::metrics {
namespace {

using namespace std::chrono_literals;

TEST(NativeBuckets, UpperBoundsAreInclusive) {
    // Schema 4: bucket i is (2^((i-1)/16), 2^(i/16)].
    EXPECT_EQ(native_bucket_index(1.0), 0);
    EXPECT_EQ(native_bucket_index(std::nextafter(1.0, 2.0)), 1);
    EXPECT_EQ(native_bucket_index(0.25), -32);
    EXPECT_EQ(native_bucket_index(std::nextafter(0.25, 1.0)), -31);
    EXPECT_EQ(native_bucket_index(2.0), 16);
    EXPECT_EQ(native_bucket_index(0.1), -53);  // 2^(-54/16) = 0.0962 < 0.1 <= 2^(-53/16) = 0.1005
    for (double v = 1e-4; v < 1e3; v *= 1.013) {
        const int i = native_bucket_index(v);
        EXPECT_LT(std::exp2((i - 1) / 16.0), v) << v;
        EXPECT_GE(std::exp2(i / 16.0), v) << v;
    }
}

TEST(NativeBuckets, ZeroAndCounts) {
    native_histogram h;
    h.observe(0.0);
    h.observe(0.1);
    h.observe(0.1);
    h.observe(0.25);
    EXPECT_EQ(h.count, 4U);
    EXPECT_EQ(h.zero_count, 1U);
    EXPECT_DOUBLE_EQ(h.sum, 0.45);
    EXPECT_EQ(h.positive.at(-53), 2U);
    EXPECT_EQ(h.positive.at(-32), 1U);
}

TEST(ProtobufExposition, AcceptHeader) {
    EXPECT_TRUE(
        accepts_protobuf("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                         "encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"));
    EXPECT_FALSE(accepts_protobuf("text/plain;version=0.0.4;q=1,*/*;q=0.1"));
    EXPECT_FALSE(accepts_protobuf(""));
}

std::uint64_t read_varint(const std::string& s, std::size_t& at) {
    std::uint64_t v = 0;
    for (int shift = 0; at < s.size(); shift += 7) {
        const auto byte = static_cast<unsigned char>(s[at++]);
        v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            break;
        }
    }
    return v;
}

// protoc --decode of one message: its text format.
std::string decode(const std::string& message) {
    const std::filesystem::path proto =
        std::filesystem::path(TOKENMETER_FIXTURES_DIR) / "../../proxy/metrics";
    const std::filesystem::path in =
        std::filesystem::temp_directory_path() / ("tokenmeter-proto-" + std::to_string(::getpid()));
    std::ofstream(in, std::ios::binary) << message;
    const std::string command = "protoc --proto_path=" + proto.string() +
                                " --decode=io.prometheus.client.MetricFamily metrics.proto < " +
                                in.string() + " 2>&1";
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
        char buffer[4096];
        std::size_t n = 0;
        while ((n = std::fread(buffer, 1, sizeof buffer, p)) > 0) {
            out.append(buffer, n);
        }
        EXPECT_EQ(::pclose(p), 0) << out << "(is protoc installed? Debian: protobuf-compiler)";
    }
    std::filesystem::remove(in);
    return out;
}

bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
}

meter::request_summary with_ttft(const registry& r, std::chrono::milliseconds ttft) {
    meter::stream_meter m(protocol::api_kind::openai_chat_completions, "llama", true,
                          core::time_point{}, &r.inter_token_latency_bounds());
    m.on_request_sent();  // served: the server got it
    m.on_response_head(200, core::time_point{} + 1ms);
    protocol::response_chunk chunk;
    chunk.content = "a";
    m.on_chunk(chunk, core::time_point{} + ttft);
    m.on_chunk(chunk, core::time_point{} + ttft + 5ms);
    return m.finish(meter::end_reason::upstream_complete, core::time_point{} + ttft + 10ms);
}

TEST(ProtobufExposition, DecodesAgainstTheSchemaWithNativeBuckets) {
    registry_options settings;
    settings.native_histograms = true;
    registry r(settings);
    ASSERT_TRUE(r.native_histograms_enabled());
    for (const auto ttft : {100ms, 100ms, 100ms, 250ms}) {
        r.record(with_ttft(r, ttft));
    }
    r.upstream_error("timeout");
    const std::string bytes = r.expose_protobuf();
    ASSERT_FALSE(bytes.empty());

    std::map<std::string, std::string> decoded;  // family name -> text format
    std::size_t at = 0;
    while (at < bytes.size()) {
        const std::uint64_t length = read_varint(bytes, at);
        ASSERT_LE(at + length, bytes.size());
        const std::string text = decode(bytes.substr(at, length));
        at += length;
        const auto name_at = text.find("name: \"");
        ASSERT_NE(name_at, std::string::npos) << text;
        const auto name_end = text.find('"', name_at + 7);
        decoded[text.substr(name_at + 7, name_end - name_at - 7)] = text;
    }
    EXPECT_EQ(decoded.size(), r.collect().size()) << "one message per family";

    const std::string& ttft = decoded.at("tokenmeter_time_to_first_token_seconds");
    EXPECT_TRUE(contains(ttft, "type: HISTOGRAM")) << ttft;
    EXPECT_TRUE(contains(ttft, "sample_count: 4")) << ttft;
    EXPECT_TRUE(contains(ttft, "schema: 4")) << ttft;
    EXPECT_TRUE(contains(ttft, "zero_count: 0")) << ttft;
    // 0.1 s three times in bucket -53, 0.25 s once in bucket -32: two spans, deltas 3 and -2.
    EXPECT_TRUE(contains(ttft,
                         "positive_span {\n      offset: -53\n      length: 1\n    }\n    "
                         "positive_span {\n      offset: 20\n      length: 1\n    }"))
        << ttft;
    EXPECT_TRUE(contains(ttft, "positive_delta: 3\n    positive_delta: -2")) << ttft;
    // The classic buckets are there too, without +Inf (implied by sample_count).
    EXPECT_TRUE(contains(ttft, "bucket {\n      cumulative_count: 3\n      upper_bound: 0.1051"))
        << ttft;
    EXPECT_FALSE(contains(ttft, "upper_bound: inf")) << ttft;

    const std::string& errors = decoded.at("tokenmeter_upstream_errors_total");
    EXPECT_TRUE(contains(errors, "type: COUNTER")) << errors;
    EXPECT_TRUE(contains(errors, "label {\n    name: \"reason\"\n    value: \"timeout\"\n  }"))
        << errors;
    EXPECT_TRUE(contains(errors, "counter {\n    value: 1\n  }")) << errors;
    const std::string& build = decoded.at("tokenmeter_build_info");
    EXPECT_TRUE(contains(build, "type: GAUGE")) << build;
    // Inter-token latency: batched per request, split exactly into classic and native buckets.
    // One 5 ms gap per request: native bucket -122 (2^(-123/16) < 0.005 <= 2^(-122/16)).
    const std::string& itl = decoded.at("tokenmeter_inter_token_latency_seconds");
    EXPECT_TRUE(contains(itl, "sample_count: 4")) << itl;
    EXPECT_TRUE(contains(itl, "schema: 4")) << itl;
    EXPECT_TRUE(contains(itl, "zero_threshold: 7.62939453125e-06")) << itl;
    EXPECT_TRUE(contains(itl, "positive_span {\n      offset: -122\n      length: 1\n    }"))
        << itl;
    EXPECT_TRUE(contains(itl, "positive_delta: 4")) << itl;
    EXPECT_TRUE(contains(itl, "bucket {\n      cumulative_count: 4\n      upper_bound: 0.005524"))
        << itl;
    EXPECT_TRUE(contains(itl, "bucket {\n      cumulative_count: 0\n      upper_bound: 0.004645"))
        << itl;
}

// The same gaps observed one by one into a native histogram and batched per request through the
// registry give the same buckets: the batch bounds hold every native boundary.
TEST(ProtobufExposition, BatchedInterTokenLatencyIsExact) {
    registry_options settings;
    settings.native_histograms = true;
    registry r(settings);
    const auto& bounds = r.inter_token_latency_bounds();
    for (const double b : default_buckets().inter_token_latency) {
        EXPECT_TRUE(std::binary_search(bounds.begin(), bounds.end(), b)) << b;
    }
    for (int i = -17 * 16; i <= 8 * 16; i += 7) {
        EXPECT_TRUE(std::binary_search(bounds.begin(), bounds.end(), std::exp2(i / 16.0))) << i;
    }
    meter::histogram_batch batch(&bounds);
    native_histogram direct;
    direct.zero_threshold = bounds.front();
    for (const double gap : {0.0, 0.0, 0.0009, 0.005, 0.0051, 0.02, 0.0203, 0.25, 0.2501, 1.7}) {
        batch.observe(gap);
        direct.observe(gap);
    }
    std::vector<double> increments = batch.bucket_increments();
    std::map<int, std::uint64_t> from_batch;
    for (std::size_t j = 1; j < increments.size(); ++j) {
        if (increments[j] > 0) {
            from_batch[native_bucket_index(j < bounds.size() ? bounds[j] : bounds.back())] +=
                static_cast<std::uint64_t>(increments[j]);
        }
    }
    EXPECT_EQ(from_batch, direct.positive);
    EXPECT_EQ(static_cast<std::uint64_t>(increments[0]), direct.zero_count);
    EXPECT_EQ(direct.zero_count, 2U);
}

// A sampled request's exemplar rides in its classic bucket, as Prometheus' schema has it.
TEST(ProtobufExposition, ABucketCarriesItsExemplar) {
    registry_options settings;
    settings.native_histograms = true;
    registry r(settings);
    exemplar_source trace;
    trace.trace = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                   0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
    trace.span = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    trace.unix_ms = 1'764'300'000'250;
    const meter::request_summary summary = with_ttft(r, 100ms);
    r.record(summary, meter::billed(summary), &trace);
    const std::string bytes = r.expose_protobuf();
    std::size_t at = 0;
    std::string ttft;
    while (at < bytes.size()) {
        const std::uint64_t length = read_varint(bytes, at);
        ASSERT_LE(at + length, bytes.size());
        const std::string text = decode(bytes.substr(at, length));
        at += length;
        if (contains(text, "name: \"tokenmeter_time_to_first_token_seconds\"")) {
            ttft = text;
        }
    }
    EXPECT_TRUE(contains(ttft,
                         "      upper_bound: 0.1051\n      exemplar {\n        label {\n"
                         "          name: \"trace_id\"\n"
                         "          value: \"4bf92f3577b34da6a3ce929d0e0e4736\"\n        }\n"
                         "        label {\n          name: \"span_id\"\n"
                         "          value: \"00f067aa0ba902b7\"\n        }\n"
                         "        value: 0.1\n        timestamp {\n"
                         "          seconds: 1764300000\n          nanos: 250000000\n"))
        << ttft;
}

TEST(ProtobufExposition, OffWithoutTheOption) {
    registry r(registry_options{});
    EXPECT_FALSE(r.native_histograms_enabled());
    EXPECT_TRUE(r.expose_protobuf().empty());
}

}  // namespace
}  // namespace tokenmeter::metrics
