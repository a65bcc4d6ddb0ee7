// The response plan without sockets: the client's head, the body's framing, keep-alive and the
// usage filter, for every kind of upstream head.
#include "relay/response_plan.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokenmeter::relay {
namespace {

bhttp::response_header<> head(unsigned status, std::string content_type = "application/json") {
    bhttp::response_header<> h;
    h.result(status);
    h.version(11);
    if (!content_type.empty()) {
        h.set(bhttp::field::content_type, content_type);
    }
    return h;
}

response_plan plan(const bhttp::response_header<>& h, bool has_body,
                   std::optional<std::uint64_t> length, response_context context = {}) {
    return plan_response(upstream_head{h, has_body, length}, context);
}

bool has_line(const std::string& text, const std::string& line) {
    return text.find("\r\n" + line + "\r\n") != std::string::npos;
}

TEST(ResponsePlan, KnownLengthIsPassedOnRaw) {
    auto h = head(200);
    h.set("x-request-id", "abc");
    const auto p = plan(h, true, 42);
    EXPECT_EQ(p.framing, body_framing::raw);
    EXPECT_TRUE(p.head.starts_with("HTTP/1.1 200 OK\r\n")) << p.head;
    EXPECT_TRUE(has_line(p.head, "Content-Length: 42")) << p.head;
    EXPECT_TRUE(has_line(p.head, "x-request-id: abc")) << p.head;
    EXPECT_TRUE(p.head.ends_with("\r\n\r\n"));
    EXPECT_TRUE(p.keep_alive);
    EXPECT_FALSE(p.filter_usage);
    EXPECT_EQ(p.head.find("Connection:"), std::string::npos) << "1.1 keeps alive by default";
}

TEST(ResponsePlan, UnknownLengthIsChunkedForHttp11) {
    const auto p = plan(head(200, "text/event-stream"), true, std::nullopt);
    EXPECT_EQ(p.framing, body_framing::chunked);
    EXPECT_TRUE(has_line(p.head, "Transfer-Encoding: chunked")) << p.head;
    EXPECT_TRUE(p.keep_alive);
}

TEST(ResponsePlan, UnknownLengthEndsAtTheCloseForHttp10) {
    response_context c;
    c.client_version = 10;
    const auto p = plan(head(200, "text/event-stream"), true, std::nullopt, c);
    EXPECT_TRUE(p.head.starts_with("HTTP/1.0 200 OK\r\n")) << p.head;
    EXPECT_EQ(p.framing, body_framing::raw);
    EXPECT_FALSE(p.keep_alive) << "the body ends when the connection closes";
    EXPECT_EQ(p.head.find("Transfer-Encoding"), std::string::npos) << p.head;
    EXPECT_EQ(p.head.find("keep-alive"), std::string::npos) << p.head;
}

TEST(ResponsePlan, Http10KeepAliveIsSaidAndHttp11CloseIsSaid) {
    response_context c10;
    c10.client_version = 10;
    EXPECT_TRUE(has_line(plan(head(200), true, 5, c10).head, "Connection: keep-alive"));
    response_context closing;
    closing.client_keep_alive = false;
    const auto p = plan(head(200), true, 5, closing);
    EXPECT_TRUE(has_line(p.head, "Connection: close")) << p.head;
    EXPECT_FALSE(p.keep_alive);
}

TEST(ResponsePlan, DrainingClosesWithoutChangingTheClientsChoice) {
    response_context c;
    c.draining = true;
    const auto p = plan(head(200), true, 5, c);
    EXPECT_TRUE(has_line(p.head, "Connection: close")) << p.head;
    EXPECT_TRUE(p.keep_alive) << "the drain is decided when the response ends";
}

TEST(ResponsePlan, NoBodyKeepsTheUpstreamsLengthAsADescription) {
    auto h = head(200);
    h.set(bhttp::field::content_length, "1234");
    const auto p = plan(h, false, 1234);
    EXPECT_EQ(p.framing, body_framing::none);
    EXPECT_TRUE(has_line(p.head, "Content-Length: 1234")) << p.head;
    const auto no_content = plan(head(204, ""), false, std::nullopt);
    EXPECT_EQ(no_content.head.find("Content-Length"), std::string::npos) << no_content.head;
    EXPECT_EQ(no_content.head.find("Transfer-Encoding"), std::string::npos) << no_content.head;
}

TEST(ResponsePlan, UsageFilterOnlyForSuccessfulEventStreamsWithInjectedUsage) {
    response_context c;
    c.filter_usage = true;
    const auto sse = plan(head(200, "text/event-stream; charset=utf-8"), true, 100, c);
    EXPECT_TRUE(sse.filter_usage);
    EXPECT_EQ(sse.framing, body_framing::chunked) << "filtered bytes change the length";
    EXPECT_EQ(sse.head.find("Content-Length"), std::string::npos) << sse.head;
    EXPECT_FALSE(plan(head(200), true, 100, c).filter_usage) << "JSON";
    EXPECT_FALSE(plan(head(400, "text/event-stream"), true, 100, c).filter_usage) << "an error";
    EXPECT_FALSE(plan(head(200, "text/event-stream"), false, std::nullopt, c).filter_usage);
    EXPECT_FALSE(plan(head(200, "text/event-stream"), true, 100).filter_usage) << "not injected";
}

TEST(ResponsePlan, HopByHopFieldsAreNotPassedOn) {
    auto h = head(200);
    h.set(bhttp::field::connection, "close, x-secret");
    h.set("x-secret", "1");
    h.set(bhttp::field::transfer_encoding, "chunked");
    h.set(bhttp::field::keep_alive, "timeout=5");
    const auto p = plan(h, true, std::nullopt);
    EXPECT_EQ(p.head.find("x-secret"), std::string::npos) << p.head;
    EXPECT_EQ(p.head.find("timeout=5"), std::string::npos) << p.head;
    EXPECT_EQ(p.head.find("Transfer-Encoding: chunked"), p.head.rfind("Transfer-Encoding"))
        << "framing set once, by the proxy: " << p.head;
    EXPECT_TRUE(p.keep_alive) << "the upstream's Connection is its own hop's";
}

TEST(ResponsePlan, ContentCodedBodiesAreFlagged) {
    auto h = head(200);
    h.set(bhttp::field::content_encoding, "gzip");
    EXPECT_TRUE(plan(h, true, 10).coded_body);
    h.set(bhttp::field::content_encoding, "identity");
    EXPECT_FALSE(plan(h, true, 10).coded_body);
    h.set(bhttp::field::content_encoding, "gzip");
    EXPECT_FALSE(plan(h, false, std::nullopt).coded_body) << "no body to read";
}

TEST(ResponsePlan, SwitchToWebSocketPassesTheHandshakeFieldsOn) {
    auto h = head(101, "");
    h.reason("Switching Protocols");
    h.set(bhttp::field::upgrade, "websocket");
    h.set(bhttp::field::connection, "Upgrade");
    h.set(bhttp::field::sec_websocket_accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    h.set(bhttp::field::sec_websocket_protocol, "realtime");
    h.set(bhttp::field::sec_websocket_extensions, "permessage-deflate; server_no_context_takeover");
    const auto p = plan_switch(h);
    EXPECT_TRUE(p.head.starts_with("HTTP/1.1 101 Switching Protocols\r\n")) << p.head;
    EXPECT_TRUE(has_line(p.head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")) << p.head;
    EXPECT_TRUE(has_line(p.head, "Sec-WebSocket-Protocol: realtime")) << p.head;
    EXPECT_TRUE(has_line(p.head, "Upgrade: websocket")) << p.head;
    EXPECT_TRUE(has_line(p.head, "Connection: Upgrade")) << p.head;
    EXPECT_EQ(p.head.find("Content-Length"), std::string::npos);
    EXPECT_TRUE(p.head.ends_with("\r\n\r\n"));
    EXPECT_EQ(p.reserved_bits, 0x40);  // RSV1 for permessage-deflate

    h.erase(bhttp::field::sec_websocket_extensions);
    EXPECT_EQ(plan_switch(h).reserved_bits, 0);
}

}  // namespace
}  // namespace tokenmeter::relay
