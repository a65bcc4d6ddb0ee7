#include "http/proxy_session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "http/headers.hpp"
#include "http/request_target.hpp"
#include "metrics/billing.hpp"
#include "protocol/dialects.hpp"
#include "protocol/openai.hpp"
#include "usage/spool.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

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
        ec == bhttp::error::partial_message || ec == asio::error::connection_reset ||
        ec == asio::error::broken_pipe) {
        return "connection_closed";
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category() ||
        ec.category() == upstream_category()) {
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
      // Bounded: a chunk-size line, chunk extension or trailer section is parsed from this
      // buffer whole, so without a cap one such line could grow it without end.
      client_buffer_(static_cast<std::size_t>(context.settings.limits.max_request_header_bytes) +
                     client_buffer_slack),
      body_buffer_(std::make_unique<std::array<char, body_buffer_size>>()) {}

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
    response_begun_ = false;
    request_parser_.emplace();
    request_parser_->header_limit(
        static_cast<std::uint32_t>(context_.settings.limits.max_request_header_bytes));
    request_parser_->body_limit(context_.settings.limits.max_request_body_bytes);
    const auto& timeouts = context_.settings.timeouts;
    client_.expires_after(first_request_ ? timeouts.request_header : timeouts.client_idle);
    bhttp::async_read_header(client_, client_buffer_, *request_parser_,
                             guard(&proxy_session::on_read_header));
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
    client_version_ = head.version() == 10 ? 10 : 11;
    // Refused before the body is read, so each of these closes the connection: the unread body
    // must not be taken for the next request.
    if (auto problem = host_or_version_problem(head)) {
        respond_local(problem->status, problem->code, problem->message, true,
                      meter::outcome::rejected);
        return;
    }
    if (auto problem = framing_problem(head)) {
        respond_local(problem->status, problem->code, problem->message, true,
                      meter::outcome::rejected);
        return;
    }
    if (head.method() == bhttp::verb::trace &&
        (head.find(bhttp::field::transfer_encoding) != head.end() ||
         request_parser_->content_length().value_or(0) > 0)) {
        respond_local(bhttp::status::bad_request, "trace_with_content",
                      "a TRACE request carries no content (RFC 9110 §9.3.8)", true,
                      meter::outcome::rejected);
        return;
    }
    header_fields_ = static_cast<std::size_t>(std::distance(head.begin(), head.end()));
    auto target = normalize_target(head.target());
    if (auto* refusal = std::get_if<target_refusal>(&target)) {
        respond_local(bhttp::status::bad_request, refusal->code, refusal->message, true,
                      meter::outcome::rejected);
        return;
    }
    forward_target_ = std::move(std::get<std::string>(target));
    if (forward_target_ == "*" &&
        (head.method() != bhttp::verb::options || !context_.settings.upstream.base_path.empty())) {
        respond_local(bhttp::status::bad_request, "bad_target",
                      "'*' is a target only for OPTIONS, and only without an upstream base path",
                      true, meter::outcome::rejected);
        return;
    }
    // Beast leaves 100-continue to the application; the body is needed before forwarding.
    // An HTTP/1.0 client's expectation is ignored (RFC 9110 §10.1.1): it cannot take a 1xx.
    auto expect = head[bhttp::field::expect];
    if (head.version() >= 11 && !expect.empty() && beast::iequals(expect, "100-continue") &&
        !request_parser_->is_done()) {
        static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
        asio::async_write(client_, asio::buffer(continue_line),
                          [self = shared_from_this()](error_code write_ec, std::size_t) {
                              self->run_guarded([&] {
                                  if (write_ec) {
                                      self->close_client();
                                      return;
                                  }
                                  self->do_read_body();
                              });
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
    client_.expires_after(context_.settings.timeouts.request_header);
    bhttp::async_read(client_, client_buffer_, *request_parser_,
                      guard(&proxy_session::on_read_body));
}

void proxy_session::on_read_body(error_code ec, std::size_t /*bytes*/) {
    if (ec == bhttp::error::body_limit) {
        respond_local(bhttp::status::payload_too_large, "body_too_large",
                      "request body exceeds limits.max_request_body_bytes", true,
                      meter::outcome::rejected);
        return;
    }
    if (ec == bhttp::error::buffer_overflow) {
        respond_local(bhttp::status::bad_request, "chunk_line_too_long",
                      "a chunk-size line, chunk extension or trailer section is longer than "
                      "limits.max_request_header_bytes",
                      true, meter::outcome::rejected);
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
    // From here on the target is the normalized origin-form one: routing, metering, the usage
    // record and the upstream all see the same path.
    request.target(forward_target_);
    // Beast appends a chunked body's trailer fields to the header; they are not header fields
    // (RFC 9110 §6.5.1) and the proxy re-frames the body, so they are dropped.
    drop_trailer_fields(request.base(), header_fields_);
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
    begin_billing(request);

    upstream_request_ = bhttp::request<bhttp::string_body>{};
    if (request.method() == bhttp::verb::unknown) {
        // Any token method (QUERY, PURGE, lowercase "get" ...) goes upstream as it came; Beast
        // throws for method(verb::unknown), so only the string is set.
        upstream_request_.method_string(request.method_string());
    } else {
        upstream_request_.method(request.method());
    }
    if (forward_target_ == "*") {
        upstream_request_.target("*");
    } else {
        upstream_request_.target(context_.settings.upstream.base_path + forward_target_);
    }
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
    if (!admit_tenant()) {
        return;
    }
    phase_ = phase::proxying;
    retried_ = false;
    client_gone_ = false;
    relayed_bytes_ = 0;
    watch_client();
    acquire_upstream(true);
}

// ---- upstream -----------------------------------------------------------------------------

void proxy_session::acquire_upstream(bool allow_reuse) {
    pool_.acquire(allow_reuse, [self = shared_from_this()](error_code ec, upstream_ptr connection,
                                                           bool reused) {
        self->run_guarded([&] { self->on_upstream(ec, std::move(connection), reused); });
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
    upstream_->stream.expires_after(context_.settings.timeouts.upstream_idle);
    bhttp::async_write(upstream_->stream, upstream_request_,
                       guard(&proxy_session::on_write_upstream_request));
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
        static_cast<std::uint32_t>(context_.settings.limits.max_request_header_bytes));
    if (head_request_) {
        response_parser_->skip(true);
    }
    upstream_head_bytes_ = 0;
    parse_upstream_head();
}

// The response head is read in pieces with the idle timeout re-armed per read (as for the
// body), not under one deadline: a server that is slow to start but keeps sending is not cut.
void proxy_session::parse_upstream_head() {
    auto& buffer = upstream_->buffer;
    if (buffer.size() > 0) {
        error_code ec;
        const std::size_t used = response_parser_->put(buffer.data(), ec);
        buffer.consume(used);
        if (ec != bhttp::error::need_more) {
            if (!ec && !response_parser_->is_header_done()) {
                ec = bhttp::error::need_more;  // not expected: put stops only at the header end
            } else {
                on_read_upstream_header(ec, 0);
                return;
            }
        }
    }
    upstream_->stream.expires_after(context_.settings.timeouts.upstream_idle);
    upstream_->stream.async_read_some(buffer.prepare(head_read_size),
                                      guard(&proxy_session::on_upstream_head_bytes));
}

void proxy_session::on_upstream_head_bytes(error_code ec, std::size_t bytes) {
    upstream_->buffer.commit(bytes);
    upstream_head_bytes_ += bytes;
    if (ec == asio::error::eof) {
        // Closed before a whole head: with nothing at all, the pooled-connection retry applies.
        ec = upstream_head_bytes_ == 0 && response_parser_->got_some() == false
                 ? error_code(bhttp::error::end_of_stream)
                 : error_code(bhttp::error::partial_message);
    }
    if (ec) {
        on_read_upstream_header(ec, 0);
        return;
    }
    parse_upstream_head();
}

void proxy_session::on_read_upstream_header(error_code ec, std::size_t /*bytes*/) {
    auto now = context_.clock.now();
    if (client_gone_) {
        end_for_client_gone();
        return;
    }
    if (!ec) {
        const unsigned status = response_parser_->get().result_int();
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
    interim_responses_ = 0;
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
    // No byte of a metered response reaches the client before its open entry is on disk, so a
    // client that saw a response always has a record, even if the proxy is killed next.
    if (hold_for_spool(open_seq_, &proxy_session::write_client_header)) {
        return;
    }
    write_client_header();
}

// An interim (1xx) response: passed on to an HTTP/1.1 client (RFC 9110 §15.2; an HTTP/1.0
// client cannot take one), then the final response is read from the same connection.
void proxy_session::forward_interim() {
    if (++interim_responses_ > max_interim_responses) {
        on_read_upstream_header(make_error_code(upstream_errc::too_many_interim), 0);
        return;
    }
    if (client_version_ < 11) {
        do_read_upstream_header();
        return;
    }
    const auto& head = response_parser_->get();
    interim_response_ = bhttp::response<bhttp::empty_body>{};
    interim_response_.result(head.result_int());
    interim_response_.reason(head.reason());
    interim_response_.version(11);
    copy_end_to_end_fields(head.base(), interim_response_.base());
    client_.expires_after(context_.settings.timeouts.client_write);
    bhttp::async_write(client_, interim_response_, guard(&proxy_session::on_write_interim));
}

void proxy_session::on_write_interim(error_code ec, std::size_t /*bytes*/) {
    if (ec || client_gone_) {
        end_for_client_gone();
        return;
    }
    do_read_upstream_header();
}

void proxy_session::write_client_header() {
    response_begun_ = true;
    client_.expires_after(context_.settings.timeouts.client_write);
    bhttp::async_write_header(client_, *client_serializer_,
                              guard(&proxy_session::on_write_client_header));
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
    upstream_->stream.expires_after(context_.settings.timeouts.upstream_idle);
    bhttp::async_read_some(upstream_->stream, upstream_->buffer, *response_parser_,
                           guard(&proxy_session::on_read_upstream_body));
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
        if (last && !forward.empty() && billing_holds() && !open_.id.empty()) {
            // The last read: observe it first, put the close entry on disk, then release the
            // end of the response. A client that saw the end therefore has a complete record;
            // the price is that the end waits for one group commit (usage.fsync_interval).
            // `forward` stays valid meanwhile: nothing reads into the buffer or feeds the filter.
            if (api_ != protocol::api_kind::none && bytes > 0) {
                exchange_->on_body(read, now);
            }
            seal_exchange(meter::end_reason::upstream_complete);
            pending_last_ = forward;
            if (hold_for_spool(close_seq_, &proxy_session::write_last_body)) {
                return;
            }
            write_last_body();
            return;
        }
        if (!forward.empty()) {
            // Write first, observe second: the write is started (and usually completed by the
            // kernel) before the meter looks at the bytes.
            write_client_body(forward, last);
        }
        if (api_ != protocol::api_kind::none && bytes > 0) {
            // The meter sees every byte the upstream sent, the removed usage chunk included.
            exchange_->on_body(read, now);
            maybe_checkpoint(now);
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
    client_.expires_after(context_.settings.timeouts.client_write);
    bhttp::async_write(client_, *client_serializer_, guard(&proxy_session::on_write_client_body));
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
    if (billing_holds() && !sealed_ && exchange_ && !open_.id.empty()) {
        seal_exchange(meter::end_reason::upstream_complete);
        if (hold_for_spool(close_seq_, &proxy_session::write_body_end)) {
            return;
        }
    }
    auto& out = client_response_.body();
    out.data = nullptr;
    out.size = 0;
    out.more = false;
    client_.expires_after(context_.settings.timeouts.client_write);
    bhttp::async_write(client_, *client_serializer_, guard(&proxy_session::on_write_client_body));
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
    } else if (reason == "bad_response") {
        // It answered, but not with HTTP the proxy can relay: the connection is not reused.
        respond_local(
            bhttp::status::bad_gateway, "upstream_bad_response",
            std::string("the upstream's response was not valid HTTP/1.1: ") + ec.message(), false,
            meter::outcome::upstream_error);
    } else if (reason == "connection_closed") {
        respond_local(bhttp::status::bad_gateway, "upstream_closed",
                      std::string("the upstream closed the connection before a whole response "
                                  "head: ") +
                          ec.message(),
                      false, meter::outcome::upstream_error);
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
    response_begun_ = true;
    local_response_ = bhttp::response<bhttp::string_body>{};
    local_response_.result(status);
    local_response_.version(client_version_ == 10 ? 10 : 11);
    local_response_.set(bhttp::field::content_type, "application/json");
    local_response_.set(bhttp::field::cache_control, "no-store");
    local_response_.body() = error_body(code, message);
    if (!retry_after_.empty()) {
        local_response_.set(bhttp::field::retry_after, retry_after_);
        retry_after_.clear();
    }
    local_response_.keep_alive(!close);
    local_response_.prepare_payload();
    client_.expires_after(context_.settings.timeouts.client_write);
    bhttp::async_write(client_, local_response_,
                       [self = shared_from_this(), close](error_code ec, std::size_t bytes) {
                           self->run_guarded([&] { self->on_write_local(ec, bytes, close); });
                       });
}

void proxy_session::on_write_local(error_code ec, std::size_t /*bytes*/, bool close_connection) {
    if (ec) {
        close_client();
        return;
    }
    if (close_connection) {
        linger_close();
        return;
    }
    next_request_or_close();
}

// ---- client liveness ----------------------------------------------------------------------

void proxy_session::watch_client() {
    watching_ = true;
    auto generation = ++watch_generation_;
    client_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this(), generation](error_code ec) {
            if (ec || generation != self->watch_generation_ || !self->watching_) {
                return;
            }
            self->run_guarded([&] { self->on_client_readable(); });
        });
}

void proxy_session::on_client_readable() {
    auto& socket = client_.socket();
    char probe = 0;
    error_code mode_ec;
    error_code peek_ec;
    socket.non_blocking(true, mode_ec);
    std::size_t n = socket.receive(asio::buffer(&probe, 1), tcp::socket::message_peek, peek_ec);
    socket.non_blocking(false, mode_ec);
    if (peek_ec == asio::error::would_block || peek_ec == asio::error::try_again) {
        // A spurious wake-up: the client is still there, keep watching.
        watch_client();
        return;
    }
    watching_ = false;
    if (n == 0) {
        // EOF or reset: the client is gone, so the model server should stop generating.
        client_gone_ = true;
        // Only cancel here: the pending operation's handler releases the connection.
        if (upstream_) {
            upstream_->stream.cancel();
        }
    }
    // Otherwise the client sent its next request early; it waits in the socket buffer.
}

void proxy_session::on_internal_error(const char* what) noexcept {
    failed_ = true;
    context_.edge.internal_error(what);
    // Nothing below may throw out of here: each step is guarded on its own.
    try {
        stop_watching_client();
        abort_upstream();
    } catch (...) {
    }
    if (!response_begun_ && phase_ != phase::closed) {
        try {
            // Its completion is dropped (failed_): the session then ends, closing the socket
            // after the 500 went out.
            respond_local(bhttp::status::internal_server_error, "internal_error",
                          "the proxy failed while handling this request; it was not completed",
                          true, meter::outcome::upstream_error);
            return;
        } catch (...) {
        }
    }
    try {
        finish_exchange(meter::end_reason::upstream_failed);
    } catch (...) {
    }
    try {
        close_client();
    } catch (...) {
    }
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
    const bool was_sealed = sealed_.has_value();
    auto summary =
        was_sealed ? std::move(*sealed_) : exchange_->finish(reason, context_.clock.now());
    sealed_.reset();
    exchange_.reset();
    if (!was_sealed) {
        write_close(summary);
    }
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
    record_tenant(summary);
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

// After an error answer with unread request bytes left, closing at once would make the kernel
// send a reset that can destroy the answer before the client reads it (RFC 9112 §9.6): stop
// sending, read and discard for a short while, then close.
void proxy_session::linger_close() {
    stop_watching_client();
    phase_ = phase::closed;
    error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    client_.expires_after(linger_time);
    lingered_bytes_ = 0;
    client_.async_read_some(asio::buffer(body_buffer_->data(), body_buffer_->size()),
                            guard(&proxy_session::on_linger_read));
}

void proxy_session::on_linger_read(error_code ec, std::size_t bytes) {
    lingered_bytes_ += bytes;
    if (ec || lingered_bytes_ > max_linger_bytes) {
        close_client();
        return;
    }
    client_.async_read_some(asio::buffer(body_buffer_->data(), body_buffer_->size()),
                            guard(&proxy_session::on_linger_read));
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

// ---- usage records ------------------------------------------------------------------------

namespace {

std::string_view header_value(const bhttp::request<bhttp::string_body>& request,
                              std::string_view name) {
    auto value = request[beast::string_view(name.data(), name.size())];
    return {value.data(), value.size()};
}

// The client's own request id, kept only when it is short plain text.
std::string client_request_id(std::string_view value) {
    if (value.empty() || value.size() > 128) {
        return {};
    }
    for (char c : value) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x21 || u > 0x7e || c == '"' || c == '\\') {
            return {};
        }
    }
    return std::string(value);
}

}  // namespace

std::int64_t proxy_session::wall_ms(core::time_point t) const noexcept {
    return wall_start_ms_ +
           std::chrono::duration_cast<std::chrono::milliseconds>(t - request_received_).count();
}

void proxy_session::begin_billing(const bhttp::request<bhttp::string_body>& request) {
    open_ = {};
    open_seq_ = 0;
    close_seq_ = 0;
    sealed_.reset();
    retry_after_.clear();
    tenant_.clear();
    auto& billing = context_.billing;
    if (api_ == protocol::api_kind::none || billing.tenants == nullptr) {
        return;
    }
    usage::tenant_headers headers;
    if (billing.tenants->source() == usage::tenant_source::header) {
        headers.tenant = header_value(request, billing.tenants->header_name());
    }
    headers.authorization = header_value(request, "authorization");
    headers.x_api_key = header_value(request, "x-api-key");
    tenant_ = billing.tenants->resolve(headers);
    if (billing.spool == nullptr || billing.ids == nullptr) {
        return;
    }
    // The one wall-clock reading per request; every later time is this plus steady time.
    wall_start_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::string_view target(request.target().data(), request.target().size());
    open_.id = billing.ids->next();
    open_.tenant = tenant_;
    open_.model = request_info_.model;
    open_.api = std::string(protocol::to_string(api_));
    open_.route = std::string(target.substr(0, target.find('?')));
    open_.request_id = client_request_id(header_value(request, "x-request-id"));
    open_.start_unix_ms = wall_start_ms_;
    open_.streamed = request_info_.stream;
    open_seq_ = billing.spool->append(usage::encode_open(open_));
    last_checkpoint_ = request_received_;
}

bool proxy_session::admit_tenant() {
    auto& billing = context_.billing;
    if (billing.throughput == nullptr || tenant_.empty()) {
        return true;
    }
    auto decision = billing.throughput->admit(tenant_, request_received_);
    if (decision.admitted) {
        return true;
    }
    auto seconds = static_cast<long long>(std::ceil(decision.retry_after_seconds));
    seconds = std::max(1LL, seconds);
    retry_after_ = std::to_string(seconds);
    if (billing.metrics != nullptr) {
        billing.metrics->rate_limited(tenant_);
    }
    respond_local(bhttp::status::too_many_requests, "provisioned_throughput_exceeded",
                  "tenant " + tenant_ + " is over its provisioned tokens per second; retry after " +
                      retry_after_ + " s",
                  false, meter::outcome::rejected);
    return false;
}

void proxy_session::maybe_checkpoint(core::time_point now) {
    auto* spool = context_.billing.spool;
    if (spool == nullptr || open_.id.empty() || !exchange_ ||
        now - last_checkpoint_ < context_.billing.checkpoint_interval) {
        return;
    }
    last_checkpoint_ = now;
    spool->append(usage::encode_checkpoint(
        usage::make_checkpoint(open_.id, exchange_->current(), wall_ms(now))));
}

void proxy_session::seal_exchange(meter::end_reason reason) {
    if (!exchange_ || sealed_) {
        return;
    }
    sealed_ = exchange_->finish(reason, context_.clock.now());
    write_close(*sealed_);
}

void proxy_session::write_close(const meter::request_summary& summary) {
    auto* spool = context_.billing.spool;
    if (spool == nullptr || open_.id.empty()) {
        return;
    }
    close_seq_ = spool->append(
        usage::encode_close(usage::make_record(open_, summary, wall_ms(summary.end))), true);
    open_.id.clear();
}

void proxy_session::record_tenant(const meter::request_summary& summary) {
    auto& billing = context_.billing;
    if (tenant_.empty() || summary.api == protocol::api_kind::none) {
        return;
    }
    // A rejected request was never forwarded: whatever its prompt counts, it used no tokens.
    const bool used = summary.result != meter::outcome::rejected;
    auto input = used ? usage::best_input(summary).value.value_or(0) : 0;
    auto output = used ? usage::best_output(summary).value.value_or(0) : 0;
    if (billing.metrics != nullptr) {
        metrics::tenant_usage u;
        std::string model = context_.metrics.model_label(summary.model);
        u.tenant = tenant_;
        u.model_label = model;
        u.outcome = meter::to_string(summary.result);
        u.input_tokens = input;
        u.output_tokens = output;
        u.reasoning_tokens = summary.reported.reasoning_tokens.value_or(0);
        u.cached_input_tokens = summary.reported.cached_input_tokens.value_or(0);
        billing.metrics->record(u);
    }
    if (billing.throughput != nullptr) {
        billing.throughput->charge(tenant_, input + output, summary.end);
    }
}

bool proxy_session::billing_holds() const noexcept {
    return context_.billing.spool != nullptr && context_.billing.hold_until_durable;
}

bool proxy_session::hold_for_spool(std::uint64_t seq, void (proxy_session::*next)()) {
    auto* spool = context_.billing.spool;
    if (!billing_holds() || seq == 0 || spool->is_durable(seq)) {
        return false;
    }
    auto self = shared_from_this();
    auto exec = client_.get_executor();
    spool->when_durable(seq, [self, next, exec](bool /*ok*/) {
        // On the writer thread: hop back to the connection's own thread.
        asio::post(exec, [self, next] { self->run_guarded([&] { ((*self).*next)(); }); });
    });
    return true;
}

void proxy_session::write_last_body() {
    write_client_body(pending_last_, true);
}

}  // namespace tokenmeter::http
