// http/proxy_session: one client connection. Reads a request, forwards it through the upstream
// pool, relays the response read by read (each read is written to the client before the next
// one is started), and shows every forwarded span to the meter after it has been handed to
// the socket.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "http/beast.hpp"
#include "http/proxy_context.hpp"
#include "http/upstream_pool.hpp"
#include "meter/exchange.hpp"
#include "protocol/types.hpp"
#include "protocol/usage_filter.hpp"
#include "usage/record.hpp"

namespace tokenmeter::http {

class proxy_session : public std::enable_shared_from_this<proxy_session> {
  public:
    proxy_session(socket_type socket, proxy_context& context, upstream_pool& pool,
                  session_registry& sessions);
    ~proxy_session();

    void start();
    // Called on drain: closes the connection if it is waiting for a request.
    void close_if_idle();

  private:
    enum class phase : std::uint8_t { reading_request, proxying, writing_local, closed };

    void do_read_header();
    void on_read_header(error_code ec, std::size_t bytes);
    void do_read_body();
    void on_read_body(error_code ec, std::size_t bytes);
    void handle_request();

    void acquire_upstream(bool allow_reuse);
    void on_upstream(error_code ec, upstream_ptr connection, bool reused);
    void do_write_upstream_request();
    void on_write_upstream_request(error_code ec, std::size_t bytes);
    void do_read_upstream_header();
    void parse_upstream_head();
    void on_upstream_head_bytes(error_code ec, std::size_t bytes);
    void on_read_upstream_header(error_code ec, std::size_t bytes);
    void forward_interim();
    void on_write_interim(error_code ec, std::size_t bytes);
    void on_write_client_header(error_code ec, std::size_t bytes);
    void do_read_upstream_body();
    void on_read_upstream_body(error_code ec, std::size_t bytes);
    void on_write_client_body(error_code ec, std::size_t bytes);
    // Writes `bytes` (the read as it is, or what the usage filter let through) to the client.
    void write_client_body(std::string_view bytes, bool last);
    void write_body_end();
    void on_response_complete();

    // Upstream failed before any response byte reached the client: answer locally.
    void fail_before_response(error_code ec, std::string_view stage);
    void respond_local(bhttp::status status, std::string_view code, std::string_view message,
                       bool close_connection, meter::outcome result);
    void on_write_local(error_code ec, std::size_t bytes, bool close_connection);

    // A handler that runs `method` and turns any exception escaping it into the end of this
    // connection alone (500 when no response has begun, else a cut), never of the process.
    template <typename... Args>
    auto guard(void (proxy_session::*method)(Args...)) {
        return [self = shared_from_this(), method](Args... args) {
            self->run_guarded([&] { ((*self).*method)(args...); });
        };
    }
    template <typename Body>
    void run_guarded(Body&& body) noexcept {
        if (failed_) {
            return;  // the connection already failed; late completions are dropped
        }
        try {
            body();
        } catch (const std::exception& e) {
            on_internal_error(e.what());
        } catch (...) {
            on_internal_error("unknown exception");
        }
    }
    void on_internal_error(const char* what) noexcept;
    void on_client_readable();

    void watch_client();
    void stop_watching_client();
    void finish_exchange(meter::end_reason reason);
    void abort_upstream();
    void end_for_client_gone();
    void close_client();
    void linger_close();
    void on_linger_read(error_code ec, std::size_t bytes);
    void next_request_or_close();

    // Usage records (usage/): open entry, checkpoints, close entry; tenant admission.
    void begin_billing(const bhttp::request<bhttp::string_body>& request);
    bool admit_tenant();
    void maybe_checkpoint(core::time_point now);
    void seal_exchange(meter::end_reason reason);
    void write_close(const meter::request_summary& summary);
    void record_tenant(const meter::request_summary& summary);
    [[nodiscard]] bool billing_holds() const noexcept;
    // Runs `next` once spool entry `seq` is on disk; false when it already is (run it now).
    bool hold_for_spool(std::uint64_t seq, void (proxy_session::*next)());
    void write_client_header();
    void write_last_body();
    [[nodiscard]] std::int64_t wall_ms(core::time_point t) const noexcept;

    proxy_context& context_;
    upstream_pool& pool_;
    session_registry& sessions_;
    tcp_stream client_;
    beast::flat_buffer client_buffer_;
    phase phase_ = phase::reading_request;
    bool first_request_ = true;
    bool failed_ = false;            // an exception ended this connection (on_internal_error)
    bool response_begun_ = false;    // a response head (local or relayed) went to the client
    std::string forward_target_;     // the normalized origin-form target (request_target.hpp)
    std::size_t header_fields_ = 0;  // fields in the request head; later ones are trailers
    std::uint64_t lingered_bytes_ = 0;
    static constexpr std::size_t client_buffer_slack = 16 * 1024;
    static constexpr std::chrono::seconds linger_time{2};
    static constexpr std::uint64_t max_linger_bytes = 1024 * 1024;

    std::optional<bhttp::request_parser<bhttp::string_body>> request_parser_;
    bhttp::request<bhttp::string_body> upstream_request_;
    core::time_point request_received_{};
    protocol::api_kind api_ = protocol::api_kind::none;
    protocol::request_info request_info_;
    bool client_keep_alive_ = true;
    bool head_request_ = false;
    unsigned client_version_ = 11;

    upstream_ptr upstream_;
    bool upstream_reused_ = false;
    bool retried_ = false;
    std::optional<bhttp::response_parser<bhttp::buffer_body>> response_parser_;
    std::uint64_t upstream_head_bytes_ = 0;
    unsigned interim_responses_ = 0;
    bhttp::response<bhttp::empty_body> interim_response_;
    static constexpr unsigned max_interim_responses = 16;
    static constexpr std::size_t head_read_size = 8 * 1024;
    bhttp::response<bhttp::buffer_body> client_response_;
    std::optional<bhttp::response_serializer<bhttp::buffer_body>> client_serializer_;
    bhttp::response<bhttp::string_body> local_response_;
    std::optional<meter::exchange> exchange_;
    bool stream_counted_ = false;
    std::uint64_t relayed_bytes_ = 0;
    bool client_gone_ = false;
    std::uint64_t watch_generation_ = 0;
    bool watching_ = false;

    std::string tenant_;     // "" when the request is not metered
    usage::open_info open_;  // id "" when no record is being written
    std::uint64_t open_seq_ = 0;
    std::uint64_t close_seq_ = 0;
    std::int64_t wall_start_ms_ = 0;
    core::time_point last_checkpoint_{};
    std::optional<meter::request_summary> sealed_;  // finished before its last bytes were sent
    std::string retry_after_;
    std::string_view pending_last_;  // the held end of the response (see write_last_body)
    // The proxy added stream_options.include_usage to this request; the filter then removes the
    // usage-only chunk from the response the client sees (absent otherwise: zero-copy relay).
    bool usage_injected_ = false;
    bool continuous_usage_injected_ = false;  // continuous_usage_stats was added too
    std::optional<protocol::usage_filter> usage_filter_;

    static constexpr std::size_t body_buffer_size = 16 * 1024;
    std::unique_ptr<std::array<char, body_buffer_size>> body_buffer_;
};

}  // namespace tokenmeter::http
