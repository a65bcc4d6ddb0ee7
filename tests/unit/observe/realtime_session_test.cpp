// observe/realtime_session: a Realtime session's events, message by message, through the guarded
// metering observer the proxy runs (a manual clock, a fake record sink, a real registry): one
// usage record per response, as an HTTP request's.
#include "observe/realtime_session.hpp"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

#include "fake_sink.hpp"
#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "observe/guarded_observer.hpp"
#include "observe/metering_observer.hpp"
#include "tokenizer/catalog.hpp"
#include "usage/record.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

struct session_fixture {
    // tokens_per_second: tenant "acme" has a provisioned rate, enforced.
    explicit session_fixture(double tokens_per_second = 0) {
        usage::tenant_options tenant_settings;
        tenant_settings.source = usage::tenant_source::header;
        tenants = std::make_unique<usage::tenant_resolver>(tenant_settings, "");
        tokenizer::catalog_options catalog;
        catalog.reference = "o200k_base";
        catalog.search_dirs = {"/nonexistent/tokenmeter-realtime-test"};
        tokenizers = tokenizer::catalog::load(catalog).value;
        usage::throughput_options limits;
        if (tokens_per_second > 0) {
            limits.enforce = true;
            limits.rates["acme"] = tokens_per_second;
        }
        throughput = std::make_unique<usage::provisioned_throughput>(limits);
        metrics::billing_options billing_settings;
        billing_settings.tenants_on = true;
        billing = std::make_unique<metrics::billing_metrics>(registry, billing_settings);
        metering_parts parts{&registry,     tokenizers.get(),
                             tenants.get(), throughput.get(),
                             &ids,          billing.get(),
                             &sink,         [] { return std::int64_t{1'700'000'000'000}; }};
        inner = std::make_unique<metering_observer>(parts, metering_options{});
        guarded = std::make_unique<guarded_observer>(
            *inner, [this](metering_phase phase) { failures.push_back(phase); });
    }

    std::unique_ptr<tunnel_observer> open(
        const std::string& target = "/v1/realtime?model=gpt-realtime", bool with_request_id = true,
        protocol::api_kind api = protocol::api_kind::openai_realtime) const {
        tunnel_facts facts;
        facts.api = api;
        facts.target = target;
        facts.client = "127.0.0.1";
        facts.headers = {{"x-tenant-id", "acme"}, {"authorization", "Bearer sk-test"}};
        if (with_request_id) {
            facts.headers.emplace_back("x-request-id", "req-42");
        }
        return guarded->begin_tunnel(facts);
    }

    void server(tunnel_observer& t, const std::string& text) const {
        t.message(false, text, clock.now());
    }
    void client(tunnel_observer& t, const std::string& text) const {
        t.message(true, text, clock.now());
    }

    [[nodiscard]] std::vector<usage::usage_record> closes() const { return observe::closes(sink); }

    [[nodiscard]] double counter(
        const std::string& name,
        const std::vector<std::pair<std::string, std::string>>& labels) const {
        double sum = 0;
        for (const auto& family : registry.collect()) {
            if (family.name != name) {
                continue;
            }
            for (const auto& metric : family.metric) {
                bool match = true;
                for (const auto& [key, value] : labels) {
                    bool found = false;
                    for (const auto& l : metric.label) {
                        found = found || (l.name == key && l.value == value);
                    }
                    match = match && found;
                }
                if (match) {
                    sum += metric.counter.value;
                }
            }
        }
        return sum;
    }

    core::manual_clock clock{core::time_point{} + 1000s};
    metrics::registry registry{metrics::registry_options{}};
    std::unique_ptr<usage::tenant_resolver> tenants;
    std::unique_ptr<usage::provisioned_throughput> throughput;
    std::unique_ptr<metrics::billing_metrics> billing;
    std::shared_ptr<const tokenizer::catalog> tokenizers;
    usage::id_generator ids{1, 1};
    fake_sink sink;
    std::unique_ptr<metering_observer> inner;
    std::unique_ptr<guarded_observer> guarded;
    std::vector<metering_phase> failures;
};

constexpr const char* done_with_usage =
    R"({"type":"response.done","response":{"id":"resp_1","status":"completed","usage":{)"
    R"("total_tokens":190,"input_tokens":120,"output_tokens":70,)"
    R"("input_token_details":{"text_tokens":20,"audio_tokens":100,"cached_tokens":64},)"
    R"("output_token_details":{"text_tokens":15,"audio_tokens":55}}}})";

TEST(RealtimeSession, OneRecordPerResponseWithItsUsageAndTtft) {
    session_fixture f;
    auto t = f.open();
    ASSERT_NE(t, nullptr);
    f.server(*t, R"({"type":"session.created","session":{"model":"gpt-realtime-2025"}})");
    f.client(*t, R"({"type":"response.create"})");
    f.clock.advance(10ms);
    f.server(*t,
             R"({"type":"response.created","response":{"id":"resp_1","status":"in_progress"}})");
    f.clock.advance(40ms);
    f.server(
        *t,
        R"({"type":"response.output_audio_transcript.delta","response_id":"resp_1","delta":"Hello"})");
    f.clock.advance(5ms);
    f.server(*t, R"({"type":"response.output_audio.delta","response_id":"resp_1","delta":"AAAA"})");
    EXPECT_TRUE(f.closes().empty()) << "nothing is closed before response.done";
    f.clock.advance(45ms);
    f.server(*t, done_with_usage);
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 1u);
    const auto& r = records[0];
    EXPECT_EQ(r.api, "openai_realtime");
    EXPECT_EQ(r.route, "/v1/realtime");
    EXPECT_EQ(r.model, "gpt-realtime-2025") << "the server's session names the model";
    EXPECT_EQ(r.tenant, "acme");
    EXPECT_EQ(r.request_id, "req-42:1");
    EXPECT_EQ(r.outcome, "complete");
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.served);
    EXPECT_TRUE(r.streamed);
    EXPECT_EQ(r.input, (meter::token_count{120, meter::token_source::reported}));
    EXPECT_EQ(r.output, (meter::token_count{70, meter::token_source::reported}));
    EXPECT_EQ(r.cached_input, (meter::token_count{64, meter::token_source::reported}));
    EXPECT_EQ(r.input_audio, (meter::token_count{100, meter::token_source::reported}));
    EXPECT_EQ(r.output_audio, (meter::token_count{55, meter::token_source::reported}));
    ASSERT_TRUE(r.ttft_seconds);
    EXPECT_DOUBLE_EQ(*r.ttft_seconds, 0.05) << "from response.create to the first delta";
    EXPECT_DOUBLE_EQ(r.duration_seconds, 0.1);
    EXPECT_EQ(
        f.counter("tokenmeter_tokens_total", {{"api", "openai_realtime"}, {"type", "output"}}), 70);
    EXPECT_EQ(f.counter("tokenmeter_tokens_total", {{"api", "openai_realtime"}, {"type", "input"}}),
              120);
    t->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_EQ(f.closes().size(), 1u) << "the session's end adds no record";
    EXPECT_TRUE(f.failures.empty());
}

TEST(RealtimeSession, EachResponseHasItsOwnRequestIdAndClock) {
    session_fixture f;
    auto t = f.open();
    for (int i = 1; i <= 3; ++i) {
        const std::string id = "resp_" + std::to_string(i);
        f.client(*t, R"({"type":"input_audio_buffer.commit"})");
        f.clock.advance(20ms);
        f.server(*t, R"({"type":"response.created","response":{"id":")" + id + R"("}})");
        f.server(*t,
                 R"({"type":"response.text.delta","response_id":")" + id + R"(","delta":"Hi"})");
        f.clock.advance(5ms);
        f.server(*t,
                 R"({"type":"response.done","response":{"id":")" + id +
                     R"(","status":"completed","usage":{"input_tokens":3,"output_tokens":1}}})");
    }
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(records[i].request_id, "req-42:" + std::to_string(i + 1));
        EXPECT_EQ(records[i].model, "gpt-realtime") << "from the ?model= query";
        ASSERT_TRUE(records[i].ttft_seconds);
        EXPECT_DOUBLE_EQ(*records[i].ttft_seconds, 0.02);
        EXPECT_FALSE(records[i].input_audio.value) << "not reported: not written";
    }
    EXPECT_NE(records[0].id, records[1].id);
}

TEST(RealtimeSession, SessionUpdateNamesTheModelWithoutAQuery) {
    session_fixture f;
    auto t = f.open("/v1/realtime", false);
    f.client(*t, R"({"type":"session.update","session":{"model":"gpt-4o-mini-realtime"}})");
    f.server(*t, R"({"type":"response.created","response":{"id":"r"}})");
    f.server(*t, R"({"type":"response.done","response":{"id":"r","status":"completed"}})");
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].model, "gpt-4o-mini-realtime");
    EXPECT_EQ(records[0].request_id, "") << "no X-Request-Id on the upgrade";
}

TEST(RealtimeSession, BadJsonIsForwardedAndCountedNotBilled) {
    session_fixture f;
    auto t = f.open();
    f.server(*t, R"({"type":"response.done", broken)");
    f.client(*t, "\xff\xfe not utf-8");
    f.server(*t, R"(["an array"])");
    EXPECT_EQ(f.counter("tokenmeter_parse_errors_total",
                        {{"api", "openai_realtime"}, {"reason", "invalid_json"}}),
              2);
    EXPECT_EQ(f.counter("tokenmeter_parse_errors_total",
                        {{"api", "openai_realtime"}, {"reason", "unexpected_shape"}}),
              1);
    t->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.closes().empty());
    EXPECT_TRUE(f.failures.empty());
}

TEST(RealtimeSession, ACutResponseBillsWhatItStreamed) {
    session_fixture f;
    auto t = f.open();
    f.client(*t, R"({"type":"response.create"})");
    f.clock.advance(30ms);
    f.server(*t, R"({"type":"response.created","response":{"id":"resp_9"}})");
    f.server(
        *t,
        R"({"type":"response.output_text.delta","response_id":"resp_9","delta":"Hello there, "})");
    f.clock.advance(10ms);
    f.server(
        *t,
        R"({"type":"response.output_text.delta","response_id":"resp_9","delta":"general Kenobi"})");
    f.clock.advance(10ms);
    t->end(end_reason::client_cancel, f.clock.now());
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 1u);
    const auto& r = records[0];
    EXPECT_EQ(r.outcome, "client_cancel");
    EXPECT_EQ(r.output.source, meter::token_source::normalized) << "counted by the tokenizer";
    // `echo -n "Hello there, general Kenobi" | tokenmeter tokenize --tokenizer o200k_base`: 6
    EXPECT_EQ(r.output.value, 6u);
    EXPECT_FALSE(r.input.value) << "the input was never reported and is not text to count";
    ASSERT_TRUE(r.ttft_seconds);
    EXPECT_DOUBLE_EQ(*r.ttft_seconds, 0.03);
}

TEST(RealtimeSession, AnUpstreamCloseMidResponseIsATruncatedStream) {
    session_fixture f;
    auto t = f.open();
    f.server(*t, R"({"type":"response.text.delta","response_id":"r","delta":"partial"})");
    t->end(end_reason::upstream_complete, f.clock.now());
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].outcome, "upstream_truncated");
    EXPECT_EQ(records[0].output.value, 1u);
}

TEST(RealtimeSession, ResponseDoneWithoutUsageCountsTheDeltas) {
    session_fixture f;
    auto t = f.open();
    f.server(*t, R"({"type":"response.created","response":{"id":"r"}})");
    f.server(*t, R"({"type":"response.function_call_arguments.delta","response_id":"r",)"
                 R"("delta":"{\"city\":\"Paris\"}"})");
    f.server(*t, R"({"type":"response.done","response":{"id":"r","status":"completed"}})");
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].outcome, "complete");
    EXPECT_EQ(records[0].output.source, meter::token_source::normalized);
    EXPECT_GT(records[0].output.value.value_or(0), 0u);
}

TEST(RealtimeSession, CancelledAndFailedResponses) {
    session_fixture f;
    auto t = f.open();
    f.server(*t, R"({"type":"response.done","response":{"id":"a","status":"cancelled",)"
                 R"("usage":{"input_tokens":9,"output_tokens":2}}})");
    f.server(*t, R"({"type":"response.done","response":{"id":"b","status":"failed",)"
                 R"("usage":{"input_tokens":9,"output_tokens":0}}})");
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[0].outcome, "client_cancel");
    EXPECT_EQ(records[0].output.value, 2u);
    EXPECT_EQ(records[1].outcome, "upstream_error");
    EXPECT_EQ(records[1].input.value, 9u);
}

TEST(RealtimeSession, OpenResponsesAreBounded) {
    session_fixture f;
    auto t = f.open();
    for (std::size_t i = 0; i < max_open_realtime_responses + 5; ++i) {
        f.server(
            *t, R"({"type":"response.created","response":{"id":"r)" + std::to_string(i) + R"("}})");
    }
    EXPECT_EQ(f.counter("tokenmeter_parse_errors_total",
                        {{"api", "openai_realtime"}, {"reason", "unexpected_shape"}}),
              5);
    t->end(end_reason::upstream_failed, f.clock.now());
    EXPECT_EQ(f.closes().size(), max_open_realtime_responses);
}

TEST(RealtimeSession, EachInputTranscriptionIsARecordOfItsOwn) {
    session_fixture f;
    auto t = f.open();
    f.server(*t, R"({"type":"session.updated","session":{"model":"gpt-realtime",)"
                 R"("audio":{"input":{"transcription":{"model":"gpt-4o-transcribe"}}}}})");
    f.server(*t, R"({"type":"input_audio_buffer.committed","item_id":"item_1"})");
    f.clock.advance(120ms);
    f.server(*t,
             R"({"type":"conversation.item.input_audio_transcription.delta","item_id":"item_1",)"
             R"("delta":"Hello"})");
    // The conversation's response runs beside it.
    f.server(*t, R"({"type":"response.created","response":{"id":"resp_1"}})");
    f.clock.advance(30ms);
    f.server(*t,
             R"({"type":"conversation.item.input_audio_transcription.completed",)"
             R"("item_id":"item_1","transcript":"Hello","usage":{"type":"tokens",)"
             R"("input_tokens":25,"input_token_details":{"audio_tokens":25},"output_tokens":2}})");
    f.server(*t, done_with_usage);
    // whisper-1: no deltas, the whole transcript at once, seconds of audio for usage.
    f.server(*t, R"({"type":"input_audio_buffer.committed","item_id":"item_2"})");
    f.clock.advance(200ms);
    f.server(
        *t,
        R"({"type":"conversation.item.input_audio_transcription.completed",)"
        R"("item_id":"item_2","transcript":"general Kenobi","usage":{"type":"duration","seconds":2}})");
    f.server(*t,
             R"({"type":"conversation.item.input_audio_transcription.failed","item_id":"item_3",)"
             R"("error":{"message":"bad audio"}})");
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 4u);
    const auto& first = records[0];
    EXPECT_EQ(first.api, "openai_realtime_transcription");
    EXPECT_EQ(first.model, "gpt-4o-transcribe");
    EXPECT_EQ(first.request_id, "req-42:1");
    EXPECT_EQ(first.input, (meter::token_count{25, meter::token_source::reported}));
    EXPECT_EQ(first.input_audio, (meter::token_count{25, meter::token_source::reported}));
    EXPECT_EQ(first.output, (meter::token_count{2, meter::token_source::reported}));
    ASSERT_TRUE(first.ttft_seconds);
    EXPECT_DOUBLE_EQ(*first.ttft_seconds, 0.12) << "from the committed input to the first delta";
    EXPECT_EQ(records[1].api, "openai_realtime");
    EXPECT_EQ(records[1].model, "gpt-realtime");
    EXPECT_EQ(records[1].request_id, "req-42:2");
    const auto& whole = records[2];
    EXPECT_EQ(whole.api, "openai_realtime_transcription");
    EXPECT_EQ(whole.output.source, meter::token_source::normalized) << "the transcript, counted";
    EXPECT_EQ(whole.output.value, 3u) << "`tokenmeter tokenize --tokenizer o200k_base`";
    EXPECT_FALSE(whole.input.value) << "seconds of audio are no token count";
    EXPECT_EQ(records[3].outcome, "upstream_error");
}

// The Responses API's WebSocket mode: response.create asks, the SSE form's events answer.
TEST(ResponsesWebSocket, EachResponseCreateIsOneRequestMeteredAsItsStream) {
    session_fixture f;
    auto t = f.open("/v1/responses", true, protocol::api_kind::openai_responses);
    ASSERT_NE(t, nullptr);
    f.server(*t, R"({"type":"response.output_text.delta","delta":"stray"})");
    f.client(*t, R"({"type":"response.create","model":"gpt-5","input":"Say hi",)"
                 R"("max_output_tokens":50})");
    f.clock.advance(15ms);
    f.server(*t, R"({"type":"response.created","response":{"id":"resp_1","model":"gpt-5"}})");
    f.clock.advance(25ms);
    f.server(*t, R"({"type":"response.output_text.delta","item_id":"msg_1","delta":"Hi"})");
    f.clock.advance(5ms);
    f.server(*t, R"({"type":"response.output_text.delta","item_id":"msg_1","delta":" there"})");
    f.server(*t, R"({"type":"response.completed","response":{"id":"resp_1","status":"completed",)"
                 R"("usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":8},)"
                 R"("output_tokens":4,"output_tokens_details":{"reasoning_tokens":2}}}})");
    // The next ask is cut: what it streamed bills.
    f.client(*t, R"({"type":"response.create","model":"gpt-5-mini","input":"More"})");
    f.server(*t,
             R"({"type":"response.output_text.delta","item_id":"msg_2","delta":"Hello there"})");
    t->end(end_reason::client_cancel, f.clock.now());
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 2u);
    const auto& r = records[0];
    EXPECT_EQ(r.api, "openai_responses");
    EXPECT_EQ(r.route, "/v1/responses");
    EXPECT_EQ(r.model, "gpt-5");
    EXPECT_EQ(r.request_id, "req-42:1");
    EXPECT_EQ(r.outcome, "complete");
    EXPECT_EQ(r.input, (meter::token_count{12, meter::token_source::reported}));
    EXPECT_EQ(r.cached_input, (meter::token_count{8, meter::token_source::reported}));
    EXPECT_EQ(r.output, (meter::token_count{4, meter::token_source::reported}));
    EXPECT_EQ(r.reasoning, (meter::token_count{2, meter::token_source::reported}));
    ASSERT_TRUE(r.ttft_seconds);
    EXPECT_DOUBLE_EQ(*r.ttft_seconds, 0.04) << "from response.create to the first delta";
    const auto& cut = records[1];
    EXPECT_EQ(cut.model, "gpt-5-mini");
    EXPECT_EQ(cut.request_id, "req-42:2");
    EXPECT_EQ(cut.outcome, "client_cancel");
    EXPECT_EQ(cut.output.source, meter::token_source::normalized);
    EXPECT_EQ(cut.output.value, 2u) << "\"Hello there\" in o200k_base";
    // As for a POST to /v1/responses: the request reader keeps no prompt text of this dialect,
    // so the tokenizer's count of its input is of nothing.
    EXPECT_EQ(cut.input, (meter::token_count{0, meter::token_source::normalized}));
}

TEST(ResponsesWebSocket, AnAskNeverAnsweredBillsNothing) {
    session_fixture f;
    auto t = f.open("/v1/responses", true, protocol::api_kind::openai_responses);
    f.client(*t, R"({"type":"response.create","model":"gpt-5","input":"Say hi"})");
    f.client(*t, R"({"type":"response.create", nope)");
    t->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.closes().empty());
    EXPECT_EQ(f.counter("tokenmeter_parse_errors_total",
                        {{"api", "openai_responses"}, {"reason", "invalid_json"}}),
              1);
}

TEST(RealtimeSession, ATenantInDebtIsChargedNeverRefused) {
    session_fixture f(10);  // "acme": 10 tokens per second, enforced
    auto t = f.open();
    for (int i = 1; i <= 2; ++i) {
        const std::string id = "r" + std::to_string(i);
        f.server(*t, R"({"type":"response.created","response":{"id":")" + id + R"("}})");
        f.server(
            *t, R"({"type":"response.done","response":{"id":")" + id +
                    R"(","status":"completed","usage":{"input_tokens":500,"output_tokens":500}}})");
    }
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[1].outcome, "complete") << "a response under way is not refused";
    EXPECT_EQ(records[1].tenant, "acme");
    EXPECT_EQ(f.counter("tokenmeter_tenant_rate_limited_total", {}), 0);
    EXPECT_EQ(f.counter("tokenmeter_tenant_tokens_total", {{"tenant", "acme"}}), 2000);
    // Both responses are in the bucket: the tenant's next HTTP request meets the debt.
    request_facts next;
    next.api = protocol::api_kind::openai_chat_completions;
    next.info.model = "m";
    next.received = f.clock.now();
    next.header = [](std::string_view name) -> std::string_view {
        return name == "x-tenant-id" ? "acme" : "";
    };
    EXPECT_FALSE(f.guarded->begin(std::move(next))->admitted().admitted);
    EXPECT_EQ(f.counter("tokenmeter_tenant_rate_limited_total", {}), 1);
}

TEST(RealtimeSession, AnUnmeteredTunnelHasNoSession) {
    session_fixture f;
    tunnel_facts facts;
    facts.api = protocol::api_kind::none;
    facts.target = "/v1/realtime";
    EXPECT_EQ(f.guarded->begin_tunnel(facts), nullptr);
}

TEST(RealtimeSession, ADroppedSessionStillClosesItsRecords) {
    session_fixture f;
    {
        auto t = f.open();
        f.server(*t, R"({"type":"response.text.delta","response_id":"r","delta":"x"})");
    }
    const auto records = f.closes();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].outcome, "upstream_truncated");
}

}  // namespace
}  // namespace tokenmeter::observe
