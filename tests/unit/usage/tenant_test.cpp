#include "usage/tenant.hpp"

#include <gtest/gtest.h>

#include "usage/throughput.hpp"

namespace tokenmeter::usage {
namespace {

tenant_options settings(tenant_source source) {
    tenant_options t;
    t.source = source;
    return t;
}

TEST(Tenant, NoSourceIsAnonymous) {
    tenant_resolver r(settings(tenant_source::none), "");
    EXPECT_EQ(r.resolve({"team-a", "Bearer sk-1", ""}), "anonymous");
}

TEST(Tenant, HeaderFromTrustedLayer) {
    tenant_resolver r(settings(tenant_source::header), "");
    EXPECT_EQ(r.resolve({"team-a", "", ""}), "team-a");
    EXPECT_EQ(r.resolve({"  team-b \r", "", ""}), "team-b");
    EXPECT_EQ(r.resolve({"", "Bearer sk", ""}), "anonymous");
    EXPECT_EQ(r.resolve({std::string(200, 'x'), "", ""}), "invalid");
    EXPECT_EQ(r.resolve({"a\x01b", "", ""}), "invalid");
}

TEST(Tenant, ApiKeyIsAKeyedHashNeverTheKey) {
    tenant_resolver r(settings(tenant_source::api_key), "secret");
    // HMAC-SHA256("secret", "sk-test-123"), first 16 bytes (Python's hmac module agrees).
    const std::string expected = "key:fb730cd51be67ad76da3ba7ba0306aa0";
    EXPECT_EQ(r.key_tenant("sk-test-123"), expected);
    EXPECT_EQ(r.resolve({"", "Bearer sk-test-123", ""}), expected);
    EXPECT_EQ(r.resolve({"", "bearer   sk-test-123 ", ""}), expected);
    EXPECT_EQ(r.resolve({"", "", "sk-test-123"}), expected);
    // A tenant header from the client cannot pick someone else's tenant.
    EXPECT_EQ(r.resolve({"victim", "Bearer sk-test-123", ""}), expected);
    EXPECT_EQ(r.resolve({"victim", "", ""}), "anonymous");
    EXPECT_EQ(r.resolve({"", "Basic abc", ""}), "anonymous");
    // Another secret, another tenant id: the hash cannot be precomputed without the secret.
    tenant_resolver other(settings(tenant_source::api_key), "other");
    EXPECT_NE(other.key_tenant("sk-test-123"), expected);
}

TEST(Authorization, CredentialsAreReadAsRfc9110SaysThenBearerTakesItsToken68) {
    auto token = [](std::string_view value) {
        const authorization_credentials c = parse_authorization(value);
        return c.valid ? std::string(c.scheme) + "|" + std::string(c.token68)
                       : std::string("invalid");
    };
    EXPECT_EQ(token("Bearer sk-1"), "Bearer|sk-1");
    EXPECT_EQ(token("bearer    sk-1"), "bearer|sk-1") << "one or more spaces";
    EXPECT_EQ(token("  Bearer sk-1\t"), "Bearer|sk-1") << "OWS around the value is not in it";
    EXPECT_EQ(token("Bearer abc+/_~.-=="), "Bearer|abc+/_~.-==");
    EXPECT_EQ(token("Bearer"), "Bearer|") << "a scheme alone";
    EXPECT_EQ(token("Digest realm=\"a b\", nonce=x"), "Digest|") << "auth-params";
    EXPECT_EQ(token("Bearer\tsk-1"), "invalid") << "a tab is not a separator";
    EXPECT_EQ(token("Bearer sk-1 sk-2"), "invalid");
    EXPECT_EQ(token("Bearer sk-1\tx"), "invalid");
    EXPECT_EQ(token("Bearer a=b=c"), "invalid");
    EXPECT_EQ(token("Bearer =abc"), "invalid");
    EXPECT_EQ(token(""), "invalid");
    EXPECT_EQ(token("Bearer:sk"), "invalid");
    EXPECT_EQ(token("Digest realm=\"open"), "invalid");

    EXPECT_EQ(bearer_token("Bearer sk-1"), "sk-1");
    EXPECT_EQ(bearer_token("BEARER  sk-1"), "sk-1");
    EXPECT_EQ(bearer_token("Basic dXNlcjpw"), "");
    EXPECT_EQ(bearer_token("Bearer\tsk-1"), "");
    EXPECT_EQ(bearer_token("Bearers sk-1"), "");
}

TEST(Tenant, ApiKeyFromAnAuthorizationThatIsNotCredentialsIsNotTaken) {
    tenant_resolver r(settings(tenant_source::api_key), "secret");
    const std::string key = r.key_tenant("sk-test-123");
    EXPECT_EQ(r.resolve({"", "Bearer\tsk-test-123", ""}), "anonymous");
    EXPECT_EQ(r.resolve({"", "Bearer\tjunk", "sk-test-123"}), key)
        << "the edge refuses this pair before it is billed; the resolver reads the key";
}

TEST(Tenant, MappingTableNamesHashedKeys) {
    auto s = settings(tenant_source::api_key);
    s.api_key_names["key:fb730cd51be67ad76da3ba7ba0306aa0"] = "team-x";
    tenant_resolver r(s, "secret");
    EXPECT_EQ(r.resolve({"", "Bearer sk-test-123", ""}), "team-x");
    EXPECT_EQ(r.resolve({"", "Bearer sk-other", ""}).substr(0, 4), "key:");
}

TEST(Tenant, SecretFromEnvironment) {
    auto s = settings(tenant_source::api_key);
    s.api_key_secret_env = "TOKENMETER_UNIT_TEST_SECRET";
    ::unsetenv("TOKENMETER_UNIT_TEST_SECRET");
    std::string error;
    EXPECT_EQ(load_tenant_secret(s, error), "");
    EXPECT_NE(error.find("TOKENMETER_UNIT_TEST_SECRET"), std::string::npos);
    ::setenv("TOKENMETER_UNIT_TEST_SECRET", "s3cr3t", 1);
    error.clear();
    EXPECT_EQ(load_tenant_secret(s, error), "s3cr3t");
    EXPECT_EQ(error, "");
}

core::time_point at(double seconds) {
    return core::time_point{std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9))};
}

TEST(ProvisionedThroughput, DebtBlocksNewRequestsUntilRefilled) {
    throughput_options s;
    s.enforce = true;
    s.burst = std::chrono::milliseconds(2000);
    s.rates["slow"] = 100;
    provisioned_throughput p(s);
    EXPECT_TRUE(p.admit("slow", 0, at(0)).admitted);
    EXPECT_DOUBLE_EQ(p.level("slow", at(0)), 200);  // full bucket: rate x burst
    p.charge("slow", 500, at(1));                   // refilled to the cap, then -300
    EXPECT_DOUBLE_EQ(p.level("slow", at(1)), -300);
    auto refused = p.admit("slow", 0, at(1));
    EXPECT_FALSE(refused.admitted);
    EXPECT_DOUBLE_EQ(refused.retry_after_seconds, 3.0);
    EXPECT_FALSE(p.admit("slow", 0, at(3.9)).admitted);
    EXPECT_TRUE(p.admit("slow", 0, at(4.0)).admitted);
    EXPECT_DOUBLE_EQ(p.level("slow", at(100)), 200);  // never above the burst
    // Tenants without a provisioned rate are never limited.
    p.charge("free", 1'000'000, at(1));
    EXPECT_TRUE(p.admit("free", 0, at(1)).admitted);
}

// An admitted request reserves at once: 50 concurrent requests of 105 tokens each (5 of prompt,
// 100 of output limit) under a 10-token bucket, none ended yet: the first is admitted, and the
// bucket is overrun by at most its reservation; the rest wait for settlements.
TEST(ProvisionedThroughput, AReservationAtAdmissionBoundsABurst) {
    throughput_options s;
    s.enforce = true;
    s.burst = std::chrono::milliseconds(1000);
    s.rates["acme"] = 10;
    provisioned_throughput p(s);
    int admitted = 0;
    for (int i = 0; i < 50; ++i) {
        const admission a = p.admit("acme", 105, at(0));
        if (a.admitted) {
            EXPECT_EQ(a.reserved, 105u);
            ++admitted;
        } else {
            EXPECT_EQ(a.reserved, 0u) << "a refusal reserves nothing";
        }
    }
    EXPECT_EQ(admitted, 1);
    EXPECT_DOUBLE_EQ(p.level("acme", at(0)), 10 - 105);
    // It used 25 tokens in the end: the other 80 come back, and the bucket is at 10 - 25.
    p.adjust("acme", 25.0 - 105.0, at(0));
    EXPECT_DOUBLE_EQ(p.level("acme", at(0)), -15);
    const admission refused = p.admit("acme", 105, at(0));
    EXPECT_FALSE(refused.admitted);
    EXPECT_DOUBLE_EQ(refused.retry_after_seconds, 1.5);
    EXPECT_TRUE(p.admit("acme", 105, at(1.5)).admitted);
    EXPECT_TRUE(p.limits("acme"));
    EXPECT_FALSE(p.limits("free"));
}

TEST(ProvisionedThroughput, WithoutEnforcementEveryoneIsAdmitted) {
    throughput_options s;
    s.rates["slow"] = 1;
    provisioned_throughput p(s);
    p.charge("slow", 1000, at(0));
    EXPECT_TRUE(p.admit("slow", 0, at(0)).admitted);
    EXPECT_EQ(p.rates().at("slow"), 1);
}

}  // namespace
}  // namespace tokenmeter::usage
