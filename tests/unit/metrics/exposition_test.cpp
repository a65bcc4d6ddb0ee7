// What a /metrics request gets from its Accept and Accept-Encoding headers, and the gzip member
// it may get, read back with zlib.
#include "metrics/exposition.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace tokenmeter::metrics {
namespace {

constexpr std::string_view prometheus_accept =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
constexpr std::string_view protobuf_accept =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;"
    "q=0.6,application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4";

TEST(Exposition, TextUnlessOpenMetricsIsAskedFor) {
    using enum exposition_format;
    EXPECT_EQ(choose_exposition("", false), prometheus_text);
    EXPECT_EQ(choose_exposition("*/*", false), prometheus_text);
    EXPECT_EQ(choose_exposition("text/plain;version=0.0.4", false), prometheus_text);
    EXPECT_EQ(choose_exposition(prometheus_accept, false), openmetrics);
    EXPECT_EQ(choose_exposition("Application/OpenMetrics-Text", false), openmetrics);
    EXPECT_EQ(choose_exposition("application/openmetrics-text;q=0", false), prometheus_text);
    EXPECT_EQ(choose_exposition("application/openmetrics-text;q=0.3, text/plain", false),
              prometheus_text);
    EXPECT_EQ(choose_exposition("text/plain;q=0.5 , application/openmetrics-text ; q=0.5", false),
              openmetrics)
        << "a tie goes to OpenMetrics";
    EXPECT_EQ(choose_exposition("application/openmetrics-text;q=bogus", false), openmetrics);
}

TEST(Exposition, ProtobufOnlyWhenItIsServed) {
    EXPECT_EQ(choose_exposition(protobuf_accept, true), exposition_format::protobuf);
    EXPECT_EQ(choose_exposition(protobuf_accept, false), exposition_format::openmetrics);
}

TEST(Exposition, GzipWhenAccepted) {
    EXPECT_TRUE(accepts_gzip("gzip"));
    EXPECT_TRUE(accepts_gzip("deflate, GZIP;q=0.5"));
    EXPECT_TRUE(accepts_gzip("x-gzip"));
    EXPECT_TRUE(accepts_gzip("*"));
    EXPECT_FALSE(accepts_gzip(""));
    EXPECT_FALSE(accepts_gzip("identity"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0.000, *"));
    EXPECT_FALSE(accepts_gzip("br, deflate"));
    EXPECT_FALSE(accepts_gzip(",;,;q="));
}

std::string gunzip(const std::string& data) {
    z_stream stream{};
    EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
    std::string out(1 << 20, '\0');
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    stream.avail_in = static_cast<uInt>(data.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
    out.resize(stream.total_out);
    inflateEnd(&stream);
    return out;
}

TEST(Exposition, GzipReadsBackAsItWas) {
    std::string text;
    for (int i = 0; i < 2000; ++i) {
        text += "tokenmeter_requests_total{model=\"m" + std::to_string(i % 7) + "\"} " +
                std::to_string(i) + "\n";
    }
    const auto zipped = gzip_compress(text);
    ASSERT_TRUE(zipped.has_value());
    EXPECT_EQ(static_cast<unsigned char>((*zipped)[0]), 0x1f) << "a gzip member";
    EXPECT_EQ(static_cast<unsigned char>((*zipped)[1]), 0x8b);
    EXPECT_LT(zipped->size() * 5, text.size());
    EXPECT_EQ(gunzip(*zipped), text);
    const auto empty = gzip_compress("");
    ASSERT_TRUE(empty.has_value());
    EXPECT_EQ(gunzip(*empty), "");
}

}  // namespace
}  // namespace tokenmeter::metrics
