// A request's trace through the metering observer: the usage record's open and close entries and
// the access record carry its trace and span ids, and only a sampled request leaves exemplars.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "fake_sink.hpp"
#include "metrics/registry.hpp"
#include "observe/metering_observer.hpp"
#include "usage/record.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view trace_hex = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view span_hex = "00f067aa0ba902b7";

core::trace_context a_trace(bool sampled) {
    core::trace_context t;
    t.trace =
        core::parse_traceparent("00-" + std::string(trace_hex) + "-b7ad6b7169203331-01")->trace;
    t.span = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    t.flags = sampled ? core::trace_flag_sampled : 0;
    return t;
}

struct fixture {
    fixture() {
        tenants = std::make_unique<usage::tenant_resolver>(usage::tenant_options{}, "");
        throughput = std::make_unique<usage::provisioned_throughput>(usage::throughput_options{});
        metering_parts parts{
            &registry, nullptr, tenants.get(), throughput.get(),
            &ids,      nullptr, &sink,         [] { return std::int64_t{1'700'000'000'250}; }};
        parts.access_log = [this](const access_entry& e) {
            logged_trace.push_back(e.trace_id ? core::to_hex(*e.trace_id) : "");
            logged_span.push_back(e.span_id ? core::to_hex(*e.span_id) : "");
        };
        observer = std::make_unique<metering_observer>(parts, metering_options{});
    }

    // One streamed request with two tokens, start to end.
    void run(const core::trace_context& trace) {
        request_facts facts;
        facts.api = protocol::api_kind::openai_chat_completions;
        facts.info.model = "llama";
        facts.info.stream = true;
        facts.target = "/v1/chat/completions";
        facts.received = clock.now();
        facts.header = [](std::string_view) { return std::string_view(); };
        facts.trace = trace;
        auto exchange = observer->begin(std::move(facts));
        exchange->request_sent(clock.now());
        (void)exchange->response_head(200, "text/event-stream", true, clock.now());
        for (const char* text : {"Hello", " world"}) {
            clock.advance(40ms);
            exchange->body(
                std::string("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"") + text +
                    "\"}}]}\n\n",
                clock.now());
        }
        (void)exchange->seal(clock.now());
        sink.make_durable();
        exchange->end(end_reason::upstream_complete, clock.now());
    }

    core::manual_clock clock{core::time_point{} + 1000s};
    metrics::registry registry{metrics::registry_options{}};
    std::unique_ptr<usage::tenant_resolver> tenants;
    std::unique_ptr<usage::provisioned_throughput> throughput;
    usage::id_generator ids{1, 1};
    fake_sink sink;
    std::unique_ptr<metering_observer> observer;
    std::vector<std::string> logged_trace;
    std::vector<std::string> logged_span;
};

TEST(RequestTrace, RecordsAndTheAccessLogCarryTheTraceAndTheProxysSpan) {
    fixture f;
    f.run(a_trace(true));
    ASSERT_GE(f.sink.lines.size(), 2U);
    const auto open =
        usage::decode_line(f.sink.lines.front().substr(0, f.sink.lines.front().size() - 1));
    ASSERT_TRUE(open);
    ASSERT_EQ(open->kind, usage::entry_kind::open);
    EXPECT_EQ(open->open.trace_id, trace_hex);
    EXPECT_EQ(open->open.span_id, span_hex);
    const auto close =
        usage::decode_line(f.sink.lines.back().substr(0, f.sink.lines.back().size() - 1));
    ASSERT_TRUE(close);
    ASSERT_EQ(close->kind, usage::entry_kind::close);
    EXPECT_EQ(close->record.trace_id, trace_hex);
    EXPECT_EQ(close->record.span_id, span_hex);
    ASSERT_EQ(f.logged_trace.size(), 1U);
    EXPECT_EQ(f.logged_trace[0], trace_hex);
    EXPECT_EQ(f.logged_span[0], span_hex);
}

TEST(RequestTrace, ASampledRequestLeavesExemplarsAnUnsampledOneNone) {
    fixture unsampled;
    unsampled.run(a_trace(false));
    EXPECT_EQ(unsampled.registry.expose_openmetrics().find(trace_hex), std::string::npos);
    ASSERT_EQ(unsampled.logged_trace.size(), 1U);
    EXPECT_EQ(unsampled.logged_trace[0], trace_hex) << "logged whether sampled or not";

    fixture sampled;
    sampled.run(a_trace(true));
    const std::string om = sampled.registry.expose_openmetrics();
    const std::string mark =
        "{trace_id=\"" + std::string(trace_hex) + "\",span_id=\"" + std::string(span_hex) + "\"}";
    for (const char* family : {"tokenmeter_time_to_first_token_seconds_bucket",
                               "tokenmeter_inter_token_latency_seconds_bucket",
                               "tokenmeter_time_per_output_token_seconds_bucket",
                               "tokenmeter_request_duration_seconds_bucket"}) {
        bool found = false;
        std::size_t at = 0;
        while ((at = om.find(family, at)) != std::string::npos) {
            const std::string line = om.substr(at, om.find('\n', at) - at);
            found = found || line.find(mark) != std::string::npos;
            at += line.size();
        }
        EXPECT_TRUE(found) << family << "\n" << om;
    }
    // Stamped with the wall clock at the request's end, in seconds.
    EXPECT_NE(om.find(mark + " 0.04 1700000000.25\n"), std::string::npos) << om;
}

TEST(RequestTrace, AnOldSpoolLineWithoutTraceStillReads) {
    const std::string old_close =
        R"({"v":1,"type":"close","id":"abc","tenant":"t","model":"m","api":"openai_chat",)"
        R"("route":"/v1/chat/completions","request_id":null,"start":"2026-11-22T01:02:03.456Z",)"
        R"("end":"2026-11-22T01:02:04.456Z","ttft_s":0.1,"duration_s":1.0,"streamed":true,)"
        R"("input_tokens":3,"input_source":"reported","output_tokens":5,"output_source":"reported",)"
        R"("outcome":"complete","status":200,"served":true,"reason":null})";
    const auto entry = usage::decode_line(old_close);
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->record.id, "abc");
    EXPECT_EQ(entry->record.trace_id, "");
    EXPECT_EQ(entry->record.span_id, "");
    // A value that is not the proxy's form is not taken either (the line is hostile input).
    std::string odd = old_close;
    odd.insert(odd.size() - 1, R"(,"trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","span_id":7)");
    const auto read = usage::decode_line(odd);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->record.trace_id, "");
    EXPECT_EQ(read->record.span_id, "");
    // Written with no trace, the fields are null.
    EXPECT_NE(usage::encode_close(read->record).find(R"("trace_id":null)"), std::string::npos);
}

}  // namespace
}  // namespace tokenmeter::observe
