// The request plan without sockets: routing, usage injection and the upstream request head.
#include "relay/request_plan.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "net/beast.hpp"

namespace tokenmeter::relay {
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

// The upstream request as the model server reads it: the plan's head and body, parsed by Beast.
bhttp::request<bhttp::string_body> sent(const request_plan& plan) {
    const std::string bytes = plan.upstream.head + plan.upstream.body;
    bhttp::request_parser<bhttp::string_body> parser;
    parser.eager(true);
    error_code ec;
    std::size_t used = 0;
    while (used < bytes.size() && !parser.is_done() && !ec) {
        const std::size_t n =
            parser.put(asio::const_buffer(bytes.data() + used, bytes.size() - used), ec);
        if (n == 0) {
            break;
        }
        used += n;
    }
    EXPECT_FALSE(ec) << ec.message() << "\n" << plan.upstream.head;
    EXPECT_TRUE(parser.is_done()) << plan.upstream.head;
    EXPECT_EQ(used, bytes.size()) << "bytes after the request";
    return parser.release();
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
    const auto up = sent(plan);
    EXPECT_EQ(plan.api, protocol::api_kind::openai_chat_completions);
    EXPECT_EQ(plan.info.model, "llama");
    EXPECT_TRUE(plan.info.stream);
    EXPECT_TRUE(plan.usage_injected);
    EXPECT_NE(plan.upstream.body.find("include_usage"), std::string::npos);
    EXPECT_EQ(up.target(), "/base/v1/chat/completions");
    EXPECT_EQ(up[bhttp::field::host], "model:8000");
    EXPECT_EQ(up["x-tenant-id"], "acme");
    EXPECT_EQ(up[bhttp::field::content_length], std::to_string(plan.upstream.body.size()));
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
    EXPECT_EQ(plan.upstream.body, body);
}

TEST(RequestPlan, GetIsNotMeteredAndKeepsItsMethod) {
    bhttp::request<bhttp::string_body> request{bhttp::verb::get, "/v1/models", 10};
    request.set(bhttp::field::host, "proxy.local");
    auto plan = plan_request(request, "/v1/models", field_count(request), settings_for());
    const auto up = sent(plan);
    EXPECT_EQ(plan.api, protocol::api_kind::none);
    EXPECT_EQ(plan.version, 10u);
    EXPECT_FALSE(plan.keep_alive);
    EXPECT_EQ(up.method(), bhttp::verb::get);
    EXPECT_EQ(up.version(), 11u);
}

TEST(RequestPlan, UnknownTokenMethodGoesUpstreamAsItCame) {
    bhttp::request<bhttp::string_body> request;
    request.method_string("QUERY");
    request.target("/x");
    request.set(bhttp::field::host, "proxy.local");
    auto plan = plan_request(request, "/x", field_count(request), settings_for());
    const auto up = sent(plan);
    EXPECT_EQ(up.method_string(), "QUERY");
}

TEST(RequestPlan, PreserveHostKeepsTheClientsHostAndTrailersAreDropped) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    const auto fields = field_count(request);
    request.set("x-trailer", "late");  // as Beast appends a chunked body's trailer
    auto settings = settings_for();
    settings.preserve_host = true;
    auto plan = plan_request(request, "/v1/completions", fields, settings);
    const auto up = sent(plan);
    EXPECT_EQ(up[bhttp::field::host], "proxy.local");
    EXPECT_EQ(up.find("x-trailer"), up.end());
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
    const auto up = sent(plan);
    EXPECT_EQ(values_of(up, "x-forwarded-for"), std::vector<std::string>{"203.0.113.7"});
    EXPECT_EQ(up.find("x-forwarded-proto"), up.end());
    EXPECT_EQ(up.find(bhttp::field::forwarded), up.end());
}

TEST(RequestPlan, ForwardedForAppendJoinsRepeatedLinesThenTheClientAddress) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-For", "203.0.113.7");
    request.insert("X-Forwarded-For", "198.51.100.2");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{false, "10.0.0.1"});
    const auto up = sent(plan);
    EXPECT_EQ(values_of(up, "x-forwarded-for"),
              std::vector<std::string>{"203.0.113.7, 198.51.100.2, 10.0.0.1"});
}

TEST(RequestPlan, ForwardedForAppendSetsTheAddressWhenAbsent) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{false, "127.0.0.1"});
    const auto up = sent(plan);
    EXPECT_EQ(up["x-forwarded-for"], "127.0.0.1");
}

TEST(RequestPlan, ForwardedForDropRemovesEveryLine) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-For", "203.0.113.7");
    request.insert("x-forwarded-for", "spoofed");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::drop;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{true, "127.0.0.1"});
    const auto up = sent(plan);
    EXPECT_TRUE(values_of(up, "x-forwarded-for").empty());
}

TEST(RequestPlan, TlsClientGetsProtoHttpsReplacingAClientsClaim) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-Proto", "http");
    request.insert(bhttp::field::forwarded, "for=192.0.2.60;proto=http");
    auto settings = settings_for();
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{true, "::1"});
    const auto up = sent(plan);
    EXPECT_EQ(values_of(up, "x-forwarded-proto"), std::vector<std::string>{"https"});
    EXPECT_EQ(values_of(up, "forwarded"),
              std::vector<std::string>{"for=192.0.2.60;proto=http, for=\"[::1]\";proto=https"});
}

TEST(RequestPlan, PlainClientLeavesProtoHeadersAsTheyCame) {
    auto request = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    request.insert("X-Forwarded-Proto", "https");  // set by a TLS-terminating ingress in front
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings_for(),
                             client_origin{false, "127.0.0.1"});
    const auto up = sent(plan);
    EXPECT_EQ(up["x-forwarded-proto"], "https");
}

TEST(RequestPlan, UpstreamHeadIsTheEndToEndFieldsInOrderThenTheProxysOwn) {
    bhttp::request<bhttp::string_body> request{bhttp::verb::post, "/v1/completions", 11};
    request.insert("Connection", "keep-alive, X-Hop");
    request.insert(bhttp::field::host, "proxy.local");
    request.insert("X-Hop", "1");
    request.insert("Authorization", "Bearer k");
    request.insert("Expect", "100-continue");
    request.insert("x-forwarded-for", "203.0.113.7");
    request.insert("Transfer-Encoding", "chunked");
    request.insert("Keep-Alive", "timeout=5");
    request.insert("accept", "text/event-stream");
    request.insert("x-empty", "");
    request.body() = R"({"model":"m","prompt":"x"})";
    auto settings = settings_for("/base");
    settings.routes = protocol::route_table({}, false);
    settings.forwarded_for = forwarded_for_policy::append;
    auto plan = plan_request(request, "/v1/completions", field_count(request), settings,
                             client_origin{false, "10.0.0.1"});
    EXPECT_EQ(plan.upstream.head,
              "POST /base/v1/completions HTTP/1.1\r\n"
              "Authorization: Bearer k\r\n"
              "accept: text/event-stream\r\n"
              "x-empty: \r\n"
              "X-Forwarded-For: 203.0.113.7, 10.0.0.1\r\n"
              "traceparent: " +
                  core::format_traceparent(plan.trace) +
                  "\r\n"
                  "Host: model:8000\r\n"
                  "Accept-Encoding: identity\r\n"
                  "Content-Length: " +
                  std::to_string(plan.upstream.body.size()) + "\r\n\r\n");
    EXPECT_EQ(plan.upstream.body, R"({"model":"m","prompt":"x"})");
}

TEST(RequestPlan, MeteredRequestsAskForIdentityWhateverTheClientAccepts) {
    auto request = post("/v1/chat/completions", R"({"model":"m","messages":[]})");
    request.insert(bhttp::field::accept_encoding, "gzip, br");
    request.insert(bhttp::field::accept_encoding, "zstd");
    auto plan = plan_request(request, "/v1/chat/completions", field_count(request), settings_for());
    const auto up = sent(plan);
    EXPECT_EQ(up.count(bhttp::field::accept_encoding), 1U);
    EXPECT_EQ(up[bhttp::field::accept_encoding], "identity");

    bhttp::request<bhttp::string_body> get{bhttp::verb::get, "/v1/models", 11};
    get.set(bhttp::field::host, "proxy.local");
    get.set(bhttp::field::accept_encoding, "gzip");
    auto passed = plan_request(get, "/v1/models", field_count(get), settings_for());
    EXPECT_EQ(sent(passed)[bhttp::field::accept_encoding], "gzip") << "not metered: as it came";
}

// A body that names no model, on an API that names it in the body: served under a server's
// default model the meter cannot know or price, so refused (or, under forward, forwarded).
TEST(RequestPlan, AMeteredBodyWithoutItsModelIsRefusedUnlessForwardingIsConfigured) {
    for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/responses",
                             "/v1/messages", "/api/chat", "/api/generate"}) {
        auto request = post(path, R"({"messages":[{"role":"user","content":"hi"}],"prompt":"x"})");
        auto plan = plan_request(request, path, field_count(request), settings_for());
        EXPECT_TRUE(plan.model_missing) << path;
        EXPECT_TRUE(plan.upstream.head.empty()) << path;
        auto named = post(path, R"({"model":"m","prompt":"x"})");
        EXPECT_FALSE(plan_request(named, path, field_count(named), settings_for()).model_missing)
            << path;
        auto again = post(path, R"({"prompt":"x"})");
        auto settings = settings_for();
        settings.unparsable_body = unparsable_body_policy::forward;
        auto forwarded = plan_request(again, path, field_count(again), settings);
        EXPECT_FALSE(forwarded.model_missing) << path;
        EXPECT_FALSE(forwarded.upstream.head.empty()) << path;
    }
    // TGI and llama.cpp serve one model and name none in the body.
    for (const char* path : {"/generate", "/completion"}) {
        auto request = post(path, R"({"inputs":"x","prompt":"x"})");
        EXPECT_FALSE(
            plan_request(request, path, field_count(request), settings_for()).model_missing)
            << path;
    }
}

TEST(RequestPlan, AnUnreadableBodyOnAMeteredRouteIsRefusedUnlessForwardingIsConfigured) {
    for (const char* body : {"not json", "[1,2]", R"({"model":"m")", R"({"model":"m"} x)"}) {
        auto request = post("/v1/chat/completions", body);
        auto plan =
            plan_request(request, "/v1/chat/completions", field_count(request), settings_for());
        EXPECT_TRUE(plan.unparsable_body) << body;
        EXPECT_TRUE(plan.upstream.head.empty()) << body;

        auto again = post("/v1/chat/completions", body);
        auto settings = settings_for();
        settings.unparsable_body = unparsable_body_policy::forward;
        auto forwarded = plan_request(again, "/v1/chat/completions", field_count(again), settings);
        EXPECT_FALSE(forwarded.unparsable_body) << body;
        EXPECT_EQ(forwarded.upstream.body, body);
    }
    auto upload = post("/v1/files", "not json");
    EXPECT_FALSE(
        plan_request(upload, "/v1/files", field_count(upload), settings_for()).unparsable_body)
        << "not metered";
}

TEST(RequestPlan, BodiesPythonsJsonReadsAreReadAsItReadsThem) {
    // NaN, Infinity, 1e400 and a lone surrogate: vLLM serves these, so they are metered.
    auto request = post("/v1/chat/completions",
                        R"({"model":"llama","temperature":NaN,"top_p":Infinity,"seed":-Infinity,)"
                        R"("max_tokens":1e400,"stream":true,"messages":[{"role":"user",)"
                        R"("content":"a\ud800b"}]})");
    const std::string original = request.body();
    auto plan = plan_request(request, "/v1/chat/completions", field_count(request), settings_for());
    EXPECT_FALSE(plan.unparsable_body);
    EXPECT_EQ(plan.info.model, "llama");
    EXPECT_TRUE(plan.info.stream);
    EXPECT_EQ(plan.info.prompt_text, std::string("a\xEF\xBF\xBD") + "b");
    ASSERT_TRUE(plan.usage_injected);
    EXPECT_EQ(plan.upstream.body,
              "{\"stream_options\":{\"include_usage\":true}," + original.substr(1))
        << "the client's bytes go upstream as they came, with usage asked for";
}

TEST(RequestPlan, ContentLengthOnlyWhereBeastWouldSetIt) {
    bhttp::request<bhttp::string_body> get{bhttp::verb::get, "/v1/models", 11};
    get.set(bhttp::field::host, "proxy.local");
    auto plan = plan_request(get, "/v1/models", field_count(get), settings_for("/base"));
    const std::string trace_line = "traceparent: " + core::format_traceparent(plan.trace) + "\r\n";
    EXPECT_EQ(plan.upstream.head,
              "GET /base/v1/models HTTP/1.1\r\n" + trace_line + "Host: model:8000\r\n\r\n");

    // An empty OPTIONS, PUT or POST says its length is 0; "*" takes no base path.
    bhttp::request<bhttp::string_body> options{bhttp::verb::options, "*", 11};
    options.set(bhttp::field::host, "proxy.local");
    plan = plan_request(options, "*", field_count(options), settings_for());
    EXPECT_EQ(plan.upstream.head,
              "OPTIONS * HTTP/1.1\r\ntraceparent: " + core::format_traceparent(plan.trace) +
                  "\r\nHost: model:8000\r\nContent-Length: 0\r\n\r\n");
}

}  // namespace
}  // namespace tokenmeter::relay

namespace tokenmeter::relay {
namespace {

constexpr std::string_view client_trace = "0af7651916cd43dd8448eb211c80319c";
constexpr std::string_view client_parent = "b7ad6b7169203331";

std::string upstream_field(const request_plan& plan, std::string_view name) {
    const auto up = sent(plan);
    return std::string(up[beast::string_view(name.data(), name.size())]);
}

std::size_t count_lines(const std::string& head, std::string_view name) {
    std::size_t n = 0;
    const std::string prefix = "\r\n" + std::string(name) + ":";
    for (std::size_t at = head.find(prefix); at != std::string::npos;
         at = head.find(prefix, at + 1)) {
        ++n;
    }
    return n;
}

TEST(RequestPlanTrace, AValidTraceparentKeepsItsTraceAndFlagsWithTheProxysSpanAsParent) {
    auto request = post("/v1/chat/completions", R"({"model":"m","messages":[]})");
    request.insert("traceparent",
                   "00-" + std::string(client_trace) + "-" + std::string(client_parent) + "-01");
    request.insert("tracestate", "rojo=00f067aa0ba902b7");
    request.insert("tracestate", "congo=t61rcWkgMzE");
    core::trace_random random(7);
    const auto plan = plan_request(request, "/v1/chat/completions", field_count(request),
                                   settings_for(), {}, &random);
    EXPECT_EQ(core::to_hex(plan.trace.trace), client_trace);
    EXPECT_EQ(core::to_hex(plan.trace.parent), client_parent);
    EXPECT_TRUE(plan.trace.sampled());
    const std::string span = core::to_hex(plan.trace.span);
    EXPECT_NE(span, client_parent);
    EXPECT_NE(span, "0000000000000000");
    EXPECT_EQ(upstream_field(plan, "traceparent"),
              "00-" + std::string(client_trace) + "-" + span + "-01");
    EXPECT_EQ(count_lines(plan.upstream.head, "traceparent"), 1U) << plan.upstream.head;
    // Both tracestate lines, unchanged and in order.
    EXPECT_NE(plan.upstream.head.find("tracestate: rojo=00f067aa0ba902b7\r\ntracestate: "
                                      "congo=t61rcWkgMzE\r\n"),
              std::string::npos)
        << plan.upstream.head;
}

TEST(RequestPlanTrace, AnUnsampledTraceStaysUnsampled) {
    auto request = post("/v1/chat/completions", R"({"model":"m","messages":[]})");
    request.insert("TraceParent",
                   "00-" + std::string(client_trace) + "-" + std::string(client_parent) + "-00");
    const auto plan =
        plan_request(request, "/v1/chat/completions", field_count(request), settings_for());
    EXPECT_FALSE(plan.trace.sampled());
    EXPECT_EQ(core::to_hex(plan.trace.trace), client_trace);
    EXPECT_EQ(upstream_field(plan, "traceparent").substr(52), "-00");
    EXPECT_EQ(plan.upstream.head.find("TraceParent"), std::string::npos);
}

TEST(RequestPlanTrace, AMalformedTraceparentIsReplacedAndItsTracestateDropped) {
    for (const std::string& bad :
         {"00-" + std::string(client_trace) + "-" + std::string(client_parent) + "-1",
          "00-0AF7651916CD43DD8448EB211C80319C-" + std::string(client_parent) + "-01",
          "ff-" + std::string(client_trace) + "-" + std::string(client_parent) + "-01",
          "00-00000000000000000000000000000000-" + std::string(client_parent) + "-01",
          std::string("garbage\x01\xff")}) {
        auto request = post("/v1/chat/completions", R"({"model":"m","messages":[]})");
        request.insert("traceparent", bad);
        request.insert("tracestate", "rojo=00f067aa0ba902b7");
        const auto plan =
            plan_request(request, "/v1/chat/completions", field_count(request), settings_for());
        EXPECT_NE(core::to_hex(plan.trace.trace), client_trace) << bad;
        EXPECT_TRUE(plan.trace.valid());
        EXPECT_EQ(plan.trace.parent, core::span_id{});
        EXPECT_TRUE(plan.trace.sampled()) << "the default ratio samples every new trace";
        EXPECT_EQ(upstream_field(plan, "traceparent"), core::format_traceparent(plan.trace));
        EXPECT_EQ(plan.upstream.head.find(bad), std::string::npos) << plan.upstream.head;
        EXPECT_EQ(plan.upstream.head.find("tracestate"), std::string::npos) << plan.upstream.head;
        EXPECT_EQ(count_lines(plan.upstream.head, "traceparent"), 1U);
    }
}

TEST(RequestPlanTrace, TwoTraceparentFieldsAreMalformed) {
    auto request = post("/v1/chat/completions", R"({"model":"m","messages":[]})");
    const std::string valid =
        "00-" + std::string(client_trace) + "-" + std::string(client_parent) + "-01";
    request.insert("traceparent", valid);
    request.insert("traceparent", valid);
    const auto plan =
        plan_request(request, "/v1/chat/completions", field_count(request), settings_for());
    EXPECT_NE(core::to_hex(plan.trace.trace), client_trace);
    EXPECT_EQ(count_lines(plan.upstream.head, "traceparent"), 1U);
}

TEST(RequestPlanTrace, WithoutTraceparentANewTraceIsSampledByTheRatio) {
    auto settings = settings_for();
    for (const double ratio : {0.0, 1.0}) {
        settings.trace_sampling_ratio = ratio;
        auto request = bhttp::request<bhttp::string_body>{bhttp::verb::get, "/v1/models", 11};
        request.insert("tracestate", "rojo=1");
        const auto plan = plan_request(request, "/v1/models", field_count(request), settings);
        EXPECT_TRUE(plan.trace.valid());
        EXPECT_EQ(plan.trace.sampled(), ratio == 1.0);
        EXPECT_EQ(upstream_field(plan, "traceparent"), core::format_traceparent(plan.trace));
        EXPECT_EQ(plan.upstream.head.find("tracestate"), std::string::npos);
    }
    // Every request its own trace and span.
    auto a = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    auto b = post("/v1/completions", R"({"model":"m","prompt":"x"})");
    const auto first = plan_request(a, "/v1/completions", field_count(a), settings);
    const auto second = plan_request(b, "/v1/completions", field_count(b), settings);
    EXPECT_NE(first.trace.trace, second.trace.trace);
    EXPECT_NE(first.trace.span, second.trace.span);
}

bhttp::request<bhttp::string_body> websocket_get(bhttp::verb method = bhttp::verb::get) {
    bhttp::request<bhttp::string_body> r{method, "/v1/realtime?model=m", 11};
    r.set(bhttp::field::host, "proxy.local");
    r.set(bhttp::field::upgrade, "websocket");
    r.set(bhttp::field::connection, "keep-alive, Upgrade");
    r.set(bhttp::field::authorization, "Bearer sk-1");
    r.set(bhttp::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    r.set(bhttp::field::sec_websocket_version, "13");
    r.set(bhttp::field::sec_websocket_protocol, "realtime");
    r.set("keep-alive", "timeout=5");
    return r;
}

TEST(RequestPlan, WebSocketUpgradeKeepsUpgradeAndAsksForItUpstream) {
    auto request = websocket_get();
    auto plan = plan_request(request, "/v1/realtime?model=m", field_count(request), settings_for());
    EXPECT_TRUE(plan.upgrade);
    const auto up = sent(plan);
    EXPECT_EQ(up.method(), bhttp::verb::get);
    EXPECT_EQ(up.target(), "/v1/realtime?model=m");
    EXPECT_EQ(up[bhttp::field::upgrade], "websocket");
    // Only the upgrade: the client's other Connection options (and the fields they name) stop
    // here.
    EXPECT_EQ(up[bhttp::field::connection], "Upgrade");
    EXPECT_EQ(up.count("keep-alive"), 0U);
    EXPECT_EQ(up[bhttp::field::authorization], "Bearer sk-1");
    EXPECT_EQ(up[bhttp::field::sec_websocket_key], "dGhlIHNhbXBsZSBub25jZQ==");
    EXPECT_EQ(up[bhttp::field::sec_websocket_version], "13");
    EXPECT_EQ(up[bhttp::field::sec_websocket_protocol], "realtime");
    EXPECT_EQ(up.count(bhttp::field::content_length), 0U);
}

TEST(RequestPlan, OtherUpgradesAndOtherMethodsDropUpgrade) {
    auto h2c = websocket_get();
    h2c.set(bhttp::field::upgrade, "h2c");
    auto post_upgrade = websocket_get(bhttp::verb::post);
    auto no_connection = websocket_get();
    no_connection.erase(bhttp::field::connection);
    auto http10 = websocket_get();
    http10.version(10);
    auto with_body = websocket_get();
    with_body.body() = "x";
    with_body.prepare_payload();
    for (auto* request : {&h2c, &post_upgrade, &no_connection, &http10, &with_body}) {
        auto plan =
            plan_request(*request, "/v1/realtime?model=m", field_count(*request), settings_for());
        EXPECT_FALSE(plan.upgrade);
        EXPECT_EQ(plan.upstream.head.find("Upgrade"), std::string::npos) << plan.upstream.head;
    }
}

}  // namespace
}  // namespace tokenmeter::relay
