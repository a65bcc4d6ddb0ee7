// The admin listener's /drain?wait= durations and who may start or end a drain (the endpoints
// themselves: drain_prestop.test.mjs, drain_control.test.mjs).
#include "admin/admin.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace tokenmeter::admin {
namespace {

using namespace std::chrono_literals;

TEST(DrainWait, UnitsAndBareSeconds) {
    EXPECT_EQ(parse_drain_wait("90s"), std::chrono::milliseconds(90s));
    EXPECT_EQ(parse_drain_wait("500ms"), std::chrono::milliseconds(500));
    EXPECT_EQ(parse_drain_wait("2m"), std::chrono::milliseconds(2min));
    EXPECT_EQ(parse_drain_wait("45"), std::chrono::milliseconds(45s));
    EXPECT_EQ(parse_drain_wait("0"), std::chrono::milliseconds(0));
}

TEST(DrainWait, AnythingElseIsRefused) {
    for (const char* bad : {"", "soon", "-1", "10h", "1.5s", "s", "30 s", "99999999999"}) {
        EXPECT_FALSE(parse_drain_wait(bad).has_value()) << bad;
    }
}

TEST(DrainRequest, ACallFromAWebPageIsRefusedWhateverItsToken) {
    EXPECT_EQ(judge_drain_request(true, "", ""), drain_verdict::cross_site);
    EXPECT_EQ(judge_drain_request(true, "Bearer t0ken", "t0ken"), drain_verdict::cross_site);
}

TEST(DrainRequest, WithoutATokenConfiguredAnyOtherCallerMay) {
    EXPECT_EQ(judge_drain_request(false, "", ""), drain_verdict::allowed);
    EXPECT_EQ(judge_drain_request(false, "Bearer whatever", ""), drain_verdict::allowed);
}

TEST(DrainRequest, WithATokenOnlyItsBearerMay) {
    EXPECT_EQ(judge_drain_request(false, "Bearer t0ken", "t0ken"), drain_verdict::allowed);
    EXPECT_EQ(judge_drain_request(false, "", "t0ken"), drain_verdict::unauthorized);
    EXPECT_EQ(judge_drain_request(false, "Bearer t0kem", "t0ken"), drain_verdict::unauthorized);
}

TEST(BearerToken, SchemeCaseInsensitiveTokenExact) {
    EXPECT_TRUE(bearer_token_matches("Bearer abc123", "abc123"));
    EXPECT_TRUE(bearer_token_matches("bearer abc123", "abc123"));
    EXPECT_TRUE(bearer_token_matches("BEARER abc123", "abc123"));
    for (const char* bad : {"", "Bearer", "Bearer ", "Bearer abc12", "Bearer abc1234",
                            "Bearer ABC123", "Basic abc123", "Bearerabc123", "Bearer  abc123",
                            "abc123"}) {
        EXPECT_FALSE(bearer_token_matches(bad, "abc123")) << bad;
    }
}

TEST(BearerToken, AnEmptyTokenMatchesNothing) {
    EXPECT_FALSE(bearer_token_matches("Bearer ", ""));
    EXPECT_FALSE(bearer_token_matches("", ""));
}

}  // namespace
}  // namespace tokenmeter::admin
