// The text parsers behind every key: endpoints, upstream URLs, durations and sizes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

using std::chrono::milliseconds;

TEST(ParseEndpoint, HostAndPort) {
    const auto e = parse_endpoint("127.0.0.1:8080");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->host, "127.0.0.1");
    EXPECT_EQ(e->port, 8080);
}

TEST(ParseEndpoint, HostNameAndPortZero) {
    const auto e = parse_endpoint("localhost:0");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->host, "localhost");
    EXPECT_EQ(e->port, 0);
    const auto any = parse_endpoint("0.0.0.0:0");
    ASSERT_TRUE(any.has_value());
    EXPECT_EQ(any->host, "0.0.0.0");
    EXPECT_EQ(any->port, 0);
}

TEST(ParseEndpoint, BracketedIpv6LosesItsBrackets) {
    const auto e = parse_endpoint("[::1]:9090");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->host, "::1");
    EXPECT_EQ(e->port, 9090);
    const auto any = parse_endpoint("[::]:80");
    ASSERT_TRUE(any.has_value());
    EXPECT_EQ(any->host, "::");
    const auto zoned = parse_endpoint("[fe80::1%eth0]:80");
    ASSERT_TRUE(zoned.has_value());
    EXPECT_EQ(zoned->host, "fe80::1%eth0");
}

TEST(ParseEndpoint, MaximumPortAndSurroundingSpace) {
    const auto e = parse_endpoint("  example.internal:65535 ");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->host, "example.internal");
    EXPECT_EQ(e->port, 65535);
}

TEST(ParseEndpoint, RejectsMalformed) {
    for (const char* bad : {"", "localhost", "localhost:", ":8080", "127.0.0.1:65536",
                            "127.0.0.1:99999999999999999999999", "127.0.0.1:-1", "127.0.0.1:80a",
                            "::1:8080", "[::1]", "[::1]8080", "[::1:8080", "[]:80",
                            "[127.0.0.1]:80", "my host:80", "host/path:80", "http://h:80"}) {
        EXPECT_FALSE(parse_endpoint(bad).has_value()) << bad;
    }
}

TEST(EndpointToString, RoundTrips) {
    for (const char* text : {"127.0.0.1:8080", "[::1]:9090", "localhost:0"}) {
        const auto e = parse_endpoint(text);
        ASSERT_TRUE(e.has_value()) << text;
        EXPECT_EQ(to_string(*e), text);
    }
}

TEST(ParseUpstream, HostAndPort) {
    const auto u = parse_upstream("http://127.0.0.1:8000");
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->scheme, "http");
    EXPECT_EQ(u->host, "127.0.0.1");
    EXPECT_EQ(u->port, 8000);
    EXPECT_EQ(u->base_path, "");
}

TEST(ParseUpstream, PortDefaultsTo80) {
    const auto u = parse_upstream("http://vllm");
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->host, "vllm");
    EXPECT_EQ(u->port, 80);
    EXPECT_EQ(u->base_path, "");
}

TEST(ParseUpstream, BasePathWithoutTrailingSlash) {
    const auto u = parse_upstream("http://models.internal:8000/team-a/");
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->base_path, "/team-a");
    const auto root = parse_upstream("http://models.internal:8000/");
    ASSERT_TRUE(root.has_value());
    EXPECT_EQ(root->base_path, "");
    const auto deep = parse_upstream("http://m/a/b");
    ASSERT_TRUE(deep.has_value());
    EXPECT_EQ(deep->base_path, "/a/b");
}

TEST(ParseUpstream, Ipv6AndUppercaseScheme) {
    const auto u = parse_upstream("HTTP://[::1]:8000");
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->scheme, "http");
    EXPECT_EQ(u->host, "::1");
    EXPECT_EQ(u->port, 8000);
}

// https is a later feature: it parses so that validate() can say exactly that.
TEST(ParseUpstream, HttpsParsesWithPort443) {
    const auto u = parse_upstream("https://api.example.com");
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->scheme, "https");
    EXPECT_EQ(u->port, 443);
}

TEST(ParseUpstream, RejectsMalformed) {
    for (const char* bad :
         {"", "127.0.0.1:8000", "ftp://host", "ws://host:80", "http://", "http://:8000",
          "http://host:0", "http://host:65536", "http://host:", "http://user:pw@host",
          "http://host/v1?x=1", "http://host/#frag", "http://host/a b", "http://::1:8000"}) {
        EXPECT_FALSE(parse_upstream(bad).has_value()) << bad;
    }
}

TEST(ParseDuration, Units) {
    EXPECT_EQ(parse_duration("250ms"), milliseconds{250});
    EXPECT_EQ(parse_duration("30s"), milliseconds{30'000});
    EXPECT_EQ(parse_duration("5m"), milliseconds{300'000});
    EXPECT_EQ(parse_duration("1h"), milliseconds{3'600'000});
    EXPECT_EQ(parse_duration("0ms"), milliseconds{0});
}

TEST(ParseDuration, BareNumberIsSeconds) {
    EXPECT_EQ(parse_duration("30"), milliseconds{30'000});
    EXPECT_EQ(parse_duration("0.25"), milliseconds{250});
    EXPECT_EQ(parse_duration("1.5"), milliseconds{1'500});
}

// Decimal arithmetic, not floating point: 0.1 s is exactly 100 ms.
TEST(ParseDuration, FractionsAreExact) {
    EXPECT_EQ(parse_duration("0.1s"), milliseconds{100});
    EXPECT_EQ(parse_duration("0.001"), milliseconds{1});
    EXPECT_EQ(parse_duration("1.5m"), milliseconds{90'000});
    EXPECT_EQ(parse_duration("0.5h"), milliseconds{1'800'000});
    EXPECT_EQ(parse_duration("2.000000000000s"), milliseconds{2'000});
    EXPECT_EQ(parse_duration(" 10 s "), milliseconds{10'000});
}

TEST(ParseDuration, AtMostOneYear) {
    EXPECT_EQ(parse_duration("8760h"), milliseconds{8760LL * 3'600'000});
    EXPECT_FALSE(parse_duration("8761h").has_value());
    EXPECT_FALSE(parse_duration("99999999999999999999s").has_value());
}

TEST(ParseDuration, RejectsMalformed) {
    for (const char* bad : {"", "   ", "-1s", "-5", "s", "10x", "10sec", "1.s", ".5s", "1e3",
                            "0.5ms", "0.0001", "1,5s", "10 s s", "inf", "nan"}) {
        EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
    }
}

TEST(ParseSize, PlainAndBinaryUnits) {
    EXPECT_EQ(parse_size("65536"), 65536u);
    EXPECT_EQ(parse_size("0"), 0u);
    EXPECT_EQ(parse_size("512B"), 512u);
    EXPECT_EQ(parse_size("64KiB"), 64u * 1024);
    EXPECT_EQ(parse_size("32MiB"), 32u * 1024 * 1024);
    EXPECT_EQ(parse_size("1GiB"), 1024u * 1024 * 1024);
    EXPECT_EQ(parse_size("4 mib"), 4u * 1024 * 1024);
}

TEST(ParseSize, RejectsDecimalUnitsAndMalformed) {
    for (const char* bad : {"", "-1", "500KB", "1MB", "1GB", "10k", "1.5MiB", "MiB", "12 TiB",
                            "1 2", "18446744073709551616", "17179869184GiB"}) {
        EXPECT_FALSE(parse_size(bad).has_value()) << bad;
    }
}

}  // namespace
}  // namespace tokenmeter::config
