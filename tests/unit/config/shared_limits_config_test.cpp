// tenants.shared_limits.redis: loading, the URL rules (redis:// and rediss://), on_error, the
// password's two sources, the reply bounds and the TLS keys.
#include <gtest/gtest.h>

#include <string>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

std::string redis_yaml(const std::string& body) {
    return "tenants:\n  shared_limits:\n    redis:\n" + body;
}

TEST(SharedLimitsConfig, LoadsEveryKey) {
    auto r = load_yaml(redis_yaml(R"(      url: redis://redis.tokenmeter.svc:6380
      username: meter
      password_env: REDIS_PASSWORD
      key_prefix: "tm:"
      timeout: 25ms
      on_error: deny
      connections: 4
)"));
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    const auto& s = r.value.tenants.shared_limits.redis;
    EXPECT_EQ(s.url, "redis://redis.tokenmeter.svc:6380");
    EXPECT_EQ(s.username, "meter");
    EXPECT_EQ(s.password_env, "REDIS_PASSWORD");
    EXPECT_EQ(s.key_prefix, "tm:");
    EXPECT_EQ(s.timeout, std::chrono::milliseconds(25));
    EXPECT_EQ(s.on_error, "deny");
    EXPECT_EQ(s.connections, 4u);
    EXPECT_TRUE(default_settings().tenants.shared_limits.redis.url.empty()) << "off by default";
}

TEST(SharedLimitsConfig, RefusesCredentialsInTheUrlAndOtherSchemes) {
    auto creds = load_yaml(redis_yaml("      url: redis://user:secret@redis:6379\n"));
    ASSERT_EQ(creds.errors.size(), 1u);
    EXPECT_NE(creds.errors[0].message.find("password_file"), std::string::npos);
    EXPECT_EQ(creds.errors[0].message.find("secret"), std::string::npos) << "never echoed";
    auto tls_creds = load_yaml(redis_yaml("      url: rediss://:secret@redis:6379\n"));
    ASSERT_EQ(tls_creds.errors.size(), 1u);
    EXPECT_EQ(tls_creds.errors[0].message.find("secret"), std::string::npos) << "never echoed";
    for (const char* url : {"http://redis:6379", "redis://:6379", "redis://redis:0",
                            "redis://redis:99999", "redis://redis:63x", "redis://redis/3",
                            "redis+tls://redis", "rediss://:6379", "rediss://redis/2"}) {
        auto r = load_yaml(redis_yaml(std::string("      url: \"") + url + "\"\n"));
        ASSERT_EQ(r.errors.size(), 1u) << url;
        EXPECT_EQ(r.errors[0].key, "tenants.shared_limits.redis.url") << url;
    }
}

TEST(SharedLimitsConfig, ParsesHostAndPort) {
    std::string error;
    auto e = parse_redis_url("redis://10.0.0.7", error);
    EXPECT_TRUE(error.empty());
    EXPECT_EQ(e.host, "10.0.0.7");
    EXPECT_EQ(e.port, 6379);
    e = parse_redis_url("redis://[::1]:7000/0", error);
    EXPECT_TRUE(error.empty()) << error;
    EXPECT_EQ(e.host, "::1");
    EXPECT_EQ(e.port, 7000);
    EXPECT_FALSE(e.tls);
}

TEST(SharedLimitsConfig, RedissIsTlsOnTheSameDefaultPort) {
    std::string error;
    auto e = parse_redis_url("rediss://redis.tokenmeter.svc", error);
    EXPECT_TRUE(error.empty()) << error;
    EXPECT_TRUE(e.tls);
    EXPECT_EQ(e.host, "redis.tokenmeter.svc");
    EXPECT_EQ(e.port, 6379);
    e = parse_redis_url("rediss://[::1]:6380/0", error);
    EXPECT_TRUE(error.empty()) << error;
    EXPECT_TRUE(e.tls);
    EXPECT_EQ(e.host, "::1");
    EXPECT_EQ(e.port, 6380);
    auto r = load_yaml(redis_yaml(R"(      url: rediss://redis:6380
      ca_file: /etc/tokenmeter/redis-ca.pem
      server_name: redis.internal
)"));
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    EXPECT_EQ(r.value.tenants.shared_limits.redis.ca_file, "/etc/tokenmeter/redis-ca.pem");
    EXPECT_EQ(r.value.tenants.shared_limits.redis.server_name, "redis.internal");
}

TEST(SharedLimitsConfig, TlsKeysWithoutRedissNameTheKey) {
    auto r = load_yaml(redis_yaml("      url: redis://redis\n      ca_file: /ca.pem\n"));
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].key, "tenants.shared_limits.redis.ca_file");
    EXPECT_NE(r.errors[0].message.find("rediss://"), std::string::npos);
    auto name = load_yaml(redis_yaml("      url: redis://redis\n      server_name: r\n"));
    ASSERT_EQ(name.errors.size(), 1u);
    EXPECT_EQ(name.errors[0].key, "tenants.shared_limits.redis.server_name");
}

TEST(SharedLimitsConfig, ReplyBoundsHaveSafeDefaultsAndNameTheKey) {
    const auto& d = default_settings().tenants.shared_limits.redis;
    EXPECT_EQ(d.max_reply_bytes, 1024u * 1024u);
    EXPECT_EQ(d.max_reply_elements, 1024u);
    auto r = load_yaml(redis_yaml("      max_reply_bytes: 64KiB\n      max_reply_elements: 16\n"));
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    EXPECT_EQ(r.value.tenants.shared_limits.redis.max_reply_bytes, 64u * 1024u);
    EXPECT_EQ(r.value.tenants.shared_limits.redis.max_reply_elements, 16u);
    for (const char* bad : {"      max_reply_bytes: 10\n", "      max_reply_bytes: 1GiB\n",
                            "      max_reply_bytes: lots\n"}) {
        auto b = load_yaml(redis_yaml(bad));
        ASSERT_EQ(b.errors.size(), 1u) << bad;
        EXPECT_EQ(b.errors[0].key, "tenants.shared_limits.redis.max_reply_bytes") << bad;
    }
    for (const char* bad : {"      max_reply_elements: 1\n", "      max_reply_elements: -3\n"}) {
        auto b = load_yaml(redis_yaml(bad));
        ASSERT_EQ(b.errors.size(), 1u) << bad;
        EXPECT_EQ(b.errors[0].key, "tenants.shared_limits.redis.max_reply_elements") << bad;
    }
}

TEST(SharedLimitsConfig, OnErrorConnectionsAndPasswordSources) {
    auto word = load_yaml(redis_yaml("      on_error: maybe\n"));
    ASSERT_EQ(word.errors.size(), 1u);
    EXPECT_EQ(word.errors[0].key, "tenants.shared_limits.redis.on_error");
    auto pool = load_yaml(redis_yaml("      connections: 0\n"));
    ASSERT_EQ(pool.errors.size(), 1u);
    EXPECT_EQ(pool.errors[0].key, "tenants.shared_limits.redis.connections");
    auto both = load_yaml(redis_yaml("      password_env: A\n      password_file: /b\n"));
    ASSERT_EQ(both.errors.size(), 1u);
    EXPECT_EQ(both.errors[0].key, "tenants.shared_limits.redis.password_file");
    auto typo = load_yaml(redis_yaml("      passwrd_file: /b\n"));
    ASSERT_EQ(typo.errors.size(), 1u);
    EXPECT_NE(typo.errors[0].message.find("password_file"), std::string::npos);
}

}  // namespace
}  // namespace tokenmeter::config
