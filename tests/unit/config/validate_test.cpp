// validate(): the semantic rules, as command-line overrides reach them (settings built in code).
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

using std::chrono::milliseconds;

std::vector<std::string> keys_of(const std::vector<config_error>& errors) {
    std::vector<std::string> keys;
    for (const config_error& e : errors) {
        keys.push_back(e.key);
    }
    return keys;
}

using keys = std::vector<std::string>;

TEST(Validate, DefaultsAreValid) {
    EXPECT_TRUE(validate(default_settings()).empty());
}

TEST(Validate, PortZeroIsAllowedForListenAndAdminEvenBoth) {
    settings s;
    s.listen = {"127.0.0.1", 0};
    s.admin = {"127.0.0.1", 0};
    EXPECT_TRUE(validate(s).empty());
}

TEST(Validate, ListenAndAdminMustDiffer) {
    settings s;
    s.admin = s.listen;
    const auto errors = validate(s);
    ASSERT_EQ(keys_of(errors), keys{"admin"});
    EXPECT_EQ(errors[0].message,
              "must not use the same address and port as listen (127.0.0.1:8080)");
}

TEST(Validate, SamePortOnDifferentHostsIsFine) {
    settings s;
    s.listen = {"127.0.0.1", 8080};
    s.admin = {"127.0.0.2", 8080};
    EXPECT_TRUE(validate(s).empty());
}

// A wildcard bind takes the port on every address, so it collides with a specific one.
TEST(Validate, WildcardCollidesWithAnyHostOnTheSamePort) {
    settings s;
    s.listen = {"0.0.0.0", 8080};
    s.admin = {"127.0.0.1", 8080};
    EXPECT_EQ(keys_of(validate(s)), keys{"admin"});
    s.listen = {"10.0.0.1", 9090};
    s.admin = {"::", 9090};
    EXPECT_EQ(keys_of(validate(s)), keys{"admin"});
}

TEST(Validate, EmptyHosts) {
    settings s;
    s.listen.host = "";
    s.admin.host = "";
    s.upstream.host = "";
    EXPECT_EQ(keys_of(validate(s)), (keys{"listen", "admin", "upstream"}));
}

TEST(Validate, UpstreamMustBeHttpOrHttpsOnARealPort) {
    settings s;
    s.upstream.scheme = "https";
    EXPECT_TRUE(validate(s).empty());
    s.upstream.scheme = "ftp";
    auto errors = validate(s);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(to_string(errors[0]), "upstream: the scheme must be http:// or https://, got \"ftp\"");
    s = settings{};
    s.upstream.port = 0;
    EXPECT_EQ(keys_of(validate(s)), keys{"upstream"});
    s = settings{};
    s.upstream.base_path = "/v1/";
    EXPECT_EQ(keys_of(validate(s)), keys{"upstream"});
}

TEST(Validate, ThreadsAtMost256) {
    settings s;
    s.threads = 256;
    EXPECT_TRUE(validate(s).empty());
    s.threads = 257;
    EXPECT_EQ(keys_of(validate(s)), keys{"threads"});
}

TEST(Validate, EveryTimeoutMustBePositive) {
    settings s;
    s.timeouts = {milliseconds{0}, milliseconds{0}, milliseconds{0},
                  milliseconds{0}, milliseconds{0}, milliseconds{-1}};
    s.upstream_pool.idle_keepalive = milliseconds{0};
    s.upstream_pool.acquire_timeout = milliseconds{0};
    s.readiness.probe_interval = milliseconds{0};
    EXPECT_EQ(keys_of(validate(s)),
              (keys{"timeouts.request_header", "timeouts.client_idle", "timeouts.upstream_connect",
                    "timeouts.upstream_idle", "timeouts.client_write", "timeouts.drain",
                    "upstream_pool.idle_keepalive", "upstream_pool.acquire_timeout",
                    "readiness.probe_interval"}));
}

TEST(Validate, LimitsMustBePositive) {
    settings s;
    s.limits = {0, 0, 0, 0};
    EXPECT_EQ(keys_of(validate(s)),
              (keys{"limits.max_request_body_bytes", "limits.max_request_header_bytes",
                    "limits.max_sse_event_bytes", "limits.max_buffered_response_bytes"}));
}

TEST(Validate, PoolSizes) {
    settings s;
    // 0 (the default) is no cap, so any idle count is fine.
    s.upstream_pool.max_connections = 0;
    s.upstream_pool.max_idle_connections = 1000;
    EXPECT_TRUE(validate(s).empty());
    s.upstream_pool.max_connections = 8;
    s.upstream_pool.max_idle_connections = 8;
    EXPECT_TRUE(validate(s).empty());
    s.upstream_pool.max_idle_connections = 9;
    const auto errors = validate(s);
    ASSERT_EQ(keys_of(errors), keys{"upstream_pool.max_idle_connections"});
    EXPECT_EQ(errors[0].message, "must not exceed upstream_pool.max_connections (8), got 9");
}

TEST(Validate, Models) {
    settings s;
    s.metrics.models.max_models = 0;
    s.metrics.models.allowlist = {"a", "", "b", "a"};
    EXPECT_EQ(keys_of(validate(s)),
              (keys{"metrics.models.max_models", "metrics.models.allowlist[1]",
                    "metrics.models.allowlist[3]"}));
}

TEST(Validate, BucketRules) {
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    settings s;
    s.metrics.buckets.time_to_first_token = std::vector<double>{};  // set, but empty
    s.metrics.buckets.inter_token_latency = {0, 1};
    s.metrics.buckets.time_per_output_token = {-1, 1};
    s.metrics.buckets.output_tokens_per_second = {1, 1};
    s.metrics.buckets.decode_tokens_per_second = {1, inf};
    s.metrics.buckets.request_duration = {1, nan, 2, 1.5};
    EXPECT_EQ(keys_of(validate(s)), (keys{
                                        "metrics.buckets.time_to_first_token",
                                        "metrics.buckets.inter_token_latency[0]",
                                        "metrics.buckets.time_per_output_token[0]",
                                        "metrics.buckets.output_tokens_per_second[1]",
                                        "metrics.buckets.decode_tokens_per_second[1]",
                                        "metrics.buckets.request_duration[1]",
                                        "metrics.buckets.request_duration[3]",
                                    }));
}

TEST(Validate, LogSets) {
    settings s;
    for (const char* word : {"trace", "debug", "info", "warn", "error", "off"}) {
        const auto level = mode_from_word<log_level>(word);
        ASSERT_TRUE(level) << word;
        s.log.level = *level;
        EXPECT_TRUE(validate(s).empty()) << word;
    }
    // Words that name no level or format (from --log-level) are reported at their key.
    const auto errors = validate(s, {{"log.level", "warning"}, {"log.format", "logfmt"}});
    EXPECT_EQ(keys_of(errors), (keys{"log.level", "log.format"}));
    EXPECT_EQ(errors[0].message,
              "must be one of trace, debug, info, warn, error, off, got \"warning\"");
}

TEST(Validate, CollectsEveryError) {
    settings s;
    s.threads = 1000;
    s.timeouts.drain = milliseconds{0};
    s.upstream_pool.max_connections = 8;
    s.upstream_pool.max_idle_connections = 64;  // exceeds max_connections
    EXPECT_EQ(validate(s, {{"log.format", "xml"}}).size(), 4u);
}

}  // namespace
}  // namespace tokenmeter::config
