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

#include "relay/client_connection.hpp"
#include "net/direct_io.hpp"
#include "relay/headers.hpp"
#include "net/mailbox.hpp"

namespace tokenmeter::relay {

template <class Stream>
upstream_exchange<Stream>::upstream_exchange(client_connection<Stream>& owner,
                                             upstream_pool& pool)
    : owner_(owner),
      pool_(pool),
      body_watch_(owner.lowest().get_executor()),
      body_capacity_(0) {}

template <class Stream>
void upstream_exchange<Stream>::resize_body_buffer_after(std::size_t bytes_read) {
    // Only between a completed write and the next read: nothing refers to the old bytes then.
    const std::size_t next = relay_buffer_size::next(body_capacity_, bytes_read, small_reads_);
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
void upstream_exchange<Stream>::start(upstream_request request, relay_options options) {
    head_text_ = std::move(request.head);
    request_body_ = std::move(request.body);
    request_held_ = true;
    options_ = options;
    reset_body_buffer();
    last_read_ = 0;
    small_reads_ = 0;
    retried_ = false;
    relayed_bytes_ = 0;
    decoder_ = body_decoder();
    bytes_after_body_ = false;
    deferred_error_ = {};
    usage_filter_.reset();
    acquire(true);
}

template <class Stream>
bool upstream_exchange<Stream>::client_gone() const noexcept {
    return owner_.request_.client_gone;
}

template <class Stream>
void upstream_exchange<Stream>::cancel() noexcept {
    if (upstream_) {
        upstream_->stream.cancel();
    }
}

template <class Stream>
void upstream_exchange<Stream>::abort() noexcept {
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
    pool_.acquire(allow_reuse,
                  owner_.guarded([this](error_code ec, upstream_ptr connection, bool reused,
                                        std::string detail) {
                      on_upstream(ec, std::move(connection), reused, std::move(detail));
                  }));
}

template <class Stream>
void upstream_exchange<Stream>::on_upstream(error_code ec, upstream_ptr connection, bool reused,
                                            std::string detail) {
    if (client_gone()) {
        pool_.release(std::move(connection), true);
        owner_.finish_exchange(observe::end_reason::client_cancel);
        owner_.close_client();
        return;
    }
    if (ec) {
        fail_before_response(ec, upstream_stage::connect, detail);
        return;
    }
    upstream_ = std::move(connection);
    reused_ = reused;
    upstream_->requests += 1;
    do_write_request();
}

template <class Stream>
void upstream_exchange<Stream>::do_write_request() {
    upstream_->stream.expires_after(owner_.context_.settings.upstream_idle);
    auto done = owner_.guarded([this](error_code ec, std::size_t) { on_write_request(ec); });
    const std::array<asio::const_buffer, 2> bytes{asio::buffer(head_text_),
                                                  asio::buffer(request_body_)};
    asio::async_write(upstream_->stream, bytes, std::move(done));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_request(error_code ec) {
    if (client_gone()) {
        end_for_client_gone();
        return;
    }
    if (ec) {
        if (reused_ && !retried_) {
            // A pooled connection the server closed while idle: nothing was processed, retry once.
            retried_ = true;
            abort();
            acquire(false);
            return;
        }
        abort();
        fail_before_response(ec, upstream_stage::write);
        return;
    }
    if (!reused_ || retried_) {
        // No retry can come (a fresh connection, or the retry itself): the request is sent and
        // not needed while the response is awaited, and the model server has it: served. On a
        // pooled connection that is known only once it answers (a server that closed it while
        // idle read nothing, and the request goes again).
        release_request();
        owner_.request_.observed->request_sent(owner_.context_.clock.now());
    }
    do_read_head();
}

// ---- response head ------------------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::do_read_head() {
    parser_ = std::make_unique<bhttp::response_parser<bhttp::buffer_body>>();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_->header_limit(
        static_cast<std::uint32_t>(owner_.context_.settings.max_request_header_bytes));
    if (options_.head_request) {
        parser_->skip(true);
    }
    head_bytes_ = 0;
    parse_head();
}

// The response head is read in pieces with the idle timeout re-armed per read (as for the
// body), not under one deadline: a server that is slow to start but keeps sending is not cut.
template <class Stream>
void upstream_exchange<Stream>::parse_head() {
    auto& buffer = upstream_->buffer;
    if (buffer.size() > 0) {
        error_code ec;
        const std::size_t used = parser_->put(buffer.data(), ec);
        buffer.consume(used);
        if (ec != bhttp::error::need_more) {
            if (ec || parser_->is_header_done()) {
                on_head(ec);
                return;
            }
            // Not expected: put stops only at the end of the head. Read more.
        }
    }
    upstream_->stream.expires_after(owner_.context_.settings.upstream_idle);
    upstream_->stream.async_read_some(
        buffer.prepare(head_read_size),
        owner_.guarded([this](error_code ec, std::size_t n) { on_head_bytes(ec, n); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_head_bytes(error_code ec, std::size_t bytes) {
    upstream_->buffer.commit(bytes);
    head_bytes_ += bytes;
    if (ec == asio::error::eof) {
        // Closed before a whole head: with nothing at all, the pooled-connection retry applies.
        ec = head_bytes_ == 0 && !parser_->got_some() ? error_code(bhttp::error::end_of_stream)
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
    auto now = owner_.context_.clock.now();
    if (client_gone()) {
        end_for_client_gone();
        return;
    }
    if (!ec) {
        const unsigned status = parser_->get().result_int();
        if (status == 101) {
            // The proxy forwards no Upgrade, so it agreed to no protocol switch.
            ec = make_error_code(upstream_errc::switched_protocols);
        } else if (status >= 100 && status < 200) {
            forward_interim();
            return;
        }
    }
    if (ec) {
        bool closed_before_reply = ec == bhttp::error::end_of_stream ||
                                   ec == asio::error::connection_reset || ec == asio::error::eof;
        if (closed_before_reply && reused_ && !retried_) {
            retried_ = true;
            abort();
            acquire(false);
            return;
        }
        // No retry: the server read the request (a pooled connection's first answer, or its
        // failure, says so), whatever it did with it.
        owner_.request_.observed->request_sent(now);
        abort();
        fail_before_response(ec, upstream_stage::response_header);
        return;
    }
    owner_.request_.observed->request_sent(now);

    // No retry can come now: the request sent upstream (its fields, and its body, a long
    // prompt perhaps) is not needed while the response streams.
    release_request();
    auto& request = owner_.request_;
    const auto& head = parser_->get();
    interim_responses_ = 0;
    // The client's head is written as text straight from the upstream's (no second field set):
    // the status line, every end-to-end field in the order it came, then the framing fields
    // the proxy sets. It is kept only until it is written.
    const unsigned version = request.version == 10 ? 10 : 11;
    head_text_.clear();
    append_status_line(version, head.result_int(), head.reason(), head_text_);
    append_end_to_end_fields(head.base(), head_text_);

    const bool has_body = !parser_->is_done();
    usage_filter_.reset();
    if (options_.filter_usage && has_body && head.result_int() < 300 &&
        beast::iequals(head[bhttp::field::content_type].substr(0, 17), "text/event-stream")) {
        usage_filter_.emplace(protocol::usage_filter::default_max_held_bytes,
                              options_.continuous_usage);
    }
    framing_ = has_body ? body_framing::raw : body_framing::none;
    if (!has_body) {
        // HEAD, 204 and 304 keep the upstream's Content-Length as a description, with no body.
        auto length = head[bhttp::field::content_length];
        if (!length.empty()) {
            append_field(head_text_, "Content-Length", length);
        }
    } else if (auto length = parser_->content_length(); length && !usage_filter_) {
        append_field(head_text_, "Content-Length", *length);
    } else if (request.version >= 11) {
        append_field(head_text_, "Transfer-Encoding", "chunked");
        framing_ = body_framing::chunked;
    } else {
        // An HTTP/1.0 client cannot take chunks: the body ends when the connection closes.
        request.keep_alive = false;
    }
    end_written_ = false;
    // Persistence is the default of HTTP/1.1 and must be asked for in HTTP/1.0 (RFC 9112 §9.3).
    const bool keep_alive = request.keep_alive && !owner_.draining();
    if (version == 11 && !keep_alive) {
        append_field(head_text_, "Connection", "close");
    } else if (version == 10 && keep_alive) {
        append_field(head_text_, "Connection", "keep-alive");
    }
    head_text_ += "\r\n";

    auto content_type = head[bhttp::field::content_type];
    auto wait = request.observed->response_head(
        static_cast<int>(head.result_int()),
        std::string_view(content_type.data(), content_type.size()), has_body, now);
    if (const auto coding = head[bhttp::field::content_encoding];
        has_body && !coding.empty() && !beast::iequals(coding, "identity")) {
        request.observed->unreadable_body();  // metered requests ask for identity (request_plan)
    }
    // Everything the head said has been written or decided on: its fields are not needed while
    // the body streams (trailers, if any, are parsed into the emptied set).
    parser_->get().clear();
    // No byte of a metered response reaches the client before its open entry is on disk, so a
    // client that saw a response always has a record, even if the proxy is killed next.
    if (hold(wait, &upstream_exchange::write_client_header)) {
        return;
    }
    write_client_header();
}

// An interim (1xx) response: passed on to an HTTP/1.1 client (RFC 9110 §15.2; an HTTP/1.0
// client cannot take one), then the final response is read from the same connection.
template <class Stream>
void upstream_exchange<Stream>::forward_interim() {
    if (++interim_responses_ > max_interim_responses) {
        on_head(make_error_code(upstream_errc::too_many_interim));
        return;
    }
    if (owner_.request_.version < 11) {
        do_read_head();
        return;
    }
    const auto& head = parser_->get();
    interim_response_ = std::make_unique<bhttp::response<bhttp::empty_body>>();
    interim_response_->result(head.result_int());
    interim_response_->reason(head.reason());
    interim_response_->version(11);
    copy_end_to_end_fields(head.base(), interim_response_->base());
    owner_.lowest().expires_after(owner_.context_.settings.client_write);
    bhttp::async_write(owner_.client_, *interim_response_,
                       owner_.guarded([this](error_code ec, std::size_t) { on_write_interim(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_interim(error_code ec) {
    if (ec || client_gone()) {
        end_for_client_gone();
        return;
    }
    do_read_head();
}

template <class Stream>
void upstream_exchange<Stream>::write_client_header() {
    owner_.request_.response_begun = true;
    if constexpr (std::is_same_v<Stream, tcp_stream>) {
        if (upstream_->buffer.size() > 0 && !parser_->is_done()) {
            // Body bytes came with the head: the head goes out in front of them, in the same
            // send (write_client_body), or alone if they turn out to hold nothing to forward.
            head_pending_ = true;
            start_body();
            return;
        }
    }
    owner_.lowest().expires_after(owner_.context_.settings.client_write);
    asio::async_write(
        owner_.client_, asio::buffer(head_text_),
        owner_.guarded([this](error_code ec, std::size_t) { on_write_client_header(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::flush_head(void (upstream_exchange::*next)()) {
    head_pending_ = false;
    begin_wait(false);
    asio::async_write(owner_.client_, asio::buffer(head_text_),
                      owner_.guarded([this, next](error_code ec, std::size_t) {
                          ec = end_wait(ec);
                          head_text_ = {};
                          if (ec || client_gone()) {
                              end_for_client_gone();
                              return;
                          }
                          (this->*next)();
                      }));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_client_header(error_code ec) {
    // The body's framing is the relay's own: the head is done with.
    head_text_ = {};
    if (ec || client_gone()) {
        end_for_client_gone();
        return;
    }
    if (parser_->is_done()) {
        write_body_end();
        return;
    }
    start_body();
}

// ---- endings and failures -----------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::on_complete() {
    stop_body_watch();
    owner_.stop_watching_client();
    const bool keep_alive = parser_ ? parser_->keep_alive() : upstream_keep_alive_;
    bool reusable = keep_alive && upstream_->buffer.size() == 0 && !bytes_after_body_;
    upstream_->stream.expires_never();
    pool_.release(std::move(upstream_), reusable);
    parser_.reset();
    reset_body_buffer();  // the connection may wait a long time for its next request
    owner_.finish_exchange(observe::end_reason::upstream_complete);
    owner_.next_request_or_close();
}

template <class Stream>
void upstream_exchange<Stream>::fail_before_response(error_code ec, upstream_stage stage,
                                                     std::string_view detail) {
    upstream_failure failure = classify_upstream_error(ec, stage, detail);
    owner_.context_.observer.upstream_error(failure.reason);
    spdlog::warn("upstream {} failed ({}): {}", to_string(stage), failure.reason,
                 detail.empty() ? ec.message() : std::string(detail));
    owner_.respond_local(failure.failure, failure.message);
}

template <class Stream>
void upstream_exchange<Stream>::end_for_client_gone() {
    abort();
    owner_.finish_exchange(observe::end_reason::client_cancel);
    owner_.close_client();
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
