#pragma once

// One client connection: reads requests (keep-alive), routes them, and writes each
// response on a schedule of absolute deadlines so that simulated latency never drifts.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "completion_script.hpp"
#include "pooling_script.hpp"
#include "sim_options.hpp"
#include "sim_server.hpp"

namespace tokenmeter::sim {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class sim_session : public std::enable_shared_from_this<sim_session> {
  public:
    sim_session(tcp::socket&& socket, std::shared_ptr<server_state> state);
    ~sim_session();
    sim_session(const sim_session&) = delete;
    sim_session& operator=(const sim_session&) = delete;

    void run();

  private:
    using clock = std::chrono::steady_clock;
    using step = void (sim_session::*)();

    enum class after_write {
        read_next,    // a complete response: next request or close
        stream_step,  // a stream event went out: schedule the next one
        stream_done,  // the stream's last bytes went out
        truncate,     // x-sim-fail: close-after: drop the connection now
    };

    void do_read_header();
    void on_read_header(beast::error_code ec, std::size_t bytes);
    void on_continue_sent(beast::error_code ec, std::size_t bytes);
    void do_read_body();
    void on_read_body(beast::error_code ec, std::size_t bytes);

    void reject_unreadable(beast::error_code ec);
    void handle_request();
    // The body as a JSON object; nullopt after answering 400 when it is not one.
    std::optional<nlohmann::json> read_json_object();
    void handle_completion(api_kind api);
    void handle_pooling(pooling_kind kind);
    void handle_echo();
    void handle_models();
    void handle_stats();

    void respond(unsigned status, std::string_view content_type, std::string body,
                 clock::time_point due);
    void respond_error(unsigned status, std::string_view message, std::string_view type,
                       std::string_view code, clock::time_point due);

    void start_stream();
    void stream_step();
    void send_content_chunk();
    void send_stream_tail();
    void send_no_sse();

    void begin_head(unsigned status);
    void add_header(std::string_view name, std::string_view value);
    void end_head();
    void frame_payload(bool last);

    void wait_until(clock::time_point due, step next);
    void on_timer(step next, beast::error_code ec);
    void write_at(clock::time_point due, after_write next);
    void on_write_due(after_write next, beast::error_code ec);
    void do_write(after_write next);
    void on_write(after_write next, beast::error_code ec, std::size_t bytes);

    void arm_peer_watch();
    void on_peer_readable(std::uint64_t generation, beast::error_code ec);
    void end_response();
    void do_graceful_close();
    void do_drain();
    void on_drained(beast::error_code ec, std::size_t bytes);
    void close_connection(bool send_reset);

    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> request_;
    std::shared_ptr<server_state> state_;
    net::steady_timer timer_;

    // The request being answered.
    std::uint64_t request_id_ = 0;
    clock::time_point received_at_;
    clock::time_point schedule_base_;  // received_at_ plus any slow-headers delay
    bool keep_alive_ = true;
    bool chunked_ = true;
    request_settings settings_;
    std::optional<completion_script> script_;

    // Stream progress.
    bool stream_active_ = false;
    std::uint32_t next_chunk_ = 0;
    std::uint32_t chunk_count_ = 0;
    std::uint32_t truncate_after_ = 0;  // content chunks before close, when close-after is set

    // Detects a client that hangs up while we wait for the next deadline; a generation
    // counter turns a completion left over from an earlier response into a no-op.
    std::uint64_t watch_generation_ = 0;
    bool watching_ = false;

    // One write = [head][chunk-size line][payload][trailer]; kept apart so the payload can
    // be built in place and the whole write still goes out as one writev.
    std::string head_;
    std::string chunk_line_;
    std::string payload_;
    std::string trailer_;
};

}  // namespace tokenmeter::sim
