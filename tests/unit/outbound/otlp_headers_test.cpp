// The OTLP exporter's headers: otel.headers_file lines and OTEL_EXPORTER_OTLP_HEADERS pairs are
// read strictly, since a header value that could end a line would forge a request.
#include <gtest/gtest.h>

#include <string>

#include "outbound/otlp_exporter.hpp"

namespace tokenmeter::outbound {
namespace {

TEST(OtlpHeaders, FileLines) {
    header_list out;
    std::string why;
    ASSERT_TRUE(parse_header_lines(
        "# credentials\r\nAuthorization: Bearer abc def\r\n\r\n  X-Scope-OrgID:tenant-1  \n", out,
        why))
        << why;
    ASSERT_EQ(out.size(), 2U);
    EXPECT_EQ(out[0], (std::pair<std::string, std::string>{"Authorization", "Bearer abc def"}));
    EXPECT_EQ(out[1], (std::pair<std::string, std::string>{"X-Scope-OrgID", "tenant-1"}));
}

TEST(OtlpHeaders, FileRefusals) {
    header_list out;
    std::string why;
    EXPECT_FALSE(parse_header_lines("no colon here\n", out, why));
    EXPECT_FALSE(parse_header_lines("Bad Name: x\n", out, why));
    EXPECT_NE(why.find("HTTP token"), std::string::npos) << why;
    EXPECT_FALSE(parse_header_lines(std::string("X-A: a\x01") + "b\n", out, why));
    EXPECT_NE(why.find("control character"), std::string::npos) << why;
    std::string many;
    for (int i = 0; i < 40; ++i) {
        many += "X-" + std::to_string(i) + ": v\n";
    }
    out.clear();
    EXPECT_FALSE(parse_header_lines(many, out, why));
}

TEST(OtlpHeaders, EnvironmentPairsArePercentDecoded) {
    header_list out;
    std::string why;
    ASSERT_TRUE(parse_otlp_headers_env("api-key=secret%20value, x-team = blue,,", out, why)) << why;
    ASSERT_EQ(out.size(), 2U);
    EXPECT_EQ(out[0].first, "api-key");
    EXPECT_EQ(out[0].second, "secret value");
    EXPECT_EQ(out[1].second, "blue");
    out.clear();
    EXPECT_TRUE(parse_otlp_headers_env("", out, why));
    EXPECT_TRUE(out.empty());
    EXPECT_FALSE(parse_otlp_headers_env("novalue", out, why));
    // A percent-encoded line break would split the request: refused.
    EXPECT_FALSE(parse_otlp_headers_env("x=a%0d%0aInjected: 1", out, why));
    // A cut escape stays as written.
    out.clear();
    ASSERT_TRUE(parse_otlp_headers_env("x=%4", out, why));
    EXPECT_EQ(out.back().second, "%4");
}

}  // namespace
}  // namespace tokenmeter::outbound
