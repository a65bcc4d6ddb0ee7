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
#include "protocol/usage_filter.hpp"
#include "relay/body_decoder.hpp"
#include "relay/drained_read.hpp"
#include "relay/local_failure.hpp"
#include "relay/relay_buffer.hpp"
#include "relay/request_plan.hpp"
#include "relay/response_plan.hpp"
#include "relay/upstream_pool.hpp"

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
    // A WebSocket upgrade (request_plan::upgrade): a 101 that switches to websocket is taken.
    bool upgrade = false;
};

// Where one request's exchange is. Each stage names what the exchange waits for; finish() is
// the only way out of every stage but done.
enum class exchange_stage : std::uint8_t {
    idle,       // no request: between requests on the client connection
    acquiring,  // a pooled or new upstream connection
    writing,    // the request going to the upstream
    head,       // the upstream's response head
    interim,    // a 1xx response going to the client
    held_head,  // the observer's durable wait before the response head goes out
    body,       // the body relay: each upstream read, then its write to the client
    held_end,   // the observer's durable wait before the end of the response goes out
    done,       // over: the connection has been told how
};

// How an exchange ends; finish() turns each into what the upstream connection, the observer and
// the client connection are told.
enum class exchange_end : std::uint8_t {
    complete,         // the whole response reached the client
    client_gone,      // the client hung up, or a write to it failed
    upstream_closed,  // the upstream closed before answering: retried once on a pooled one
    failed,           // the upstream failed before the response began: a local answer
    cut,              // the upstream failed mid-body: the client connection is cut
    switched,  // the client has the 101 to its WebSocket upgrade: both connections become a tunnel
};

template <class Stream>
class upstream_exchange {
  public:
    upstream_exchange(client_connection<Stream>& owner, upstream_pool& pool);
    upstream_exchange(const upstream_exchange&) = delete;
    upstream_exchange& operator=(const upstream_exchange&) = delete;
    upstream_exchange(upstream_exchange&&) = delete;
    upstream_exchange& operator=(upstream_exchange&&) = delete;
    ~upstream_exchange() = default;

    // Forwards `request` and relays its response; the owner hears back through its
    // finish_exchange / respond_local / next_request_or_close.
    void start(upstream_request&& request, relay_options options);
    // cancel, abort and stop_body_watch are noexcept although Asio's cancel reports a failure by
    // exception: the reactor's cancel does not fail, so a throw there is a broken invariant and
    // terminate is the right answer (hence the NOLINTs).
    // The client hung up: stop waiting for the upstream (the pending handler ends the exchange).
    void cancel() noexcept;  // NOLINT(bugprone-exception-escape)
    // Closes the upstream connection, if any, without reusing it.
    void abort() noexcept;  // NOLINT(bugprone-exception-escape)
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
    // The upstream switched to WebSocket: its 101 goes to the client, then finish(switched).
    void on_switch(core::time_point now);
    void write_switch_head();
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
    // The one way an exchange ends. `ec`, `stage` and `detail` say what failed (for
    // upstream_closed, failed and cut).
    void finish(exchange_end how, error_code ec = {},
                upstream_stage stage = upstream_stage::connect, std::string_view detail = {});
    void enter(exchange_stage stage) noexcept { r_.stage = stage; }
    // While the body streams, one coarse timer per exchange enforces timeouts.upstream_idle on
    // the read and timeouts.client_write on the write in flight, in place of Beast's timer per
    // operation (a wait and a cancel for every read and every write: two per chunk).
    void start_body_watch();
    void stop_body_watch() noexcept;  // NOLINT(bugprone-exception-escape): see cancel
    void begin_wait(bool on_upstream) noexcept;
    // Clears the wait; the error to handle (`ec`, or a timeout when the watch cut the operation).
    [[nodiscard]] error_code end_wait(error_code ec) noexcept;
    void arm_body_watch();
    void on_body_watch(error_code ec);
    // Runs `next` once the observer's wait is over (now, when there is nothing to wait for).
    template <typename Wait>
    bool hold(const Wait& wait, void (upstream_exchange::*next)());
    // `write` (a response head) once the observer's wait is over, in stage held_head meanwhile.
    template <typename Wait>
    void head_after(const Wait& wait, void (upstream_exchange::*write)());
    [[nodiscard]] bool client_gone() const noexcept;

    client_connection<Stream>& owner_;
    upstream_pool& pool_;
    upstream_ptr upstream_;  // held from acquiring until finish(); released to the pool there

    // Everything one request's exchange knows, made anew by start(): nothing carries over from
    // one request to the next on the same client connection.
    struct state {
        relay_options options;
        // The request being sent (its head in head_text), kept for a retry on a fresh connection
        // until the retry can no longer come; empty while the response streams.
        std::string request_body;
        // The response head's parser: made per response, let go once the body's framing is
        // known (the relay decodes the body itself), so a streaming response does not carry it.
        std::unique_ptr<bhttp::response_parser<bhttp::buffer_body>> parser;
        std::uint64_t head_bytes = 0;
        std::unique_ptr<bhttp::response<bhttp::empty_body>> interim_response;  // for a 1xx
        // The head being written: the request's to the upstream (request_plan), then the
        // response's to the client (response_plan).
        std::string head_text;
        std::optional<protocol::usage_filter> usage_filter;
        std::uint8_t ws_reserved_bits = 0;  // for the tunnel: what the agreed extensions allow
        // The body as it arrives: its framing removed in place, read by read (start_body).
        body_decoder decoder;
        std::uint64_t relayed_bytes = 0;
        std::string_view pending_last;  // the held end of the response (see write_last_body)
        std::size_t last_read = 0;      // bytes of the previous body read (buffer growth)
        error_code deferred_error;      // a framing error found behind forwarded bytes
        unsigned interim_responses = 0;
        std::uint32_t small_reads = 0;  // reads in a row too small to need a grown buffer
        exchange_stage stage = exchange_stage::idle;
        body_framing framing = body_framing::none;
        bool request_held = false;         // head_text and request_body hold the request
        bool reused = false;               // the upstream connection came from the pool
        bool retried = false;              // the one retry on a fresh connection was taken
        bool upstream_keep_alive = false;  // the parser's keep_alive(), kept when it is let go
        bool end_written = false;          // the write in flight carries the end of the body
        // Over plain TCP, when body bytes came with the response head, the head (head_text) is
        // written with them in one send: one write and one segment fewer per response.
        bool head_pending = false;
        bool bytes_after_body = false;  // the upstream sent more than the body: not reused
        bool drained_ok = false;        // this body is read with drained_
    };
    state r_;

    void release_request() noexcept {
        if (r_.request_held) {
            r_.request_body = {};  // a long prompt, perhaps
            r_.head_text = {};
            r_.request_held = false;
        }
    }

    std::array<char, 20> chunk_head_{};  // "<hex size>\r\n" of the chunk being written
    // Body reads over plain TCP where the framing says more bytes are due (relay/drained_read).
    drained_read drained_;
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
    std::unique_ptr<char[]> body_buffer_;  // NOLINT(modernize-avoid-c-arrays): a vector zeroes
    std::size_t body_capacity_ = 0;
};

}  // namespace tokenmeter::relay
