// The access record the metering observer hands to the log at a request's end: one per request,
// its counts the billing rule's (the same as the usage record's), unknown values left unset.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_sink.hpp"
#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "observe/metering_observer.hpp"
#include "usage/record.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::observe {
namespace {

using namespace std::chrono_literals;

// access_entry holds views: what a test reads later is copied here.
struct logged {
    std::string method, path, outcome, api, model, tenant, request_id, client, upstream;
    int status = 0;
    std::optional<double> ttft;
    double duration = 0;
    std::optional<std::uint64_t> input, output, bytes_in, bytes_out;
};

struct fixture {
    explicit fixture(double tokens_per_second = 0) {
        usage::tenant_options tenant_settings;
        tenant_settings.source = usage::tenant_source::header;
        usage::throughput_options limits;
        if (tokens_per_second > 0) {
            limits.enforce = true;
            limits.rates["acme"] = tokens_per_second;
        }
        tenants = std::make_unique<usage::tenant_resolver>(tenant_settings, "");
        throughput = std::make_unique<usage::provisioned_throughput>(limits);
        metering_parts parts{
            &registry, nullptr, tenants.get(), throughput.get(),
            &ids,      nullptr, &sink,         [] { return std::int64_t{1'700'000'000'000}; }};
        parts.access_log = [this](const access_entry& e) {
            entries.push_back({std::string(e.method), std::string(e.path), std::string(e.outcome),
                               std::string(e.api), std::string(e.model), std::string(e.tenant),
                               std::string(e.request_id), std::string(e.client),
                               std::string(e.upstream), e.status, e.time_to_first_token,
                               e.duration_seconds, e.input_tokens, e.output_tokens, e.bytes_in,
                               e.bytes_out});
        };
        metering_options options;
        options.upstream = "10.0.0.7:8000";
        observer = std::make_unique<metering_observer>(parts, options);
    }

    std::unique_ptr<exchange_observer> begin(std::string tenant, std::string request_id) {
        request_facts facts;
        facts.api = protocol::api_kind::openai_chat_completions;
        facts.info.model = "llama";
        facts.info.stream = true;
        facts.target = "/v1/chat/completions?key=secret";
        facts.method = "POST";
        facts.client = "192.0.2.1";
        facts.body_bytes = 321;
        facts.received = clock.now();
        facts.header = [tenant = std::move(tenant),
                        request_id = std::move(request_id)](std::string_view name) {
            return std::string_view(name == "x-tenant-id"    ? tenant
                                    : name == "x-request-id" ? request_id
                                                             : std::string_view());
        };
        return observer->begin(std::move(facts));
    }

    core::manual_clock clock{core::time_point{} + 1000s};
    metrics::registry registry{metrics::registry_options{}};
    std::unique_ptr<usage::tenant_resolver> tenants;
    std::unique_ptr<usage::provisioned_throughput> throughput;
    usage::id_generator ids{1, 1};
    fake_sink sink;
    std::unique_ptr<metering_observer> observer;
    std::vector<logged> entries;
};

std::string chunk(const std::string& text) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + text + "\"}}]}\n\n";
}

TEST(AccessRecord, AStreamedRequestLogsOnceWithTheRecordsCounts) {
    fixture f;
    auto exchange = f.begin("acme", "req-1");
    exchange->request_sent(f.clock.now());
    (void)exchange->response_head(200, "text/event-stream", true, f.clock.now());
    f.sink.make_durable();
    f.clock.advance(40ms);
    const std::string first = chunk("Hello");
    exchange->body(first, f.clock.now());
    const std::string usage =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\n\n";
    f.clock.advance(10ms);
    exchange->body(usage, f.clock.now());
    (void)exchange->seal(f.clock.now());
    f.sink.make_durable();
    exchange->end(end_reason::upstream_complete, f.clock.now() + 1ms);

    ASSERT_EQ(f.entries.size(), 1u) << "one request, one record, sealed or not";
    const logged& e = f.entries[0];
    EXPECT_EQ(e.method, "POST");
    EXPECT_EQ(e.path, "/v1/chat/completions") << "the query is left out";
    EXPECT_EQ(e.status, 200);
    EXPECT_EQ(e.outcome, "complete");
    EXPECT_EQ(e.api, "openai_chat");
    EXPECT_EQ(e.model, "llama");
    EXPECT_EQ(e.tenant, "acme");
    EXPECT_EQ(e.request_id, "req-1");
    EXPECT_EQ(e.client, "192.0.2.1");
    EXPECT_EQ(e.upstream, "10.0.0.7:8000");
    ASSERT_TRUE(e.ttft.has_value());
    EXPECT_DOUBLE_EQ(*e.ttft, 0.040);
    EXPECT_DOUBLE_EQ(e.duration, 0.050) << "the sealed summary's, as the record's";
    EXPECT_EQ(e.bytes_in, 321u);
    EXPECT_EQ(e.bytes_out, first.size() + usage.size());

    std::optional<usage::usage_record> record;
    for (const std::string& line : f.sink.lines) {
        auto entry = usage::decode_line(std::string_view(line).substr(0, line.size() - 1));
        if (entry && entry->kind == usage::entry_kind::close) {
            record = entry->record;
        }
    }
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(e.input, record->input.value);
    EXPECT_EQ(e.output, record->output.value);
    EXPECT_EQ(e.input, 12u);
    EXPECT_EQ(e.output, 7u);
}

TEST(AccessRecord, ARefusedTenantHasNoUpstreamAndNoResponseBytes) {
    fixture f(10);
    auto first = f.begin("acme", "");
    first->request_sent(f.clock.now());
    (void)first->response_head(200, "application/json", true, f.clock.now());
    first->body(R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":10}})",
                f.clock.now());
    first->end(end_reason::upstream_complete, f.clock.now());

    auto refused = f.begin("acme", "bad id with spaces");
    ASSERT_FALSE(refused->admitted().admitted);
    refused->answered_locally("provisioned_throughput_exceeded");
    (void)refused->response_head(429, "application/json", false, f.clock.now());
    refused->end(end_reason::rejected, f.clock.now());

    ASSERT_EQ(f.entries.size(), 2u);
    const logged& e = f.entries[1];
    EXPECT_EQ(e.status, 429);
    EXPECT_EQ(e.outcome, "rejected");
    EXPECT_EQ(e.upstream, "") << "never forwarded";
    EXPECT_EQ(e.bytes_out, std::nullopt) << "the proxy's own answer is not counted as upstream's";
    EXPECT_EQ(e.ttft, std::nullopt);
    EXPECT_EQ(e.request_id, "") << "kept only as the usage record keeps it";
    EXPECT_EQ(e.input, 0u) << "not served: the billing rule bills 0";
    EXPECT_EQ(e.output, 0u);
}

TEST(AccessRecord, ARequestRefusedBeforeMeteringLogsWhatItsHeadSaid) {
    fixture f;
    unforwarded_request refused;
    refused.api = protocol::api_kind::openai_chat_completions;
    refused.model = "llama";
    refused.status = 413;
    refused.seconds = 0.002;
    refused.method = "POST";
    refused.target = "/v1/chat/completions?key=secret";
    refused.client = "192.0.2.9";
    refused.request_id = "req-9";
    f.observer->unforwarded(refused);

    unforwarded_request unreadable;  // a head the proxy could not read: nothing known of it
    unreadable.status = 400;
    unreadable.request_id = "bad id";
    f.observer->unforwarded(unreadable);

    ASSERT_EQ(f.entries.size(), 2u);
    const logged& e = f.entries[0];
    EXPECT_EQ(e.method, "POST");
    EXPECT_EQ(e.path, "/v1/chat/completions") << "the query is left out";
    EXPECT_EQ(e.status, 413);
    EXPECT_EQ(e.outcome, "rejected");
    EXPECT_EQ(e.api, "openai_chat");
    EXPECT_EQ(e.model, "llama");
    EXPECT_EQ(e.tenant, "");
    EXPECT_EQ(e.request_id, "req-9");
    EXPECT_EQ(e.client, "192.0.2.9");
    EXPECT_EQ(e.upstream, "");
    EXPECT_DOUBLE_EQ(e.duration, 0.002);
    EXPECT_EQ(e.input, 0u) << "not served: the billing rule bills 0";
    EXPECT_EQ(e.output, 0u);
    EXPECT_EQ(e.bytes_in, std::nullopt);
    EXPECT_EQ(e.bytes_out, std::nullopt);

    const logged& u = f.entries[1];
    EXPECT_EQ(u.status, 400);
    EXPECT_EQ(u.method, "");
    EXPECT_EQ(u.api, "") << "not metered";
    EXPECT_EQ(u.request_id, "") << "kept only as the usage record keeps it";
}

TEST(AccessRecord, NoRecordForARefusedRequestWhenTheAccessLogIsOff) {
    fixture f;
    f.observer.reset();
    metering_parts parts{&f.registry, nullptr, f.tenants.get(), f.throughput.get(),
                         &f.ids,      nullptr, &f.sink,         [] { return std::int64_t{0}; }};
    metering_observer quiet(parts, metering_options{});
    unforwarded_request refused;
    refused.status = 400;
    quiet.unforwarded(refused);
    EXPECT_TRUE(f.entries.empty());
    EXPECT_NE(f.registry.expose().find("code=\"400\""), std::string::npos);
}

}  // namespace
}  // namespace tokenmeter::observe
