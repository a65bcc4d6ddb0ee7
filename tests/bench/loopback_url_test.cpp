#include "loopback_url.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::load {
namespace {

TEST(loopback_url, accepts_loopback_forms) {
    url_result a = parse_loopback_url("http://127.0.0.1:8080");
    ASSERT_TRUE(a.url) << a.error;
    EXPECT_EQ(a.url->address, "127.0.0.1");
    EXPECT_EQ(a.url->port, 8080);
    EXPECT_EQ(a.url->path, "/");
    EXPECT_EQ(a.url->host_header, "127.0.0.1:8080");

    url_result b = parse_loopback_url("http://127.3.2.1:9/metrics");
    ASSERT_TRUE(b.url) << b.error;
    EXPECT_EQ(b.url->path, "/metrics");

    url_result c = parse_loopback_url("http://[::1]:7000/x");
    ASSERT_TRUE(c.url) << c.error;
    EXPECT_EQ(c.url->address, "::1");
    EXPECT_EQ(c.url->port, 7000);

    url_result d = parse_loopback_url("HTTP://LocalHost:1");
    ASSERT_TRUE(d.url) << d.error;
    EXPECT_EQ(d.url->address, "127.0.0.1");

    url_result e = parse_loopback_url("http://127.0.0.1");
    ASSERT_TRUE(e.url) << e.error;
    EXPECT_EQ(e.url->port, 80);
    EXPECT_FALSE(e.url->tls);
}

TEST(loopback_url, https_sets_tls_and_its_default_port) {
    url_result a = parse_loopback_url("https://127.0.0.1:8443/v1");
    ASSERT_TRUE(a.url) << a.error;
    EXPECT_TRUE(a.url->tls);
    EXPECT_EQ(a.url->port, 8443);
    EXPECT_EQ(a.url->path, "/v1");
    EXPECT_EQ(a.url->host_header, "127.0.0.1:8443");

    url_result b = parse_loopback_url("HTTPS://localhost");
    ASSERT_TRUE(b.url) << b.error;
    EXPECT_TRUE(b.url->tls);
    EXPECT_EQ(b.url->port, 443);
    EXPECT_EQ(b.url->address, "127.0.0.1");

    EXPECT_FALSE(parse_loopback_url("https://10.0.0.1:443").url);
    EXPECT_FALSE(parse_loopback_url("httpss://127.0.0.1:443").url);
}

TEST(loopback_url, refuses_everything_else) {
    for (const char* url :
         {"http://10.0.0.1:80", "http://example.com:80", "http://0.0.0.0:80", "http://[::]:80",
          "http://[::ffff:8.8.8.8]:80", "ftp://127.0.0.1:21", "127.0.0.1:80", "http://:80",
          "http://127.0.0.1:0", "http://127.0.0.1:70000", "http://127.0.0.1:8x",
          "http://user@127.0.0.1:80", "http://::1:80", "http://[::1", "http://128.0.0.1:1"}) {
        EXPECT_FALSE(parse_loopback_url(url).url) << url;
    }
}

}  // namespace
}  // namespace tokenmeter::load
