// The metering observer without sockets: a manual clock, a fake record sink, a real registry.
#include "observe/metering_observer.hpp"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_sink.hpp"
#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "metrics/status_board.hpp"
#include "tokenizer/catalog.hpp"
#include "usage/price.hpp"
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
    // with_billing: the reference tokenizer (built in), a price for "llama" and the status page,
    // as a proxy that bills runs.
    // off_thread: ends too large for an I/O thread are queued in `jobs`, run when the test says.
    explicit fixture(bool with_records, double tokens_per_second = 0, bool with_status = false,
                     bool with_billing = false, meter::billing_policy policy = {},
                     bool off_thread = false) {
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
        metering_parts parts{&registry,
                             nullptr,
                             tenants.get(),
                             throughput.get(),
                             &ids,
                             billing.get(),
                             with_records ? &sink : nullptr,
                             [] { return std::int64_t{1'700'000'000'000}; }};
        if (with_status) {
            status = std::make_unique<metrics::status_board>(
                registry, billing.get(), clock, [] { return std::int64_t{1'700'000'000'000}; },
                metrics::status_options{});
            parts.status = status.get();
        }
        if (with_billing) {
            tokenizer::catalog_options catalog;
            catalog.reference = "o200k_base";
            catalog.search_dirs = {"/nonexistent/tokenmeter-observer-test"};
            tokenizers = tokenizer::catalog::load(catalog).value;
            parts.tokenizers = tokenizers.get();
            usage::price p;
            p.input = 3'000'000;
            p.cached_input = 300'000;
            p.cache_write = 3'750'000;
            p.cache_write_1h = 6'000'000;
            p.output = 15'000'000;
            p.reasoning = 15'000'000;
            p.currency = "USD";
            prices.emplace("llama", p);
            parts.prices = &prices;
            if (!status) {
                status = std::make_unique<metrics::status_board>(
                    registry, billing.get(), clock, [] { return std::int64_t{1'700'000'000'000}; },
                    metrics::status_options{});
                parts.status = status.get();
            }
        }
        if (off_thread) {
            parts.finish_off_thread = [this](std::function<void()>& job, std::size_t bytes) {
                EXPECT_GT(bytes, 0u) << "a job holds the prompt it counts";
                if (refuse_jobs) {
                    return false;
                }
                jobs.push_back(std::move(job));
                return true;
            };
        }
        metering_options options;
        options.checkpoint_interval = 1s;
        options.billing = policy;
        observer = std::make_unique<metering_observer>(parts, options);
    }

    std::unique_ptr<exchange_observer> begin(protocol::api_kind api, std::string tenant,
                                             bool stream = true, std::string prompt = {}) {
        request_facts facts;
        facts.api = api;
        facts.info.model = "llama";
        facts.info.stream = stream;
        facts.info.body_parsed = !prompt.empty();
        facts.info.prompt_text = std::move(prompt);
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
    std::shared_ptr<const tokenizer::catalog> tokenizers;
    usage::price_table prices;
    std::vector<std::function<void()>> jobs;  // for the finishing thread (off_thread)
    bool refuse_jobs = false;                 // the finishing thread's queue is full
    std::unique_ptr<metering_observer> observer;

    void run_jobs() {
        auto now = std::move(jobs);
        jobs.clear();
        for (auto& job : now) {
            job();
        }
    }
};

// The sum of every series of a family, with `label` = `value` when a label is given.
double family_sum(const metrics::registry& registry, const std::string& name,
                  const std::string& label = {}, const std::string& value = {}) {
    double sum = 0;
    for (const auto& family : registry.collect()) {
        if (family.name != name) {
            continue;
        }
        for (const auto& metric : family.metric) {
            bool match = label.empty();
            for (const auto& l : metric.label) {
                match = match || (l.name == label && l.value == value);
            }
            if (match) {
                sum += metric.counter.value;
            }
        }
    }
    return sum;
}

constexpr const char* a_prompt = "Summarize the quarterly report in three short sentences.";

// A JSON response with no usage report, relayed whole: the server got the request, answered
// 200, and the exchange ended 2 ms later.
void complete_json(fixture& f, exchange_observer& exchange) {
    exchange.request_sent(f.clock.now());
    (void)exchange.response_head(200, "application/json", true, f.clock.now());
    exchange.body(R"({"choices":[{"message":{"content":"Revenue grew."}}]})", f.clock.now());
    exchange.end(end_reason::upstream_complete, f.clock.now() + 2ms);
}

TEST(MeteringObserver, WritesOpenCheckpointAndCloseAndHoldsUntilDurable) {
    fixture f(true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    ASSERT_TRUE(exchange->admitted().admitted);
    ASSERT_EQ(f.sink.lines.size(), 1u);
    EXPECT_TRUE(contains(f.sink.lines[0], "\"tenant\":\"acme\""));
    EXPECT_TRUE(contains(f.sink.lines[0], "\"route\":\"/v1/chat/completions\""));

    f.clock.advance(50ms);
    exchange->request_sent(f.clock.now());  // the server has it
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
    exchange->request_sent(f.clock.now());  // the server has it
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
    exchange->request_sent(f.clock.now());  // the server has it
    EXPECT_FALSE(exchange->response_head(200, "text/plain", true, f.clock.now()).pending());
    exchange->body("anything", f.clock.now());
    exchange->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.sink.lines.empty());
}

TEST(MeteringObserver, TenantInDebtIsRefusedWithRetryAfter) {
    fixture f(false, 10);  // 10 tokens/s, burst 1 s
    auto first = f.begin(protocol::api_kind::openai_chat_completions, "acme");
    ASSERT_TRUE(first->admitted().admitted);
    first->request_sent(f.clock.now());  // the server has it
    (void)first->response_head(200, "application/json", true, f.clock.now());
    first->body(
        R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":40,"completion_tokens":10}})",
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
    first->request_sent(f.clock.now());  // the server has it
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

// The upstream could not be reached: the proxy answered 502 itself. The prompt was parsed and
// could be counted, but no model read it.
TEST(MeteringObserver, ARequestTheServerNeverGotBillsNothingAnywhere) {
    fixture f(true, 10, false, true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme", true, a_prompt);
    ASSERT_TRUE(exchange->admitted().admitted);
    exchange->answered_locally("upstream_unreachable");
    (void)exchange->response_head(502, "application/json", false, f.clock.now());
    exchange->end(end_reason::upstream_failed, f.clock.now() + 2ms);

    const auto records = closes(f.sink);
    ASSERT_EQ(records.size(), 1u);
    const usage::usage_record& r = records[0];
    EXPECT_EQ(r.outcome, "upstream_error");
    EXPECT_FALSE(r.served);
    EXPECT_EQ(r.reason, "upstream_unreachable");
    EXPECT_EQ(r.input, (usage::token_count{0, usage::token_source::unbilled}));
    EXPECT_EQ(r.output, (usage::token_count{0, usage::token_source::unbilled}));
    EXPECT_EQ(r.cost_picos, 0);
    EXPECT_EQ(r.currency, "USD");
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tokens_total"), 0);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_normalized_tokens_total"), 0);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_tokens_total"), 0);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_cost_total"), 0);
    EXPECT_EQ(f.status->snapshot()["tenants"]["by_tokens"].size(), 0u);
    // The bucket was not charged: the tenant's next request is admitted at once.
    auto next = f.begin(protocol::api_kind::openai_chat_completions, "acme", true, a_prompt);
    EXPECT_TRUE(next->admitted().admitted);
    next->end(end_reason::client_cancel, f.clock.now());
}

// The same request once the server has it: its prompt bills.
TEST(MeteringObserver, ARequestTheServerGotBillsItsCountedPrompt) {
    fixture f(true, 0, false, true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme", false, a_prompt);
    complete_json(f, *exchange);
    const auto records = closes(f.sink);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_TRUE(records[0].served);
    EXPECT_EQ(records[0].input.source, usage::token_source::normalized);
    EXPECT_GT(records[0].input.value.value_or(0), 5u);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tokens_total", "type", "input"),
              static_cast<double>(*records[0].input.value));
}

// A served request the server failed, with no report and no output: its prompt bills only under
// billing.bill_failed_input.
TEST(MeteringObserver, AFailedRequestBillsItsPromptOnlyWhenConfigured) {
    for (bool bill_failed_input : {false, true}) {
        fixture f(true, 0, false, true, {.bill_failed_input = bill_failed_input});
        auto exchange =
            f.begin(protocol::api_kind::openai_chat_completions, "acme", true, a_prompt);
        exchange->request_sent(f.clock.now());
        (void)exchange->response_head(503, "application/json", true, f.clock.now());
        exchange->body(R"({"error":{"message":"overloaded"}})", f.clock.now());
        exchange->end(end_reason::upstream_complete, f.clock.now());
        const auto records = closes(f.sink);
        ASSERT_EQ(records.size(), 1u);
        EXPECT_EQ(records[0].outcome, "upstream_error");
        EXPECT_TRUE(records[0].served);
        EXPECT_EQ(records[0].output.value, 0u);
        if (bill_failed_input) {
            EXPECT_EQ(records[0].input.source, usage::token_source::normalized);
            EXPECT_GT(records[0].input.value.value_or(0), 0u);
            EXPECT_GT(*records[0].cost_picos, 0);
        } else {
            EXPECT_EQ(records[0].input, (usage::token_count{0, usage::token_source::unbilled}));
            EXPECT_EQ(records[0].cost_picos, 0);
        }
    }
}

// One rule for every count: the records, the token families, the tenant counters, the cost and
// the status page all add up to the same totals over requests of every kind.
TEST(MeteringObserver, RecordsAndMetricsAgreeOnEveryCount) {
    fixture f(true, 0, false, true);
    const auto run = [&](bool stream, bool sent, int status, const std::string& body,
                         end_reason reason, const char* local = nullptr) {
        auto exchange =
            f.begin(protocol::api_kind::openai_chat_completions, "acme", stream, a_prompt);
        if (sent) {
            exchange->request_sent(f.clock.now());
        }
        if (local != nullptr) {
            exchange->answered_locally(local);
        }
        (void)exchange->response_head(status, stream ? "text/event-stream" : "application/json",
                                      !body.empty(), f.clock.now());
        f.clock.advance(20ms);
        exchange->body(body, f.clock.now());
        f.clock.advance(20ms);
        exchange->end(reason, f.clock.now());
    };
    // Reported usage with reasoning, cache reads and cache writes.
    run(false, true, 200,
        R"({"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":1523,)"
        R"("completion_tokens":40,"prompt_tokens_details":{"cached_tokens":1000,)"
        R"("cache_write_tokens":500},"completion_tokens_details":{"reasoning_tokens":30}}})",
        end_reason::upstream_complete);
    // Nothing reported: the prompt, the answer and the reasoning text re-tokenized.
    run(true, true, 200,
        sse_chunk("Revenue grew by a third.") +
            R"(data: {"choices":[{"index":0,"delta":{"reasoning_content":"Let me think )"
            R"(about the numbers first."}}]})"
            "\n\ndata: [DONE]\n\n",
        end_reason::upstream_complete);
    // Cut by the upstream after some output.
    run(true, true, 200, sse_chunk("Revenue"), end_reason::upstream_truncated);
    // An upstream 503 with no output, and a 502 the proxy gave itself.
    run(false, true, 503, R"({"error":"busy"})", end_reason::upstream_complete);
    run(false, false, 502, "", end_reason::upstream_failed, "upstream_unreachable");

    const auto records = closes(f.sink);
    ASSERT_EQ(records.size(), 5u);
    double input = 0;
    double output = 0;
    double reasoning = 0;
    double cached = 0;
    double written = 0;
    double cost = 0;
    for (const auto& r : records) {
        input += static_cast<double>(r.input.value.value_or(0));
        output += static_cast<double>(r.output.value.value_or(0));
        reasoning += static_cast<double>(r.reasoning.value.value_or(0));
        cached += static_cast<double>(r.cached_input.value.value_or(0));
        written += static_cast<double>(r.cache_write.value.value_or(0));
        cost += static_cast<double>(r.cost_picos.value_or(0)) / 1e12;
    }
    EXPECT_GT(input, 1523);
    EXPECT_GT(reasoning, 30) << "the re-counted reasoning of the second request is billed";
    EXPECT_EQ(cached, 1000);
    EXPECT_EQ(written, 500);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tokens_total", "type", "input"), input);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tokens_total", "type", "output"), output);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_reasoning_tokens_total"), reasoning);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_cached_input_tokens_total"), cached);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_cache_write_tokens_total"), written);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_tokens_total", "type", "input"), input);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_tokens_total", "type", "output"), output);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_reasoning_tokens_total"), reasoning);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_cached_input_tokens_total"), cached);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_cache_write_tokens_total"), written);
    EXPECT_NEAR(family_sum(f.registry, "tokenmeter_cost_total"), cost, 1e-12);
    const nlohmann::json doc = f.status->snapshot();
    ASSERT_EQ(doc["tenants"]["by_tokens"].size(), 1u);
    EXPECT_EQ(doc["tenants"]["by_tokens"][0]["tokens"].get<double>(), input + output);
}

// A tenant takes a label slot only once the upstream served one of its requests: 120 invented
// keys the upstream refused with 401 leave the slots to the real tenant.
TEST(MeteringObserver, RefusedTenantsTakeNoLabelSlot) {
    fixture f(false);
    for (int i = 0; i < 120; ++i) {
        auto refused =
            f.begin(protocol::api_kind::openai_chat_completions, "key-" + std::to_string(i));
        refused->request_sent(f.clock.now());
        (void)refused->response_head(401, "application/json", true, f.clock.now());
        refused->body(R"({"error":{"message":"invalid key"}})", f.clock.now());
        refused->end(end_reason::upstream_complete, f.clock.now());
    }
    auto real = f.begin(protocol::api_kind::openai_chat_completions, "acme", false);
    real->request_sent(f.clock.now());
    (void)real->response_head(200, "application/json", true, f.clock.now());
    real->body(
        R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":4,"completion_tokens":1}})",
        f.clock.now());
    real->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_requests_total", "tenant", "other"), 120);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_requests_total", "tenant", "acme"), 1);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tenant_tokens_total", "tenant", "acme"), 5);
    EXPECT_FALSE(contains(f.registry.expose(), "key-"));
}

// A 16 MiB model name is cut to 256 bytes in every entry of its record (and marked), so one
// request cannot write megabytes of spool.
TEST(MeteringObserver, LongModelNamesAreCutInRecords) {
    fixture f(true);
    request_facts facts;
    facts.api = protocol::api_kind::openai_chat_completions;
    facts.info.model = std::string(300, 'm') + "\u00e9";
    facts.info.model.insert(255, "\xc3\xa9");  // a two-byte character across the cut
    facts.target = "/v1/chat/completions";
    facts.received = f.clock.now();
    facts.header = [](std::string_view) { return std::string_view{}; };
    auto exchange = f.observer->begin(std::move(facts));
    exchange->request_sent(f.clock.now());
    (void)exchange->response_head(200, "application/json", true, f.clock.now());
    exchange->end(end_reason::upstream_complete, f.clock.now());
    ASSERT_EQ(f.sink.lines.size(), 2u);
    for (const std::string& line : f.sink.lines) {
        EXPECT_LT(line.size(), 1024u) << line;
        EXPECT_TRUE(contains(line, "\"model_cut\":true")) << line;
    }
    const auto records = closes(f.sink);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].model, std::string(255, 'm')) << "cut before the character, not in it";
    EXPECT_TRUE(records[0].model_cut);
}

TEST(MeteringObserver, UnforwardedAndUpstreamErrorsReachTheRegistry) {
    fixture f(false);
    unforwarded_request refused;
    refused.status = 400;
    refused.seconds = 0.001;
    f.observer->unforwarded(refused);
    f.observer->upstream_error("connect_refused");
    const std::string text = f.registry.expose();
    EXPECT_TRUE(contains(text, "reason=\"connect_refused\"")) << text;
    EXPECT_TRUE(contains(text, "outcome=\"rejected\""));
}

// A prompt whose count is too large for an I/O thread: 200 KiB of words.
std::string long_prompt() {
    std::string out;
    while (out.size() < 200 * 1024) {
        out += "the quarterly report shows revenue growth across every region and segment ";
    }
    return out;
}

// What a completed JSON exchange of `prompt` with no usage report bills, ended in place.
usage::usage_record billed_in_place(const std::string& prompt) {
    fixture f(true, 0, false, true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme", false, prompt);
    complete_json(f, *exchange);
    const auto records = closes(f.sink);
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? usage::usage_record{} : records[0];
}

TEST(MeteringObserver, ALongPromptsEndRunsOffTheIoThreadWithTheSameCounts) {
    const std::string prompt = long_prompt();
    const usage::usage_record expected = billed_in_place(prompt);
    ASSERT_GT(expected.input.value.value_or(0), 10'000u);

    fixture f(true, 0, false, true, {}, true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme", false, prompt);
    complete_json(f, *exchange);
    ASSERT_EQ(f.jobs.size(), 1u) << "the end was handed to the finishing thread";
    EXPECT_TRUE(closes(f.sink).empty()) << "nothing written until the job runs";
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tokens_total", "type", "input"), 0.0);
    exchange.reset();  // the session lets go first: the job keeps what it needs
    f.run_jobs();
    const auto records = closes(f.sink);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].input.value, expected.input.value);
    EXPECT_EQ(records[0].input.source, expected.input.source);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_tokens_total", "type", "input"),
              static_cast<double>(*expected.input.value));
}

TEST(MeteringObserver, AShortPromptsEndAndAFullQueueRunInPlace) {
    fixture f(true, 0, false, true, {}, true);
    auto exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme", false, a_prompt);
    exchange->request_sent(f.clock.now());
    (void)exchange->response_head(200, "application/json", true, f.clock.now());
    exchange->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.jobs.empty()) << "a short prompt is counted in place";
    EXPECT_EQ(closes(f.sink).size(), 1u);

    f.refuse_jobs = true;
    exchange = f.begin(protocol::api_kind::openai_chat_completions, "acme", false, long_prompt());
    exchange->request_sent(f.clock.now());
    (void)exchange->response_head(200, "application/json", true, f.clock.now());
    exchange->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.jobs.empty());
    EXPECT_EQ(closes(f.sink).size(), 2u) << "refused by the queue: ended in place, not lost";
}

TEST(MeteringObserver, AHeldEndWaitsForTheSealOffTheIoThreadThenForItsCloseEntry) {
    fixture f(true, 0, false, true, {}, true);
    auto exchange =
        f.begin(protocol::api_kind::openai_chat_completions, "acme", true, long_prompt());
    exchange->request_sent(f.clock.now());
    (void)exchange->response_head(200, "text/event-stream", true, f.clock.now());
    f.sink.make_durable();
    exchange->body(sse_chunk("Revenue grew."), f.clock.now());
    ASSERT_TRUE(exchange->holds_end());
    auto wait = exchange->seal(f.clock.now());
    ASSERT_EQ(f.jobs.size(), 1u);
    EXPECT_FALSE(exchange->holds_end());
    EXPECT_TRUE(wait.pending()) << "the close entry does not exist yet";
    bool released = false;
    wait.then([&] { released = true; });
    EXPECT_EQ(f.sink.closes, 0u);
    f.run_jobs();
    EXPECT_EQ(f.sink.closes, 1u) << "the job wrote the close entry";
    EXPECT_FALSE(released) << "the end waits for the close entry on disk";
    f.sink.make_durable();
    EXPECT_TRUE(released);
    EXPECT_FALSE(wait.pending());
    exchange->end(end_reason::upstream_complete, f.clock.now());
    EXPECT_TRUE(f.jobs.empty()) << "sealed: the end is cheap and runs in place";
    EXPECT_EQ(f.sink.closes, 1u);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_requests_total"), 1.0);
}

TEST(MeteringObserver, AClientGoneWhileTheSealRunsEndsAfterIt) {
    fixture f(true, 0, false, true, {}, true);
    auto exchange =
        f.begin(protocol::api_kind::openai_chat_completions, "acme", true, long_prompt());
    exchange->request_sent(f.clock.now());
    (void)exchange->response_head(200, "text/event-stream", true, f.clock.now());
    exchange->body(sse_chunk("Revenue grew."), f.clock.now());
    const durable_wait wait = exchange->seal(f.clock.now());
    ASSERT_EQ(f.jobs.size(), 1u);
    EXPECT_TRUE(wait.pending());
    exchange->end(end_reason::client_cancel, f.clock.now());
    EXPECT_EQ(f.jobs.size(), 1u) << "the end is left to the seal's job";
    exchange.reset();
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_requests_total"), 0.0);
    f.run_jobs();
    EXPECT_EQ(f.sink.closes, 1u);
    EXPECT_EQ(family_sum(f.registry, "tokenmeter_requests_total"), 1.0)
        << "the end ran once, after the seal";
}

}  // namespace
}  // namespace tokenmeter::observe
