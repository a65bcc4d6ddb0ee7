// observe/task_sessions: requests of one session add up; a session ends after the idle expiry
// (manual time), never while a request runs; the table is bounded; ids are checked and hashed.
#include "observe/task_sessions.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

const core::time_point t0 = core::time_point{} + 1000s;

session_key key(const task_sessions& s, std::string_view id, std::string_view task = "fix",
                std::string_view model = "llama") {
    auto k = s.key_for(id, task, model);
    EXPECT_TRUE(k) << id;
    return k.value_or(session_key{});
}

// One request of `key` from `start` to `done` (its last token), ended at `done` + 1 ms.
session_events run(task_sessions& s, const session_key& k, core::duration start,
                   core::duration done, std::uint64_t in, std::uint64_t out) {
    s.begin(k, t0 + start);
    return s.end(k, session_request{t0 + start, t0 + done, in, out}, t0 + done + 1ms);
}

TEST(TaskSessions, RequestsOfOneSessionAddUpAndEndAfterTheIdleExpiry) {
    task_sessions s({30s, 100});
    const session_key a = key(s, "conv-1");
    EXPECT_TRUE(run(s, a, 0s, 2s, 100, 40).ended.empty());
    EXPECT_TRUE(run(s, a, 5s, 9s, 150, 60).ended.empty());
    EXPECT_TRUE(run(s, a, 20s, 21500ms, 200, 10).ended.empty());
    EXPECT_EQ(s.size(), 1u);
    // Idle from 21.501 s: still held 1 ms before the expiry, ended at it.
    EXPECT_TRUE(s.sweep(t0 + 51500ms).ended.empty());
    const session_events events = s.sweep(t0 + 51501ms);
    ASSERT_EQ(events.ended.size(), 1u);
    const finished_session& f = events.ended[0];
    EXPECT_EQ(f.task, "fix");
    EXPECT_EQ(f.model, "llama");
    EXPECT_DOUBLE_EQ(f.duration_seconds, 21.5);  // first start to the last token of the last
    EXPECT_EQ(f.requests, 3u);
    EXPECT_EQ(f.input_tokens, 450u);
    EXPECT_EQ(f.output_tokens, 110u);
    EXPECT_EQ(events.active, 0u);
    EXPECT_EQ(s.size(), 0u);
    // Swept once: nothing more.
    EXPECT_TRUE(s.sweep(t0 + 100s).ended.empty());
}

TEST(TaskSessions, TheSameIdInAnotherTaskOrModelIsAnotherSession) {
    task_sessions s({10s, 100});
    run(s, key(s, "c", "fix", "llama"), 0s, 1s, 1, 1);
    run(s, key(s, "c", "fix", "qwen"), 0s, 3s, 1, 1);
    run(s, key(s, "c", "sql", "llama"), 0s, 5s, 1, 1);
    run(s, key(s, "d", "fix", "llama"), 0s, 7s, 1, 1);
    EXPECT_EQ(s.size(), 4u);
    const auto events = s.sweep(t0 + 1h);
    ASSERT_EQ(events.ended.size(), 4u);
    for (const auto& f : events.ended) {
        EXPECT_EQ(f.requests, 1u);
    }
}

TEST(TaskSessions, ARequestInFlightKeepsItsSessionAlive) {
    task_sessions s({10s, 100});
    const session_key a = key(s, "long");
    run(s, a, 0s, 1s, 1, 1);
    // The second request runs for a minute: far past the expiry, the session is held.
    s.begin(a, t0 + 5s);
    EXPECT_TRUE(s.sweep(t0 + 40s).ended.empty());
    EXPECT_EQ(s.size(), 1u);
    s.end(a, session_request{t0 + 5s, t0 + 65s, 10, 20}, t0 + 65s);
    EXPECT_TRUE(s.sweep(t0 + 74s).ended.empty());
    const auto events = s.sweep(t0 + 75s);
    ASSERT_EQ(events.ended.size(), 1u);
    EXPECT_DOUBLE_EQ(events.ended[0].duration_seconds, 65.0);
    EXPECT_EQ(events.ended[0].requests, 2u);
    EXPECT_EQ(events.ended[0].output_tokens, 21u);
}

TEST(TaskSessions, ARequestEndSweepsOtherSessions) {
    task_sessions s({10s, 100});
    run(s, key(s, "old"), 0s, 1s, 1, 2);
    // Another session's request ends after "old" expired: that end reports it.
    const auto events = run(s, key(s, "new"), 20s, 21s, 1, 1);
    ASSERT_EQ(events.ended.size(), 1u);
    EXPECT_EQ(events.ended[0].output_tokens, 2u);
    EXPECT_EQ(events.active, 1u);
}

TEST(TaskSessions, ARefusedRequestAddsNothingAndAloneEndsUnobserved) {
    task_sessions s({10s, 100});
    const session_key a = key(s, "refused");
    s.begin(a, t0);
    s.end(a, std::nullopt, t0 + 1ms);
    EXPECT_EQ(s.size(), 1u);
    const auto events = s.sweep(t0 + 1h);
    EXPECT_TRUE(events.ended.empty());
    EXPECT_EQ(s.size(), 0u);
}

TEST(TaskSessions, WhenFullTheLeastRecentlyActiveIsEvictedUnobserved) {
    task_sessions s({1h, 3});
    run(s, key(s, "a"), 0s, 1s, 1, 1);
    run(s, key(s, "b"), 2s, 3s, 1, 1);
    run(s, key(s, "c"), 4s, 5s, 1, 1);
    run(s, key(s, "a"), 6s, 7s, 1, 1);  // "a" is now the most recent; "b" the least
    s.begin(key(s, "d"), t0 + 8s);
    const auto events = s.end(key(s, "d"), session_request{t0 + 8s, t0 + 9s, 1, 1}, t0 + 9s);
    EXPECT_TRUE(events.ended.empty());
    EXPECT_EQ(events.active, 3u);
    EXPECT_EQ(s.size(), 3u);
    const auto evicted = s.begin(key(s, "e"), t0 + 10s);
    EXPECT_EQ(evicted.evicted, 1u);  // "c"
    const auto ended = s.sweep(t0 + 10h);
    std::uint64_t requests = 0;
    for (const auto& f : ended.ended) {
        requests += f.requests;
    }
    EXPECT_EQ(ended.ended.size(), 2u);  // "a" (2 requests) and "d"; "e" has none ended
    EXPECT_EQ(requests, 3u);
}

TEST(TaskSessions, ASessionEvictedMidRequestStartsAgainFromThatRequest) {
    task_sessions s({1h, 1});
    const session_key a = key(s, "a");
    s.begin(a, t0);
    EXPECT_EQ(s.begin(key(s, "b"), t0 + 1s).evicted, 1u);
    // "a" ends after its eviction: a session of its own, evicting "b" in turn.
    const auto events = s.end(a, session_request{t0, t0 + 2s, 3, 4}, t0 + 2s);
    EXPECT_EQ(events.evicted, 1u);
    const auto ended = s.sweep(t0 + 2h);
    ASSERT_EQ(ended.ended.size(), 1u);
    EXPECT_EQ(ended.ended[0].requests, 1u);
    EXPECT_DOUBLE_EQ(ended.ended[0].duration_seconds, 2.0);
}

TEST(TaskSessions, IdsAreCheckedAndKeptOnlyAsAHash) {
    task_sessions s({1h, 10});
    EXPECT_FALSE(s.key_for("", "fix", "m"));
    EXPECT_FALSE(s.key_for(std::string(257, 'x'), "fix", "m"));
    EXPECT_TRUE(s.key_for(std::string(256, 'x'), "fix", "m"));
    EXPECT_FALSE(s.key_for("has space", "fix", "m"));
    EXPECT_FALSE(s.key_for(std::string("nul\0byte", 8), "fix", "m"));
    EXPECT_FALSE(s.key_for("caf\xc3\xa9", "fix", "m"));
    EXPECT_FALSE(s.key_for("tab\there", "fix", "m"));
    const auto a = s.key_for("secret-conversation-id", "fix", "m");
    const auto b = s.key_for("secret-conversation-id", "fix", "m");
    const auto c = s.key_for("secret-conversation-iD", "fix", "m");
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(*a, *b);
    EXPECT_NE(a->id_digest, c->id_digest);
    // Another process (another hash key) gives the same id another digest.
    task_sessions other({1h, 10});
    EXPECT_NE(other.key_for("secret-conversation-id", "fix", "m")->id_digest, a->id_digest);
}

TEST(TaskSessions, RequestsEndingOnManyThreadsAllCount) {
    task_sessions s({1h, 1000});
    constexpr int threads = 4;
    constexpr int per_thread = 500;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&s, t] {
            for (int i = 0; i < per_thread; ++i) {
                // Eight sessions shared by every thread.
                const auto k = s.key_for("s" + std::to_string((i + t) % 8), "fix", "m");
                s.begin(*k, t0);
                s.end(*k, session_request{t0, t0 + 1s, 1, 2}, t0 + 1s);
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    const auto ended = s.sweep(t0 + 2h);
    std::uint64_t requests = 0;
    std::uint64_t output = 0;
    for (const auto& f : ended.ended) {
        requests += f.requests;
        output += f.output_tokens;
    }
    EXPECT_EQ(ended.ended.size(), 8u);
    EXPECT_EQ(requests, std::uint64_t{threads * per_thread});
    EXPECT_EQ(output, std::uint64_t{2 * threads * per_thread});
}

}  // namespace
}  // namespace tokenmeter::observe
