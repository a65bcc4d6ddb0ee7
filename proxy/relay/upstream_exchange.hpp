// relay/upstream_exchange: one request's trip to the upstream and back, for its client
// connection. Acquires a pooled connection (retrying once when a reused one turns out closed),
// writes the planned request, reads the response head (passing 1xx on), and relays the body
// read by read: each read is written to the client before the next one is started, and shown
// to the observer after the write was started. An optional byte transform (the usage filter)
// sits between the two. Every decision about what the bytes mean is the observer's.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "net/beast.hpp"
#include "relay/body_decoder.hpp"
#include "relay/drained_read.hpp"
#include "relay/local_failure.hpp"
#include "relay/relay_buffer.hpp"
#include "relay/request_plan.hpp"
#include "relay/upstream_pool.hpp"
#include "protocol/usage_filter.hpp"

namespace tokenmeter::relay {

template <class Stream>
class client_connection;

// What the relay does with the response besides forwarding it.
struct relay_options {
    bool head_request = false;  // the response to a HEAD has no body
    // The proxy injected usage into the request: remove the extra usage chunk from an SSE
    // response (protocol::usage_filter).
    bool filter_usage = false;
    bool continuous_usage = false;
};

template <class Stream>
class upstream_exchange {
  public:
    upstream_exchange(client_connection<Stream>& owner, upstream_pool& pool);
    upstream_exchange(const upstream_exchange&) = delete;
    upstream_exchange& operator=(const upstream_exchange&) = delete;

    // Forwards `request` and relays its response; the owner hears back through its
    // finish_exchange / respond_local / next_request_or_close.
    void start(upstream_request request, relay_options options);
    // The client hung up: stop waiting for the upstream (the pending handler ends the exchange).
    void cancel() noexcept;
    // Closes the upstream connection, if any, without reusing it.
    void abort() noexcept;
    // A scratch buffer for the owner while no exchange runs (draining a closing connection).
    [[nodiscard]] asio::mutable_buffer scratch() noexcept {
        ensure_body_buffer();
        return asio::buffer(body_buffer_.get(), body_capacity_);
    }

  private:
    void acquire(bool allow_reuse);
    void on_upstream(error_code ec, upstream_ptr connection, bool reused, std::string detail);
    void do_write_request();
    void on_write_request(error_code ec);
    void do_read_head();
    void parse_head();
    void on_head_bytes(error_code ec, std::size_t bytes);
    void on_head(error_code ec);
    void forward_interim();
    void on_write_interim(error_code ec);
    void write_client_header();
    void on_write_client_header(error_code ec);
    // The head held for the first body write (head_pending_) goes out alone: no body bytes
    // follow at once. Then `next`.
    void flush_head(void (upstream_exchange::*next)());
    void start_body();
    void do_read_body();
    void read_upstream();  // do_read_body once the buffer is sized and no bytes are waiting
    void on_read_body(error_code ec, std::size_t bytes);
    // Writes `bytes` (the read as it is, or what the transform let through) to the client. A
    // write the kernel took whole at once returns its result (the caller then runs
    // on_write_client_body); otherwise nullopt, and on_write_client_body runs when it is done.
    [[nodiscard]] std::optional<error_code> write_client_body(std::string_view bytes, bool last);
    void on_write_client_body(error_code ec);
    void write_then(std::string_view bytes, bool last);
    void write_body_end();
    void write_last_body();
    void on_complete();
    // Upstream failed before any response byte reached the client: the owner answers locally.
    void fail_before_response(error_code ec, upstream_stage stage, std::string_view detail = {});
    void end_for_client_gone();
    // While the body streams, one coarse timer per exchange enforces timeouts.upstream_idle on
    // the read and timeouts.client_write on the write in flight, in place of Beast's timer per
    // operation (a wait and a cancel for every read and every write: two per chunk).
    void start_body_watch();
    void stop_body_watch() noexcept;
    void begin_wait(bool on_upstream) noexcept;
    // Clears the wait; the error to handle (`ec`, or a timeout when the watch cut the operation).
    [[nodiscard]] error_code end_wait(error_code ec) noexcept;
    void arm_body_watch();
    void on_body_watch(error_code ec);
    // Runs `next` once the observer's wait is over (now, when there is nothing to wait for).
    template <typename Wait>
    bool hold(const Wait& wait, void (upstream_exchange::*next)());
    [[nodiscard]] bool client_gone() const noexcept;

    client_connection<Stream>& owner_;
    upstream_pool& pool_;
    relay_options options_;
    // The request being sent (its head in head_text_), kept for a retry on a fresh connection
    // until the retry can no longer come; empty while the response streams.
    std::string request_body_;
    upstream_ptr upstream_;
    bool reused_ = false;
    bool retried_ = false;
    bool request_held_ = false;  // head_text_ and request_body_ hold the request
    void release_request() noexcept {
        if (request_held_) {
            request_body_ = {};  // a long prompt, perhaps
            head_text_ = {};
            request_held_ = false;
        }
    }
    // The response head's parser: made per response, let go once the body's framing is known
    // (the relay decodes the body itself), so a streaming response does not carry it.
    std::unique_ptr<bhttp::response_parser<bhttp::buffer_body>> parser_;
    bool upstream_keep_alive_ = false;  // the parser's keep_alive(), kept when it is let go
    std::uint64_t head_bytes_ = 0;
    unsigned interim_responses_ = 0;
    std::unique_ptr<bhttp::response<bhttp::empty_body>> interim_response_;  // made for a 1xx
    // The head being written: the request's to the upstream (request_plan), then the
    // response's to the client (on_head); the body's framing is the relay's own (body_framing).
    std::string head_text_;
    // How the body goes to the client: as it is (Content-Length, or until the connection closes
    // for an HTTP/1.0 client) or in chunks the relay frames itself, one chunk per write, so a
    // write is one gathered send of the bytes in place (no per-chunk serializer machinery).
    enum class body_framing : std::uint8_t { none, raw, chunked };
    body_framing framing_ = body_framing::none;
    bool end_written_ = false;    // the write in flight carries the end of the body
    // Over plain TCP, when body bytes came with the response head, the head (head_text_) is
    // written with them in one send: one write and one segment fewer per response.
    bool head_pending_ = false;
    std::array<char, 20> chunk_head_{};  // "<hex size>\r\n" of the chunk being written
    std::optional<protocol::usage_filter> usage_filter_;
    // The body as it arrives: its framing removed in place, read by read (start_body).
    body_decoder decoder_;
    bool bytes_after_body_ = false;  // the upstream sent more than the body: not reused
    std::uint64_t relayed_bytes_ = 0;
    std::string_view pending_last_;  // the held end of the response (see write_last_body)
    std::size_t last_read_ = 0;      // bytes of the previous body read (buffer growth)
    error_code deferred_error_;      // a framing error found behind forwarded bytes
    // Body reads over plain TCP where the framing says more bytes are due (relay/drained_read).
    drained_read drained_;
    bool drained_ok_ = false;  // this body is read with drained_
    bool start_drained_read();  // false: not this body, or not now (read as Asio does)
    static void on_drained_read(void* self, error_code ec, std::size_t bytes);

    enum class waiting_on : std::uint8_t { nothing, upstream, client };
    steady_timer body_watch_;  // on the worker's io_context executor, as the streams are
    std::chrono::steady_clock::duration body_watch_tick_{};
    // A wait is timed in the watch's ticks, not with a clock read per read and per write: each
    // wait gets a number, and the watch counts the ticks it has seen the same wait at.
    std::uint32_t wait_number_ = 0;
    std::uint32_t watched_number_ = 0;
    std::uint32_t watched_ticks_ = 0;
    waiting_on waiting_ = waiting_on::nothing;
    bool body_watch_on_ = false;
    bool watch_cut_ = false;  // the operation in flight was cancelled by the watch: a timeout

    static constexpr unsigned max_interim_responses = 16;
    // Response heads are rarely over 1 KiB; a bigger one grows the buffer as Beast needs.
    static constexpr std::size_t head_read_size = 1024;
    // The relay buffer's size follows the reads (relay/relay_buffer.hpp): small for a stream's
    // chunks, grown while reads fill it, small again after a run of small reads; and small when
    // the next exchange starts.
    static constexpr std::size_t body_buffer_initial = relay_buffer_size::initial;
    void resize_body_buffer_after(std::size_t bytes_read);
    void reset_body_buffer();
    // A buffer of the first size goes back to the worker's relay_buffer_pool, a grown one is
    // freed; body_capacity_ is kept (the size for the next read).
    void release_body_buffer() noexcept {
        if (!body_buffer_) {
            return;
        }
        if (body_capacity_ <= body_buffer_initial) {
            relay_buffer_pool::for_thread().give(body_buffer_.release());
        } else {
            body_buffer_.reset();
        }
    }
    void ensure_body_buffer() {
        if (!body_buffer_) {
            if (body_capacity_ <= body_buffer_initial) {
                body_capacity_ = body_buffer_initial;
                body_buffer_.reset(relay_buffer_pool::for_thread().take());
                if (!body_buffer_) {
                    throw std::bad_alloc();
                }
            } else {
                body_buffer_.reset(new char[body_capacity_]);
            }
        }
    }
    // Uninitialised: untouched pages cost no RSS. A read of the first size on a plain TCP
    // upstream holds none while it waits (drained_read takes one when data is there).
    std::unique_ptr<char[]> body_buffer_;
    std::size_t body_capacity_ = 0;
    std::uint32_t small_reads_ = 0;  // reads in a row too small to need a grown buffer
};

}  // namespace tokenmeter::relay
