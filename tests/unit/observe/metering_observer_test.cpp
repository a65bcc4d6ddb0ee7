// The metering observer without sockets: a manual clock, a fake record sink, a real registry.
#include "observe/metering_observer.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_sink.hpp"
#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "metrics/status_board.hpp"
#include "usage/record.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

std::string sse_chunk(const std::string& text) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"}}]}\n\n";
}

bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
}

struct fixture {
    explicit fixture(bool with_records, double tokens_per_second = 0, bool with_status = false) {
        usage::tenant_options tenant_settings;
        tenant_settings.source = usage::tenant_source::header;
        usage::throughput_options limits;
        metrics::billing_options billing_settings;
        billing_settings.tenants_on = true;
        if (tokens_per_second > 0) {
            limits.enforce = true;
            limits.rates["acme"] = tokens_per_second;
        }
        tenants = std::make_unique<usage::tenant_resolver>(tenant_settings, "");
        throughput = std::make_unique<usage::provisioned_throughput>(limits);
        billing = std::make_unique<metrics::billing_metrics>(registry, billing_settings);
        metering_parts parts{&registry, nullptr, tenants.get(), throughput.get(), &ids,
                             billing.get(), with_records ? &sink : nullptr,
                             [] { return std::int64_t{1'700'000'000'000}; }};
        if (with_status) {
            status = std::make_unique<metrics::status_board>(
                registry, billing.get(), clock, [] { return std::int64_t{1'700'000'000'000}; },
                metrics::status_options{});
            parts.status = status.get();
        }
        metering_options options;
        options.checkpoint_interval = 1s;
        observer = std::make_unique<metering_observer>(parts, options);
    }

    std::unique_ptr<exchange_observer> begin(protocol::api_kind api, std::string tenant) {
        request_facts facts;
        facts.api = api;
        facts.info.model = "llama";
        facts.info.stream = true;
        facts.target = "/v1/chat/completions?x=1";
        facts.received = clock.now();
        // The views point into the lambda's own copy, which lives as long as the facts.
        facts.header = [tenant = std::move(tenant)](std::string_view name) -> std::string_view {
            if (name == "x-tenant-id") {
                return tenant;
            }
            return {};
        };
        return observer->begin(std::move(facts));
    }

    core::manual_clock clock{core::time_point{} + 1000s};
    // The finer inter-token latency batch, as app/ sets it with the status page on.
    metrics::registry registry{[] {
        metrics::registry_options o;
        o.fine_inter_token_latency = true;
        return o;
    }()};
    std::unique_ptr<usage::tenant_resolver> tenants;
    std::unique_ptr<usage::provisioned_throughput> throughput;
    std::unique_ptr<metrics::billing_metrics> billing;
    usage::id_generator ids{1, 1};
    fake_sink sink;
    std::unique_ptr<metrics::status_board> status;
    std::unique_ptr<metering_observer> observer;
};

TEST(MeteringObserver, WritesOpenCheckpointAndCloseAndHoldsUntilDurable) {
    fixture f(true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    ASSERT_TRUE(exchange->admitted().admitted);
    ASSERT_EQ(f.sink.lines.size(), 1u);
    EXPECT_TRUE(contains(f.sink.lines[0], "\"tenant\":\"acme\""));
    EXPECT_TRUE(contains(f.sink.lines[0], "\"route\":\"/v1/chat/completions\""));

    f.clock.advance(50ms);
    auto head_wait = exchange->response_head(200, "text/event-stream", true, f.clock.now());
    EXPECT_TRUE(head_wait.pending());
    bool released = false;
    head_wait.then([&] { released = true; });
    EXPECT_FALSE(released);
    f.sink.make_durable();
    EXPECT_TRUE(released);
    EXPECT_FALSE(head_wait.pending());

    f.clock.advance(10ms);
    exchange->body(sse_chunk("Hello"), f.clock.now());
    EXPECT_EQ(f.sink.lines.size(), 1u) << "no checkpoint before checkpoint_interval";
    f.clock.advance(1200ms);
    exchange->body(sse_chunk(" world"), f.clock.now());
    ASSERT_EQ(f.sink.lines.size(), 2u);
    EXPECT_TRUE(contains(f.sink.lines[1], "checkpoint"));

    EXPECT_TRUE(exchange->holds_end());
    auto close_wait = exchange->seal(f.clock.now());
    EXPECT_TRUE(close_wait.pending());
    EXPECT_EQ(f.sink.closes, 1u);
    EXPECT_FALSE(exchange->holds_end()) << "sealed: the end is no longer held";
    f.clock.advance(5ms);
    exchange->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_EQ(f.sink.closes, 1u) << "the sealed record stands; no second close";
    const std::string text = f.registry.expose();
    EXPECT_TRUE(contains(text, "tokenmeter_streams_active 0")) << text;
    EXPECT_TRUE(contains(text, "model=\"llama\""));
}

TEST(MeteringObserver, NoSinkMeansNothingToWaitFor) {
    fixture f(false);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    auto wait = exchange->response_head(200, "text/event-stream", true, f.clock.now());
    EXPECT_FALSE(wait.pending());
    EXPECT_FALSE(exchange->holds_end());
    exchange->body(sse_chunk("Hi"), f.clock.now());
    exchange->end(end_reason::client_cancel, f.clock.now() + 1ms);
    EXPECT_TRUE(f.sink.lines.empty());
}

TEST(MeteringObserver, UnmeteredApiWritesNoRecord) {
    fixture f(true);
    auto exchange = f.begin(protocol::api_kind::none, "acme");
    EXPECT_TRUE(exchange->admitted().admitted);
    EXPECT_TRUE(f.sink.lines.empty());
    EXPECT_FALSE(exchange->response_head(200, "text/plain", true, f.clock.now()).pending());
    exchange->body("anything", f.clock.now());
    exchange->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.sink.lines.empty());
}

TEST(MeteringObserver, TenantInDebtIsRefusedWithRetryAfter) {
    fixture f(false, 10);  // 10 tokens/s, burst 1 s
    auto first = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    ASSERT_TRUE(first->admitted().admitted);
    (void)first->response_head(200, "application/json", true, f.clock.now());
    first->body(R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":40,"completion_tokens":10}})",
                f.clock.now());
    first->end(end_reason::upstream_complete, f.clock.now());

    auto second = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    const auto& admitted = second->admitted();
    EXPECT_FALSE(admitted.admitted);
    EXPECT_EQ(admitted.retry_after, "4");  // 50 tokens charged, 10 in the bucket, 10/s
    EXPECT_TRUE(contains(admitted.message, "tenant acme"));
    (void)second->response_head(429, "application/json", false, f.clock.now());
    second->end(end_reason::rejected, f.clock.now());

    auto other = f.begin(protocol::api_kind::openai_chat_completions, "other-tenant");
    EXPECT_TRUE(other->admitted().admitted) << "one tenant's debt is not another's";
    other->end(end_reason::client_cancel, f.clock.now());
}

// The status page hears of each request once, at its end, and of each 429 and upstream error.
TEST(MeteringObserver, FeedsTheStatusBoardAtEachEnd) {
    fixture f(false, 10, true);
    auto first = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    (void)first->response_head(200, "text/event-stream", true, f.clock.now());
    f.clock.advance(50ms);
    first->body(sse_chunk("a"), f.clock.now());
    f.clock.advance(10ms);
    first->body(sse_chunk("b"), f.clock.now());
    EXPECT_TRUE(f.status->snapshot()["models"].empty()) << "nothing before the end";
    EXPECT_EQ(f.status->snapshot()["streams_active"], 1);
    first->body(R"(data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2}})"
                "\n\ndata: [DONE]\n\n",
                f.clock.now());
    first->end(end_reason::upstream_complete, f.clock.now());
    auto second = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    ASSERT_FALSE(second->admitted().admitted);
    (void)second->response_head(429, "application/json", false, f.clock.now());
    second->end(end_reason::rejected, f.clock.now());
    f.observer->upstream_error("connect_refused");

    const nlohmann::json doc = f.status->snapshot();
    EXPECT_EQ(doc["streams_active"], 0);
    ASSERT_EQ(doc["models"].size(), 1u);
    const auto& w = doc["models"][0]["latency"]["1m"];
    EXPECT_EQ(w["requests"], 2);
    EXPECT_EQ(w["ttft"]["count"], 1);
    EXPECT_NEAR(w["ttft"]["p50"].get<double>(), 0.05, 0.05 * 0.0217);
    EXPECT_EQ(w["itl"]["count"], 1);
    EXPECT_NEAR(w["itl"]["p50"].get<double>(), 0.01, 0.01 * 0.0217);
    EXPECT_EQ(doc["models"][0]["throughput"]["1m"]["output_tokens"]["reported"], 2);
    EXPECT_EQ(doc["tenants"]["by_tokens"][0]["tenant"], "acme");
    EXPECT_EQ(doc["tenants"]["by_tokens"][0]["tokens"], 42);
    EXPECT_EQ(doc["tenants"]["by_rate_limited"][0]["rate_limited"], 1);
    EXPECT_EQ(doc["upstream_errors"]["recent"][0]["reason"], "connect_refused");
}

TEST(MeteringObserver, UnforwardedAndUpstreamErrorsReachTheRegistry) {
    fixture f(false);
    f.observer->unforwarded(protocol::api_kind::none, "", outcome::rejected, 400, 0.001);
    f.observer->upstream_error("connect_refused");
    const std::string text = f.registry.expose();
    EXPECT_TRUE(contains(text, "reason=\"connect_refused\"")) << text;
    EXPECT_TRUE(contains(text, "outcome=\"rejected\""));
}

}  // namespace
}  // namespace tokenmeter::observe
