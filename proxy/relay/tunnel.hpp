// relay/tunnel: a WebSocket connection (RFC 6455) after the upstream's 101, for its client
// connection. Two directions, client → upstream and upstream → client; each reads, shows the
// bytes to its frame reader (relay/ws_frame) and writes what it accepted to the other side
// before its next read, so a slow reader holds back its writer and nothing queues in the proxy.
// The bytes pass unchanged; the endpoints answer each other's pings and close handshakes.
// The proxy speaks only to end the tunnel: after its idle timeout, at the end of a drain, or
// when a frame breaks the protocol or the size limit, it writes a close frame of its own to
// each side whose stream is at a frame boundary (unmasked to the client, masked to the
// upstream), waits a short while for the close handshakes, and closes both connections.
//
// A tunnel on a metered path (observe::tunnel_facts) also collects each direction's text
// messages whole (bounded by websocket.max_message_bytes, which the frame reader enforces) and
// shows them to its tunnel_observer once the bytes that complete them were handed to the other
// side. A tunnel that is not metered collects nothing: its frame readers touch no payload byte.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/beast.hpp"
#include "observe/observer.hpp"
#include "relay/proxy_context.hpp"
#include "relay/relay_buffer.hpp"
#include "relay/upstream_pool.hpp"
#include "relay/ws_frame.hpp"

namespace tokenmeter::relay {

template <class Stream>
class client_connection;

template <class Stream>
class tunnel {
  public:
    // `upstream` answered 101; `reserved_bits`: what the agreed extensions let frames set.
    // `meter`: null when the tunnel is not metered.
    tunnel(client_connection<Stream>& owner, upstream_pool& pool, upstream_ptr upstream,
           tunnel_slot slot, std::uint8_t reserved_bits,
           std::unique_ptr<observe::tunnel_observer> meter);
    tunnel(const tunnel&) = delete;
    tunnel& operator=(const tunnel&) = delete;
    tunnel(tunnel&&) = delete;
    tunnel& operator=(tunnel&&) = delete;
    ~tunnel() = default;

    // Starts both directions. `from_client`: bytes the client sent behind its request head,
    // read with it; they go to the upstream first. Bytes the upstream sent behind its 101 wait
    // in its connection's buffer and go to the client first.
    void start(std::string_view from_client);
    // Ends the tunnel the polite way: a close frame with `code` to each side, then the close.
    void go_away(std::uint16_t to_client, std::uint16_t to_upstream,
                 std::string_view reason) noexcept;
    // Closes both connections now (the connection's own failure).
    void abort() noexcept;

  private:
    enum class side : std::uint8_t { client, upstream };
    // A direction's text messages, whole, for the meter (binary and control frames are not
    // kept). A message that could not be kept (no memory) is dropped and counted.
    class message_collector final : public ws::frame_observer {
      public:
        void payload(ws::opcode message, std::string_view unmasked, bool frame_end,
                     bool message_end) noexcept override;
        std::vector<std::string> complete;  // in the order they ended
        std::uint64_t lost = 0;

      private:
        std::string partial_;
        bool failed_ = false;  // the partial message is lost
    };
    struct direction {
        direction(side from, const ws::frame_limits& limits, bool collect)
            : source(from),
              collector(collect ? std::make_unique<message_collector>() : nullptr),
              reader(from == side::client ? ws::sender::client : ws::sender::server, limits,
                     collector.get()) {}
        side source;
        std::unique_ptr<message_collector> collector;  // null when the tunnel is not metered
        ws::frame_reader reader;
        sized_relay_buffer buffer;
        std::string pending;      // bytes read before the tunnel began, forwarded first
        std::string close_frame;  // the proxy's own close frame while it is written
        std::uint16_t close_code = ws::close_code::going_away;  // the one the sink gets
        ws::frame_error violation = ws::frame_error::none;
        std::size_t last_read = 0;   // bytes of the previous read (the buffer's next size)
        core::time_point read_at{};  // when the bytes being forwarded were read
        bool reading = false;
        bool writing = false;
        bool source_done = false;  // the source ended, or has nothing more to say while closing
        bool close_sent = false;   // the proxy's close frame went to the sink, or cannot
        bool sink_shut = false;    // the source's end was passed on: nothing more to the sink
    };

    [[nodiscard]] static side sink_of(const direction& d) noexcept {
        return d.source == side::client ? side::upstream : side::client;
    }
    void do_read(direction& d);
    void on_read(direction& d, error_code ec, std::size_t bytes);
    void forward(direction& d, const char* data, std::size_t size);
    // Shows the messages the last forward completed to the meter (after their write began).
    void meter_messages(direction& d) noexcept;
    void on_written(direction& d, error_code ec);
    void after_forward(direction& d);
    void send_close(direction& d);
    void source_ended(direction& d, error_code ec);
    void maybe_end();
    void end(observe::end_reason reason) noexcept;
    void release_upstream() noexcept;
    void arm_timer(std::chrono::steady_clock::duration after);
    void on_timer(error_code ec);
    void touch() noexcept { last_activity_ = std::chrono::steady_clock::now(); }

    template <class Handler>
    void read_some(side from, asio::mutable_buffer into, Handler handler);
    template <class Handler>
    void write_all(side to, asio::const_buffer bytes, Handler handler);

    client_connection<Stream>& owner_;
    upstream_pool& pool_;
    upstream_ptr upstream_;
    tunnel_slot slot_;
    std::unique_ptr<observe::tunnel_observer> meter_;  // null when the tunnel is not metered
    direction from_client_;
    direction from_upstream_;
    steady_timer timer_;
    std::chrono::steady_clock::time_point last_activity_{};
    std::chrono::milliseconds idle_timeout_;
    // Operations pending on the upstream connection: it goes back to the pool (closed) only
    // once none is, so no handler refers to a destroyed stream.
    unsigned upstream_operations_ = 0;
    bool closing_ = false;      // go_away began
    bool half_closed_ = false;  // one endpoint closed its side; the other has close_grace
    bool done_ = false;
    // How the tunnel ends when it ends by a close: the endpoints' own close, or the proxy's for
    // a frame one of them sent (its side's failure).
    observe::end_reason end_reason_ = observe::end_reason::upstream_complete;
    std::string close_reason_;

    // How long the endpoints get to answer the proxy's close frames.
    static constexpr std::chrono::seconds close_grace{2};
};

}  // namespace tokenmeter::relay
