// relay/client_connection: one client connection. Reads each request (head, 100-continue, body),
// checks it at the edge, plans it (relay/request_plan), asks the observer whether to forward it,
// hands it to its upstream_exchange, answers locally when the proxy itself must answer, keeps
// the connection alive between requests, and notices a client that hangs up mid-stream.
// Templated over the client stream (Beast's flex pattern), so a TLS stream plugs in beside TCP.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/beast.hpp"
#include "net/tls_stream.hpp"
#include "observe/observer.hpp"
#include "relay/local_failure.hpp"
#include "relay/proxy_context.hpp"
#include "relay/tunnel.hpp"
#include "relay/upstream_exchange.hpp"
#include "relay/upstream_pool.hpp"

namespace tokenmeter::relay {

// One request on a client connection, from its head to its end. Reset by assignment.
struct request_state {
    core::time_point received{};
    std::string forward_target;     // the normalized origin-form target (request_target.hpp)
    std::size_t header_fields = 0;  // fields in the request head; later ones are trailers
    protocol::api_kind api = protocol::api_kind::none;
    std::string model;
    unsigned version = 11;   // the client's HTTP version: 10 or 11
    bool keep_alive = true;  // the client's, and false once the response must end by closing
    std::unique_ptr<observe::exchange_observer> observed;  // set while forwarded
    bool response_begun = false;  // a response head (local or relayed) went to the client
    bool client_gone = false;     // the client hung up while the upstream was answering
    // Held while a fleet-wide limit decides admission (observer's await_admission); a request
    // admitted at once goes straight to the upstream exchange.
    // (Each of these is made when needed, not carried inline by every open stream.)
    std::unique_ptr<upstream_request> admitting;
    relay_options admitting_options;
    // A WebSocket upgrade's place under websocket.max_tunnels, until its tunnel takes it.
    tunnel_slot slot;
    // The metering of the upgrade's tunnel, when its path is metered, until its tunnel takes it.
    std::unique_ptr<observe::tunnel_observer> tunnel_meter;
};

template <class Stream>
class client_connection : public idle_closable,
                          public std::enable_shared_from_this<client_connection<Stream>> {
  public:
    client_connection(Stream stream, proxy_context& context, upstream_pool& pool,
                      session_registry& sessions);
    ~client_connection() override;
    client_connection(const client_connection&) = delete;
    client_connection& operator=(const client_connection&) = delete;

    void start();
    // Called on drain: closes the connection if it is waiting for a request.
    void close_if_idle() override;
    // The end of a drain: a tunnel is closed with 1001 (Going Away).
    void close_tunnel() override;

    // The door the upstream exchange goes through: the client stream, the request, the shared
    // context, and how the exchange ends. Nothing else of the connection is the exchange's.
    Stream& stream() noexcept { return client_; }
    auto& socket() { return beast::get_lowest_layer(client_).socket(); }
    auto& lowest() { return beast::get_lowest_layer(client_); }
    proxy_context& context() noexcept { return context_; }
    request_state& request() noexcept { return request_; }
    [[nodiscard]] bool draining() const noexcept {
        return context_.draining.load(std::memory_order_relaxed);
    }
    // The forwarded request is over: the observer records it, and the connection goes on to the
    // next request after a complete response, or closes.
    void exchange_done(observe::end_reason reason);
    // The upstream switched to WebSocket and the client has its 101: the connection becomes a
    // tunnel between the client and `upstream` until either side ends it.
    void start_tunnel(upstream_ptr upstream, std::uint8_t reserved_bits);
    // The tunnel is over (both connections closed): the observer records it.
    void tunnel_done(observe::end_reason reason);
    // The upstream failed before the response began: the proxy answers itself.
    void answer_locally(local_failure failure, std::string_view message) {
        respond_local(failure, message);
    }
    // A completion handler that runs `f` with this connection kept alive, and turns any
    // exception escaping it into the end of this connection alone (500 when no response has
    // begun, else a cut), never of the process. Late completions after a failure are dropped.
    template <typename F>
    auto guarded(F f) {
        return [self = this->shared_from_this(), f = std::move(f)](auto&&... args) mutable {
            self->run_guarded([&] { f(std::forward<decltype(args)>(args)...); });
        };
    }
    template <typename Body>
    void run_guarded(Body&& body) noexcept {
        if (failed_) {
            return;
        }
        try {
            body();
        } catch (const std::exception& e) {
            on_internal_error(e.what());
        } catch (...) {
            on_internal_error("unknown exception");
        }
    }

  private:
    enum class phase : std::uint8_t { reading_request, proxying, writing_local, closed };

    void on_internal_error(const char* what) noexcept;

    void on_handshake(error_code ec);
    void do_read_header();
    void on_read_header(error_code ec);
    bool metered_head_problem(const bhttp::request_header<>& head);
    void do_read_body();
    void on_read_body(error_code ec);
    void handle_request();
    // A metered body over plan_off_thread_bytes is planned (parsed, and rewritten for usage
    // injection) on the context's planner thread, so the worker's other streams do not wait
    // for it; the request goes on from continue_request back on this connection's thread.
    struct planning;
    void plan_off_thread(std::shared_ptr<planning> held);
    void continue_request(bhttp::request<bhttp::string_body>& request, request_plan plan,
                          std::size_t body_bytes);
    // The shared store decided admission: admit() the held request.
    void on_admission();
    // Forwards the request if the observer admitted it, else answers 429.
    void admit(upstream_request request);

    // retry_after: a Retry-After value in seconds, or "" for none.
    void respond_local(local_failure failure, std::string_view message,
                       std::string_view retry_after = {});
    void respond_local(const failure_answer& answer, std::string_view message,
                       std::string_view retry_after = {});
    void on_write_local(error_code ec, bool close_connection);

    void watch_client();
    void on_client_readable();
    void stop_watching_client();

    // The forwarded request is over: the observer records it.
    void finish_exchange(observe::end_reason reason);
    void close_client();
    // A close the proxy chose after a response (no operation pending): over TLS a close_notify
    // first (bounded by close_notify_time), so the client knows the stream was not cut and keeps
    // its session for resumption; over TCP close_client().
    void close_gracefully();
    void linger_close();
    void on_linger_read(error_code ec, std::size_t bytes);
    void next_request_or_close();

    proxy_context& context_;
    session_registry& sessions_;
    upstream_pool& pool_;
    Stream client_;
    beast::flat_buffer client_buffer_;
    phase phase_ = phase::reading_request;
    bool first_request_ = true;
    bool failed_ = false;  // an exception ended this connection (on_internal_error)
    bool watching_ = false;
    std::uint64_t watch_generation_ = 0;
    std::uint64_t lingered_bytes_ = 0;
    std::string client_address_;  // X-Forwarded-For / Forwarded, the access log; or ""
    // Made per request while it is read, and for a local answer: not carried inline by every
    // open stream (about 400 bytes).
    std::unique_ptr<bhttp::request_parser<bhttp::string_body>> request_parser_;
    std::unique_ptr<bhttp::response<bhttp::string_body>> local_response_;
    request_state request_;
    upstream_exchange<Stream> upstream_;
    std::unique_ptr<tunnel<Stream>> tunnel_;  // after a 101 to a WebSocket upgrade

    static constexpr std::size_t client_buffer_slack = std::size_t{16} * 1024;
    static constexpr std::chrono::seconds linger_time{2};
    static constexpr std::chrono::seconds close_notify_time{2};
    static constexpr std::uint64_t max_linger_bytes = 1024ull * 1024;
};

extern template class client_connection<tcp_stream>;
extern template class client_connection<net::tls_stream>;

}  // namespace tokenmeter::relay
