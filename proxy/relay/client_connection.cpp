#include "relay/client_connection.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "net/direct_io.hpp"
#include "net/mailbox.hpp"
#include "relay/headers.hpp"
#include "relay/request_plan.hpp"
#include "relay/request_target.hpp"
#include "relay/worker_activity.hpp"

namespace tokenmeter::relay {
namespace {

// A metered body larger than this is planned off the worker thread (client_connection::
// plan_off_thread): reading 8 MiB of JSON holds a thread for about 10 ms.
constexpr std::size_t plan_off_thread_bytes = std::size_t{64} * 1024;

}  // namespace

template <class Stream>
client_connection<Stream>::client_connection(Stream stream, proxy_context& context,
                                             upstream_pool& pool, session_registry& sessions)
    : context_(context),
      sessions_(sessions),
      pool_(pool),
      client_(std::move(stream)),
      // Bounded: a chunk-size line, chunk extension or trailer section is parsed from this
      // buffer whole, so without a cap one such line could grow it without end.
      client_buffer_(static_cast<std::size_t>(context.settings.max_request_header_bytes) +
                     client_buffer_slack),
      upstream_(*this, pool) {}

template <class Stream>
client_connection<Stream>::~client_connection() {
    sessions_.remove(this);
    context_.client_connections.fetch_sub(1, std::memory_order_relaxed);
    // Destroyed mid-exchange (process shutting down after the drain timeout).
    finish_exchange(observe::end_reason::client_cancel);
}

template <class Stream>
void client_connection<Stream>::start() {
    sessions_.add(this->shared_from_this());
    error_code ignored;
    socket().set_option(tcp::no_delay(true), ignored);
    if (context_.settings.forwarded_for == forwarded_for_policy::append ||
        context_.settings.client_address) {
        const auto remote = socket().remote_endpoint(ignored);
        if (!ignored) {
            client_address_ = remote.address().to_string();
        }
    }
    if constexpr (net::is_tls_stream<Stream>) {
        // The handshake shares the request head's deadline: a client that opens a connection
        // and says nothing is closed after timeouts.request_header either way.
        lowest().expires_after(context_.settings.request_header);
        client_.async_handshake(ssl::stream_base::server,
                                guarded([this](error_code ec) { on_handshake(ec); }));
    } else {
        do_read_header();
    }
}

template <class Stream>
void client_connection<Stream>::on_handshake(error_code ec) {
    if constexpr (net::is_tls_stream<Stream>) {
        if (ec == asio::error::operation_aborted) {
            close_client();  // the proxy closed it (drain, shutdown): not the client's failure
            return;
        }
        if (ec) {
            const std::string_view reason = net::classify_handshake_error(ec);
            context_.edge.tls_handshake_failed(reason, ec.message());
            if (reason == "plaintext_http") {
                // A readable answer in plain HTTP (net/tls_stream), then the close.
                lowest().expires_after(context_.settings.client_write);
                asio::async_write(lowest().socket(),
                                  asio::buffer(net::plain_http_on_tls_port_answer()),
                                  guarded([this](error_code, std::size_t) { linger_close(); }));
                return;
            }
            close_client();
            return;
        }
        context_.edge.tls_handshake_done(SSL_session_reused(client_.native_handle()) == 1);
    }
    do_read_header();
}

template <class Stream>
void client_connection<Stream>::close_if_idle() {
    if (phase_ == phase::reading_request) {
        close_client();  // a read is pending: no close_notify can be written beside it
    }
}

template <class Stream>
void client_connection<Stream>::close_tunnel() {
    if (tunnel_) {
        run_guarded([&] {
            tunnel_->go_away(ws::close_code::going_away, ws::close_code::going_away, "going away");
        });
    }
}

template <class Stream>
void client_connection<Stream>::start_tunnel(upstream_ptr upstream, std::uint8_t reserved_bits) {
    stop_watching_client();
    lowest().expires_never();
    // Bytes the client sent behind its request head (read with it) go to the upstream first.
    std::string early(static_cast<const char*>(client_buffer_.data().data()),
                      client_buffer_.size());
    client_buffer_.consume(client_buffer_.size());
    client_buffer_.shrink_to_fit();
    tunnel_ = std::make_unique<tunnel<Stream>>(*this, pool_, std::move(upstream),
                                               std::move(request_.slot), reserved_bits,
                                               std::move(request_.tunnel_meter));
    tunnel_->start(early);
}

template <class Stream>
void client_connection<Stream>::tunnel_done(observe::end_reason reason) {
    phase_ = phase::closed;
    finish_exchange(reason);
}

// ---- request ------------------------------------------------------------------------------

template <class Stream>
void client_connection<Stream>::do_read_header() {
    phase_ = phase::reading_request;
    request_ = request_state{};
    const auto& settings = context_.settings;
    request_parser_ = std::make_unique<bhttp::request_parser<bhttp::string_body>>();
    request_parser_->header_limit(static_cast<std::uint32_t>(settings.max_request_header_bytes));
    request_parser_->body_limit(settings.max_request_body_bytes);
    lowest().expires_after(first_request_ ? settings.request_header : settings.client_idle);
    bhttp::async_read_header(client_, client_buffer_, *request_parser_,
                             guarded([this](error_code ec, std::size_t) { on_read_header(ec); }));
}

template <class Stream>
void client_connection<Stream>::on_read_header(error_code ec) {
    request_.received = context_.clock.now();
    first_request_ = false;
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::error::eof) {
        close_client();
        return;
    }
    if (ec == bhttp::error::header_limit) {
        respond_local(local_failure::header_too_large,
                      "request header exceeds limits.max_request_header_bytes");
        return;
    }
    if (ec == bhttp::error::body_limit) {
        respond_local(local_failure::body_too_large,
                      "request body exceeds limits.max_request_body_bytes");
        return;
    }
    if (ec) {
        respond_local(local_failure::bad_request, "malformed HTTP request: " + ec.message());
        return;
    }
    const auto& head = request_parser_->get();
    request_.version = head.version() == 10 ? 10 : 11;
    // Refused before the body is read, so each of these closes the connection: the unread body
    // must not be taken for the next request.
    for (auto problem : {host_or_version_problem(head), framing_problem(head)}) {
        if (problem) {
            respond_local({problem->status, problem->code, true, observe::outcome::rejected},
                          problem->message);
            return;
        }
    }
    if (head.method() == bhttp::verb::trace &&
        (head.find(bhttp::field::transfer_encoding) != head.end() ||
         request_parser_->content_length().value_or(0) > 0)) {
        respond_local(local_failure::trace_with_content,
                      "a TRACE request carries no content (RFC 9110 §9.3.8)");
        return;
    }
    request_.header_fields = static_cast<std::size_t>(std::distance(head.begin(), head.end()));
    auto target = normalize_target(head.target());
    if (auto* refusal = std::get_if<target_refusal>(&target)) {
        respond_local({bhttp::status::bad_request, refusal->code, true, observe::outcome::rejected},
                      refusal->message);
        return;
    }
    request_.forward_target = std::move(std::get<std::string>(target));
    if (request_.forward_target == "*" &&
        (head.method() != bhttp::verb::options || !context_.settings.upstream.base_path.empty())) {
        respond_local(local_failure::bad_target,
                      "'*' is a target only for OPTIONS, and only without an upstream base path");
        return;
    }
    if (head.method() == bhttp::verb::post && metered_head_problem(head)) {
        return;
    }
    // Beast leaves 100-continue to the application; the body is needed before forwarding.
    // An HTTP/1.0 client's expectation is ignored (RFC 9110 §10.1.1): it cannot take a 1xx.
    auto expect = head[bhttp::field::expect];
    if (head.version() >= 11 && !expect.empty() && beast::iequals(expect, "100-continue") &&
        !request_parser_->is_done()) {
        static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
        asio::async_write(client_, asio::buffer(continue_line),
                          guarded([this](error_code write_ec, std::size_t) {
                              if (write_ec) {
                                  close_client();
                                  return;
                              }
                              do_read_body();
                          }));
        return;
    }
    do_read_body();
}

// Refusals that only a POST to a metered API gets, decided from its head: the meter must read
// the target and the credential the upstream receives. Answers and returns true when refused.
template <class Stream>
bool client_connection<Stream>::metered_head_problem(const bhttp::request_header<>& head) {
    const auto& settings = context_.settings;
    if (auto refusal = refuse_escaped_api_path(request_.forward_target, settings.routes)) {
        respond_local({bhttp::status::bad_request, refusal->code, true, observe::outcome::rejected},
                      refusal->message);
        return true;
    }
    if (settings.routes.choose(request_.forward_target).api == protocol::api_kind::none) {
        return false;
    }
    if (auto problem = credential_problem(head, settings.tenant_from, settings.tenant_header)) {
        respond_local({problem->status, problem->code, true, observe::outcome::rejected},
                      problem->message);
        return true;
    }
    return false;
}

template <class Stream>
void client_connection<Stream>::do_read_body() {
    if (request_parser_->is_done()) {
        handle_request();
        return;
    }
    lowest().expires_after(context_.settings.request_header);
    bhttp::async_read(client_, client_buffer_, *request_parser_,
                      guarded([this](error_code ec, std::size_t) { on_read_body(ec); }));
}

template <class Stream>
void client_connection<Stream>::on_read_body(error_code ec) {
    if (ec == bhttp::error::body_limit) {
        respond_local(local_failure::body_too_large,
                      "request body exceeds limits.max_request_body_bytes");
        return;
    }
    if (ec == bhttp::error::buffer_overflow) {
        respond_local(local_failure::chunk_line_too_long,
                      "a chunk-size line, chunk extension or trailer section is longer than "
                      "limits.max_request_header_bytes");
        return;
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
        close_client();
        return;
    }
    if (ec == beast::error::timeout) {
        respond_local(local_failure::request_timeout,
                      "request body not received within timeouts.request_header");
        return;
    }
    if (ec) {
        respond_local(local_failure::bad_request_body,
                      "malformed HTTP request body: " + ec.message());
        return;
    }
    handle_request();
}

template <class Stream>
void client_connection<Stream>::handle_request() {
    lowest().expires_never();
    bhttp::request<bhttp::string_body> request = request_parser_->release();
    request_parser_.reset();
    // The read buffer is not needed again until the next request, and a stream can last
    // minutes: give it back now (512 bytes on every open stream, more after a long prompt)
    // unless a pipelined request is already waiting in it. The next read allocates anew.
    if (client_buffer_.size() == 0) {
        client_buffer_.shrink_to_fit();
    }
    if (context_.planner != nullptr &&
        plans_a_large_body(request, request_.forward_target, context_.settings,
                           plan_off_thread_bytes)) {
        plan_off_thread(std::make_shared<planning>(planning{std::move(request), {}, false}));
        return;
    }
    const std::size_t body_bytes = request.body().size();
    request_plan plan =
        plan_request(request, request_.forward_target, request_.header_fields, context_.settings,
                     client_origin{net::is_tls_stream<Stream>, client_address_});
    continue_request(request, std::move(plan), body_bytes);
}

template <class Stream>
struct client_connection<Stream>::planning {
    bhttp::request<bhttp::string_body> request;
    std::optional<request_plan> plan;
    bool failed = false;
};

template <class Stream>
void client_connection<Stream>::plan_off_thread(std::shared_ptr<planning> held) {
    // Not idle meanwhile (a drain must not close it); the connection's own state is left alone
    // until the planner is done, and only the planner reads it until then.
    phase_ = phase::proxying;
    const std::size_t body_bytes = held->request.body().size();
    auto resume = guarded([this, held, body_bytes] {
        if (held->failed || !held->plan) {
            throw std::runtime_error("planning the request failed");
        }
        continue_request(held->request, std::move(*held->plan), body_bytes);
    });
    std::function<void()> job = [this, held, executor = client_.get_executor(),
                                 resume = std::move(resume)]() mutable {
        try {
            held->plan = plan_request(held->request, request_.forward_target,
                                      request_.header_fields, context_.settings,
                                      client_origin{net::is_tls_stream<Stream>, client_address_});
        } catch (...) {
            held->failed = true;  // answered 500 on the connection's own thread
        }
        net::post_from_any_thread(executor.context(), std::move(resume));
    };
    if (!context_.planner->post(job, body_bytes)) {
        job();  // the planner's queue is full: plan here, and go on when the post comes back
    }
}

template <class Stream>
void client_connection<Stream>::continue_request(bhttp::request<bhttp::string_body>& request,
                                                 request_plan plan, std::size_t body_bytes) {
    request_.api = plan.api;
    request_.model = plan.info.model;
    request_.keep_alive = plan.keep_alive;
    request_.version = plan.version;
    if (plan.upgrade) {
        request_.slot =
            tunnel_slot::take(context_.tunnels, context_.settings.websocket.max_tunnels);
        if (!request_.slot) {
            respond_local(local_failure::too_many_tunnels,
                          "the proxy has websocket.max_tunnels WebSocket tunnels open; retry "
                          "shortly");
            return;
        }
        if (plan.tunnel_api != protocol::api_kind::none) {
            observe::tunnel_facts tunnel;
            tunnel.api = plan.tunnel_api;
            tunnel.target = std::string_view(request.target().data(), request.target().size());
            tunnel.client = client_address_;
            tunnel.trace = plan.trace;
            for (const auto& field : request.base()) {
                std::string name(field.name_string().data(), field.name_string().size());
                std::ranges::transform(name, name.begin(), [](unsigned char c) {
                    return static_cast<char>(std::tolower(c));
                });
                tunnel.headers.emplace_back(
                    std::move(name), std::string(field.value().data(), field.value().size()));
            }
            request_.tunnel_meter = context_.observer.begin_tunnel(tunnel);
        }
    }
    if (plan.unparsable_body) {
        respond_local(local_failure::unparsable_body,
                      "the request body is not a JSON object the proxy can read (as Python's "
                      "json reads it), so it cannot be metered; refused by "
                      "limits.unparsable_body");
        return;
    }
    if (plan.model_missing) {
        respond_local(local_failure::model_required,
                      "the request names no model, so the model that would serve it (a server "
                      "default) cannot be metered or priced; refused by limits.unparsable_body");
        return;
    }

    observe::request_facts facts;
    facts.api = plan.api;
    facts.info = std::move(plan.info);
    facts.target = std::string_view(request.target().data(), request.target().size());
    facts.method = std::string_view(request.method_string().data(), request.method_string().size());
    facts.client = client_address_;
    facts.body_bytes = body_bytes;
    facts.received = request_.received;
    facts.trace = plan.trace;
    facts.header = [&request](std::string_view name) {
        auto value = request[beast::string_view(name.data(), name.size())];
        return std::string_view(value.data(), value.size());
    };
    request_.observed = context_.observer.begin(std::move(facts));
    context_.requests_in_flight.fetch_add(1, std::memory_order_relaxed);
    worker_activity& activity = worker_activity::for_thread();
    ++activity.in_flight;
    ++activity.started;
    request_.admitting_options = {plan.head, plan.usage_injected, plan.continuous_usage,
                                  plan.upgrade};
    if (request_.observed->admission_pending()) {
        // A shared store decides (one round trip, bounded by its timeout); the callback comes
        // on the store's thread and the rest runs back on this connection's own executor.
        // Not idle meanwhile: a drain must not close it.
        phase_ = phase::proxying;
        request_.admitting = std::make_unique<upstream_request>(std::move(plan.upstream));
        request_.observed->await_admission(
            [executor = client_.get_executor(),
             resume = guarded([this] { on_admission(); })]() mutable {
                net::post_from_any_thread(executor.context(), std::move(resume));
            });
        return;
    }
    admit(std::move(plan.upstream));
}

template <class Stream>
void client_connection<Stream>::on_admission() {
    if (!request_.observed || !request_.admitting) {
        return;
    }
    upstream_request held = std::move(*request_.admitting);
    request_.admitting.reset();
    admit(std::move(held));
}

template <class Stream>
void client_connection<Stream>::admit(upstream_request request) {
    if (const auto& admitted = request_.observed->admitted(); !admitted.admitted) {
        // Copies: answering ends the exchange, and the observer with it.
        const std::string message = admitted.message;
        const std::string retry_after = admitted.retry_after;
        respond_local(local_failure::rate_limited, message, retry_after);
        return;
    }
    phase_ = phase::proxying;
    watch_client();
    upstream_.start(std::move(request), request_.admitting_options);
}

// ---- local answers ------------------------------------------------------------------------

template <class Stream>
void client_connection<Stream>::respond_local(local_failure failure, std::string_view message,
                                              std::string_view retry_after) {
    respond_local(answer_for(failure), message, retry_after);
}

template <class Stream>
void client_connection<Stream>::respond_local(const failure_answer& answer,
                                              std::string_view message,
                                              std::string_view retry_after) {
    stop_watching_client();
    auto now = context_.clock.now();
    const int status = static_cast<int>(answer.status);
    if (request_.observed) {
        request_.observed->answered_locally(answer.code);
        (void)request_.observed->response_head(status, "application/json", false, now);
        finish_exchange(answer.result == observe::outcome::rejected
                            ? observe::end_reason::rejected
                            : observe::end_reason::upstream_failed);
    } else {
        observe::unforwarded_request refused;
        refused.api = request_.api;
        refused.model = request_.model;
        refused.result = answer.result;
        refused.status = status;
        refused.seconds = core::to_seconds(now - request_.received);
        refused.client = client_address_;
        if (request_parser_) {
            // What the parser read before it stopped: the request line once it was whole (a
            // head refused for its size or its fields still names its method and target).
            const auto& head = request_parser_->get();
            refused.method =
                std::string_view(head.method_string().data(), head.method_string().size());
            refused.target = std::string_view(head.target().data(), head.target().size());
            const auto id = head.find("x-request-id");
            if (id != head.end()) {
                refused.request_id = std::string_view(id->value().data(), id->value().size());
            }
        }
        context_.observer.unforwarded(refused);
    }
    const bool close = answer.close || !request_.keep_alive || draining();
    phase_ = phase::writing_local;
    request_.response_begun = true;
    local_response_ = std::make_unique<bhttp::response<bhttp::string_body>>();
    local_response_->result(answer.status);
    local_response_->version(request_.version == 10 ? 10 : 11);
    local_response_->set(bhttp::field::content_type, "application/json");
    local_response_->set(bhttp::field::cache_control, "no-store");
    local_response_->body() = net::error_body(answer.code, message);
    if (!retry_after.empty()) {
        local_response_->set(bhttp::field::retry_after,
                             beast::string_view(retry_after.data(), retry_after.size()));
    }
    local_response_->keep_alive(!close);
    local_response_->prepare_payload();
    lowest().expires_after(context_.settings.client_write);
    bhttp::async_write(
        client_, *local_response_,
        guarded([this, close](error_code ec, std::size_t) { on_write_local(ec, close); }));
}

template <class Stream>
void client_connection<Stream>::on_write_local(error_code ec, bool close_connection) {
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

template <class Stream>
void client_connection<Stream>::watch_client() {
    watching_ = true;
    auto generation = ++watch_generation_;
    socket().async_wait(tcp::socket::wait_read,
                        [self = this->shared_from_this(), generation](error_code ec) {
                            if (ec || generation != self->watch_generation_ || !self->watching_) {
                                return;
                            }
                            self->run_guarded([&] { self->on_client_readable(); });
                        });
}

template <class Stream>
void client_connection<Stream>::on_client_readable() {
    const net::direct_io::peek_result seen = net::direct_io::peek(socket().native_handle());
    if (seen == net::direct_io::peek_result::nothing_yet) {
        // A spurious wake-up: the client is still there, keep watching.
        watch_client();
        return;
    }
    watching_ = false;
    if (seen != net::direct_io::peek_result::data) {
        // EOF or reset: the client is gone, so the model server should stop generating. Only
        // cancel here: the pending operation's handler ends the exchange.
        request_.client_gone = true;
        upstream_.cancel();
    }
    // Otherwise the client sent its next request early; it waits in the socket buffer.
}

template <class Stream>
void client_connection<Stream>::stop_watching_client() {
    if (watching_) {
        watching_ = false;
        ++watch_generation_;
        error_code ignored;
        socket().cancel(ignored);
    }
}

template <class Stream>
void client_connection<Stream>::on_internal_error(const char* what) noexcept {
    failed_ = true;
    context_.edge.internal_error(what);
    // Nothing below may throw out of here: each step is guarded on its own.
    try {
        stop_watching_client();
        upstream_.abort();
        if (tunnel_) {
            tunnel_->abort();
        }
    } catch (...) {
    }
    if (!request_.response_begun && phase_ != phase::closed) {
        try {
            // Its completion is dropped (failed_): the connection then ends, closing the socket
            // after the 500 went out.
            respond_local(local_failure::internal_error,
                          "the proxy failed while handling this request; it was not completed");
            return;
        } catch (...) {
        }
    }
    try {
        finish_exchange(observe::end_reason::upstream_failed);
    } catch (...) {
    }
    try {
        close_client();
    } catch (...) {
    }
}

// ---- endings ------------------------------------------------------------------------------

template <class Stream>
void client_connection<Stream>::exchange_done(observe::end_reason reason) {
    if (reason == observe::end_reason::upstream_complete) {
        stop_watching_client();
        finish_exchange(reason);
        next_request_or_close();
        return;
    }
    finish_exchange(reason);
    close_client();
}

template <class Stream>
void client_connection<Stream>::finish_exchange(observe::end_reason reason) {
    request_.slot = tunnel_slot{};  // an upgrade the upstream did not take
    request_.tunnel_meter.reset();
    if (!request_.observed) {
        return;
    }
    auto observed = std::move(request_.observed);
    observed->end(reason, context_.clock.now());
    context_.requests_in_flight.fetch_sub(1, std::memory_order_relaxed);
    --worker_activity::for_thread().in_flight;
}

// After an error answer with unread request bytes left, closing at once would make the kernel
// send a reset that can destroy the answer before the client reads it (RFC 9112 §9.6): stop
// sending, read and discard for a short while, then close.
template <class Stream>
void client_connection<Stream>::linger_close() {
    stop_watching_client();
    phase_ = phase::closed;
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().expires_after(linger_time);
    lingered_bytes_ = 0;
    lowest().async_read_some(upstream_.scratch(), guarded([this](error_code ec, std::size_t n) {
                                 on_linger_read(ec, n);
                             }));
}

template <class Stream>
void client_connection<Stream>::on_linger_read(error_code ec, std::size_t bytes) {
    lingered_bytes_ += bytes;
    if (ec || lingered_bytes_ > max_linger_bytes) {
        close_client();
        return;
    }
    lowest().async_read_some(upstream_.scratch(), guarded([this](error_code e, std::size_t n) {
                                 on_linger_read(e, n);
                             }));
}

template <class Stream>
void client_connection<Stream>::close_client() {
    stop_watching_client();
    phase_ = phase::closed;
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    socket().close(ignored);
}

template <class Stream>
void client_connection<Stream>::next_request_or_close() {
    if (request_.keep_alive && !request_.client_gone && !draining()) {
        do_read_header();
        return;
    }
    if (request_.client_gone) {
        close_client();
        return;
    }
    close_gracefully();
}

template <class Stream>
void client_connection<Stream>::close_gracefully() {
    if constexpr (net::is_tls_stream<Stream>) {
        stop_watching_client();
        phase_ = phase::closed;
        // Sends close_notify, then waits (bounded) for the client's or its hang-up.
        lowest().expires_after(close_notify_time);
        client_.async_shutdown(guarded([this](error_code) { close_client(); }));
    } else {
        close_client();
    }
}

template class client_connection<tcp_stream>;
template class client_connection<net::tls_stream>;

}  // namespace tokenmeter::relay
