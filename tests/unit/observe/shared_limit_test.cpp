// The fleet-wide limit without Redis: a fake store whose replies the test gives, a manual clock,
// this replica's real local bucket. Every decision on a reply, a failure, on_error, the
// divergence kept while the store fails, and the metering observer's asynchronous admission.
#include "observe/shared_limit.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <string>

#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "metrics/shared_limit.hpp"
#include "observe/metering_observer.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

// Calls wait until the test answers them, in order.
class fake_store final : public shared_store {
  public:
    void call(const shared_call& c, std::function<void(const store_reply&)> done) override {
        calls.push_back(c);
        pending.push_back(std::move(done));
    }
    void answer(bool admitted, double level) {
        store_reply reply;
        reply.admitted = admitted;
        reply.level = level;
        reply.seconds = 0.001;
        next()(reply);
    }
    void fail(store_failure failure) {
        store_reply reply;
        reply.failure = failure;
        next()(reply);
    }
    std::function<void(const store_reply&)> next() {
        auto done = std::move(pending.front());
        pending.pop_front();
        return done;
    }
    std::vector<shared_call> calls;
    std::deque<std::function<void(const store_reply&)>> pending;
};

bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
}

struct fixture {
    explicit fixture(on_store_error on_error = on_store_error::allow) {
        usage::throughput_options limits;
        limits.enforce = true;
        limits.rates["acme"] = 100;  // burst 1 s: a bucket of 100 tokens
        local = std::make_unique<usage::provisioned_throughput>(limits);
        metrics = std::make_unique<metrics::shared_limit_metrics>(*registry.prometheus_registry());
        shared_limit_options options;
        options.key_prefix = "tm:";
        options.on_error = on_error;
        limiter = std::make_unique<shared_limiter>(options, store, *local, metrics.get());
    }

    void admit(std::uint64_t estimate) {
        decision.reset();
        limiter->admit("acme", estimate, clock.now(),
                       [this](const shared_decision& d) { decision = d; });
    }

    core::manual_clock clock{core::time_point{} + 1000s};
    metrics::registry registry{metrics::registry_options{}};
    fake_store store;
    std::unique_ptr<usage::provisioned_throughput> local;
    std::unique_ptr<metrics::shared_limit_metrics> metrics;
    std::unique_ptr<shared_limiter> limiter;
    std::optional<shared_decision> decision;
};

TEST(SharedLimit, KeysAreHashTaggedPerTenant) {
    EXPECT_EQ(bucket_key("tokenmeter:", "team-a"), "tokenmeter:{team-a}:tokens");
    EXPECT_EQ(bucket_key("", "x"), "{x}:tokens");
}

TEST(SharedLimit, ScriptArgumentsAndReplies) {
    shared_call call{"k", 1000, 500, -12.5, true};
    EXPECT_EQ(script_arguments(call),
              (std::vector<std::string>{"1000.000000", "500.000000", "-12.500000", "1"}));
    call.admit = false;
    EXPECT_EQ(script_arguments(call)[3], "0");

    auto ok = read_script_reply(1, "-42.250000");
    EXPECT_EQ(ok.failure, store_failure::none);
    EXPECT_TRUE(ok.admitted);
    EXPECT_DOUBLE_EQ(ok.level, -42.25);
    EXPECT_FALSE(read_script_reply(0, "3").admitted);
    EXPECT_EQ(read_script_reply(2, "3").failure, store_failure::reply);
    EXPECT_EQ(read_script_reply(1, "").failure, store_failure::reply);
    EXPECT_EQ(read_script_reply(1, "12x").failure, store_failure::reply);
    EXPECT_EQ(read_script_reply(1, "nan").failure, store_failure::reply);
    // The script is one EVAL: the bucket read, refill, decision and write in one atomic step.
    EXPECT_TRUE(contains(std::string(shared_limit_script()), "redis.call('TIME')"));
    EXPECT_TRUE(contains(std::string(shared_limit_script()), "PEXPIRE"));
}

TEST(SharedLimit, CoversOnlyEnforcedTenantsWithARate) {
    fixture f;
    EXPECT_TRUE(f.limiter->covers("acme"));
    EXPECT_FALSE(f.limiter->covers("other"));
    usage::throughput_options off;
    off.rates["acme"] = 100;
    usage::provisioned_throughput not_enforced(off);
    shared_limiter limiter({}, f.store, not_enforced, nullptr);
    EXPECT_FALSE(limiter.covers("acme"));
}

TEST(SharedLimit, TheStoreDecidesAndARefusalSaysWhenToRetry) {
    fixture f;
    f.admit(30);
    ASSERT_EQ(f.store.calls.size(), 1u);
    EXPECT_EQ(f.store.calls[0].key, "tm:{acme}:tokens");
    EXPECT_DOUBLE_EQ(f.store.calls[0].cost, 30);
    EXPECT_DOUBLE_EQ(f.store.calls[0].rate, 100);
    EXPECT_DOUBLE_EQ(f.store.calls[0].capacity, 100);
    EXPECT_TRUE(f.store.calls[0].admit);
    EXPECT_FALSE(f.decision) << "nothing decided before the store answers";
    f.store.answer(true, 70);
    ASSERT_TRUE(f.decision);
    EXPECT_TRUE(f.decision->admission.admitted);
    EXPECT_TRUE(f.decision->shared);

    f.admit(30);
    f.store.answer(false, -250);
    EXPECT_FALSE(f.decision->admission.admitted);
    EXPECT_DOUBLE_EQ(f.decision->admission.retry_after_seconds, 2.5);  // 250 tokens at 100/s
    const std::string text = f.registry.expose();
    EXPECT_TRUE(contains(text, "tokenmeter_tenant_shared_limit_store_in_use 1")) << text;
    EXPECT_TRUE(contains(
        text,
        R"(tokenmeter_tenant_shared_limit_decisions_total{decision="refused",store="shared"} 1)"));
}

TEST(SharedLimit, SettlementSendsTheDifferenceToTheEstimate) {
    fixture f;
    f.admit(30);
    f.store.answer(true, 70);
    f.limiter->settle("acme", 130 - 30, f.clock.now());
    ASSERT_EQ(f.store.calls.size(), 2u);
    EXPECT_FALSE(f.store.calls[1].admit);
    EXPECT_DOUBLE_EQ(f.store.calls[1].cost, 100);
    f.store.answer(true, -30);
    // An estimate that was too high is given back.
    f.limiter->settle("acme", -20, f.clock.now());
    EXPECT_DOUBLE_EQ(f.store.calls[2].cost, -20);
    // The local bucket followed: 100 - 30 - 100 + 20.
    EXPECT_DOUBLE_EQ(f.local->level("acme", f.clock.now()), -10);
}

TEST(SharedLimit, StoreDownAllowLetsTheLocalBucketDecideAndKeepsTheDivergence) {
    fixture f(on_store_error::allow);
    f.admit(60);
    f.store.fail(store_failure::timeout);
    ASSERT_TRUE(f.decision);
    EXPECT_TRUE(f.decision->admission.admitted) << "the local bucket is full";
    EXPECT_FALSE(f.decision->shared);
    EXPECT_DOUBLE_EQ(f.limiter->unsynced_tokens(), 60);
    f.limiter->settle("acme", 90, f.clock.now());
    f.store.fail(store_failure::connection);
    EXPECT_DOUBLE_EQ(f.limiter->unsynced_tokens(), 150);

    // The local bucket (100 - 150) is in debt: refused locally, for as long as it takes.
    f.admit(10);
    f.store.fail(store_failure::connection);
    EXPECT_FALSE(f.decision->admission.admitted);
    EXPECT_DOUBLE_EQ(f.decision->admission.retry_after_seconds, 0.5);
    EXPECT_DOUBLE_EQ(f.limiter->unsynced_tokens(), 150) << "a refusal charges nothing";

    // The store is back: the tokens it missed go with the next call, once.
    f.clock.advance(1s);
    f.admit(10);
    EXPECT_DOUBLE_EQ(f.store.calls.back().cost, 160);
    EXPECT_DOUBLE_EQ(f.limiter->unsynced_tokens(), 0);
    f.store.answer(true, -60);
    EXPECT_TRUE(f.decision->shared);
    EXPECT_DOUBLE_EQ(f.limiter->unsynced_tokens(), 0);
    const std::string text = f.registry.expose();
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_tenant_shared_limit_errors_total{reason="timeout"} 1)"))
        << text;
    EXPECT_TRUE(
        contains(text, R"(tokenmeter_tenant_shared_limit_errors_total{reason="connection"} 2)"));
    EXPECT_TRUE(contains(text, R"(decisions_total{decision="admitted",store="local"} 1)"));
    EXPECT_TRUE(contains(text, "tokenmeter_tenant_shared_limit_unsynced_tokens 0"));
}

TEST(SharedLimit, ARefusedCallPutsTheDivergenceBack) {
    fixture f;
    f.admit(60);
    f.store.fail(store_failure::connection);
    f.admit(5);
    EXPECT_DOUBLE_EQ(f.store.calls.back().cost, 65);
    f.store.answer(false, -10);
    EXPECT_DOUBLE_EQ(f.limiter->unsynced_tokens(), 60) << "nothing was charged by a refusal";
}

TEST(SharedLimit, StoreDownDenyRefuses) {
    fixture f(on_store_error::deny);
    f.admit(1);
    f.store.fail(store_failure::connection);
    EXPECT_FALSE(f.decision->admission.admitted);
    EXPECT_FALSE(f.decision->shared);
    EXPECT_DOUBLE_EQ(f.decision->admission.retry_after_seconds, 1);
    EXPECT_TRUE(contains(f.registry.expose(), "tokenmeter_tenant_shared_limit_store_in_use 0"));
}

// The observer side: admission is pending until the store answers; the end settles.
TEST(SharedLimit, MeteringObserverAdmitsAsynchronouslyAndSettles) {
    fixture f(on_store_error::deny);
    usage::tenant_options tenant_settings;
    tenant_settings.source = usage::tenant_source::header;
    usage::tenant_resolver tenants(tenant_settings, "");
    metrics::billing_options billing_settings;
    billing_settings.tenants_on = true;
    metrics::billing_metrics billing(f.registry, billing_settings);
    metering_parts parts{
        &f.registry,    nullptr,  &tenants, f.local.get(),
        nullptr,        &billing, nullptr,  [] { return std::int64_t{1'700'000'000'000}; },
        f.limiter.get()};
    metering_observer observer(parts, {});
    auto begin = [&](const std::string& tenant) {
        request_facts facts;
        facts.api = protocol::api_kind::openai_chat_completions;
        facts.info.model = "llama";
        facts.info.prompt_text = std::string(400, 'x');  // no tokenizer: about 100 tokens
        facts.info.max_output_tokens = 50;               // and at most 50 of output
        facts.received = f.clock.now();
        facts.header = [tenant](std::string_view name) -> std::string_view {
            return name == "x-tenant-id" ? std::string_view(tenant) : std::string_view();
        };
        return observer.begin(std::move(facts));
    };

    auto first = begin("acme");
    ASSERT_TRUE(first->admission_pending());
    bool resumed = false;
    first->await_admission([&] { resumed = true; });
    ASSERT_EQ(f.store.calls.size(), 1u);
    EXPECT_DOUBLE_EQ(f.store.calls[0].cost, 150)
        << "the prompt's estimate and the output limit, reserved at admission";
    EXPECT_FALSE(resumed);
    f.store.answer(true, 0);
    EXPECT_TRUE(resumed);
    EXPECT_FALSE(first->admission_pending());
    EXPECT_TRUE(first->admitted().admitted);
    first->request_sent(f.clock.now());  // the server has it
    (void)first->response_head(200, "application/json", true, f.clock.now());
    first->body(
        R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":90,"completion_tokens":40}})",
        f.clock.now());
    first->end(end_reason::upstream_complete, f.clock.now());
    ASSERT_EQ(f.store.calls.size(), 2u);
    EXPECT_FALSE(f.store.calls[1].admit);
    EXPECT_DOUBLE_EQ(f.store.calls[1].cost, -20) << "90 + 40 used, 150 reserved: 20 given back";
    f.store.answer(true, -30);

    auto second = begin("acme");
    second->await_admission([] {});
    f.store.fail(store_failure::timeout);
    EXPECT_FALSE(second->admitted().admitted);
    EXPECT_EQ(second->admitted().retry_after, "1");
    EXPECT_TRUE(contains(second->admitted().message, "shared limit store is unavailable"));
    second->end(end_reason::rejected, f.clock.now());
    EXPECT_EQ(f.store.calls.size(), 3u) << "a refused request settles nothing";

    auto other = begin("nobody");
    EXPECT_FALSE(other->admission_pending()) << "a tenant without a rate never waits";
    EXPECT_TRUE(other->admitted().admitted);
    other->end(end_reason::client_cancel, f.clock.now());
}

}  // namespace
}  // namespace tokenmeter::observe
