// WebSocket tunnels inside one process: client_connection, its upstream_exchange and the tunnel
// after the 101, between a test client and a test upstream on loopback sockets, with frames
// written and read byte by byte on both sides.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "relay/ws_frame.hpp"
#include "relay_harness.hpp"

namespace tokenmeter::relay::testing {
namespace {

using namespace std::chrono_literals;
using calls = std::vector<std::string>;

const std::string upgrade_request =
    "GET /v1/realtime?model=m HTTP/1.1\r\nHost: proxy\r\nUpgrade: websocket\r\n"
    "Connection: Upgrade\r\nAuthorization: Bearer sk-1\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
const std::string switched =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

// A server's frame (unmasked) and a client's (masked), text unless `first` says otherwise.
std::string server_frame(std::string_view payload, unsigned char first = 0x81) {
    std::string out{static_cast<char>(first), static_cast<char>(payload.size())};
    return out + std::string(payload);
}
std::string client_frame(std::string_view payload, unsigned char first = 0x81) {
    const std::string mask = "\x12\x34\x56\x78";
    std::string out{static_cast<char>(first), static_cast<char>(0x80 | payload.size())};
    out += mask;
    for (std::size_t i = 0; i < payload.size(); ++i) {
        out.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
    }
    return out;
}

// The close code of a close frame at the start of `bytes` (either direction); 0 if none.
int close_code_in(std::string_view bytes) {
    if (bytes.size() < 4 || static_cast<unsigned char>(bytes[0]) != 0x88) {
        return 0;
    }
    const bool masked = (static_cast<unsigned char>(bytes[1]) & 0x80) != 0;
    std::string payload(bytes.substr(masked ? 6 : 2, 2));
    if (masked) {
        for (std::size_t i = 0; i < payload.size(); ++i) {
            payload[i] = static_cast<char>(payload[i] ^ bytes[2 + i]);
        }
    }
    return (static_cast<unsigned char>(payload[0]) << 8) | static_cast<unsigned char>(payload[1]);
}

// The client's upgrade reaches the upstream and the 101 comes back: the tunnel is open.
wire tunnel_open(relay_rig& rig, wire& client, std::string_view after_101 = {}) {
    client.send(upgrade_request);
    wire upstream = rig.upstream.accept();
    const auto head = upstream.read_until("\r\n\r\n");
    EXPECT_TRUE(head);
    if (head) {
        EXPECT_EQ(field(*head, "upgrade"), "websocket") << *head;
        EXPECT_EQ(field(*head, "connection"), "Upgrade") << *head;
        EXPECT_EQ(field(*head, "authorization"), "Bearer sk-1") << *head;
        EXPECT_TRUE(head->starts_with("GET /v1/realtime?model=m HTTP/1.1\r\n")) << *head;
    }
    upstream.send(switched + std::string(after_101));
    const auto answer = client.read_until("\r\n\r\n");
    EXPECT_TRUE(answer);
    if (answer) {
        EXPECT_EQ(status_of(*answer), 101) << *answer;
        EXPECT_EQ(field(*answer, "sec-websocket-accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        EXPECT_EQ(field(*answer, "upgrade"), "websocket");
    }
    return upstream;
}

TEST(RelayTunnel, BytesPassBothWaysUnchangedUntilTheEndpointsClose) {
    relay_rig rig;
    wire client = rig.client();
    // A frame the upstream sent in the same write as its 101 reaches the client too.
    wire upstream = tunnel_open(rig, client, server_frame("early"));
    EXPECT_EQ(client.read_exact(7), server_frame("early"));

    const std::string up = client_frame("hello") + client_frame("x", 0x89);  // text, then a ping
    client.send(up.substr(0, 3));  // a header split across reads
    client.send(up.substr(3));
    EXPECT_EQ(upstream.read_exact(up.size()), up);
    const std::string down = server_frame("y", 0x8A) + server_frame("world");
    upstream.send(down);
    EXPECT_EQ(client.read_exact(down.size()), down);

    // The close handshake is the endpoints': the client's close goes up, the upstream's answer
    // comes down, then the upstream closes and the client sees the close too.
    const std::string client_close = client_frame("\x03\xe8", 0x88);
    client.send(client_close);
    EXPECT_EQ(upstream.read_exact(client_close.size()), client_close);
    upstream.send(server_frame("\x03\xe8", 0x88));
    upstream.close();
    EXPECT_EQ(client.read_exact(4), server_frame("\x03\xe8", 0x88));
    EXPECT_TRUE(client.closed_by_peer());
    client.close();

    const auto log = rig.log.ended(0);
    EXPECT_EQ(log.calls,
              (calls{"request_sent", "response_head 101  (no body)", "end upstream_complete"}));
}

TEST(RelayTunnel, OverTheCapAnUpgradeIsAnswered503AndNeverForwarded) {
    relay_rig rig(
        [](session_settings& s, upstream_pool_settings&) { s.websocket.max_tunnels = 1; });
    wire first = rig.client();
    wire upstream = tunnel_open(rig, first);

    wire second = rig.client();
    second.send(upgrade_request);
    const auto head = second.read_until("\r\n\r\n");
    ASSERT_TRUE(head);
    EXPECT_EQ(status_of(*head), 503) << *head;
    const auto body = second.read_exact(std::stoul(field(*head, "content-length")));
    ASSERT_TRUE(body);
    EXPECT_NE(body->find("too_many_tunnels"), std::string::npos) << *body;
    EXPECT_FALSE(rig.upstream.has_pending()) << "the refused upgrade reached the upstream";
    second.close();

    // The first tunnel still carries bytes.
    first.send(client_frame("still"));
    EXPECT_EQ(upstream.read_exact(11), client_frame("still"));
    first.close();
    upstream.close();
}

TEST(RelayTunnel, IdleTunnelGetsCloseFramesOfTheProxysOwnOnBothSides) {
    relay_rig rig(
        [](session_settings& s, upstream_pool_settings&) { s.websocket.idle_timeout = 100ms; });
    wire client = rig.client();
    wire upstream = tunnel_open(rig, client);
    // To the client as a server writes (unmasked), to the upstream as a client does (masked).
    const auto to_client = client.read_exact(2 + 2 + 12);
    ASSERT_TRUE(to_client);
    EXPECT_EQ(*to_client, ws::close_frame(1001, "idle timeout", ws::sender::server));
    const auto to_upstream = upstream.read_exact(2 + 4 + 2 + 12);
    ASSERT_TRUE(to_upstream);
    EXPECT_EQ(static_cast<unsigned char>((*to_upstream)[1]), 0x80 | 14);
    EXPECT_EQ(close_code_in(*to_upstream), 1001);
    // Both answer; the proxy then closes both connections.
    client.send(client_frame("\x03\xe9", 0x88));
    upstream.send(server_frame("\x03\xe9", 0x88));
    EXPECT_TRUE(client.closed_by_peer());
    EXPECT_TRUE(upstream.closed_by_peer());
    EXPECT_TRUE(rig.log.ended(0).ended);
}

TEST(RelayTunnel, BrokenFrameIsNotForwardedAndItsSenderGets1002) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = tunnel_open(rig, client);
    // A good frame and, in the same write, an unmasked one (a client must mask).
    client.send(client_frame("ok") + server_frame("bad"));
    EXPECT_EQ(upstream.read_exact(8), client_frame("ok"));
    const auto to_upstream = upstream.read_exact(2 + 4 + 2 + 14);
    ASSERT_TRUE(to_upstream);
    EXPECT_EQ(close_code_in(*to_upstream), 1001);
    const auto to_client = client.read_exact(2 + 2 + 14);
    ASSERT_TRUE(to_client);
    EXPECT_EQ(close_code_in(*to_client), 1002);
    // The endpoints' answers are not needed: the upstream's close ends the wait.
    upstream.close();
    EXPECT_TRUE(client.closed_by_peer());
    const auto log = rig.log.ended(0);
    EXPECT_EQ(log.calls.back(), "end client_cancel");
}

TEST(RelayTunnel, BrokenFrameSentWithTheRequestHeadNeverReachesTheUpstream) {
    relay_rig rig;
    wire client = rig.client();
    // Read with the request head, before the 101: forwarded first when the tunnel opens, and
    // here refused there (a client must mask).
    client.send(upgrade_request + server_frame("bad"));
    wire upstream = rig.upstream.accept();
    ASSERT_TRUE(upstream.read_until("\r\n\r\n"));
    upstream.send(switched);
    const auto answer = client.read_until("\r\n\r\n");
    ASSERT_TRUE(answer);
    EXPECT_EQ(status_of(*answer), 101);
    const auto to_client = client.read_exact(2 + 2 + 14);
    ASSERT_TRUE(to_client);
    EXPECT_EQ(close_code_in(*to_client), 1002);
    const auto to_upstream = upstream.read_exact(2 + 4 + 2 + 14);
    ASSERT_TRUE(to_upstream);
    EXPECT_EQ(close_code_in(*to_upstream), 1001);
    upstream.send(server_frame("\x03\xe9", 0x88));  // the upstream's answering close
    // With that answer both endpoints have said their last: the proxy closes both connections,
    // and the upstream's close is not forwarded behind its own.
    EXPECT_TRUE(client.closed_by_peer());
    EXPECT_EQ(client.buffered(), "");
    EXPECT_TRUE(upstream.closed_by_peer());
}

}  // namespace
}  // namespace tokenmeter::relay::testing
