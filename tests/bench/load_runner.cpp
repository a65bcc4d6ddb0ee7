#include "load_runner.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

namespace tokenmeter::load {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t max_line_bytes = 4 * 1024 * 1024;
// After a failed connect, so that a refused port costs a request slot every few milliseconds
// instead of spinning a core.
constexpr std::chrono::milliseconds reconnect_backoff{10};

double seconds_between(clock_type::time_point from, clock_type::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}

// libstdc++'s steady_clock is CLOCK_MONOTONIC, the same clock the simulator stamps sim_sent_ns
// with.
std::int64_t monotonic_ns(clock_type::time_point at) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

bool non_empty_string(const nlohmann::json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

// A chunk counts as output when it carries text the user would see (or reasoning or a tool
// call), the same events a server-side TTFT would start from; role-only and usage-only chunks
// do not.
bool carries_output(const nlohmann::json& chunk) {
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array()) {
        return false;
    }
    for (const auto& choice : *choices) {
        if (!choice.is_object()) {
            continue;
        }
        if (non_empty_string(choice, "text")) {
            return true;
        }
        auto delta = choice.find("delta");
        if (delta == choice.end() || !delta->is_object()) {
            continue;
        }
        if (non_empty_string(*delta, "content") || non_empty_string(*delta, "reasoning_content") ||
            non_empty_string(*delta, "reasoning")) {
            return true;
        }
        auto tools = delta->find("tool_calls");
        if (tools != delta->end() && tools->is_array() && !tools->empty()) {
            return true;
        }
    }
    return false;
}

// What one response did, before it is folded into the run's totals.
struct response_record {
    std::string model;
    int status = 0;
    clock_type::time_point sent_at;
    std::optional<clock_type::time_point> first_chunk_at;
    std::optional<clock_type::time_point> last_chunk_at;
    std::uint64_t content_chunks = 0;
    std::uint64_t sse_events = 0;
    std::uint64_t body_bytes = 0;
    std::optional<std::uint64_t> completion_tokens;
    bool saw_done = false;
    std::string protocol_error;
};

class load_session;

class load_state {
  public:
    load_state(const load_options& options, asio::io_context& ioc)
        : options_(options),
          ioc_(ioc),
          endpoint_(asio::ip::make_address(options.target.address), options.target.port),
          deadline_timer_(ioc) {
        if (options.target.tls) {
            // Throws when the CA file does not load: a start-up error, reported by main.
            tls_context_.emplace(ssl::context::tls_client);
            tls_context_->set_verify_mode(ssl::verify_peer);
            if (options.ca_file.empty()) {
                tls_context_->set_default_verify_paths();
            } else {
                tls_context_->load_verify_file(options.ca_file);
            }
        }
    }

    void start();

    // Claims the next request slot; empty when the run is over.
    std::optional<std::string> next_model() {
        if (stopping_ || clock_type::now() >= deadline_) {
            return std::nullopt;
        }
        if (options_.requests && issued_ >= *options_.requests) {
            return std::nullopt;
        }
        const std::string& model = options_.models[issued_ % options_.models.size()];
        ++issued_;
        return model;
    }

    void stream_opened() {
        ++open_;
        result_.peak_open_streams = std::max(result_.peak_open_streams, open_);
        if (options_.open_streams != nullptr) {
            options_.open_streams->store(open_, std::memory_order_relaxed);
        }
    }

    void stream_closed() {
        --open_;
        if (options_.open_streams != nullptr) {
            options_.open_streams->store(open_, std::memory_order_relaxed);
        }
    }

    void on_content_chunk(response_record& record, clock_type::time_point at,
                          std::optional<std::int64_t> sim_sent_ns) {
        if (!record.first_chunk_at) {
            record.first_chunk_at = at;
        }
        if (record.last_chunk_at) {
            result_.chunk_gap_seconds.add(seconds_between(*record.last_chunk_at, at));
        }
        record.last_chunk_at = at;
        ++record.content_chunks;
        if (!options_.stamp) {
            return;
        }
        if (sim_sent_ns) {
            const double latency = static_cast<double>(monotonic_ns(at) - *sim_sent_ns) * 1e-9;
            result_.delivery_latency_seconds.add(latency);
            (record.content_chunks <= load_result::first_chunks
                 ? result_.delivery_first_chunks_seconds
                 : result_.delivery_later_chunks_seconds)
                .add(latency);
        } else {
            ++result_.unstamped_chunks;
        }
    }

    void record(const response_record& record, clock_type::time_point end,
                const std::string& error) {
        if (record.status > 0) {
            ++result_.status_counts[record.status];
        }
        model_result& model = result_.models[record.model];
        if (error.empty()) {
            ++result_.requests_ok;
            ++model.ok;
            result_.request_duration_seconds.add(seconds_between(record.sent_at, end));
        } else {
            ++result_.requests_failed;
            ++model.failed;
            ++result_.errors[error];
        }
        if (record.first_chunk_at) {
            double ttft = seconds_between(record.sent_at, *record.first_chunk_at);
            result_.time_to_first_token_seconds.add(ttft);
            model.time_to_first_token_seconds.add(ttft);
        }
        add_volume(record);
    }

    void record_cancelled(const response_record& record) {
        ++result_.requests_cancelled;
        add_volume(record);
    }

    void session_ended() {
        if (--active_sessions_ == 0) {
            finished_at_ = clock_type::now();
            deadline_timer_.cancel();
        }
    }

    [[nodiscard]] bool stopping() const noexcept { return stopping_; }
    [[nodiscard]] const load_options& options() const noexcept { return options_; }
    [[nodiscard]] const tcp::endpoint& endpoint() const noexcept { return endpoint_; }
    [[nodiscard]] asio::io_context& io_context() noexcept { return ioc_; }
    // Set only for an https:// target.
    [[nodiscard]] ssl::context* tls_context() noexcept {
        return tls_context_ ? &*tls_context_ : nullptr;
    }

    load_result take_result() {
        result_.wall_seconds =
            seconds_between(started_at_, finished_at_.value_or(clock_type::now()));
        return std::move(result_);
    }

  private:
    void add_volume(const response_record& record) {
        result_.content_chunks += record.content_chunks;
        result_.sse_events += record.sse_events;
        result_.body_bytes += record.body_bytes;
        result_.completion_tokens += record.completion_tokens.value_or(0);
    }

    void on_deadline(beast::error_code ec);

    const load_options& options_;
    asio::io_context& ioc_;
    tcp::endpoint endpoint_;
    asio::steady_timer deadline_timer_;
    std::optional<ssl::context> tls_context_;
    clock_type::time_point started_at_;
    clock_type::time_point deadline_;
    std::optional<clock_type::time_point> finished_at_;
    std::vector<std::weak_ptr<load_session>> sessions_;
    std::size_t active_sessions_ = 0;
    std::uint64_t issued_ = 0;
    std::size_t open_ = 0;
    bool stopping_ = false;
    load_result result_;
};

// One client connection: sends a request, reads its stream to the end, and sends the next one on
// the same connection while the server keeps it alive.
class load_session : public std::enable_shared_from_this<load_session> {
  public:
    load_session(asio::io_context& ioc, load_state& state)
        : state_(state), tcp_(ioc), backoff_(ioc) {}

    void start() {
        asio::dispatch(
            tcp_.get_executor(),
            beast::bind_front_handler(&load_session::do_next_request, shared_from_this()));
    }

    // The run's duration is over: abort whatever is pending; the handlers see stopping().
    void stop() {
        backoff_.cancel();
        beast::error_code ignored;
        tcp_.socket().shutdown(tcp::socket::shutdown_both, ignored);
        tcp_.close();
    }

  private:
    // Runs an I/O operation on the TLS stream of an https:// target, else on the TCP stream;
    // the plain path pays one branch.
    template <typename Operation>
    void on_stream(Operation&& operation) {
        if (tls_) {
            operation(*tls_);
        } else {
            operation(tcp_);
        }
    }

    void do_next_request() {
        std::optional<std::string> model = state_.next_model();
        if (!model) {
            close_connection();
            state_.session_ended();
            return;
        }
        current_ = response_record{};
        current_.model = std::move(*model);
        build_request();
        if (connected_) {
            reused_connection_ = true;
            do_write();
        } else {
            do_connect();
        }
    }

    void build_request() {
        const load_options& options = state_.options();
        nlohmann::json body = {
            {"model", current_.model},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}},
            {"messages",
             nlohmann::json::array({{{"role", "user"}, {"content", "Tell me a short story."}}})},
        };
        if (options.output_tokens) {
            body["max_tokens"] = *options.output_tokens;
        }
        request_ = {};
        request_.method(http::verb::post);
        request_.target(options.path);
        request_.version(11);
        request_.set(http::field::host, options.target.host_header);
        request_.set(http::field::user_agent, "tokenmeter-load");
        request_.set(http::field::content_type, "application/json");
        request_.set(http::field::accept, "text/event-stream");
        if (options.output_tokens) {
            request_.set("x-sim-output-tokens", std::to_string(*options.output_tokens));
        }
        if (options.time_to_first_token_ms) {
            request_.set("x-sim-ttft-ms", std::to_string(*options.time_to_first_token_ms));
        }
        if (options.inter_token_latency_ms) {
            request_.set("x-sim-itl-ms", std::to_string(*options.inter_token_latency_ms));
        }
        if (options.tokens_per_chunk) {
            request_.set("x-sim-tokens-per-chunk", std::to_string(*options.tokens_per_chunk));
        }
        if (options.stamp) {
            request_.set("x-sim-stamp", "1");
        }
        for (const auto& [name, value] : options.extra_headers) {
            request_.insert(name, value);
        }
        request_.body() = body.dump();
        request_.prepare_payload();
    }

    void do_connect() {
        reused_connection_ = false;
        tcp_.expires_after(idle_timeout());
        tcp_.async_connect(state_.endpoint(), beast::bind_front_handler(&load_session::on_connect,
                                                                        shared_from_this()));
    }

    void on_connect(beast::error_code ec) {
        if (ec) {
            fail_connect("connect", ec);
            return;
        }
        connected_ = true;
        tcp_.socket().set_option(tcp::no_delay(true), ec);
        if (ssl::context* context = state_.tls_context()) {
            tls_.emplace(tcp_, *context);
            tls_->set_verify_callback(ssl::host_name_verification(state_.options().target.address));
            tcp_.expires_after(idle_timeout());
            tls_->async_handshake(
                ssl::stream_base::client,
                beast::bind_front_handler(&load_session::on_handshake, shared_from_this()));
            return;
        }
        do_write();
    }

    void on_handshake(beast::error_code ec) {
        if (ec) {
            fail_connect("tls handshake", ec);
            return;
        }
        do_write();
    }

    // A connection that never carried the request costs the request and a short pause.
    void fail_connect(const char* stage, beast::error_code ec) {
        if (state_.stopping()) {
            end_cancelled();
            return;
        }
        end_stream();
        if (current_.sent_at == clock_type::time_point{}) {
            current_.sent_at = clock_type::now();
        }
        state_.record(current_, clock_type::now(), std::string(stage) + ": " + ec.message());
        close_connection();
        backoff_.expires_after(reconnect_backoff);
        backoff_.async_wait(
            beast::bind_front_handler(&load_session::on_backoff, shared_from_this()));
    }

    void on_backoff(beast::error_code) {
        if (state_.stopping()) {
            state_.session_ended();
            return;
        }
        do_next_request();
    }

    void do_write() {
        parser_.emplace();
        // A stream of tokens has no natural size limit; the run's duration bounds it instead.
        parser_->body_limit(boost::none);
        pending_line_.clear();
        current_.sent_at = clock_type::now();
        if (!in_flight_) {
            in_flight_ = true;
            state_.stream_opened();
        }
        tcp_.expires_after(idle_timeout());
        on_stream([this](auto& stream) {
            http::async_write(
                stream, request_,
                beast::bind_front_handler(&load_session::on_write, shared_from_this()));
        });
    }

    void on_write(beast::error_code ec, std::size_t) {
        if (ec) {
            fail_or_retry("write", ec);
            return;
        }
        do_read_header();
    }

    void do_read_header() {
        tcp_.expires_after(idle_timeout());
        on_stream([this](auto& stream) {
            http::async_read_header(
                stream, buffer_, *parser_,
                beast::bind_front_handler(&load_session::on_read_header, shared_from_this()));
        });
    }

    void on_read_header(beast::error_code ec, std::size_t) {
        if (ec) {
            fail_or_retry("read header", ec);
            return;
        }
        current_.status = parser_->get().result_int();
        if (parser_->is_done()) {
            finish_response({});
            return;
        }
        do_read_body();
    }

    void do_read_body() {
        auto& body = parser_->get().body();
        body.data = body_chunk_.data();
        body.size = body_chunk_.size();
        tcp_.expires_after(idle_timeout());
        on_stream([this](auto& stream) {
            http::async_read_some(
                stream, buffer_, *parser_,
                beast::bind_front_handler(&load_session::on_read_body, shared_from_this()));
        });
    }

    void on_read_body(beast::error_code ec, std::size_t) {
        // Stamped before any parsing so the client's own JSON work does not count as latency.
        clock_type::time_point at = clock_type::now();
        if (ec == http::error::need_buffer) {
            ec = {};
        }
        std::size_t filled = body_chunk_.size() - parser_->get().body().size;
        consume_body(std::string_view(body_chunk_.data(), filled), at);
        if (ec) {
            fail("read body", ec);
            return;
        }
        if (parser_->is_done()) {
            finish_response({});
            return;
        }
        do_read_body();
    }

    void consume_body(std::string_view bytes, clock_type::time_point at) {
        current_.body_bytes += bytes.size();
        std::size_t start = 0;
        for (std::size_t newline = bytes.find('\n'); newline != std::string_view::npos;
             newline = bytes.find('\n', start)) {
            std::string_view piece = bytes.substr(start, newline - start);
            if (pending_line_.empty()) {
                handle_line(piece, at);
            } else {
                pending_line_.append(piece);
                handle_line(pending_line_, at);
                pending_line_.clear();
            }
            start = newline + 1;
        }
        pending_line_.append(bytes.substr(start));
        if (pending_line_.size() > max_line_bytes) {
            current_.protocol_error = "SSE line longer than 4 MiB";
            pending_line_.clear();
        }
    }

    void handle_line(std::string_view line, clock_type::time_point at) {
        if (line.ends_with('\r')) {
            line.remove_suffix(1);
        }
        if (!line.starts_with("data:")) {
            return;
        }
        std::string_view payload = line.substr(5);
        if (payload.starts_with(' ')) {
            payload.remove_prefix(1);
        }
        ++current_.sse_events;
        if (payload == "[DONE]") {
            current_.saw_done = true;
            return;
        }
        nlohmann::json chunk = nlohmann::json::parse(payload, nullptr, false);
        if (chunk.is_discarded() || !chunk.is_object()) {
            if (current_.protocol_error.empty()) {
                current_.protocol_error = "malformed JSON in a data: line";
            }
            return;
        }
        if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
            auto tokens = usage->find("completion_tokens");
            if (tokens != usage->end() && tokens->is_number_unsigned()) {
                current_.completion_tokens = tokens->get<std::uint64_t>();
            }
        }
        if (!carries_output(chunk)) {
            return;
        }
        std::optional<std::int64_t> sim_sent_ns;
        if (auto stamp = chunk.find("sim_sent_ns");
            stamp != chunk.end() && stamp->is_number_integer()) {
            sim_sent_ns = stamp->get<std::int64_t>();
        }
        state_.on_content_chunk(current_, at, sim_sent_ns);
    }

    void finish_response(std::string error) {
        bool keep_alive = parser_->get().keep_alive();
        if (error.empty()) {
            if (current_.status < 200 || current_.status > 299) {
                error = "http " + std::to_string(current_.status);
            } else if (!current_.protocol_error.empty()) {
                error = current_.protocol_error;
            } else if (!current_.saw_done) {
                error = "stream ended without data: [DONE]";
            }
        }
        end_stream();
        state_.record(current_, clock_type::now(), error);
        if (!keep_alive) {
            close_connection();
        }
        do_next_request();
    }

    // A keep-alive connection the server closed while idle fails the first write or read; that is
    // the connection's fault, not the request's, so it gets one fresh connection.
    void fail_or_retry(const char* stage, beast::error_code ec) {
        bool nothing_received = current_.body_bytes == 0 && current_.status == 0;
        bool closed_by_peer = ec == http::error::end_of_stream ||
                              ec == asio::error::connection_reset ||
                              ec == asio::error::broken_pipe || ec == asio::error::eof;
        if (reused_connection_ && nothing_received && closed_by_peer && !state_.stopping()) {
            close_connection();
            do_connect();
            return;
        }
        fail(stage, ec);
    }

    void fail(const char* stage, beast::error_code ec) {
        if (state_.stopping()) {
            end_cancelled();
            return;
        }
        end_stream();
        std::string reason =
            ec == beast::error::timeout ? std::string("idle timeout") : ec.message();
        state_.record(current_, clock_type::now(), std::string(stage) + ": " + reason);
        close_connection();
        do_next_request();
    }

    void end_cancelled() {
        if (in_flight_) {
            end_stream();
            state_.record_cancelled(current_);
        }
        close_connection();
        state_.session_ended();
    }

    void end_stream() {
        if (in_flight_) {
            in_flight_ = false;
            state_.stream_closed();
        }
    }

    void close_connection() {
        if (connected_) {
            beast::error_code ignored;
            tcp_.socket().shutdown(tcp::socket::shutdown_both, ignored);
        }
        // A TLS stream cannot be reused: the next connection gets a new one.
        tls_.reset();
        tcp_.close();
        connected_ = false;
        buffer_.clear();
    }

    [[nodiscard]] std::chrono::steady_clock::duration idle_timeout() const {
        return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(state_.options().idle_timeout_seconds));
    }

    load_state& state_;
    beast::tcp_stream tcp_;
    std::optional<beast::ssl_stream<beast::tcp_stream&>> tls_;  // https:// targets only
    asio::steady_timer backoff_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> request_;
    std::optional<http::response_parser<http::buffer_body>> parser_;
    std::array<char, 16 * 1024> body_chunk_{};
    std::string pending_line_;
    response_record current_;
    bool connected_ = false;
    bool reused_connection_ = false;
    bool in_flight_ = false;
};

void load_state::start() {
    started_at_ = clock_type::now();
    double seconds = std::clamp(options_.duration_seconds, 0.0, max_duration_seconds);
    deadline_ = started_at_ + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double>(seconds));
    deadline_timer_.expires_at(deadline_);
    deadline_timer_.async_wait([this](beast::error_code ec) { on_deadline(ec); });
    std::size_t count = std::max<std::size_t>(options_.concurrency, 1);
    active_sessions_ = count;
    for (std::size_t i = 0; i < count; ++i) {
        auto session = std::make_shared<load_session>(ioc_, *this);
        sessions_.push_back(session);
        session->start();
    }
}

void load_state::on_deadline(beast::error_code ec) {
    if (ec) {
        return;  // cancelled: every session ended before the deadline
    }
    stopping_ = true;
    for (auto& weak : sessions_) {
        if (auto session = weak.lock()) {
            session->stop();
        }
    }
}

}  // namespace

load_result run_load(const load_options& options) {
    asio::io_context ioc{1};
    load_state state(options, ioc);
    state.start();
    ioc.run();
    return state.take_result();
}

}  // namespace tokenmeter::load
