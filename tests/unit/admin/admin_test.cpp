// The admin listener's /drain?wait= durations (the endpoint itself: drain_prestop.test.mjs).
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

}  // namespace
}  // namespace tokenmeter::admin
