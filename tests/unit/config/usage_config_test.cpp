// The tenants: and usage: sections: loading, did-you-mean, and their semantic rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::config {
using std::chrono::milliseconds;
namespace {

std::vector<std::string> keys_of(const load_result& r) {
    std::vector<std::string> keys;
    for (const auto& e : r.errors) {
        keys.push_back(e.key);
    }
    return keys;
}

TEST(UsageConfig, LoadsEveryKey) {
    auto r = load_yaml(R"(
tenants:
  source: API_KEY
  header: x-team
  api_key_secret_env: SECRET_VAR
  api_key_names:
    "key:00112233445566778899aabbccddeeff": team-a
  metrics_allowlist: [team-a, team-b]
  max_tenants: 7
  limits:
    team-a: { provisioned_tokens_per_second: 2500.5 }
  enforce_provisioned: yes
  provisioned_burst: 3s
usage:
  spool_dir: /var/lib/tokenmeter
  fsync_interval: 5ms
  segment_bytes: 1MiB
  checkpoint_interval: 250ms
  hold_until_durable: false
  readyz_fail_on_spool_error: true
  max_pending_bytes: 8MiB
  sink:
    url: http://billing:8080/api/v1/events
    batch_size: 50
    backoff_initial: 100ms
    backoff_max: 1m
    request_timeout: 2s
    source: edge-1
)");
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    const auto& t = r.value.tenants;
    EXPECT_EQ(t.source, tenant_source::api_key);
    EXPECT_EQ(t.header, "x-team");
    EXPECT_EQ(t.api_key_secret_env, "SECRET_VAR");
    EXPECT_EQ(t.api_key_names.at("key:00112233445566778899aabbccddeeff"), "team-a");
    EXPECT_EQ(t.metrics_allowlist, (std::vector<std::string>{"team-a", "team-b"}));
    EXPECT_EQ(t.max_tenants, 7u);
    EXPECT_DOUBLE_EQ(t.limits.at("team-a").provisioned_tokens_per_second, 2500.5);
    EXPECT_TRUE(t.enforce_provisioned);
    EXPECT_EQ(t.provisioned_burst, milliseconds(3000));
    const auto& u = r.value.usage;
    EXPECT_EQ(u.spool_dir, "/var/lib/tokenmeter");
    EXPECT_EQ(u.fsync_interval, milliseconds(5));
    EXPECT_EQ(u.segment_bytes, 1u << 20);
    EXPECT_EQ(u.checkpoint_interval, milliseconds(250));
    EXPECT_FALSE(u.hold_until_durable);
    EXPECT_TRUE(u.readyz_fail_on_spool_error);
    EXPECT_EQ(u.max_pending_bytes, 8u << 20);
    EXPECT_EQ(u.sink.url, "http://billing:8080/api/v1/events");
    EXPECT_EQ(u.sink.batch_size, 50u);
    EXPECT_EQ(u.sink.backoff_initial, milliseconds(100));
    EXPECT_EQ(u.sink.backoff_max, milliseconds(60'000));
    EXPECT_EQ(u.sink.request_timeout, milliseconds(2000));
    EXPECT_EQ(u.sink.source, "edge-1");
}

TEST(UsageConfig, TyposGetDidYouMean) {
    auto r = load_yaml("usage:\n  fsync_intervall: 5ms\ntenants:\n  sorce: header\n");
    ASSERT_EQ(r.errors.size(), 2u);
    EXPECT_EQ(to_string(r.errors[0]),
              "usage.fsync_intervall: unknown key (did you mean \"fsync_interval\"?)");
    EXPECT_EQ(to_string(r.errors[1]), "tenants.sorce: unknown key (did you mean \"source\"?)");
    auto limits = load_yaml("tenants:\n  limits:\n    a: { provisioned_tokens_per_sec: 5 }\n");
    ASSERT_EQ(limits.errors.size(), 1u);
    EXPECT_EQ(limits.errors[0].key, "tenants.limits.a.provisioned_tokens_per_sec");
}

TEST(UsageConfig, SemanticRulesNameTheirKeys) {
    EXPECT_EQ(keys_of(load_yaml("tenants:\n  source: cookie\n")),
              (std::vector<std::string>{"tenants.source"}));
    EXPECT_EQ(keys_of(load_yaml("tenants:\n  source: api_key\n")),
              (std::vector<std::string>{"tenants.api_key_secret_env"}));
    EXPECT_EQ(keys_of(load_yaml("tenants:\n  source: api_key\n  api_key_secret_env: A\n"
                                "  api_key_secret_file: /f\n")),
              (std::vector<std::string>{"tenants.api_key_secret_file"}));
    EXPECT_EQ(
        keys_of(load_yaml("tenants:\n  limits:\n    a: { provisioned_tokens_per_second: -1 }\n")),
        (std::vector<std::string>{"tenants.limits.a.provisioned_tokens_per_second"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  sink:\n    url: http://x:1/e\n")),
              (std::vector<std::string>{"usage.sink.url"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  spool_dir: /s\n  sink:\n    url: ftp://x/e\n")),
              (std::vector<std::string>{"usage.sink.url"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  sink:\n    token_env: T\n")),
              (std::vector<std::string>{"usage.sink.url"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  spool_dir: /s\n  sink:\n    url: http://x:1/e\n"
                                "    ca_file: /ca.pem\n")),
              (std::vector<std::string>{"usage.sink.ca_file"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  spool_dir: /s\n  sink:\n    url: https://x/e\n"
                                "    token_env: T\n    token_file: /t\n")),
              (std::vector<std::string>{"usage.sink.token_file"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  segment_bytes: 100\n  fsync_interval: 0ms\n")),
              (std::vector<std::string>{"usage.fsync_interval", "usage.segment_bytes"}));
    EXPECT_EQ(keys_of(load_yaml("usage:\n  sink:\n    batch_size: 0\n    backoff_max: 10ms\n")),
              (std::vector<std::string>{"usage.sink.batch_size", "usage.sink.backoff_max"}));
}

TEST(UsageConfig, HttpsSinkWithCaAndToken) {
    auto r = load_yaml(
        "usage:\n  spool_dir: /s\n  sink:\n    url: https://billing.example/api/v1/events\n"
        "    ca_file: /etc/ca.pem\n    token_file: /run/secrets/sink-token\n");
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    EXPECT_EQ(r.value.usage.sink.url, "https://billing.example/api/v1/events");
    EXPECT_EQ(r.value.usage.sink.ca_file, "/etc/ca.pem");
    EXPECT_EQ(r.value.usage.sink.token_file, "/run/secrets/sink-token");
    EXPECT_TRUE(r.value.usage.sink.token_env.empty());
    auto env = load_yaml(
        "usage:\n  spool_dir: /s\n  sink:\n    url: http://127.0.0.1:9/e\n    token_env: TOK\n");
    ASSERT_TRUE(env.ok()) << to_string(env.errors.front());
    EXPECT_EQ(env.value.usage.sink.token_env, "TOK");
    auto typo = load_yaml("usage:\n  sink:\n    token_fil: /t\n");
    ASSERT_EQ(typo.errors.size(), 1u);
    EXPECT_EQ(to_string(typo.errors[0]),
              "usage.sink.token_fil: unknown key (did you mean \"token_file\"?)");
}

}  // namespace
}  // namespace tokenmeter::config
