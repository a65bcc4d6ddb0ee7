// relay/upstream_relay: the body relay of upstream_exchange (included by upstream_exchange.cpp,
// which instantiates the template). Each upstream read is written to the client before the next
// read starts, so a slow client slows the upstream (TCP back-pressure) instead of growing
// memory; the observer sees each read after its write was started.
#pragma once

namespace tokenmeter::relay {

namespace relay_detail {
inline constexpr std::string_view crlf = "\r\n";
inline constexpr std::string_view crlf_last_chunk = "\r\n0\r\n\r\n";
inline constexpr std::string_view last_chunk = "0\r\n\r\n";

// The error a framing fault in the upstream's body is handled as (Beast's, for the same faults
// its parser reported before the relay decoded bodies itself).
inline error_code body_error(body_decoder::failure why) noexcept {
    switch (why) {
        case body_decoder::failure::none:
            return {};
        case body_decoder::failure::bad_chunk_size:
        case body_decoder::failure::bad_chunk_line:
        case body_decoder::failure::bad_chunk_end:
            return bhttp::error::bad_chunk;
        case body_decoder::failure::chunk_line_too_long:
            return bhttp::error::bad_chunk_extension;
        case body_decoder::failure::bad_trailer:
            return bhttp::error::bad_field;
        case body_decoder::failure::trailers_too_long:
            return bhttp::error::header_limit;
        case body_decoder::failure::cut_short:
            return bhttp::error::partial_message;
    }
    return bhttp::error::partial_message;
}
}  // namespace relay_detail

// The head is parsed and written: from here the relay reads the upstream socket itself, into
// its own buffer, and decodes the body's framing in place (relay/body_decoder). One read brings
// whatever the kernel had, however many chunks that is, and goes to the client in one write.
template <class Stream>
void upstream_exchange<Stream>::start_body() {
    if (r_.parser->chunked()) {
        r_.decoder = body_decoder::chunked(owner_.context().settings.max_request_header_bytes);
    } else if (auto length = r_.parser->content_length()) {
        r_.decoder = body_decoder::with_length(*length);
    } else {
        r_.decoder = body_decoder::until_close();
    }
    // From here the head's parser has nothing to do: the framing is in r_.decoder, and whether
    // the connection may be reused is decided by the head (Connection, the version, and a body
    // that ends at the close).
    r_.upstream_keep_alive = r_.parser->keep_alive();
    r_.parser.reset();
    r_.bytes_after_body = false;
    // Over plain TCP, where the framing says more bytes are due, a short read counts as draining
    // the socket (relay/drained_read: no receive that finds nothing before each wait). A body
    // read until the close keeps Asio's read.
    r_.drained_ok = false;
    if (upstream_->stream.tls() == nullptr &&
        r_.decoder.kind() != body_decoder::framing::until_close) {
        if (!upstream_->hangup_watched) {
            upstream_->hangup_watched =
                pool_.hangups().watch(upstream_->stream.socket().native_handle());
        }
        r_.drained_ok = upstream_->hangup_watched;
    }
    if (r_.drained_ok) {
        drained_.begin(upstream_->stream.socket(), pool_.hangups());
    } else {
        drained_.detach();
    }
    enter(exchange_stage::body);
    start_body_watch();
    do_read_body();
}

template <class Stream>
void upstream_exchange<Stream>::do_read_body() {
    resize_body_buffer_after(r_.last_read);
    if (r_.deferred_error) {
        // The bytes before the fault went out with the last write; now the fault is handled
        // as if this read had found it.
        on_read_body(std::exchange(r_.deferred_error, {}), 0);
        return;
    }
    auto& early = upstream_->buffer;
    if (early.size() > 0) {
        // Body bytes that came with the head, taken as if just read (posted: never a recursion).
        ensure_body_buffer();
        const std::size_t n =
            asio::buffer_copy(asio::buffer(body_buffer_.get(), body_capacity_), early.data());
        early.consume(n);
        asio::post(owner_.lowest().get_executor(),
                   owner_.guarded([this, n] { on_read_body({}, n); }));
        return;
    }
    if (early.capacity() > 0) {
        // The head's read buffer is not used while the body streams: a long stream should not
        // hold it (the next response's head allocates it again).
        early.shrink_to_fit();
    }
    read_upstream();
}

template <class Stream>
void upstream_exchange<Stream>::read_upstream() {
    if (r_.head_pending) {
        // Nothing to forward came with the head: it goes out now, before the wait for more.
        flush_head(&upstream_exchange::read_upstream);
        return;
    }
    begin_wait(true);
    if (start_drained_read()) {
        return;
    }
    ensure_body_buffer();
    auto into = asio::buffer(body_buffer_.get(), body_capacity_);
    auto done = owner_.guarded([this](error_code ec, std::size_t n) { on_read_body(ec, n); });
    if (upstream_->stream.tls() == nullptr) {
        // The socket itself: the body watch keeps the time, so Beast's stream has nothing to add.
        upstream_->stream.socket().async_read_some(into, std::move(done));
    } else {
        upstream_->stream.async_read_some(into, std::move(done));
    }
}

template <class Stream>
bool upstream_exchange<Stream>::start_drained_read() {
    if (!r_.drained_ok) {
        return false;
    }
    // A grown buffer is the exchange's own. At the first size the read takes a buffer from the
    // worker's pool when data is there, and this one goes back (its bytes are written and
    // observed).
    const bool lend = body_capacity_ <= body_buffer_initial;
    if (!lend) {
        ensure_body_buffer();
    }
    if (!drained_.start(upstream_->stream.socket(), lend ? nullptr : body_buffer_.get(),
                        lend ? body_buffer_initial : body_capacity_, owner_.shared_from_this(),
                        &upstream_exchange::on_drained_read, this)) {
        return false;
    }
    if (lend) {
        release_body_buffer();
        body_capacity_ = body_buffer_initial;
    }
    return true;
}

template <class Stream>
void upstream_exchange<Stream>::on_drained_read(void* self, error_code ec, std::size_t bytes) {
    auto* exchange = static_cast<upstream_exchange*>(self);
    if (char* taken = exchange->drained_.take_buffer()) {
        exchange->body_buffer_.reset(taken);  // the first size (start_drained_read)
    }
    exchange->owner_.run_guarded([&] {
        if (ec == asio::error::try_again) {
            // The upstream closed while the read waited: read what is left (and the close) now,
            // unless the exchange has moved on meanwhile (then the wait was cancelled).
            if (!exchange->watch_cut_ && exchange->upstream_ &&
                exchange->upstream_->stream.socket().is_open() && exchange->start_drained_read()) {
                return;
            }
            ec = asio::error::operation_aborted;
        }
        exchange->on_read_body(ec, bytes);
    });
}

template <class Stream>
void upstream_exchange<Stream>::on_read_body(error_code ec, std::size_t bytes) {
    auto now = owner_.context().clock.now();
    ec = end_wait(ec);
    if (client_gone()) {
        finish(exchange_end::client_gone);
        return;
    }
    r_.last_read = bytes;
    std::size_t payload = 0;
    std::size_t offset = 0;  // where the payload starts in the buffer
    if (bytes > 0) {
        const auto step = r_.decoder.decode(body_buffer_.get(), bytes);
        payload = step.payload;
        offset = step.offset;
        r_.bytes_after_body = r_.bytes_after_body || step.consumed < bytes;
        if (step.error != body_decoder::failure::none && !ec) {
            // The payload before the fault is forwarded first.
            (payload == 0 ? ec : r_.deferred_error) = relay_detail::body_error(step.error);
        }
    } else if (ec == asio::error::eof) {
        // The end of a body read until close; any other body was cut.
        ec = relay_detail::body_error(r_.decoder.at_close());
    }
    auto& observed = *owner_.request().observed;
    std::string_view read(body_buffer_.get() + offset, payload);
    if (ec) {
        // Bytes decoded in this same read are still shown to the observer; none go to the client.
        if (std::exchange(r_.head_pending, false)) {
            // The head, as it would have gone before this read: best effort, the connection
            // closes next.
            (void)net::direct_io::send_all_now(owner_.socket().native_handle(), r_.head_text);
        }
        observed.body(read, now);
        r_.relayed_bytes += payload;
        finish(exchange_end::cut, ec);
        return;
    }
    const bool last = r_.decoder.done();
    if (payload > 0 || (r_.usage_filter && last)) {
        r_.relayed_bytes += payload;
        std::string_view forward = r_.usage_filter ? r_.usage_filter->feed(read, last) : read;
        if (last && !forward.empty() && observed.holds_end()) {
            // The last read: observe it first, put the close entry on disk, then release the
            // end of the response. A client that saw the end therefore has a complete record;
            // the price is that the end waits for one group commit (usage.fsync_interval).
            // `forward` stays valid meanwhile: nothing reads into the buffer or feeds the filter.
            observed.body(read, now);
            auto wait = observed.seal(now);
            r_.pending_last = forward;
            if (hold(wait, &upstream_exchange::write_last_body)) {
                enter(exchange_stage::held_end);
                return;
            }
            write_last_body();
            return;
        }
        if (!forward.empty()) {
            // Write first, observe second: the write is started (and usually completed by the
            // kernel) before the observer looks at the bytes; the next read waits for both.
            const auto written = write_client_body(forward, last);
            observed.body(read, now);
            if (written) {
                on_write_client_body(*written);
            }
            return;
        }
        // The observer sees every byte the upstream sent, the removed usage chunk included.
        observed.body(read, now);
    }
    if (last) {
        write_body_end();
        return;
    }
    do_read_body();
}

template <class Stream>
std::optional<error_code> upstream_exchange<Stream>::write_client_body(std::string_view bytes,
                                                                       bool last) {
    using namespace relay_detail;
    // At most four pieces, gathered into one send: the response head if it waited for these
    // bytes (r_.head_pending), the chunk's size line, the bytes where the read left them, and the
    // chunk's end. The last bytes carry the end of the message with them (for chunked framing,
    // the final chunk goes in the same write), so a client that reads them and hangs up at once
    // has still received a complete response.
    std::array<asio::const_buffer, 4> pieces;
    std::size_t count = 0;
    if (std::exchange(r_.head_pending, false)) {
        pieces[count++] = asio::buffer(r_.head_text);
    }
    if (r_.framing == body_framing::chunked) {
        if (!bytes.empty()) {
            auto [end, ec] =
                std::to_chars(chunk_head_.data(), chunk_head_.data() + 16, bytes.size(), 16);
            std::memcpy(end, crlf.data(), crlf.size());
            pieces[count++] = asio::buffer(chunk_head_.data(),
                                           static_cast<std::size_t>(end - chunk_head_.data()) + 2);
            pieces[count++] = asio::buffer(bytes.data(), bytes.size());
            pieces[count++] = asio::buffer(last ? crlf_last_chunk : crlf);
        } else if (last) {
            pieces[count++] = asio::buffer(last_chunk);
        }
    } else if (r_.framing == body_framing::raw) {
        pieces[count++] = asio::buffer(bytes.data(), bytes.size());
    }
    r_.end_written = last;
    begin_wait(false);
    if constexpr (std::is_same_v<Stream, tcp_stream>) {
        // Over plain TCP the write is tried at once, without blocking: a client that keeps up
        // takes it whole, and the relay goes on to the next read without a trip through the
        // event loop. What the kernel could not take is written asynchronously.
        std::array<iovec, 4> vectors{};
        std::size_t total = 0;
        for (std::size_t i = 0; i < count; ++i) {
            vectors[i].iov_base =
                const_cast<void*>(pieces[i].data());  // NOLINT: iovec is not const
            vectors[i].iov_len = pieces[i].size();
            total += pieces[i].size();
        }
        if (total == 0) {
            return error_code{};
        }
        msghdr message{};
        message.msg_iov = vectors.data();
        message.msg_iovlen = count;
        const ssize_t sent = net::direct_io::sendmsg(owner_.socket().native_handle(), &message,
                                                     MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent >= 0 && static_cast<std::size_t>(sent) == total) {
            return error_code{};
        }
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return error_code(errno, asio::error::get_system_category());
        }
        // The rest, after what the kernel took.
        std::size_t skip = sent > 0 ? static_cast<std::size_t>(sent) : 0;
        std::size_t first = 0;
        while (first < count && skip >= pieces[first].size()) {
            skip -= pieces[first].size();
            ++first;
        }
        pieces[first] += skip;
        std::array<asio::const_buffer, 4> rest;
        std::copy(pieces.begin() + static_cast<std::ptrdiff_t>(first),
                  pieces.begin() + static_cast<std::ptrdiff_t>(count), rest.begin());
        asio::async_write(owner_.socket(), rest, owner_.guarded([this](error_code ec, std::size_t) {
            on_write_client_body(ec);
        }));
    } else {
        asio::async_write(
            owner_.stream(), pieces,
            owner_.guarded([this](error_code ec, std::size_t) { on_write_client_body(ec); }));
    }
    return std::nullopt;
}

template <class Stream>
void upstream_exchange<Stream>::write_then(std::string_view bytes, bool last) {
    if (auto written = write_client_body(bytes, last)) {
        on_write_client_body(*written);
    }
}

template <class Stream>
void upstream_exchange<Stream>::on_write_client_body(error_code ec) {
    ec = end_wait(ec);
    if (!r_.head_text.empty()) {
        r_.head_text = {};  // the response head went out with these bytes (r_.head_pending)
    }
    if (!ec && r_.end_written) {
        // Every byte was handed over: the response is complete even if the client hung up
        // right after reading it (the liveness watch may have seen that close first).
        finish(exchange_end::complete);
        return;
    }
    if (ec || client_gone()) {
        finish(exchange_end::client_gone);
        return;
    }
    if (r_.decoder.done()) {
        write_body_end();
        return;
    }
    do_read_body();
}

// The end of the body: the final chunk for chunked framing, nothing otherwise.
template <class Stream>
void upstream_exchange<Stream>::write_body_end() {
    auto& observed = *owner_.request().observed;
    if (observed.holds_end()) {
        auto wait = observed.seal(owner_.context().clock.now());
        if (hold(wait, &upstream_exchange::write_body_end)) {
            enter(exchange_stage::held_end);
            return;
        }
    }
    enter(exchange_stage::body);
    write_then({}, true);
}

template <class Stream>
void upstream_exchange<Stream>::write_last_body() {
    enter(exchange_stage::body);
    write_then(r_.pending_last, true);
}

// ---- the body watch --------------------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::start_body_watch() {
    const auto& settings = owner_.context().settings;
    // A timeout fires between its length and an eighth more (at most a second more).
    const auto shortest = std::min<std::chrono::steady_clock::duration>(settings.upstream_idle,
                                                                        settings.client_write);
    body_watch_tick_ = std::clamp<std::chrono::steady_clock::duration>(
        shortest / 8, std::chrono::milliseconds(5), std::chrono::seconds(1));
    // Beast's own timers stay off while the watch runs: an operation with no expiry neither
    // waits on a timer nor cancels one.
    upstream_->stream.expires_never();
    owner_.lowest().expires_never();
    waiting_ = waiting_on::nothing;
    watch_cut_ = false;
    body_watch_on_ = true;
    arm_body_watch();
}

template <class Stream>
void upstream_exchange<Stream>::stop_body_watch() noexcept {  // NOLINT(bugprone-exception-escape)
    if (body_watch_on_) {
        body_watch_on_ = false;
        waiting_ = waiting_on::nothing;
        body_watch_.cancel();
    }
}

template <class Stream>
void upstream_exchange<Stream>::begin_wait(bool on_upstream) noexcept {
    if (body_watch_on_) {
        waiting_ = on_upstream ? waiting_on::upstream : waiting_on::client;
        ++wait_number_;
    }
}

template <class Stream>
error_code upstream_exchange<Stream>::end_wait(error_code ec) noexcept {
    waiting_ = waiting_on::nothing;
    if (std::exchange(watch_cut_, false)) {
        return beast::error::timeout;
    }
    return ec;
}

template <class Stream>
void upstream_exchange<Stream>::arm_body_watch() {
    body_watch_.expires_after(body_watch_tick_);
    body_watch_.async_wait(owner_.guarded([this](error_code ec) { on_body_watch(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_body_watch(error_code ec) {
    if (ec || !body_watch_on_) {
        return;  // stopped: the exchange ended or moved on
    }
    if (waiting_ != waiting_on::nothing && !watch_cut_) {
        const auto& settings = owner_.context().settings;
        const auto limit = waiting_ == waiting_on::upstream
                               ? std::chrono::steady_clock::duration(settings.upstream_idle)
                               : std::chrono::steady_clock::duration(settings.client_write);
        // A wait first seen at this tick began within the last tick; one seen at n ticks began
        // more than n ticks ago. So a timeout fires between its length and one tick more.
        bool expired = false;
        if (wait_number_ != watched_number_) {
            watched_number_ = wait_number_;
            watched_ticks_ = 0;
        } else {
            ++watched_ticks_;
            expired = body_watch_tick_ * watched_ticks_ >= limit;
        }
        if (expired) {
            // The operation in flight completes with operation_aborted, read as a timeout.
            watch_cut_ = true;
            if (waiting_ == waiting_on::upstream) {
                upstream_->stream.cancel();
            } else {
                error_code ignored;
                owner_.socket().cancel(ignored);
            }
        }
    }
    arm_body_watch();
}

}  // namespace tokenmeter::relay
