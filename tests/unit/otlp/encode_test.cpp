// The OTLP bodies: the protobuf read back field by field with a small wire reader (the
// integration test decodes them with the official opentelemetry-proto definitions), and the
// JSON form parsed back.
#include "otlp/encode.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tokenmeter::otlp {
namespace {

// One message's fields by number: varints and fixed64 as integers, length-delimited as bytes.
struct fields {
    std::multimap<int, std::uint64_t> numbers;
    std::multimap<int, std::string> bytes;

    [[nodiscard]] std::string one(int field) const {
        EXPECT_EQ(bytes.count(field), 1U) << "field " << field;
        auto it = bytes.find(field);
        return it == bytes.end() ? std::string() : it->second;
    }
    [[nodiscard]] std::vector<std::string> all(int field) const {
        std::vector<std::string> out;
        auto [a, b] = bytes.equal_range(field);
        for (auto it = a; it != b; ++it) {
            out.push_back(it->second);
        }
        return out;
    }
    [[nodiscard]] std::uint64_t number(int field) const {
        auto it = numbers.find(field);
        EXPECT_NE(it, numbers.end()) << "field " << field;
        return it == numbers.end() ? 0 : it->second;
    }
};

std::uint64_t varint(std::string_view& in) {
    std::uint64_t v = 0;
    for (int shift = 0; !in.empty(); shift += 7) {
        const auto b = static_cast<unsigned char>(in.front());
        in.remove_prefix(1);
        v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            break;
        }
    }
    return v;
}

fields read(std::string_view in) {
    fields out;
    while (!in.empty()) {
        const std::uint64_t tag = varint(in);
        const int field = static_cast<int>(tag >> 3);
        switch (tag & 7) {
            case 0:
                out.numbers.emplace(field, varint(in));
                break;
            case 1: {
                std::uint64_t v = 0;
                std::memcpy(&v, in.data(), 8);
                in.remove_prefix(8);
                out.numbers.emplace(field, v);
                break;
            }
            case 2: {
                const auto n = static_cast<std::size_t>(varint(in));
                out.bytes.emplace(field, std::string(in.substr(0, n)));
                in.remove_prefix(n);
                break;
            }
            default:
                ADD_FAILURE() << "wire type " << (tag & 7);
                return out;
        }
    }
    return out;
}

double as_double(std::uint64_t bits) {
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}

std::map<std::string, fields> attributes_of(const fields& message, int field) {
    std::map<std::string, fields> out;
    for (const std::string& kv : message.all(field)) {
        const fields pair = read(kv);
        out[pair.one(1)] = read(pair.one(2));
    }
    return out;
}

span sample_span() {
    span s;
    for (std::uint8_t i = 0; i < 16; ++i) {
        s.trace[i] = static_cast<std::uint8_t>(0xa0 + i);
    }
    for (std::uint8_t i = 0; i < 8; ++i) {
        s.id[i] = static_cast<std::uint8_t>(0x10 + i);
        s.parent[i] = static_cast<std::uint8_t>(0x20 + i);
    }
    s.name = "chat gpt-4o";
    s.start_unix_ns = 1'700'000'000'000'000'000;
    s.end_unix_ns = 1'700'000'001'500'000'000;
    s.attrs = {{"gen_ai.request.model", std::string("gpt-4o")},
               {"gen_ai.usage.input_tokens", std::int64_t{12}},
               {"ratio", 0.5},
               {"flag", true},
               {"bad", std::string("a\xff\xfe"
                                   "b")},
               // Sizes past one varint byte, a negative integer, and UTF-8 that needs no repair.
               {"long", std::string(300, 'x')},
               {"negative", std::int64_t{-5}},
               {"accented", std::string("caf\xc3\xa9")}};
    s.events.push_back({"gen_ai.first_token", 1'700'000'000'250'000'000, {}});
    s.status = status_code::error;
    s.status_message = "503";
    return s;
}

origin sample_origin() {
    origin o;
    o.resource = {{"service.name", std::string("tokenmeter")}};
    return o;
}

TEST(OtlpTraces, ProtobufFields) {
    const span s = sample_span();
    const std::string body =
        encode_traces(sample_origin(), std::span<const span>(&s, 1), encoding::protobuf);
    const fields request = read(body);
    const fields resource_spans = read(request.one(1));
    const auto resource = attributes_of(read(resource_spans.one(1)), 1);
    EXPECT_EQ(resource.at("service.name").one(1), "tokenmeter");
    const fields scope_spans = read(resource_spans.one(2));
    EXPECT_EQ(read(scope_spans.one(1)).one(1), "tokenmeter");
    const fields decoded = read(scope_spans.one(2));
    EXPECT_EQ(decoded.one(1), std::string(reinterpret_cast<const char*>(s.trace.data()), 16));
    EXPECT_EQ(decoded.one(2), std::string(reinterpret_cast<const char*>(s.id.data()), 8));
    EXPECT_EQ(decoded.one(4), std::string(reinterpret_cast<const char*>(s.parent.data()), 8));
    EXPECT_EQ(decoded.one(5), "chat gpt-4o");
    EXPECT_EQ(decoded.number(6), 3U);  // SPAN_KIND_CLIENT
    EXPECT_EQ(decoded.number(7), 1'700'000'000'000'000'000U);
    EXPECT_EQ(decoded.number(8), 1'700'000'001'500'000'000U);
    const auto attrs = attributes_of(decoded, 9);
    EXPECT_EQ(attrs.at("gen_ai.request.model").one(1), "gpt-4o");
    EXPECT_EQ(attrs.at("gen_ai.usage.input_tokens").number(3), 12U);
    EXPECT_DOUBLE_EQ(as_double(attrs.at("ratio").number(4)), 0.5);
    EXPECT_EQ(attrs.at("flag").number(2), 1U);
    EXPECT_EQ(attrs.at("bad").one(1), "a??b");  // string fields stay UTF-8
    EXPECT_EQ(attrs.at("long").one(1), std::string(300, 'x'));
    EXPECT_EQ(attrs.at("negative").number(3), static_cast<std::uint64_t>(std::int64_t{-5}));
    EXPECT_EQ(attrs.at("accented").one(1), "caf\xc3\xa9");
    EXPECT_EQ(attrs.size(), 8U);
    const fields event = read(decoded.one(11));
    EXPECT_EQ(event.number(1), 1'700'000'000'250'000'000U);
    EXPECT_EQ(event.one(2), "gen_ai.first_token");
    const fields status = read(decoded.one(15));
    EXPECT_EQ(status.number(3), 2U);  // STATUS_CODE_ERROR
    EXPECT_EQ(status.one(2), "503");
}

TEST(OtlpTraces, ARootSpanHasNoParent) {
    span s = sample_span();
    s.parent = {};
    const std::string body =
        encode_traces(sample_origin(), std::span<const span>(&s, 1), encoding::protobuf);
    const fields decoded = read(read(read(read(body).one(1)).one(2)).one(2));
    EXPECT_EQ(decoded.bytes.count(4), 0U);
    const auto json = nlohmann::json::parse(
        encode_traces(sample_origin(), std::span<const span>(&s, 1), encoding::json));
    EXPECT_FALSE(json["resourceSpans"][0]["scopeSpans"][0]["spans"][0].contains("parentSpanId"));
}

TEST(OtlpTraces, JsonUsesHexIdsAndStringIntegers) {
    const span s = sample_span();
    const auto json = nlohmann::json::parse(
        encode_traces(sample_origin(), std::span<const span>(&s, 1), encoding::json));
    const auto& rs = json.at("resourceSpans").at(0);
    EXPECT_EQ(rs["resource"]["attributes"][0]["key"], "service.name");
    EXPECT_EQ(rs["resource"]["attributes"][0]["value"]["stringValue"], "tokenmeter");
    const auto& j = rs.at("scopeSpans").at(0).at("spans").at(0);
    EXPECT_EQ(j["traceId"], "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    EXPECT_EQ(j["spanId"], "1011121314151617");
    EXPECT_EQ(j["parentSpanId"], "2021222324252627");
    EXPECT_EQ(j["kind"], 3);
    EXPECT_EQ(j["startTimeUnixNano"], "1700000000000000000");
    EXPECT_EQ(j["endTimeUnixNano"], "1700000001500000000");
    EXPECT_EQ(j["attributes"][1]["value"]["intValue"], "12");
    EXPECT_EQ(j["attributes"][2]["value"]["doubleValue"], 0.5);
    EXPECT_EQ(j["attributes"][3]["value"]["boolValue"], true);
    EXPECT_EQ(j["attributes"][4]["value"]["stringValue"], "a??b");
    EXPECT_EQ(j["events"][0]["name"], "gen_ai.first_token");
    EXPECT_EQ(j["events"][0]["timeUnixNano"], "1700000000250000000");
    EXPECT_EQ(j["status"]["code"], 2);
    EXPECT_EQ(content_type(encoding::json), "application/json");
    EXPECT_EQ(content_type(encoding::protobuf), "application/x-protobuf");
}

histogram sample_histogram() {
    histogram h{"gen_ai.server.request.duration", "d", "s", {0.1, 1.0}, {}};
    histogram_point p;
    p.attrs = {{"gen_ai.operation.name", std::string("chat")}};
    p.count = 3;
    p.sum = 2.5;
    p.min = 0.05;
    p.max = 2.0;
    p.bucket_counts = {1, 1, 1};
    h.points.push_back(p);
    return h;
}

TEST(OtlpMetrics, ProtobufCumulativeHistogram) {
    const histogram h = sample_histogram();
    const std::string body = encode_metrics(sample_origin(), std::span<const histogram>(&h, 1), 100,
                                            200, encoding::protobuf);
    const fields metric = read(read(read(read(body).one(1)).one(2)).one(2));
    EXPECT_EQ(metric.one(1), "gen_ai.server.request.duration");
    EXPECT_EQ(metric.one(3), "s");
    const fields data = read(metric.one(9));
    EXPECT_EQ(data.number(2), 2U);  // AGGREGATION_TEMPORALITY_CUMULATIVE
    const fields point = read(data.one(1));
    EXPECT_EQ(attributes_of(point, 9).at("gen_ai.operation.name").one(1), "chat");
    EXPECT_EQ(point.number(2), 100U);
    EXPECT_EQ(point.number(3), 200U);
    EXPECT_EQ(point.number(4), 3U);
    EXPECT_DOUBLE_EQ(as_double(point.number(5)), 2.5);
    const std::string counts = point.one(6);  // packed fixed64
    ASSERT_EQ(counts.size(), 24U);
    std::uint64_t c = 0;
    std::memcpy(&c, counts.data() + 16, 8);
    EXPECT_EQ(c, 1U);
    const std::string bounds = point.one(7);  // packed double
    ASSERT_EQ(bounds.size(), 16U);
    double b = 0;
    std::memcpy(&b, bounds.data() + 8, 8);
    EXPECT_DOUBLE_EQ(b, 1.0);
    EXPECT_DOUBLE_EQ(as_double(point.number(11)), 0.05);
    EXPECT_DOUBLE_EQ(as_double(point.number(12)), 2.0);
}

TEST(OtlpMetrics, Json) {
    const histogram h = sample_histogram();
    const auto json = nlohmann::json::parse(encode_metrics(
        sample_origin(), std::span<const histogram>(&h, 1), 100, 200, encoding::json));
    const auto& m = json.at("resourceMetrics").at(0).at("scopeMetrics").at(0).at("metrics").at(0);
    EXPECT_EQ(m["name"], "gen_ai.server.request.duration");
    EXPECT_EQ(m["unit"], "s");
    EXPECT_EQ(m["histogram"]["aggregationTemporality"], 2);
    const auto& p = m["histogram"]["dataPoints"][0];
    EXPECT_EQ(p["count"], "3");
    EXPECT_EQ(p["startTimeUnixNano"], "100");
    EXPECT_EQ(p["bucketCounts"], nlohmann::json::array({"1", "1", "1"}));
    EXPECT_EQ(p["explicitBounds"], nlohmann::json::array({0.1, 1.0}));
    EXPECT_EQ(p["sum"], 2.5);
}

}  // namespace
}  // namespace tokenmeter::otlp
