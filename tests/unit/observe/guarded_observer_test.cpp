// The guard between the relay and metering: an observer that throws in any phase is caught,
// counted by phase, marks the record degraded, and the session's answer lets the bytes go on.
#include "observe/guarded_observer.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../faults/throwing_observer.hpp"
#include "fake_sink.hpp"
#include "metrics/registry.hpp"
#include "observe/metering_observer.hpp"
#include "usage/record.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;
using faults::throwing_observer;

// A record sink whose waits throw (a broken spool).
class throwing_sink final : public record_sink {
  public:
    std::uint64_t append(std::string line, bool /*is_close*/) override {
        lines.push_back(std::move(line));
        return lines.size();
    }
    [[nodiscard]] bool is_durable(std::uint64_t /*seq*/) const override { return false; }
    void when_durable(std::uint64_t /*seq*/, std::function<void()> /*done*/) override {
        throw std::runtime_error("spool gone");
    }
    std::vector<std::string> lines;
};

std::string sse_chunk(const std::string& text) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"}}]}\n\n";
}

// The real metering observer with usage records, behind a fault and the guard, as app/ wires the
// guard (failures counted in the registry).
struct fixture {
    explicit fixture(std::optional<metering_phase> fault, record_sink* records = nullptr) {
        usage::tenant_options tenant_settings;
        tenant_settings.source = usage::tenant_source::header;
        tenants = std::make_unique<usage::tenant_resolver>(tenant_settings, "");
        metering_parts parts;
        parts.registry = &registry;
        parts.tenants = tenants.get();
        parts.ids = &ids;
        parts.records = records != nullptr ? records : &sink;
        parts.wall_clock_ms = [] { return std::int64_t{1'700'000'000'000}; };
        metering = std::make_unique<metering_observer>(parts, metering_options{});
        observer* inner = metering.get();
        if (fault) {
            faulty = std::make_unique<throwing_observer>(*metering, *fault);
            inner = faulty.get();
        }
        guard = std::make_unique<guarded_observer>(
            *inner, [this](metering_phase phase) { registry.metering_failure(to_string(phase)); });
    }

    std::unique_ptr<exchange_observer> begin() {
        request_facts facts;
        facts.api = protocol::api_kind::openai_chat_completions;
        facts.info.model = "llama";
        facts.info.stream = true;
        facts.target = "/v1/chat/completions";
        facts.received = now;
        facts.header = [](std::string_view name) -> std::string_view {
            return name == "x-tenant-id" ? "acme" : "";
        };
        return guard->begin(std::move(facts));
    }

    // One streamed request as the relay drives it: head, three chunks, seal, end. Every wait
    // is released as the relay would be; returns whether all three were released.
    bool relay(exchange_observer& ex) {
        bool released = true;
        const auto pass = [&](const durable_wait& wait) {
            if (!wait.pending()) {
                return;
            }
            bool ran = false;
            wait.then([&] { ran = true; });
            sink.make_durable();
            released = released && ran;
        };
        if (ex.admission_pending()) {
            bool admitted = false;
            ex.await_admission([&] { admitted = true; });
            released = released && admitted;
        }
        released = released && ex.admitted().admitted;
        ex.request_sent(now += 1ms);
        pass(ex.response_head(200, "text/event-stream", true, now += 10ms));
        for (const char* word : {"one", " two", " three"}) {
            ex.body(sse_chunk(word), now += 10ms);
        }
        ex.body("data: [DONE]\n\n", now += 1ms);
        if (ex.holds_end()) {
            pass(ex.seal(now));
        }
        ex.end(end_reason::upstream_complete, now += 1ms);
        return released;
    }

    [[nodiscard]] double failures(std::string_view phase) const {
        const std::string text = registry.expose();
        const std::string series =
            "tokenmeter_metering_failures_total{phase=\"" + std::string(phase) + "\"} ";
        const auto at = text.find(series);
        return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size()));
    }
    // The close entry of the usage record, "" when none was written.
    [[nodiscard]] std::string close_line() const {
        for (const auto& line : sink.lines) {
            if (line.find("\"type\":\"close\"") != std::string::npos) {
                return line;
            }
        }
        return {};
    }

    core::time_point now = core::time_point{} + 1000s;
    metrics::registry registry{metrics::registry_options{}};
    std::unique_ptr<usage::tenant_resolver> tenants;
    usage::id_generator ids{1, 1};
    fake_sink sink;
    std::unique_ptr<metering_observer> metering;
    std::unique_ptr<throwing_observer> faulty;
    std::unique_ptr<guarded_observer> guard;
};

TEST(GuardedObserver, WithoutFailuresTheRecordIsWholeAndNotDegraded) {
    fixture f(std::nullopt);
    auto ex = f.begin();
    EXPECT_TRUE(f.relay(*ex));
    const std::string close = f.close_line();
    ASSERT_FALSE(close.empty());
    EXPECT_EQ(close.find("degraded"), std::string::npos) << close;
    EXPECT_EQ(f.registry.expose().find("tokenmeter_metering_failures_total"), std::string::npos);
}

// Each phase of a request throws in turn: the relay's calls all return, every wait is released,
// the failure is counted under its phase, and the record (when one is still open) says degraded.
TEST(GuardedObserver, AFailureInEachPhaseIsCaughtCountedAndMarked) {
    struct expectation {
        metering_phase phase;
        bool record_marked;  // the record was still open when the phase failed
    };
    for (const auto& [phase, record_marked] :
         {expectation{metering_phase::admission, true},
          expectation{metering_phase::request_sent, true},
          expectation{metering_phase::response_head, true}, expectation{metering_phase::body, true},
          // Closed by then: the end is held, so the record was sealed before end() was called.
          expectation{metering_phase::seal, false}, expectation{metering_phase::end, false}}) {
        SCOPED_TRACE(std::string(to_string(phase)));
        fixture f(phase);
        auto ex = f.begin();
        ASSERT_NE(ex, nullptr);
        bool released = false;
        EXPECT_NO_THROW(released = f.relay(*ex));
        EXPECT_TRUE(released);
        // A body that threw is not shown the rest of the stream: one failure per request.
        EXPECT_EQ(f.failures(to_string(phase)), 1);
        const std::string close = f.close_line();
        ASSERT_FALSE(close.empty());
        EXPECT_EQ(close.find("\"degraded\":true") != std::string::npos, record_marked) << close;
    }
}

TEST(GuardedObserver, ABodyFailureStopsFeedingTheMeterAndKeepsWhatItCounted) {
    fixture f(metering_phase::body);
    auto ex = f.begin();
    EXPECT_TRUE(f.relay(*ex));
    const std::string close = f.close_line();
    auto record = usage::decode_line(close);
    ASSERT_TRUE(record) << close;
    EXPECT_TRUE(record->record.degraded);
    EXPECT_EQ(record->record.output.value, 1u) << "the first chunk, counted before the throw";
}

TEST(GuardedObserver, ABeginFailureForwardsTheRequestUnmetered) {
    fixture f(metering_phase::begin);
    auto ex = f.begin();
    ASSERT_NE(ex, nullptr);
    EXPECT_TRUE(f.relay(*ex));
    EXPECT_EQ(f.failures("begin"), 1);
    EXPECT_TRUE(f.sink.lines.empty()) << "no record: metering never began";
}

TEST(GuardedObserver, ALocalAnswerFailureIsCountedAndTheAnswerGoesOut) {
    fixture f(metering_phase::answered_locally);
    auto ex = f.begin();
    EXPECT_NO_THROW(ex->answered_locally("upstream_unreachable"));
    EXPECT_NO_THROW((void)ex->response_head(502, "application/json", false, f.now));
    EXPECT_NO_THROW(ex->end(end_reason::upstream_failed, f.now));
    EXPECT_EQ(f.failures("answered_locally"), 1);
    auto record = usage::decode_line(f.close_line());
    ASSERT_TRUE(record);
    EXPECT_TRUE(record->record.degraded);
    EXPECT_FALSE(record->record.served) << "the upstream never had it: nothing billed";
}

TEST(GuardedObserver, ProcessWideCallsAreGuarded) {
    for (metering_phase phase : {metering_phase::unforwarded, metering_phase::upstream_error}) {
        fixture f(phase);
        unforwarded_request refused;
        refused.api = protocol::api_kind::openai_chat_completions;
        refused.model = "llama";
        refused.status = 400;
        refused.seconds = 0.1;
        EXPECT_NO_THROW(f.guard->unforwarded(refused));
        EXPECT_NO_THROW(f.guard->upstream_error("connect_refused"));
        EXPECT_EQ(f.failures(to_string(phase)), 1);
        // The wrapped observer did its part before the throw.
        const std::string text = f.registry.expose();
        EXPECT_NE(text.find(R"(tokenmeter_upstream_errors_total{reason="connect_refused"} 1)"),
                  std::string::npos)
            << text;
    }
}

TEST(GuardedObserver, ASinkThatThrowsReleasesTheResponseAtOnce) {
    throwing_sink broken;
    fixture f(std::nullopt, &broken);
    auto ex = f.begin();
    auto wait = ex->response_head(200, "text/event-stream", true, f.now);
    ASSERT_TRUE(wait.pending());
    int ran = 0;
    EXPECT_NO_THROW(wait.then([&] { ++ran; }));
    EXPECT_EQ(ran, 1);
    EXPECT_EQ(f.failures("durable_wait"), 1);
    ex->end(end_reason::upstream_complete, f.now + 1ms);
}

TEST(GuardedObserver, ACounterThatThrowsIsSwallowed) {
    fixture f(metering_phase::body);
    guarded_observer guard(*f.faulty, [](metering_phase) { throw std::runtime_error("no"); });
    EXPECT_NO_THROW(guard.upstream_error("timeout"));
    EXPECT_TRUE(guard.run(metering_phase::end, [] {}));
    EXPECT_FALSE(guard.run(metering_phase::end, [] { throw 42; }));
}

}  // namespace
}  // namespace tokenmeter::observe
