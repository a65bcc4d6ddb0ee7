#include "relay/tunnel.hpp"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "relay/client_connection.hpp"

namespace tokenmeter::relay {
namespace {

ws::frame_limits frame_limits_for(const websocket_limits& limits, std::uint8_t reserved_bits) {
    ws::frame_limits out;
    out.max_frame_bytes = limits.max_message_bytes;
    out.max_message_bytes = limits.max_message_bytes;
    out.allowed_reserved_bits = reserved_bits;
    return out;
}

}  // namespace

template <class Stream>
void tunnel<Stream>::message_collector::payload(ws::opcode message, std::string_view unmasked,
                                                bool /*frame_end*/, bool message_end) noexcept {
    if (message != ws::opcode::text) {
        return;
    }
    try {
        if (!failed_) {
            partial_.append(unmasked);
        }
        if (message_end) {
            if (failed_) {
                ++lost;
            } else {
                complete.push_back(std::move(partial_));
            }
            partial_ = std::string();
            failed_ = false;
        }
    } catch (...) {
        // Out of memory: this message goes unmetered (the bytes were forwarded all the same).
        partial_ = std::string();
        failed_ = !message_end;
        if (message_end) {
            ++lost;
        }
    }
}

template <class Stream>
tunnel<Stream>::tunnel(client_connection<Stream>& owner, upstream_pool& pool, upstream_ptr upstream,
                       tunnel_slot slot, std::uint8_t reserved_bits,
                       std::unique_ptr<observe::tunnel_observer> meter)
    : owner_(owner),
      pool_(pool),
      upstream_(std::move(upstream)),
      slot_(std::move(slot)),
      meter_(std::move(meter)),
      from_client_(side::client,
                   frame_limits_for(owner.context().settings.websocket, reserved_bits),
                   meter_ != nullptr),
      from_upstream_(side::upstream,
                     frame_limits_for(owner.context().settings.websocket, reserved_bits),
                     meter_ != nullptr),
      timer_(owner.lowest().get_executor()),
      idle_timeout_(owner.context().settings.websocket.idle_timeout) {}

template <class Stream>
void tunnel<Stream>::start(std::string_view from_client) {
    touch();
    arm_timer(idle_timeout_);
    from_client_.pending.assign(from_client);
    auto& buffered = upstream_->buffer;
    from_upstream_.pending.assign(static_cast<const char*>(buffered.data().data()),
                                  buffered.size());
    buffered.consume(buffered.size());
    buffered.shrink_to_fit();
    for (direction* d : {&from_client_, &from_upstream_}) {
        if (done_) {
            return;
        }
        if (closing_) {
            // The first direction's early bytes held a refused frame: this one only waits for
            // its endpoint's answering close.
            if (!d->source_done && !d->reading) {
                do_read(*d);
            }
            continue;
        }
        if (d->pending.empty()) {
            do_read(*d);
        } else {
            forward(*d, d->pending.data(), d->pending.size());
        }
    }
}

// ---- one direction: read, check the frames, write, read again ---------------------------------

template <class Stream>
template <class Handler>
void tunnel<Stream>::read_some(side from, asio::mutable_buffer into, Handler handler) {
    if (from == side::client) {
        owner_.stream().async_read_some(into, std::move(handler));
        return;
    }
    ++upstream_operations_;
    upstream_->stream.async_read_some(
        into, [this, handler = std::move(handler)](error_code ec, std::size_t n) mutable {
            --upstream_operations_;
            handler(ec, n);  // holds the connection, and so this tunnel, alive
            if (done_ && upstream_operations_ == 0) {
                release_upstream();
            }
        });
}

template <class Stream>
template <class Handler>
void tunnel<Stream>::write_all(side to, asio::const_buffer bytes, Handler handler) {
    if (to == side::client) {
        asio::async_write(owner_.stream(), bytes, std::move(handler));
        return;
    }
    ++upstream_operations_;
    asio::async_write(upstream_->stream, bytes,
                      [this, handler = std::move(handler)](error_code ec, std::size_t n) mutable {
                          --upstream_operations_;
                          handler(ec, n);
                          if (done_ && upstream_operations_ == 0) {
                              release_upstream();
                          }
                      });
}

template <class Stream>
void tunnel<Stream>::do_read(direction& d) {
    char* into = d.buffer.data();
    if (into == nullptr) {
        end(observe::end_reason::upstream_failed);  // out of memory: this tunnel alone ends
        return;
    }
    d.reading = true;
    read_some(d.source, asio::buffer(into, d.buffer.capacity()),
              owner_.guarded([this, &d](error_code ec, std::size_t bytes) {
                  d.reading = false;
                  on_read(d, ec, bytes);
              }));
}

template <class Stream>
void tunnel<Stream>::on_read(direction& d, error_code ec, std::size_t bytes) {
    if (done_) {
        return;
    }
    if (ec == ssl::error::stream_truncated) {
        ec = asio::error::eof;  // a TLS peer that closed without close_notify
    }
    if (closing_) {
        // Nothing more is forwarded: the read only waits for the endpoint's answering close.
        if (ec) {
            d.source_done = true;
        } else {
            (void)d.reader.feed(std::string_view(d.buffer.data(), bytes));
            if (d.collector) {
                d.collector->complete.clear();  // not forwarded: not metered
            }
            d.source_done = d.reader.close_seen() || d.reader.error() != ws::frame_error::none;
        }
        if (!d.source_done) {
            do_read(d);
        }
        maybe_end();
        return;
    }
    if (ec) {
        source_ended(d, ec);
        return;
    }
    touch();
    d.last_read = bytes;
    forward(d, d.buffer.data(), bytes);
}

// Writes what the frame reader accepted of `data`: everything, or what came before a frame it
// refuses (that frame never reaches the other side).
template <class Stream>
void tunnel<Stream>::forward(direction& d, const char* data, std::size_t size) {
    if (meter_) {
        d.read_at = owner_.context().clock.now();  // the read's time: the bytes came just now
    }
    const auto result = d.reader.feed(std::string_view(data, size));
    d.violation = result.error;
    if (result.accepted == 0) {
        after_forward(d);
        return;
    }
    d.writing = true;
    write_all(sink_of(d), asio::buffer(data, result.accepted),
              owner_.guarded([this, &d](error_code ec, std::size_t) {
                  d.writing = false;
                  on_written(d, ec);
              }));
    meter_messages(d);
}

template <class Stream>
void tunnel<Stream>::meter_messages(direction& d) noexcept {
    if (!meter_ || !d.collector) {
        return;
    }
    auto& collector = *d.collector;
    const bool from_client = d.source == side::client;
    for (; collector.lost > 0; --collector.lost) {
        meter_->unreadable(protocol::parse_error::oversized_event);
    }
    for (const std::string& message : collector.complete) {
        meter_->message(from_client, message, d.read_at);
    }
    collector.complete.clear();
}

template <class Stream>
void tunnel<Stream>::on_written(direction& d, error_code ec) {
    if (done_) {
        return;
    }
    if (ec) {
        end(sink_of(d) == side::client ? observe::end_reason::client_cancel
                                       : observe::end_reason::upstream_failed);
        return;
    }
    touch();
    after_forward(d);
}

template <class Stream>
void tunnel<Stream>::after_forward(direction& d) {
    if (!d.pending.empty()) {
        d.pending = std::string();
    }
    if (d.violation != ws::frame_error::none) {
        const bool from_client = d.source == side::client;
        spdlog::warn("websocket tunnel: the {} sent a frame the proxy refuses ({}); closing",
                     from_client ? "client" : "upstream", ws::to_string(d.violation));
        const std::uint16_t offender = ws::close_code_for(d.violation);
        // A size is both sides' business (1009 to each); a broken frame is its sender's (1002),
        // and the other side hears that the tunnel goes away.
        const std::uint16_t other = offender == ws::close_code::message_too_big
                                        ? ws::close_code::message_too_big
                                        : ws::close_code::going_away;
        d.source_done = true;  // nothing more is read from it
        end_reason_ =
            from_client ? observe::end_reason::client_cancel : observe::end_reason::upstream_failed;
        go_away(from_client ? offender : other, from_client ? other : offender,
                offender == ws::close_code::message_too_big ? "message too big" : "protocol error");
        return;
    }
    if (closing_) {
        send_close(d);
        if (!d.source_done && !d.reading) {
            do_read(d);  // for the endpoint's answering close
        }
        return;
    }
    d.buffer.after_read(d.last_read);
    do_read(d);
}

template <class Stream>
void tunnel<Stream>::source_ended(direction& d, error_code ec) {
    d.source_done = true;
    if (ec != asio::error::eof) {
        end(d.source == side::client ? observe::end_reason::client_cancel
                                     : observe::end_reason::upstream_failed);
        return;
    }
    // The endpoint closed its side (after its close frame, normally): the other side sees the
    // same, and the other direction gets a short while to finish.
    error_code ignored;
    if (sink_of(d) == side::client) {
        owner_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    } else {
        upstream_->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
    d.sink_shut = true;
    if (!half_closed_) {
        half_closed_ = true;
        arm_timer(close_grace);
    }
    maybe_end();
}

// ---- the end --------------------------------------------------------------------------------

template <class Stream>
void tunnel<Stream>::go_away(std::uint16_t to_client, std::uint16_t to_upstream,
                             std::string_view reason) noexcept {
    if (done_ || closing_) {
        return;
    }
    try {
        closing_ = true;
        close_reason_ = reason;
        from_upstream_.close_code = to_client;
        from_client_.close_code = to_upstream;
        arm_timer(close_grace);
        for (direction* d : {&from_client_, &from_upstream_}) {
            if (d->reader.close_seen()) {
                d->source_done = true;  // its endpoint's close already went on
            }
            if (!d->writing) {
                send_close(*d);
            }
        }
        maybe_end();
    } catch (...) {
        abort();
    }
}

// The proxy's close frame to the sink of `d`: only where the sink's stream is at a frame
// boundary, has not been told of a close already, and can still be written to.
template <class Stream>
void tunnel<Stream>::send_close(direction& d) {
    if (d.close_sent) {
        return;
    }
    d.close_sent = true;
    if (d.sink_shut || d.reader.close_seen() || !d.reader.at_frame_boundary()) {
        maybe_end();
        return;
    }
    if (sink_of(d) == side::client) {
        d.close_frame = ws::close_frame(d.close_code, close_reason_, ws::sender::server);
    } else {
        // A client's frame is masked with a key the server cannot predict (RFC 6455 §5.3).
        std::array<std::uint8_t, 4> mask{};
        (void)RAND_bytes(mask.data(), static_cast<int>(mask.size()));
        d.close_frame = ws::close_frame(d.close_code, close_reason_, ws::sender::client, mask);
    }
    d.writing = true;
    write_all(sink_of(d), asio::buffer(d.close_frame),
              owner_.guarded([this, &d](error_code ec, std::size_t) {
                  d.writing = false;
                  if (done_) {
                      return;
                  }
                  if (ec) {
                      end(end_reason_);
                      return;
                  }
                  maybe_end();
              }));
}

template <class Stream>
void tunnel<Stream>::maybe_end() {
    if (!from_client_.source_done || !from_upstream_.source_done || from_client_.writing ||
        from_upstream_.writing) {
        return;
    }
    if (closing_ && (!from_client_.close_sent || !from_upstream_.close_sent)) {
        return;
    }
    end(end_reason_);
}

template <class Stream>
void tunnel<Stream>::arm_timer(std::chrono::steady_clock::duration after) {
    timer_.expires_after(after);
    timer_.async_wait(owner_.guarded([this](error_code ec) { on_timer(ec); }));
}

template <class Stream>
void tunnel<Stream>::on_timer(error_code ec) {
    if (ec || done_) {
        return;
    }
    if (closing_ || half_closed_) {
        end(end_reason_);  // the endpoints had their while to answer
        return;
    }
    const auto idle_for = std::chrono::steady_clock::now() - last_activity_;
    if (idle_for >= idle_timeout_) {
        go_away(ws::close_code::going_away, ws::close_code::going_away, "idle timeout");
        return;
    }
    arm_timer(idle_timeout_ - idle_for);
}

template <class Stream>
void tunnel<Stream>::end(observe::end_reason reason) noexcept {
    if (done_) {
        return;
    }
    done_ = true;
    try {
        timer_.cancel();
    } catch (...) {
        // The reactor's cancel does not fail; the timer's handler sees done_ either way.
    }
    error_code ignored;
    owner_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    owner_.socket().close(ignored);
    if (upstream_) {
        upstream_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        upstream_->stream.socket().close(ignored);
    }
    if (upstream_operations_ == 0) {
        release_upstream();
    }
    // The read buffers stay with the tunnel: a cancelled read may still refer to them.
    slot_ = tunnel_slot{};
    if (meter_) {
        meter_->end(reason, owner_.context().clock.now());
        meter_.reset();
    }
    owner_.tunnel_done(reason);
}

template <class Stream>
void tunnel<Stream>::abort() noexcept {
    end(observe::end_reason::upstream_failed);
}

template <class Stream>
void tunnel<Stream>::release_upstream() noexcept {
    if (upstream_) {
        pool_.release(std::move(upstream_), false);
    }
}

template class tunnel<tcp_stream>;
template class tunnel<net::tls_stream>;

}  // namespace tokenmeter::relay
