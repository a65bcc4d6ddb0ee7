#include "http/proxy_session.hpp"

#include <spdlog/spdlog.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "http/headers.hpp"
#include "protocol/dialects.hpp"

namespace tokenmeter::http {
namespace {

std::string error_body(std::string_view code, std::string_view message) {
    nlohmann::json body = {
        {"error", {{"type", "tokenmeter_error"}, {"code", code}, {"message", message}}}};
    return body.dump();
}

std::string_view upstream_reason(const error_code& ec, std::string_view stage) {
    if (ec == beast::error::timeout) {
        return stage == "connect" ? "connect_timeout" : "timeout";
    }
    if (ec == make_error_code(pool_errc::exhausted)) {
        return "pool_exhausted";
    }
    if (ec == asio::error::connection_refused) {
        return "connect_refused";
    }
    if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again) {
        return "resolve_failed";
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
        return "connection_closed";
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category()) {
        return "bad_response";
    }
    return stage == "connect" ? "connect_failed" : "io_error";
}

}  // namespace

void session_registry::add(const std::shared_ptr<proxy_session>& session) {
    sessions_.emplace(session.get(), session);
}

void session_registry::remove(proxy_session* session) {
    sessions_.erase(session);
}

void session_registry::close_idle() {
    std::vector<std::shared_ptr<proxy_session>> alive;
    for (auto& [raw, weak] : sessions_) {
        if (auto session = weak.lock()) {
            alive.push_back(std::move(session));
        }
    }
    for (auto& session : alive) {
        session->close_if_idle();
    }
}

proxy_session::proxy_session(socket_type socket, proxy_context& context, upstream_pool& pool,
                             session_registry& sessions)
    : context_(context),
      pool_(pool),
      sessions_(sessions),
      client_(std::move(socket)),
      body_buffer_(std::make_unique<std::array<char, body_buffer_size>>()) {
    context_.client_connections.fetch_add(1, std::memory_order_relaxed);
}

proxy_session::~proxy_session() {
    sessions_.remove(this);
    context_.client_connections.fetch_sub(1, std::memory_order_relaxed);
    if (exchange_) {
        // Destroyed mid-exchange (process shutting down after the drain timeout).
        finish_exchange(meter::end_reason::client_cancel);
    }
}

void proxy_session::start() {
    sessions_.add(shared_from_this());
    error_code ignored;
    client_.socket().set_option(tcp::no_delay(true), ignored);
    do_read_header();
}

void proxy_session::close_if_idle() {
    if (phase_ == phase::reading_request) {
        close_client();
    }
}

// ---- request ------------------------------------------------------------------------------

void proxy_session::do_read_header() {
    phase_ = phase::reading_request;
    request_parser_.emplace();
    request_parser_->header_limit(
        static_cast<std::uint32_t>(context_.settings.limit.max_request_header_bytes));
    request_parser_->body_limit(context_.settings.limit.max_request_body_bytes);
    const auto& timeouts = context_.settings.timeout;
    client_.expires_after(first_request_ ? timeouts.request_header : timeouts.client_idle);
    bhttp::async_read_header(
        client_, client_buffer_, *request_parser_,
        beast::bind_front_handler(&proxy_session::on_read_header, shared_from_this()));
}

void proxy_session::on_read_header(error_code ec, std::size_t /*bytes*/) {
    request_received_ = context_.clock.now();
    first_request_ = false;
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::error::eof) {
        close_client();
        return;
    }
    if (ec == bhttp::error::header_limit) {
        respond_local(bhttp::status::request_header_fields_too_large, "header_too_large",
                      "request header exceeds limits.max_request_header_bytes", true,
                      meter::outcome::rejected);
        return;
    }
    if (ec == bhttp::error::body_limit) {
        respond_local(bhttp::status::payload_too_large, "body_too_large",
                      "request body exceeds limits.max_request_body_bytes", true,
                      meter::outcome::rejected);
        return;
    }
    if (ec) {
        respond_local(bhttp::status::bad_request, "bad_request",
                      std::string("malformed HTTP request: ") + ec.message(), true,
                      meter::outcome::rejected);
        return;
    }
    const auto& head = request_parser_->get();
    if (auto problem = framing_problem(head)) {
        respond_local(bhttp::status::bad_request, "ambiguous_framing", *problem, true,
                      meter::outcome::rejected);
        return;
    }
    // Beast leaves 100-continue to the application; the body is needed before forwarding.
    auto expect = head[bhttp::field::expect];
    if (!expect.empty() && beast::iequals(expect, "100-continue") && !request_parser_->is_done()) {
        static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
        asio::async_write(client_, asio::buffer(continue_line),
                          [self = shared_from_this()](error_code write_ec, std::size_t) {
                              if (write_ec) {
                                  self->close_client();
                                  return;
                              }
                              self->do_read_body();
                          });
        return;
    }
    do_read_body();
}

void proxy_session::do_read_body() {
    if (request_parser_->is_done()) {
        handle_request();
        return;
    }
    client_.expires_after(context_.settings.timeout.request_header);
    bhttp::async_read(client_, client_buffer_, *request_parser_,
                      beast::bind_front_handler(&proxy_session::on_read_body, shared_from_this()));
}

void proxy_session::on_read_body(error_code ec, std::size_t /*bytes*/) {
    if (ec == bhttp::error::body_limit) {
        respond_local(bhttp::status::payload_too_large, "body_too_large",
                      "request body exceeds limits.max_request_body_bytes", true,
                      meter::outcome::rejected);
        return;
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
        close_client();
        return;
    }
    if (ec == beast::error::timeout) {
        respond_local(bhttp::status::request_timeout, "request_timeout",
                      "request body not received within timeouts.request_header", true,
                      meter::outcome::rejected);
        return;
    }
    if (ec) {
        respond_local(bhttp::status::bad_request, "bad_request",
                      std::string("malformed HTTP request body: ") + ec.message(), true,
                      meter::outcome::rejected);
        return;
    }
    handle_request();
}

void proxy_session::handle_request() {
    client_.expires_never();
    bhttp::request<bhttp::string_body> request = request_parser_->release();
    request_parser_.reset();
    client_keep_alive_ = request.keep_alive();
    client_version_ = request.version();
    head_request_ = request.method() == bhttp::verb::head;
    protocol::route_choice route;
    if (request.method() == bhttp::verb::post) {
        route = protocol::choose_route(request.target(), context_.settings.routes,
                                       context_.settings.usage_injection);
    }
    api_ = route.api;
    request_info_ = {};
    usage_injected_ = false;
    continuous_usage_injected_ = false;
    if (api_ != protocol::api_kind::none) {
        request_info_ = protocol::parse_request(api_, request.target(), request.body());
        if (route.usage_injection && protocol::can_inject_usage(api_, request_info_)) {
            // The one place the proxy changes bytes: usage on every stream (see usage_filter).
            if (auto body =
                    protocol::inject_usage_request(request.body(), route.continuous_usage)) {
                request.body() = std::move(*body);
                usage_injected_ = true;
                continuous_usage_injected_ = route.continuous_usage;
            }
        }
    }

    upstream_request_ = bhttp::request<bhttp::string_body>{};
    upstream_request_.method(request.method());
    if (request.method() == bhttp::verb::unknown) {
        upstream_request_.method_string(request.method_string());
    }
    upstream_request_.target(context_.settings.upstream.base_path + std::string(request.target()));
    upstream_request_.version(11);
    copy_end_to_end_fields(request.base(), upstream_request_.base());
    upstream_request_.erase(bhttp::field::expect);
    if (!context_.settings.preserve_host || request[bhttp::field::host].empty()) {
        upstream_request_.set(bhttp::field::host, upstream_host_header(context_.settings.upstream));
    }
    upstream_request_.body() = std::move(request.body());
    upstream_request_.prepare_payload();
    upstream_request_.keep_alive(true);

    exchange_.emplace(api_, request_info_, request_received_,
                      &context_.metrics.inter_token_latency_bounds(), context_.exchange_limits);
    if (context_.tokenizers != nullptr && api_ != protocol::api_kind::none) {
        const tokenizer::selection chosen = context_.tokenizers->for_model(request_info_.model);
        exchange_->use_encoders({chosen.native, chosen.reference}, context_.input_counting,
                                std::move(request_info_.prompt_text));
    }
    context_.requests_in_flight.fetch_add(1, std::memory_order_relaxed);
    phase_ = phase::proxying;
    retried_ = false;
    client_gone_ = false;
    relayed_bytes_ = 0;
    watch_client();
    acquire_upstream(true);
}

// ---- upstream -----------------------------------------------------------------------------

void proxy_session::acquire_upstream(bool allow_reuse) {
    pool_.acquire(allow_reuse,
                  [self = shared_from_this()](error_code ec, upstream_ptr connection, bool reused) {
                      self->on_upstream(ec, std::move(connection), reused);
                  });
}

void proxy_session::on_upstream(error_code ec, upstream_ptr connection, bool reused) {
    if (client_gone_) {
        pool_.release(std::move(connection), true);
        finish_exchange(meter::end_reason::client_cancel);
        close_client();
        return;
    }
    if (ec) {
        fail_before_response(ec, "connect");
        return;
    }
    upstream_ = std::move(connection);
    upstream_reused_ = reused;
    upstream_->requests += 1;
    do_write_upstream_request();
}

void proxy_session::do_write_upstream_request() {
    upstream_->stream.expires_after(context_.settings.timeout.upstream_idle);
    bhttp::async_write(
        upstream_->stream, upstream_request_,
        beast::bind_front_handler(&proxy_session::on_write_upstream_request, shared_from_this()));
}

void proxy_session::on_write_upstream_request(error_code ec, std::size_t /*bytes*/) {
    if (client_gone_) {
        end_for_client_gone();
        return;
    }
    if (ec) {
        if (upstream_reused_ && !retried_) {
            // A pooled connection the server closed while idle: nothing was processed, retry once.
            retried_ = true;
            abort_upstream();
            acquire_upstream(false);
            return;
        }
        abort_upstream();
        fail_before_response(ec, "write");
        return;
    }
    do_read_upstream_header();
}

void proxy_session::do_read_upstream_header() {
    response_parser_.emplace();
    response_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    response_parser_->header_limit(
        static_cast<std::uint32_t>(context_.settings.limit.max_request_header_bytes));
    if (head_request_) {
        response_parser_->skip(true);
    }
    upstream_->stream.expires_after(context_.settings.timeout.upstream_idle);
    bhttp::async_read_header(
        upstream_->stream, upstream_->buffer, *response_parser_,
        beast::bind_front_handler(&proxy_session::on_read_upstream_header, shared_from_this()));
}

void proxy_session::on_read_upstream_header(error_code ec, std::size_t /*bytes*/) {
    auto now = context_.clock.now();
    if (client_gone_) {
        end_for_client_gone();
        return;
    }
    if (ec) {
        bool closed_before_reply = ec == bhttp::error::end_of_stream ||
                                   ec == asio::error::connection_reset || ec == asio::error::eof;
        if (closed_before_reply && upstream_reused_ && !retried_) {
            retried_ = true;
            abort_upstream();
            acquire_upstream(false);
            return;
        }
        abort_upstream();
        fail_before_response(ec, "response_header");
        return;
    }

    const auto& upstream_head = response_parser_->get();
    client_response_ = bhttp::response<bhttp::buffer_body>{};
    client_response_.result(upstream_head.result_int());
    client_response_.reason(upstream_head.reason());
    client_response_.version(client_version_ == 10 ? 10 : 11);
    copy_end_to_end_fields(upstream_head.base(), client_response_.base());
    client_response_.erase(bhttp::field::content_length);

    bool has_body = !response_parser_->is_done();
    usage_filter_.reset();
    if (usage_injected_ && has_body && upstream_head.result_int() < 300 &&
        beast::iequals(upstream_head[bhttp::field::content_type].substr(0, 17),
                       "text/event-stream")) {
        usage_filter_.emplace(protocol::usage_filter::default_max_held_bytes,
                              continuous_usage_injected_);
    }
    if (!has_body) {
        // HEAD, 204 and 304 keep the upstream's Content-Length as a description, with no body.
        auto length = upstream_head[bhttp::field::content_length];
        if (!length.empty()) {
            client_response_.set(bhttp::field::content_length, length);
        }
    } else if (auto length = response_parser_->content_length(); length && !usage_filter_) {
        client_response_.content_length(*length);
    } else if (client_version_ >= 11) {
        client_response_.chunked(true);
    } else {
        // An HTTP/1.0 client cannot take chunks: the body ends when the connection closes.
        client_keep_alive_ = false;
    }
    client_response_.keep_alive(client_keep_alive_ &&
                                !context_.draining.load(std::memory_order_relaxed));
    client_response_.body().data = nullptr;
    client_response_.body().size = 0;
    client_response_.body().more = has_body;

    exchange_->on_response_head(static_cast<int>(upstream_head.result_int()),
                                upstream_head[bhttp::field::content_type], now);
    if (has_body) {
        stream_counted_ = true;
        context_.metrics.stream_opened();
    }
    client_serializer_.emplace(client_response_);
    client_.expires_after(context_.settings.timeout.client_write);
    bhttp::async_write_header(
        client_, *client_serializer_,
        beast::bind_front_handler(&proxy_session::on_write_client_header, shared_from_this()));
}

void proxy_session::on_write_client_header(error_code ec, std::size_t /*bytes*/) {
    if (ec || client_gone_) {
        end_for_client_gone();
        return;
    }
    if (response_parser_->is_done()) {
        write_body_end();
        return;
    }
    do_read_upstream_body();
}

void proxy_session::do_read_upstream_body() {
    auto& body = response_parser_->get().body();
    body.data = body_buffer_->data();
    body.size = body_buffer_->size();
    upstream_->stream.expires_after(context_.settings.timeout.upstream_idle);
    bhttp::async_read_some(
        upstream_->stream, upstream_->buffer, *response_parser_,
        beast::bind_front_handler(&proxy_session::on_read_upstream_body, shared_from_this()));
}

void proxy_session::on_read_upstream_body(error_code ec, std::size_t /*bytes*/) {
    auto now = context_.clock.now();
    if (ec == bhttp::error::need_buffer) {
        ec = {};
    }
    if (client_gone_) {
        end_for_client_gone();
        return;
    }
    std::size_t bytes = body_buffer_->size() - response_parser_->get().body().size;
    if (ec) {
        // The client must not mistake a cut stream for a whole one: no final chunk, just close.
        // Bytes parsed in this same read are still shown to the meter.
        if (bytes > 0 && api_ != protocol::api_kind::none) {
            exchange_->on_body(std::string_view(body_buffer_->data(), bytes), now);
        }
        bool timed_out = ec == beast::error::timeout;
        context_.metrics.upstream_error(timed_out ? "idle_timeout" : "truncated");
        spdlog::warn("upstream response cut after {} body bytes: {}", relayed_bytes_ + bytes,
                     ec.message());
        abort_upstream();
        finish_exchange(timed_out ? meter::end_reason::upstream_failed
                                  : meter::end_reason::upstream_truncated);
        close_client();
        return;
    }
    if (bytes > 0 || (usage_filter_ && response_parser_->is_done())) {
        relayed_bytes_ += bytes;
        std::string_view read(body_buffer_->data(), bytes);
        bool last = response_parser_->is_done();
        std::string_view forward = usage_filter_ ? usage_filter_->feed(read, last) : read;
        if (!forward.empty()) {
            // Write first, observe second: the write is started (and usually completed by the
            // kernel) before the meter looks at the bytes.
            write_client_body(forward, last);
        }
        if (api_ != protocol::api_kind::none && bytes > 0) {
            // The meter sees every byte the upstream sent, the removed usage chunk included.
            exchange_->on_body(read, now);
        }
        if (!forward.empty()) {
            return;
        }
    }
    if (response_parser_->is_done()) {
        write_body_end();
        return;
    }
    do_read_upstream_body();
}

void proxy_session::write_client_body(std::string_view bytes, bool last) {
    auto& out = client_response_.body();
    // buffer_body takes a mutable pointer but only reads through it.
    out.data = const_cast<char*>(bytes.data());  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    out.size = bytes.size();
    // The last bytes carry the end of the message with them (for chunked framing, the final
    // chunk goes in the same write), so a client that reads them and hangs up at once has
    // still received a complete response.
    out.more = !last;
    client_.expires_after(context_.settings.timeout.client_write);
    bhttp::async_write(
        client_, *client_serializer_,
        beast::bind_front_handler(&proxy_session::on_write_client_body, shared_from_this()));
}

void proxy_session::on_write_client_body(error_code ec, std::size_t /*bytes*/) {
    if (ec == bhttp::error::need_buffer) {
        ec = {};
    }
    if (!ec && client_serializer_->is_done()) {
        // Every byte was handed over: the response is complete even if the client hung up
        // right after reading it (the liveness watch may have seen that close first).
        on_response_complete();
        return;
    }
    if (ec || client_gone_) {
        end_for_client_gone();
        return;
    }
    if (response_parser_->is_done()) {
        write_body_end();
        return;
    }
    do_read_upstream_body();
}

// Tells the serializer the body is over: the final chunk for chunked framing, nothing otherwise.
void proxy_session::write_body_end() {
    auto& out = client_response_.body();
    out.data = nullptr;
    out.size = 0;
    out.more = false;
    client_.expires_after(context_.settings.timeout.client_write);
    bhttp::async_write(
        client_, *client_serializer_,
        beast::bind_front_handler(&proxy_session::on_write_client_body, shared_from_this()));
}

void proxy_session::on_response_complete() {
    stop_watching_client();
    bool reusable = response_parser_->keep_alive() && upstream_->buffer.size() == 0;
    upstream_->stream.expires_never();
    pool_.release(std::move(upstream_), reusable);
    response_parser_.reset();
    client_serializer_.reset();
    finish_exchange(meter::end_reason::upstream_complete);
    next_request_or_close();
}

// ---- local answers ------------------------------------------------------------------------

void proxy_session::fail_before_response(error_code ec, std::string_view stage) {
    std::string_view reason = upstream_reason(ec, stage);
    context_.metrics.upstream_error(reason);
    spdlog::warn("upstream {} failed ({}): {}", stage, reason, ec.message());
    if (ec == make_error_code(pool_errc::exhausted)) {
        respond_local(bhttp::status::service_unavailable, "upstream_pool_exhausted",
                      "every upstream connection is busy; try again", false,
                      meter::outcome::upstream_error);
    } else if (ec == beast::error::timeout && stage != "connect") {
        respond_local(bhttp::status::gateway_timeout, "upstream_timeout",
                      "the upstream did not answer within timeouts.upstream_idle", true,
                      meter::outcome::upstream_error);
    } else {
        respond_local(bhttp::status::bad_gateway, "upstream_unreachable",
                      std::string("the upstream could not be reached: ") + ec.message(), false,
                      meter::outcome::upstream_error);
    }
}

void proxy_session::respond_local(bhttp::status status, std::string_view code,
                                  std::string_view message, bool close_connection,
                                  meter::outcome result) {
    stop_watching_client();
    auto now = context_.clock.now();
    if (exchange_) {
        exchange_->on_response_head(static_cast<int>(status), "application/json", now);
        finish_exchange(result == meter::outcome::rejected ? meter::end_reason::rejected
                                                           : meter::end_reason::upstream_failed);
    } else {
        context_.metrics.record_unforwarded(api_, request_info_.model, result,
                                            static_cast<int>(status),
                                            core::to_seconds(now - request_received_));
    }
    bool close = close_connection || !client_keep_alive_ ||
                 context_.draining.load(std::memory_order_relaxed);
    phase_ = phase::writing_local;
    local_response_ = bhttp::response<bhttp::string_body>{};
    local_response_.result(status);
    local_response_.version(client_version_ == 10 ? 10 : 11);
    local_response_.set(bhttp::field::content_type, "application/json");
    local_response_.set(bhttp::field::cache_control, "no-store");
    local_response_.body() = error_body(code, message);
    local_response_.keep_alive(!close);
    local_response_.prepare_payload();
    client_.expires_after(context_.settings.timeout.client_write);
    bhttp::async_write(client_, local_response_,
                       [self = shared_from_this(), close](error_code ec, std::size_t bytes) {
                           self->on_write_local(ec, bytes, close);
                       });
}

void proxy_session::on_write_local(error_code ec, std::size_t /*bytes*/, bool close_connection) {
    if (ec || close_connection) {
        close_client();
        return;
    }
    next_request_or_close();
}

// ---- client liveness ----------------------------------------------------------------------

void proxy_session::watch_client() {
    watching_ = true;
    auto generation = ++watch_generation_;
    client_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(),
                                                         generation](error_code ec) {
        if (ec || generation != self->watch_generation_ || !self->watching_) {
            return;
        }
        auto& socket = self->client_.socket();
        char probe = 0;
        error_code mode_ec;
        error_code peek_ec;
        socket.non_blocking(true, mode_ec);
        std::size_t n = socket.receive(asio::buffer(&probe, 1), tcp::socket::message_peek, peek_ec);
        socket.non_blocking(false, mode_ec);
        if (peek_ec == asio::error::would_block || peek_ec == asio::error::try_again) {
            // A spurious wake-up: the client is still there, keep watching.
            self->watch_client();
            return;
        }
        self->watching_ = false;
        if (n == 0) {
            // EOF or reset: the client is gone, so the model server should stop generating.
            self->client_gone_ = true;
            // Only cancel here: the pending operation's handler releases the connection.
            if (self->upstream_) {
                self->upstream_->stream.cancel();
            }
        }
        // Otherwise the client sent its next request early; it waits in the socket buffer.
    });
}

void proxy_session::stop_watching_client() {
    if (watching_) {
        watching_ = false;
        ++watch_generation_;
        error_code ignored;
        client_.socket().cancel(ignored);
    }
}

// ---- endings ------------------------------------------------------------------------------

void proxy_session::finish_exchange(meter::end_reason reason) {
    if (!exchange_) {
        return;
    }
    auto summary = exchange_->finish(reason, context_.clock.now());
    exchange_.reset();
    if (stream_counted_) {
        stream_counted_ = false;
        context_.metrics.stream_closed();
    }
    context_.requests_in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (summary.parse_errors > 0) {
        spdlog::debug("{} parse errors in response for model {}", summary.parse_errors,
                      summary.model);
    }
    context_.metrics.record(summary);
    if (context_.settings.log.access_log) {
        spdlog::info(
            "access api={} model={} status={} outcome={} ttft={} output_tokens={} "
            "duration={:.6f}",
            protocol::to_string(summary.api), summary.model, summary.status,
            meter::to_string(summary.result),
            summary.time_to_first_token ? std::to_string(*summary.time_to_first_token)
                                        : std::string("-"),
            summary.output_tokens, summary.duration_seconds);
    }
}

void proxy_session::end_for_client_gone() {
    abort_upstream();
    finish_exchange(meter::end_reason::client_cancel);
    close_client();
}

void proxy_session::abort_upstream() {
    if (upstream_) {
        error_code ignored;
        upstream_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        upstream_->stream.socket().close(ignored);
        pool_.release(std::move(upstream_), false);
    }
}

void proxy_session::close_client() {
    stop_watching_client();
    phase_ = phase::closed;
    error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    client_.socket().close(ignored);
}

void proxy_session::next_request_or_close() {
    if (client_keep_alive_ && !client_gone_ && !context_.draining.load(std::memory_order_relaxed)) {
        do_read_header();
        return;
    }
    close_client();
}

}  // namespace tokenmeter::http
