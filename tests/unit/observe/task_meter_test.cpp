// Task time through the metering observer: a task header bounded by the allowlist, the task
// time of a request (received → last token), its tokens, and sessions added up across requests
// and observed once idle, all with a manual clock and a real registry.
#include "observe/task_meter.hpp"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "metrics/registry.hpp"
#include "metrics/tasks.hpp"
#include "observe/metering_observer.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

std::string sse_chunk(const std::string& text) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"}}]}\n\n";
}

std::string usage_chunk(int prompt, int completion) {
    return "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(prompt) +
           ",\"completion_tokens\":" + std::to_string(completion) + "}}\n\n";
}

// The value of one series in the text exposition; -1 when it is not there.
double series(const std::string& text, const std::string& name_and_labels) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.starts_with(name_and_labels + " ")) {
            return std::stod(line.substr(name_and_labels.size() + 1));
        }
    }
    return -1;
}

struct fixture {
    explicit fixture(std::string session_header = "x-tokenmeter-session",
                     std::size_t max_sessions = 100) {
        task_options options;
        options.header = "x-tokenmeter-task";
        options.allowed = {"fix", "sql"};
        options.session_header = std::move(session_header);
        options.sessions.idle_expiry = 30s;
        options.sessions.max_sessions = max_sessions;
        tasks = std::make_unique<task_meter>(options, task_metrics, [this](std::string_view m) {
            ++label_lookups;
            return registry.model_label(m);
        });
        metering_parts parts;
        parts.registry = &registry;
        parts.tasks = tasks.get();
        observer = std::make_unique<metering_observer>(parts, metering_options{});
    }

    // One streamed chat request of `model`: head after 100 ms, `tokens` chunks 50 ms apart, then
    // a usage chunk 20 ms later and the end 10 ms after that. Returns when it ended.
    void request(std::map<std::string, std::string> headers, int tokens = 3,
                 std::string model = "llama", end_reason reason = end_reason::upstream_complete) {
        request_facts facts;
        facts.api = protocol::api_kind::openai_chat_completions;
        facts.info.model = std::move(model);
        facts.info.stream = true;
        facts.target = "/v1/chat/completions";
        facts.received = clock.now();
        facts.header = [headers = std::move(headers)](std::string_view name) -> std::string_view {
            const auto it = headers.find(std::string(name));
            return it == headers.end() ? std::string_view{} : std::string_view(it->second);
        };
        auto exchange = observer->begin(std::move(facts));
        clock.advance(100ms);
        exchange->request_sent(clock.now());  // the server has it
        exchange->response_head(200, "text/event-stream", true, clock.now());
        for (int i = 0; i < tokens; ++i) {
            if (i > 0) {
                clock.advance(50ms);
            }
            exchange->body(sse_chunk("tok"), clock.now());
        }
        clock.advance(20ms);
        exchange->body(usage_chunk(11, tokens), clock.now());
        clock.advance(10ms);
        exchange->end(reason, clock.now());
    }

    [[nodiscard]] std::string text() const { return registry.expose(); }

    core::manual_clock clock{core::time_point{} + 1000s};
    metrics::registry registry{metrics::registry_options{}};
    metrics::task_metrics task_metrics{*registry.prometheus_registry()};
    int label_lookups = 0;
    std::unique_ptr<task_meter> tasks;
    std::unique_ptr<metering_observer> observer;
};

TEST(TaskLabel, OnlyAllowedNamesBecomeLabels) {
    const std::unordered_set<std::string> allowed{"fix", "sql"};
    EXPECT_EQ(task_label("fix", allowed), "fix");
    EXPECT_EQ(task_label("  sql\t", allowed), "sql");
    EXPECT_EQ(task_label("Fix", allowed), "other");
    EXPECT_EQ(task_label("drop table", allowed), "other");
    EXPECT_EQ(task_label(std::string(100'000, 'f'), allowed), "other");
    EXPECT_EQ(task_label(std::string("fix\0", 4), allowed), "other");
    EXPECT_EQ(task_label("\xff\xfe", allowed), "other");
    EXPECT_FALSE(task_label("", allowed));
    EXPECT_FALSE(task_label("   ", allowed));
}

TEST(TaskMeter, ARequestWithATaskGetsItsTaskTimeAndTokens) {
    fixture f;
    f.request({{"x-tokenmeter-task", "fix"}}, 5);
    const std::string text = f.text();
    const std::string labels = "{model=\"llama\",task=\"fix\"}";
    EXPECT_EQ(series(text, "tokenmeter_task_duration_seconds_count" + labels), 1);
    // Received → last token: 100 ms to the head (and first token), 4 × 50 ms; not the 30 ms of
    // usage chunk and end after it.
    EXPECT_NEAR(series(text, "tokenmeter_task_duration_seconds_sum" + labels), 0.3, 1e-9);
    EXPECT_EQ(
        series(text, "tokenmeter_task_tokens_total{model=\"llama\",task=\"fix\",type=\"output\"}"),
        5);
    EXPECT_EQ(
        series(text, "tokenmeter_task_tokens_total{model=\"llama\",task=\"fix\",type=\"input\"}"),
        11);
    EXPECT_EQ(series(text,
                     "tokenmeter_task_requests_total{model=\"llama\",outcome=\"complete\","
                     "task=\"fix\"}"),
              1);
}

TEST(TaskMeter, UnlistedValuesAreOtherAndNoHeaderIsNoTask) {
    fixture f;
    f.request({{"x-tokenmeter-task", "rm -rf /"}});
    f.request({{"x-tokenmeter-task", std::string(70'000, 'A')}});
    f.request({{"x-tokenmeter-task", std::string("\x00\x01\xff", 3)}});
    f.request({});
    f.request({{"x-tokenmeter-task", ""}});
    const std::string text = f.text();
    EXPECT_EQ(
        series(text, "tokenmeter_task_duration_seconds_count{model=\"llama\",task=\"other\"}"), 3);
    EXPECT_EQ(text.find("rm -rf"), std::string::npos);
    EXPECT_EQ(text.find("AAAA"), std::string::npos);
    EXPECT_EQ(text.find("task=\"\""), std::string::npos);
    // Only requests with a task look their model label up (a lock in the registry).
    EXPECT_EQ(f.label_lookups, 3);
    // Every request is still metered as usual.
    EXPECT_EQ(series(text,
                     "tokenmeter_requests_total{api=\"openai_chat\",code=\"200\","
                     "model=\"llama\",outcome=\"complete\"}"),
              5);
}

TEST(TaskMeter, AnIncompleteRequestIsCountedButHasNoTaskTime) {
    fixture f;
    f.request({{"x-tokenmeter-task", "sql"}}, 2, "llama", end_reason::client_cancel);
    const std::string text = f.text();
    EXPECT_EQ(series(text,
                     "tokenmeter_task_requests_total{model=\"llama\",outcome=\"client_cancel\","
                     "task=\"sql\"}"),
              1);
    EXPECT_EQ(text.find("tokenmeter_task_duration_seconds"), std::string::npos);
}

TEST(TaskMeter, SessionsAddUpAndAreObservedOnceIdle) {
    fixture f;
    const std::map<std::string, std::string> headers{{"x-tokenmeter-task", "fix"},
                                                     {"x-tokenmeter-session", "agent-run-7"}};
    f.request(headers, 3);  // 0 → 0.2 s last token, ends 0.23 s
    f.clock.advance(1s);
    f.request(headers, 2);  // starts 1.23 s, last token 1.38 s
    f.clock.advance(1s);
    f.request(headers, 4, "qwen");  // another model: another session
    const std::string labels = "{model=\"llama\",task=\"fix\"}";
    EXPECT_EQ(series(f.text(), "tokenmeter_task_session_duration_seconds_count" + labels), -1);
    EXPECT_EQ(series(f.text(), "tokenmeter_task_sessions_active"), 2);
    // 30 s after the last request ended: the scrape's sweep ends both.
    f.clock.advance(30s);
    f.tasks->sweep(f.clock.now());
    const std::string text = f.text();
    EXPECT_EQ(series(text, "tokenmeter_task_session_duration_seconds_count" + labels), 1);
    EXPECT_NEAR(series(text, "tokenmeter_task_session_duration_seconds_sum" + labels), 1.38, 1e-9);
    EXPECT_EQ(series(text, "tokenmeter_task_session_requests_total" + labels), 2);
    EXPECT_EQ(series(text,
                     "tokenmeter_task_session_tokens_total{model=\"llama\",task=\"fix\","
                     "type=\"output\"}"),
              5);
    EXPECT_EQ(series(text,
                     "tokenmeter_task_session_tokens_total{model=\"llama\",task=\"fix\","
                     "type=\"input\"}"),
              22);
    EXPECT_EQ(series(text, "tokenmeter_task_session_requests_total{model=\"qwen\",task=\"fix\"}"),
              1);
    EXPECT_EQ(series(text, "tokenmeter_task_sessions_active"), 0);
    EXPECT_EQ(text.find("agent-run-7"), std::string::npos);
}

TEST(TaskMeter, BadSessionIdsAndEvictionsAreCounted) {
    fixture f("x-tokenmeter-session", 1);
    f.request({{"x-tokenmeter-task", "fix"}, {"x-tokenmeter-session", std::string(300, 's')}});
    f.request({{"x-tokenmeter-task", "fix"}, {"x-tokenmeter-session", "a b"}});
    f.request({{"x-tokenmeter-task", "fix"}, {"x-tokenmeter-session", "one"}});
    f.request({{"x-tokenmeter-task", "fix"}, {"x-tokenmeter-session", "two"}});
    // A session header without a task: no session at all.
    f.request({{"x-tokenmeter-session", "three"}});
    const std::string text = f.text();
    EXPECT_EQ(series(text, "tokenmeter_task_sessions_dropped_total{reason=\"invalid_id\"}"), 2);
    EXPECT_EQ(series(text, "tokenmeter_task_sessions_dropped_total{reason=\"evicted\"}"), 1);
    EXPECT_EQ(series(text, "tokenmeter_task_sessions_active"), 1);
    // Every one of them still has its own task time.
    EXPECT_EQ(series(text, "tokenmeter_task_duration_seconds_count{model=\"llama\",task=\"fix\"}"),
              4);
}

TEST(TaskMeter, WithoutASessionHeaderNothingIsTracked) {
    fixture f("");
    f.request({{"x-tokenmeter-task", "fix"}, {"x-tokenmeter-session", "one"}});
    f.clock.advance(1h);
    f.tasks->sweep(f.clock.now());
    const std::string text = f.text();
    EXPECT_EQ(text.find("tokenmeter_task_session"), std::string::npos);
    EXPECT_EQ(series(text, "tokenmeter_task_duration_seconds_count{model=\"llama\",task=\"fix\"}"),
              1);
}

}  // namespace
}  // namespace tokenmeter::observe
