// The request plan without sockets: routing, usage injection and the upstream request head.
#include "http/request_plan.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::http {
namespace {

bhttp::request<bhttp::string_body> post(std::string target, std::string body) {
    bhttp::request<bhttp::string_body> r{bhttp::verb::post, target, 11};
    r.set(bhttp::field::host, "proxy.local");
    r.set(bhttp::field::content_type, "application/json");
    r.set("x-tenant-id", "acme");
    r.body() = std::move(body);
    r.prepare_payload();
    return r;
}

std::size_t field_count(const bhttp::request<bhttp::string_body>& r) {
    return static_cast<std::size_t>(std::distance(r.begin(), r.end()));
}

session_settings settings_for(std::string base_path = "") {
    session_settings s;
    s.upstream = {"http", "model", 8000, std::move(base_path)};
    return s;
}

TEST(RequestPlan, StreamedChatGetsUsageInjectedAndAnUpstreamHead) {
    auto request =
        post("/v1/chat/completions",
             R"({"model":"llama","stream":true,"messages":[{"role":"user","content":"hi"}]})");
    const auto fields = field_count(request);
    auto plan = plan_request(request, "/v1/chat/completions", fields, settings_for("/base"));
    EXPECT_EQ(plan.api, protocol::api_kind::openai_chat_completions);
    EXPECT_EQ(plan.info.model, "llama");
    EXPECT_TRUE(plan.info.stream);
    EXPECT_TRUE(plan.usage_injected);
    EXPECT_NE(plan.upstream.body().find("include_usage"), std::string::npos);
    EXPECT_EQ(plan.upstream.target(), "/base/v1/chat/completions");
    EXPECT_EQ(plan.upstream[bhttp::field::host], "model:8000");
    EXPECT_EQ(plan.upstream["x-tenant-id"], "acme");
    EXPECT_EQ(plan.upstream[bhttp::field::content_length],
              std::to_string(plan.upstream.body().size()));
    // The client's header fields stay for the observer; only the body moved.
    EXPECT_EQ(request["x-tenant-id"], "acme");
}

TEST(RequestPlan, UsageInjectionOffForwardsTheBodyAsItCame) {
    const std::string body = R"({"model":"llama","stream":true,"messages":[]})";
    auto request = post("/v1/chat/completions", body);
    auto settings = settings_for();
    settings.routes = protocol::route_table({}, false);
    auto plan = plan_request(request, "/v1/chat/completions", field_count(request), settings);
    EXPECT_FALSE(plan.usage_injected);
    EXPECT_EQ(plan.upstream.body(), body);
}

TEST(RequestPlan, GetIsNotMeteredAndKeepsItsMethod) {
    bhttp::request<bhttp::string_body> request{bhttp::verb::get, "/v1/models", 10};
    request.set(bhttp::field::host, "proxy.local");
    auto plan = plan_request(request, "/v1/models", field_count(request), settings_for());
    EXPECT_EQ(plan.api, protocol::api_kind::none);
    EXPECT_EQ(plan.version, 10u);
    EXPECT_FALSE(plan.keep_alive);
    EXPECT_EQ(plan.upstream.method(), bhttp::verb::get);
    EXPECT_EQ(plan.upstream.version(), 11u);
}

TEST(RequestPlan, UnknownTokenMethodGoesUpstreamAsItCame) {
    bhttp::request<bhttp::string_body> request;
    request.method_string("QUERY");
    request.target("/x");
    request.set(bhttp::field::host, "proxy.local");
    auto plan = plan_request(request, "/x", field_count(request), settings_for());
    EXPECT_EQ(plan.upstream.method_string(), "QUERY");
}

TEST(RequestPlan, PreserveHostKeepsTheClientsHostAndTrailersAreDropped) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    const auto fields = field_count(request);
    request.set("x-trailer", "late");  // as Beast appends a chunked body's trailer
    auto settings = settings_for();
    settings.preserve_host = true;
    auto plan = plan_request(request, "/v1/completions", fields, settings);
    EXPECT_EQ(plan.upstream[bhttp::field::host], "proxy.local");
    EXPECT_EQ(plan.upstream.find("x-trailer"), plan.upstream.end());
}

TEST(RequestPlan, HeadRequestIsMarked) {
    bhttp::request<bhttp::string_body> request{bhttp::verb::head, "/health", 11};
    request.set(bhttp::field::host, "proxy.local");
    auto plan = plan_request(request, "/health", field_count(request), settings_for());
    EXPECT_TRUE(plan.head);
}

// Every value of a (possibly repeated) field, in order.
std::vector<std::string> values_of(const bhttp::fields& f, std::string_view name) {
    std::vector<std::string> out;
    for (auto [it, end] = f.equal_range(beast::string_view(name.data(), name.size())); it != end;
         ++it) {
        out.emplace_back(it->value());
    }
    return out;
}

TEST(RequestPlan, ForwardedForKeepPassesTheClientsValuesAndAddsNothing) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-For", "203.0.113.7");
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings_for(),
                             client_origin{false, "10.0.0.1"});
    EXPECT_EQ(values_of(plan.upstream, "x-forwarded-for"), std::vector<std::string>{"203.0.113.7"});
    EXPECT_EQ(plan.upstream.find("x-forwarded-proto"), plan.upstream.end());
    EXPECT_EQ(plan.upstream.find(bhttp::field::forwarded), plan.upstream.end());
}

TEST(RequestPlan, ForwardedForAppendJoinsRepeatedLinesThenTheClientAddress) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-For", "203.0.113.7");
    request.insert("X-Forwarded-For", "198.51.100.2");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{false, "10.0.0.1"});
    EXPECT_EQ(values_of(plan.upstream, "x-forwarded-for"),
              std::vector<std::string>{"203.0.113.7, 198.51.100.2, 10.0.0.1"});
}

TEST(RequestPlan, ForwardedForAppendSetsTheAddressWhenAbsent) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{false, "127.0.0.1"});
    EXPECT_EQ(plan.upstream["x-forwarded-for"], "127.0.0.1");
}

TEST(RequestPlan, ForwardedForDropRemovesEveryLine) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-For", "203.0.113.7");
    request.insert("x-forwarded-for", "spoofed");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::drop;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{true, "127.0.0.1"});
    EXPECT_TRUE(values_of(plan.upstream, "x-forwarded-for").empty());
}

TEST(RequestPlan, TlsClientGetsProtoHttpsReplacingAClientsClaim) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-Proto", "http");
    request.insert(bhttp::field::forwarded, "for=192.0.2.60;proto=http");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{true, "::1"});
    EXPECT_EQ(values_of(plan.upstream, "x-forwarded-proto"), std::vector<std::string>{"https"});
    EXPECT_EQ(values_of(plan.upstream, "forwarded"),
              std::vector<std::string>{"for=192.0.2.60;proto=http, for=\"[::1]\";proto=https"});
}

TEST(RequestPlan, PlainClientLeavesProtoHeadersAsTheyCame) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-Proto", "https");  // set by a TLS-terminating ingress in front
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings_for(),
                             client_origin{false, "127.0.0.1"});
    EXPECT_EQ(plan.upstream["x-forwarded-proto"], "https");
}

}  // namespace
}  // namespace tokenmeter::http
