#include "relay/upstream_exchange.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "net/direct_io.hpp"
#include "net/mailbox.hpp"
#include "relay/client_connection.hpp"
#include "relay/headers.hpp"
#include "relay/response_plan.hpp"

namespace tokenmeter::relay {

template <class Stream>
upstream_exchange<Stream>::upstream_exchange(client_connection<Stream>& owner, upstream_pool& pool)
    : owner_(owner), pool_(pool), body_watch_(owner.lowest().get_executor()) {}

template <class Stream>
void upstream_exchange<Stream>::resize_body_buffer_after(std::size_t bytes_read) {
    // Only between a completed write and the next read: nothing refers to the old bytes then.
    const std::size_t next = relay_buffer_size::next(body_capacity_, bytes_read, r_.small_reads);
    if (next != body_capacity_) {
        release_body_buffer();
        body_capacity_ = next;
        if (next > body_buffer_initial) {
            body_buffer_.reset(new char[body_capacity_]);
        }
    }
}

template <class Stream>
void upstream_exchange<Stream>::reset_body_buffer() {
    // Taken again, small, when this exchange's body arrives.
    release_body_buffer();
    body_capacity_ = 0;
}

template <class Stream>
void upstream_exchange<Stream>::start(upstream_request&& request, relay_options options) {
    r_ = state{};
    r_.head_text = std::move(request.head);
    r_.request_body = std::move(request.body);
    r_.request_held = true;
    r_.options = options;
    reset_body_buffer();
    acquire(true);
}

template <class Stream>
bool upstream_exchange<Stream>::client_gone() const noexcept {
    return owner_.request().client_gone;
}

template <class Stream>
void upstream_exchange<Stream>::cancel() noexcept {  // NOLINT(bugprone-exception-escape)
    if (upstream_) {
        upstream_->stream.cancel();
    }
}

template <class Stream>
void upstream_exchange<Stream>::abort() noexcept {  // NOLINT(bugprone-exception-escape)
    stop_body_watch();
    drained_.detach();
    if (upstream_) {
        error_code ignored;
        upstream_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        upstream_->stream.socket().close(ignored);
        pool_.release(std::move(upstream_), false);
    }
}

// ---- connection and request ---------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::acquire(bool allow_reuse) {
    enter(exchange_stage::acquiring);
    pool_.acquire(allow_reuse, owner_.guarded([this](error_code ec, upstream_ptr connection,
                                                     bool reused, std::string detail) {
        on_upstream(ec, std::move(connection), reused, std::move(detail));
    }));
}

template <class Stream>
void upstream_exchange<Stream>::on_upstream(error_code ec, upstream_ptr connection, bool reused,
                                            std::string detail) {
    if (client_gone()) {
        pool_.release(std::move(connection), true);
        finish(exchange_end::client_gone);
        return;
    }
    if (ec) {
        finish(exchange_end::failed, ec, upstream_stage::connect, detail);
        return;
    }
    upstream_ = std::move(connection);
    r_.reused = reused;
    upstream_->requests += 1;
    do_write_request();
}

template <class Stream>
void upstream_exchange<Stream>::do_write_request() {
    enter(exchange_stage::writing);
    upstream_->stream.expires_after(owner_.context().settings.upstream_idle);
    auto done = owner_.guarded([this](error_code ec, std::size_t) { on_write_request(ec); });
    const std::array<asio::const_buffer, 2> bytes{asio::buffer(r_.head_text),
                                                  asio::buffer(r_.request_body)};
    asio::async_write(upstream_->stream, bytes, std::move(done));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_request(error_code ec) {
    if (client_gone()) {
        finish(exchange_end::client_gone);
        return;
    }
    if (ec) {
        // A pooled connection the server closed while idle read nothing: finish() retries once.
        finish(exchange_end::upstream_closed, ec, upstream_stage::write);
        return;
    }
    if (!r_.reused || r_.retried) {
        // No retry can come (a fresh connection, or the retry itself): the request is sent and
        // not needed while the response is awaited, and the model server has it: served. On a
        // pooled connection that is known only once it answers (a server that closed it while
        // idle read nothing, and the request goes again).
        release_request();
        owner_.request().observed->request_sent(owner_.context().clock.now());
    }
    do_read_head();
}

// ---- response head ------------------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::do_read_head() {
    enter(exchange_stage::head);
    r_.parser = std::make_unique<bhttp::response_parser<bhttp::buffer_body>>();
    r_.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    r_.parser->header_limit(
        static_cast<std::uint32_t>(owner_.context().settings.max_request_header_bytes));
    if (r_.options.head_request) {
        r_.parser->skip(true);
    }
    r_.head_bytes = 0;
    parse_head();
}

// The response head is read in pieces with the idle timeout re-armed per read (as for the
// body), not under one deadline: a server that is slow to start but keeps sending is not cut.
template <class Stream>
void upstream_exchange<Stream>::parse_head() {
    auto& buffer = upstream_->buffer;
    if (buffer.size() > 0) {
        error_code ec;
        const std::size_t used = r_.parser->put(buffer.data(), ec);
        buffer.consume(used);
        if (ec != bhttp::error::need_more) {
            if (ec || r_.parser->is_header_done()) {
                on_head(ec);
                return;
            }
            // Not expected: put stops only at the end of the head. Read more.
        }
    }
    upstream_->stream.expires_after(owner_.context().settings.upstream_idle);
    upstream_->stream.async_read_some(
        buffer.prepare(head_read_size),
        owner_.guarded([this](error_code ec, std::size_t n) { on_head_bytes(ec, n); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_head_bytes(error_code ec, std::size_t bytes) {
    upstream_->buffer.commit(bytes);
    r_.head_bytes += bytes;
    if (ec == asio::error::eof) {
        // Closed before a whole head: with nothing at all, the pooled-connection retry applies.
        ec = r_.head_bytes == 0 && !r_.parser->got_some()
                 ? error_code(bhttp::error::end_of_stream)
                 : error_code(bhttp::error::partial_message);
    }
    if (ec) {
        on_head(ec);
        return;
    }
    parse_head();
}

template <class Stream>
void upstream_exchange<Stream>::on_head(error_code ec) {
    auto now = owner_.context().clock.now();
    if (client_gone()) {
        finish(exchange_end::client_gone);
        return;
    }
    if (!ec) {
        const unsigned status = r_.parser->get().result_int();
        if (status == 101) {
            if (r_.options.upgrade && switched_to_websocket(r_.parser->get())) {
                on_switch(now);
                return;
            }
            // Only a WebSocket upgrade is asked for (request_plan): no other switch was agreed.
            ec = make_error_code(upstream_errc::switched_protocols);
        } else if (status >= 100 && status < 200) {
            forward_interim();
            return;
        }
    }
    if (ec) {
        const bool closed_before_reply = ec == bhttp::error::end_of_stream ||
                                         ec == asio::error::connection_reset ||
                                         ec == asio::error::eof;
        finish(closed_before_reply ? exchange_end::upstream_closed : exchange_end::failed, ec,
               upstream_stage::response_header);
        return;
    }
    owner_.request().observed->request_sent(now);

    // No retry can come now: the request sent upstream (its fields, and its body, a long
    // prompt perhaps) is not needed while the response streams.
    release_request();
    auto& request = owner_.request();
    const auto& head = r_.parser->get();
    r_.interim_responses = 0;
    const bool has_body = !r_.parser->is_done();
    std::optional<std::uint64_t> content_length;
    if (const auto length = r_.parser->content_length()) {
        content_length = *length;
    }
    response_plan plan =
        plan_response(upstream_head{head, has_body, content_length},
                      response_context{request.version, request.keep_alive, owner_.draining(),
                                       r_.options.filter_usage});
    // The head is kept only until it is written.
    r_.head_text = std::move(plan.head);
    r_.framing = plan.framing;
    request.keep_alive = plan.keep_alive;
    r_.usage_filter.reset();
    if (plan.filter_usage) {
        r_.usage_filter.emplace(protocol::usage_filter::default_max_held_bytes,
                                r_.options.continuous_usage);
    }
    r_.end_written = false;

    auto content_type = head[bhttp::field::content_type];
    auto wait = request.observed->response_head(
        static_cast<int>(head.result_int()),
        std::string_view(content_type.data(), content_type.size()), has_body, now);
    if (plan.coded_body) {
        request.observed->unreadable_body();  // metered requests ask for identity (request_plan)
    }
    // Everything the head said has been written or decided on: its fields are not needed while
    // the body streams (trailers, if any, are parsed into the emptied set).
    r_.parser->get().clear();
    head_after(wait, &upstream_exchange::write_client_header);
}

// An interim (1xx) response: passed on to an HTTP/1.1 client (RFC 9110 §15.2; an HTTP/1.0
// client cannot take one), then the final response is read from the same connection.
template <class Stream>
void upstream_exchange<Stream>::forward_interim() {
    if (++r_.interim_responses > max_interim_responses) {
        on_head(make_error_code(upstream_errc::too_many_interim));
        return;
    }
    if (owner_.request().version < 11) {
        do_read_head();
        return;
    }
    enter(exchange_stage::interim);
    const auto& head = r_.parser->get();
    r_.interim_response = std::make_unique<bhttp::response<bhttp::empty_body>>();
    r_.interim_response->result(head.result_int());
    r_.interim_response->reason(head.reason());
    r_.interim_response->version(11);
    copy_end_to_end_fields(head.base(), r_.interim_response->base());
    owner_.lowest().expires_after(owner_.context().settings.client_write);
    bhttp::async_write(
        owner_.stream(), *r_.interim_response,
        owner_.guarded([this](error_code ec, std::size_t) { on_write_interim(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_interim(error_code ec) {
    if (ec || client_gone()) {
        finish(exchange_end::client_gone);
        return;
    }
    do_read_head();
}

template <class Stream>
void upstream_exchange<Stream>::on_switch(core::time_point now) {
    owner_.request().observed->request_sent(now);
    release_request();
    switch_plan plan = plan_switch(r_.parser->get());
    r_.head_text = std::move(plan.head);
    r_.ws_reserved_bits = plan.reserved_bits;
    r_.parser.reset();  // a 101 has no body: what follows it in the buffer is the tunnel's
    head_after(owner_.request().observed->response_head(101, {}, false, now),
               &upstream_exchange::write_switch_head);
}

template <class Stream>
void upstream_exchange<Stream>::write_switch_head() {
    enter(exchange_stage::head);
    owner_.request().response_begun = true;
    owner_.lowest().expires_after(owner_.context().settings.client_write);
    asio::async_write(owner_.stream(), asio::buffer(r_.head_text),
                      owner_.guarded([this](error_code ec, std::size_t) {
                          r_.head_text = {};
                          if (ec || client_gone()) {
                              finish(exchange_end::client_gone);
                              return;
                          }
                          finish(exchange_end::switched);
                      }));
}

template <class Stream>
void upstream_exchange<Stream>::write_client_header() {
    enter(exchange_stage::head);
    owner_.request().response_begun = true;
    if constexpr (std::is_same_v<Stream, tcp_stream>) {
        if (upstream_->buffer.size() > 0 && !r_.parser->is_done()) {
            // Body bytes came with the head: the head goes out in front of them, in the same
            // send (write_client_body), or alone if they turn out to hold nothing to forward.
            r_.head_pending = true;
            start_body();
            return;
        }
    }
    owner_.lowest().expires_after(owner_.context().settings.client_write);
    asio::async_write(
        owner_.stream(), asio::buffer(r_.head_text),
        owner_.guarded([this](error_code ec, std::size_t) { on_write_client_header(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::flush_head(void (upstream_exchange::*next)()) {
    r_.head_pending = false;
    begin_wait(false);
    asio::async_write(owner_.stream(), asio::buffer(r_.head_text),
                      owner_.guarded([this, next](error_code ec, std::size_t) {
                          ec = end_wait(ec);
                          r_.head_text = {};
                          if (ec || client_gone()) {
                              finish(exchange_end::client_gone);
                              return;
                          }
                          (this->*next)();
                      }));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_client_header(error_code ec) {
    // The body's framing is the relay's own: the head is done with.
    r_.head_text = {};
    if (ec || client_gone()) {
        finish(exchange_end::client_gone);
        return;
    }
    if (r_.parser->is_done()) {
        write_body_end();
        return;
    }
    start_body();
}

// ---- the end ---------------------------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::finish(exchange_end how, error_code ec, upstream_stage stage,
                                       std::string_view detail) {
    const exchange_stage from = std::exchange(r_.stage, exchange_stage::done);
    switch (how) {
        case exchange_end::complete: {
            stop_body_watch();
            const bool keep_alive = r_.parser ? r_.parser->keep_alive() : r_.upstream_keep_alive;
            const bool reusable =
                keep_alive && upstream_->buffer.size() == 0 && !r_.bytes_after_body;
            upstream_->stream.expires_never();
            pool_.release(std::move(upstream_), reusable);
            r_.parser.reset();
            reset_body_buffer();  // the connection may wait a long time for its next request
            owner_.exchange_done(observe::end_reason::upstream_complete);
            return;
        }
        case exchange_end::switched:
            // The tunnel owns the upstream connection from here; it never returns to the pool
            // open.
            stop_body_watch();
            drained_.detach();
            upstream_->stream.expires_never();
            reset_body_buffer();
            owner_.start_tunnel(std::move(upstream_), r_.ws_reserved_bits);
            return;
        case exchange_end::client_gone:
            abort();
            owner_.exchange_done(observe::end_reason::client_cancel);
            return;
        case exchange_end::upstream_closed:
            if (r_.reused && !r_.retried) {
                // Nothing was processed on a pooled connection the server had closed: the
                // request goes once more, on a fresh connection.
                r_.retried = true;
                abort();
                acquire(false);
                return;
            }
            [[fallthrough]];
        case exchange_end::failed: {
            if (from == exchange_stage::head) {
                // The server read the request (a fresh connection's failure, or a pooled one's
                // after its retry, says so), whatever it did with it.
                owner_.request().observed->request_sent(owner_.context().clock.now());
            }
            abort();
            upstream_failure failure = classify_upstream_error(ec, stage, detail);
            owner_.context().observer.upstream_error(failure.reason);
            spdlog::warn("upstream {} failed ({}): {}", to_string(stage), failure.reason,
                         detail.empty() ? ec.message() : std::string(detail));
            owner_.answer_locally(failure.failure, failure.message);
            return;
        }
        case exchange_end::cut: {
            // The client must not mistake a cut stream for a whole one: no final chunk, a close.
            const bool timed_out = ec == beast::error::timeout;
            owner_.context().observer.upstream_error(timed_out ? "idle_timeout" : "truncated");
            spdlog::warn("upstream response cut after {} body bytes: {}", r_.relayed_bytes,
                         ec.message());
            abort();
            owner_.exchange_done(timed_out ? observe::end_reason::upstream_failed
                                           : observe::end_reason::upstream_truncated);
            return;
        }
    }
}

// No byte of a metered response reaches the client before its open entry is on disk, so a
// client that saw a response always has a record, even if the proxy is killed next.
template <class Stream>
template <typename Wait>
void upstream_exchange<Stream>::head_after(const Wait& wait, void (upstream_exchange::*write)()) {
    if (hold(wait, write)) {
        enter(exchange_stage::held_head);
        return;
    }
    (this->*write)();
}

template <class Stream>
template <typename Wait>
bool upstream_exchange<Stream>::hold(const Wait& wait, void (upstream_exchange::*next)()) {
    if (!wait.pending()) {
        return false;
    }
    auto resume = owner_.guarded([this, next] { (this->*next)(); });
    auto exec = owner_.lowest().get_executor();
    wait.then([resume = std::move(resume), exec]() mutable {
        // On the writer's thread: hop back to the connection's own thread.
        net::post_from_any_thread(exec.context(), std::move(resume));
    });
    return true;
}

}  // namespace tokenmeter::relay

// The body relay: the same class, kept apart by job; one translation unit instantiates both.
#include "relay/upstream_relay.ipp"

namespace tokenmeter::relay {
template class upstream_exchange<tcp_stream>;
template class upstream_exchange<net::tls_stream>;
}  // namespace tokenmeter::relay
