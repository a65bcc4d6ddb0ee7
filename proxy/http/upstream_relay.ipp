// http/upstream_relay: the body relay of upstream_exchange (included by upstream_exchange.cpp,
// which instantiates the template). Each upstream read is written to the client before the next
// read starts, so a slow client slows the upstream (TCP back-pressure) instead of growing
// memory; the observer sees each read after its write was started.
#pragma once

namespace tokenmeter::http {

template <class Stream>
void upstream_exchange<Stream>::do_read_body() {
    auto& body = parser_->get().body();
    ensure_body_buffer();
    grow_body_buffer_after(last_read_);
    body.data = body_buffer_.get();
    body.size = body_capacity_;
    if (deferred_error_) {
        // The bytes before the fault went out with the last write; now the fault is handled
        // as if this read had found it.
        on_read_body(std::exchange(deferred_error_, {}));
        return;
    }
    begin_wait(true);
    bhttp::async_read_some(upstream_->stream, upstream_->buffer, *parser_,
                           owner_.guarded([this](error_code ec, std::size_t) { on_read_body(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_read_body(error_code ec) {
    auto now = owner_.context_.clock.now();
    ec = end_wait(ec);
    if (ec == bhttp::error::need_buffer) {
        ec = {};
    }
    if (client_gone()) {
        end_for_client_gone();
        return;
    }
    if (!ec) {
        deferred_error_ = parse_buffered_body();
    }
    auto& observed = *owner_.request_.observed;
    std::size_t bytes = body_capacity_ - parser_->get().body().size;
    last_read_ = bytes;
    std::string_view read(body_buffer_.get(), bytes);
    if (ec) {
        // The client must not mistake a cut stream for a whole one: no final chunk, just close.
        // Bytes parsed in this same read are still shown to the observer.
        observed.body(read, now);
        const bool timed_out = ec == beast::error::timeout;
        owner_.context_.observer.upstream_error(timed_out ? "idle_timeout" : "truncated");
        spdlog::warn("upstream response cut after {} body bytes: {}", relayed_bytes_ + bytes,
                     ec.message());
        abort();
        owner_.finish_exchange(timed_out ? observe::end_reason::upstream_failed
                                         : observe::end_reason::upstream_truncated);
        owner_.close_client();
        return;
    }
    const bool last = parser_->is_done();
    if (bytes > 0 || (usage_filter_ && last)) {
        relayed_bytes_ += bytes;
        std::string_view forward = usage_filter_ ? usage_filter_->feed(read, last) : read;
        if (last && !forward.empty() && observed.holds_end()) {
            // The last read: observe it first, put the close entry on disk, then release the
            // end of the response. A client that saw the end therefore has a complete record;
            // the price is that the end waits for one group commit (usage.fsync_interval).
            // `forward` stays valid meanwhile: nothing reads into the buffer or feeds the filter.
            observed.body(read, now);
            auto wait = observed.seal(now);
            pending_last_ = forward;
            if (hold(wait, &upstream_exchange::write_last_body)) {
                return;
            }
            write_last_body();
            return;
        }
        if (!forward.empty()) {
            // Write first, observe second: the write is started (and usually completed by the
            // kernel) before the observer looks at the bytes.
            write_client_body(forward, last);
        }
        // The observer sees every byte the upstream sent, the removed usage chunk included.
        observed.body(read, now);
        if (!forward.empty()) {
            return;
        }
    }
    if (last) {
        write_body_end();
        return;
    }
    do_read_body();
}

// Beast's read_some returns after one chunk of a chunked body even when the next chunks are
// already buffered (a burst, or a server that got ahead of the proxy). Parsing those now sends
// them in the same client write: one send for what one recv brought, not one per chunk. A
// chunk only partly buffered waits for the socket as before; nothing is held back for it.
// A parse error is returned to be handled after the bytes before it were forwarded.
template <class Stream>
error_code upstream_exchange<Stream>::parse_buffered_body() {
    auto& body = parser_->get().body();
    auto& buffer = upstream_->buffer;
    while (!parser_->is_done() && body.size > 0 && buffer.size() > 0) {
        error_code ec;
        const std::size_t used = parser_->put(buffer.data(), ec);
        buffer.consume(used);
        if (ec == bhttp::error::need_more || ec == bhttp::error::need_buffer) {
            return {};
        }
        if (ec) {
            return ec;
        }
        if (used == 0) {
            return {};
        }
    }
    return {};
}

namespace relay_detail {
inline constexpr std::string_view crlf = "\r\n";
inline constexpr std::string_view crlf_last_chunk = "\r\n0\r\n\r\n";
inline constexpr std::string_view last_chunk = "0\r\n\r\n";
}  // namespace relay_detail

template <class Stream>
void upstream_exchange<Stream>::write_client_body(std::string_view bytes, bool last) {
    using namespace relay_detail;
    // At most three pieces, gathered into one send: the chunk's size line, the bytes where the
    // read left them, and the chunk's end. The last bytes carry the end of the message with them
    // (for chunked framing, the final chunk goes in the same write), so a client that reads them
    // and hangs up at once has still received a complete response.
    std::array<asio::const_buffer, 3> pieces;
    if (framing_ == body_framing::chunked) {
        if (!bytes.empty()) {
            auto [end, ec] = std::to_chars(chunk_head_.data(), chunk_head_.data() + 16,
                                           bytes.size(), 16);
            std::memcpy(end, crlf.data(), crlf.size());
            pieces[0] = asio::buffer(chunk_head_.data(),
                                     static_cast<std::size_t>(end - chunk_head_.data()) + 2);
            pieces[1] = asio::buffer(bytes.data(), bytes.size());
            pieces[2] = asio::buffer(last ? crlf_last_chunk : crlf);
        } else if (last) {
            pieces[0] = asio::buffer(last_chunk);
        }
    } else if (framing_ == body_framing::raw) {
        pieces[0] = asio::buffer(bytes.data(), bytes.size());
    }
    end_written_ = last;
    begin_wait(false);
    asio::async_write(
        owner_.client_, pieces,
        owner_.guarded([this](error_code ec, std::size_t) { on_write_client_body(ec); }));
}

template <class Stream>
void upstream_exchange<Stream>::on_write_client_body(error_code ec) {
    ec = end_wait(ec);
    if (!ec && end_written_) {
        // Every byte was handed over: the response is complete even if the client hung up
        // right after reading it (the liveness watch may have seen that close first).
        on_complete();
        return;
    }
    if (ec || client_gone()) {
        end_for_client_gone();
        return;
    }
    if (parser_->is_done()) {
        write_body_end();
        return;
    }
    do_read_body();
}

// The end of the body: the final chunk for chunked framing, nothing otherwise.
template <class Stream>
void upstream_exchange<Stream>::write_body_end() {
    auto& observed = *owner_.request_.observed;
    if (observed.holds_end()) {
        auto wait = observed.seal(owner_.context_.clock.now());
        if (hold(wait, &upstream_exchange::write_body_end)) {
            return;
        }
    }
    write_client_body({}, true);
}

template <class Stream>
void upstream_exchange<Stream>::write_last_body() {
    write_client_body(pending_last_, true);
}

// ---- the body watch --------------------------------------------------------------------------

template <class Stream>
void upstream_exchange<Stream>::start_body_watch() {
    const auto& settings = owner_.context_.settings;
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
void upstream_exchange<Stream>::stop_body_watch() noexcept {
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
        wait_since_ = std::chrono::steady_clock::now();
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
        const auto& settings = owner_.context_.settings;
        const auto limit = waiting_ == waiting_on::upstream
                               ? std::chrono::steady_clock::duration(settings.upstream_idle)
                               : std::chrono::steady_clock::duration(settings.client_write);
        if (std::chrono::steady_clock::now() - wait_since_ >= limit) {
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

}  // namespace tokenmeter::http
