// tasks: the task header, its allowlist and sessions, with errors that name the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

std::vector<std::string> error_keys(const load_result& r) {
    std::vector<std::string> keys;
    for (const auto& e : r.errors) {
        keys.push_back(e.key);
    }
    return keys;
}

std::string message_at(const load_result& r, const std::string& key) {
    for (const auto& e : r.errors) {
        if (e.key == key) {
            return e.message;
        }
    }
    return {};
}

TEST(TasksConfig, DefaultsAreOff) {
    const settings s = default_settings();
    EXPECT_EQ(s.tasks.header, "x-tokenmeter-task");
    EXPECT_TRUE(s.tasks.allowed.empty());
    EXPECT_EQ(s.tasks.session_header, "x-tokenmeter-session");
    EXPECT_EQ(s.tasks.session_idle_expiry, std::chrono::minutes(5));
    EXPECT_EQ(s.tasks.max_sessions, 10'000u);
}

TEST(TasksConfig, Loads) {
    auto r = load_yaml(R"(
tasks:
  header: X-Agent-Task
  allowed: [summarize-ticket, fix_failing.test, "team/sql:v2"]
  session_header: x-conversation
  session_idle_expiry: 90s
  max_sessions: 500
)");
    ASSERT_TRUE(r.errors.empty()) << r.errors.front().key << ": " << r.errors.front().message;
    EXPECT_EQ(r.value.tasks.header, "x-agent-task");  // header names compare lower-case
    EXPECT_EQ(r.value.tasks.allowed,
              (std::vector<std::string>{"summarize-ticket", "fix_failing.test", "team/sql:v2"}));
    EXPECT_EQ(r.value.tasks.session_header, "x-conversation");
    EXPECT_EQ(r.value.tasks.session_idle_expiry, std::chrono::seconds(90));
    EXPECT_EQ(r.value.tasks.max_sessions, 500u);
}

TEST(TasksConfig, AnEmptySessionHeaderTurnsSessionsOff) {
    auto r = load_yaml("tasks:\n  allowed: [a]\n  session_header: \"\"\n");
    ASSERT_TRUE(r.errors.empty()) << r.errors.front().key << ": " << r.errors.front().message;
    EXPECT_EQ(r.value.tasks.session_header, "");
}

TEST(TasksConfig, ErrorsNameTheKey) {
    auto r = load_yaml(R"(
tasks:
  header: "bad header"
  allowed: [ok, "", other, ok, "has space", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]
  session_idle_expiry: 0s
  max_sessions: 0
  expiry: 5m
)");
    const auto keys = error_keys(r);
    const std::vector<std::string> want{
        "tasks.header",     "tasks.allowed[1]", "tasks.allowed[2]",          "tasks.allowed[3]",
        "tasks.allowed[4]", "tasks.allowed[5]", "tasks.session_idle_expiry", "tasks.max_sessions",
        "tasks.expiry"};
    for (const auto& k : want) {
        EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << "no error at " << k;
    }
    EXPECT_NE(message_at(r, "tasks.allowed[2]").find("other"), std::string::npos);
    EXPECT_NE(message_at(r, "tasks.allowed[3]").find("duplicate"), std::string::npos);
    EXPECT_NE(message_at(r, "tasks.header").find("header name"), std::string::npos);
}

TEST(TasksConfig, TheTwoHeadersMustDiffer) {
    auto r = load_yaml("tasks:\n  header: x-t\n  session_header: X-T\n");
    EXPECT_EQ(error_keys(r), std::vector<std::string>{"tasks.session_header"});
}

TEST(TasksConfig, AtMost64TasksAndAnExpiryOfADay) {
    std::string yaml = "tasks:\n  session_idle_expiry: 25h\n  allowed:\n";
    for (int i = 0; i < 65; ++i) {
        yaml += "    - t" + std::to_string(i) + "\n";
    }
    auto r = load_yaml(yaml);
    const auto keys = error_keys(r);
    EXPECT_NE(std::find(keys.begin(), keys.end(), "tasks.allowed"), keys.end());
    EXPECT_NE(std::find(keys.begin(), keys.end(), "tasks.session_idle_expiry"), keys.end());
}

}  // namespace
}  // namespace tokenmeter::config
