#include "admin/admin.hpp"

#include <spdlog/spdlog.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <string>

#include "admin/status_page.hpp"
#include "metrics/exposition.hpp"
#include "metrics/native_histogram.hpp"
#include "metrics/openmetrics.hpp"
#include "net/error_body.hpp"
#include "net/tls_server.hpp"
#include "net/tls_stream.hpp"

namespace tokenmeter::admin {
namespace {

// Longer than any terminationGracePeriodSeconds worth waiting for; kubelet gives up before.
constexpr std::chrono::milliseconds max_drain_wait{std::chrono::hours(1)};
constexpr std::chrono::milliseconds default_drain_wait{std::chrono::seconds(60)};
constexpr std::chrono::milliseconds drain_poll{20};
// A read or a write of a request or response.
constexpr std::chrono::seconds io_timeout{30};
// A client that connects to the TLS admin port and does not finish its handshake in this long is
// closed (a scraper's handshake takes milliseconds).
constexpr std::chrono::seconds handshake_timeout{10};
// After the plain HTTP answer on the TLS port: how long, and how much, of what the client still
// sends is read and dropped, so that closing does not reset the connection before it reads the
// answer.
constexpr std::chrono::seconds linger_time{2};
constexpr std::size_t max_linger_bytes = std::size_t{64} * 1024;

std::string_view query_value(std::string_view target, std::string_view key) {
    const auto q = target.find('?');
    if (q == std::string_view::npos) {
        return {};
    }
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        const auto eq = pair.find('=');
        if (pair.substr(0, eq) == key) {
            return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
        }
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    }
    return {};
}

// One admin connection, plain or TLS (Beast's flex pattern: one session over either stream).
template <class Stream>
class admin_session : public std::enable_shared_from_this<admin_session<Stream>> {
  public:
    admin_session(Stream stream, admin_state& state, net::tls_handshake_counters* handshakes)
        : stream_(std::move(stream)),
          drain_timer_(stream_.get_executor()),
          state_(state),
          handshakes_(handshakes) {}

    void start() {
        if constexpr (net::is_tls_stream<Stream>) {
            lowest().expires_after(handshake_timeout);
            stream_.async_handshake(
                ssl::stream_base::server,
                beast::bind_front_handler(&admin_session::on_handshake, this->shared_from_this()));
        } else {
            do_read();
        }
    }

  private:
    tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

    void close() {
        error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
        lowest().socket().close(ignored);
    }

    void on_handshake(error_code ec) {
        try {
            after_handshake(ec);
        } catch (const std::exception&) {
            close();  // out of memory, say: this connection ends, the listener stays
        }
    }

    void after_handshake(error_code ec) {
        if constexpr (net::is_tls_stream<Stream>) {
            if (ec == asio::error::operation_aborted) {
                close();
                return;
            }
            if (ec) {
                const std::string_view reason = net::classify_handshake_error(ec);
                if (handshakes_ != nullptr) {
                    handshakes_->failed(reason, ec.message());
                }
                if (reason == "plaintext_http") {
                    lowest().expires_after(io_timeout);
                    asio::async_write(lowest().socket(),
                                      asio::buffer(net::plain_http_on_tls_port_answer()),
                                      beast::bind_front_handler(&admin_session::on_plain_answer,
                                                                this->shared_from_this()));
                    return;
                }
                close();
                return;
            }
            if (handshakes_ != nullptr) {
                handshakes_->done(SSL_session_reused(stream_.native_handle()) == 1);
            }
        }
        do_read();
    }

    // The plain HTTP answer went out: stop sending, then read and drop what the client still
    // sends until it closes, for a bounded time and size.
    void on_plain_answer(error_code ec, std::size_t /*bytes*/) {
        if (ec) {
            close();
            return;
        }
        error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
        lowest().expires_after(linger_time);
        linger_read(0);
    }

    void linger_read(std::size_t lingered) {
        if (lingered > max_linger_bytes) {
            close();
            return;
        }
        try {
            lowest().async_read_some(
                buffer_.prepare(4096),
                [self = this->shared_from_this(), lingered](error_code ec, std::size_t n) {
                    if (ec) {
                        self->close();
                        return;
                    }
                    self->linger_read(lingered + n);
                });
        } catch (const std::exception&) {
            close();
        }
    }

    void do_read() {
        request_ = {};
        lowest().expires_after(io_timeout);
        bhttp::async_read(
            stream_, buffer_, request_,
            beast::bind_front_handler(&admin_session::on_read, this->shared_from_this()));
    }

    void on_read(error_code ec, std::size_t bytes) {
        try {
            handle(ec, bytes);
        } catch (const std::exception&) {
            // One scrape failed (out of memory, say): close it, keep the listener.
            close();
        }
    }

    void handle(error_code ec, std::size_t /*bytes*/) {
        if (ec) {
            error_code ignored;
            lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
            return;
        }
        response_ = {};
        response_.version(request_.version());
        response_.keep_alive(request_.keep_alive());
        std::string_view target = request_.target();
        std::string_view path = target.substr(0, target.find('?'));
        bool get = request_.method() == bhttp::verb::get || request_.method() == bhttp::verb::head;
        if (path == "/undrain") {
            if (request_.method() == bhttp::verb::post) {
                undrain();
            } else {
                respond(bhttp::status::method_not_allowed, "text/plain", "only POST\n");
                response_.set(bhttp::field::allow, "POST");
            }
        } else if (!get) {
            respond(bhttp::status::method_not_allowed, "text/plain", "only GET\n");
        } else if (path == "/metrics") {
            if (state_.before_scrape) {
                state_.before_scrape();
            }
            serve_metrics();
        } else if (serve_status_page(path)) {
            // answered
        } else if (path == "/drain") {
            if (may_change_drain("GET /drain")) {
                start_drain(target);
                return;
            }
        } else if (path == "/healthz") {
            respond(bhttp::status::ok, "text/plain", "ok\n");
        } else if (path == "/readyz") {
            if (state_.draining.load()) {
                respond(bhttp::status::service_unavailable, "text/plain", "draining\n");
            } else if (state_.spool_failing != nullptr && state_.spool_failing->load()) {
                respond(bhttp::status::service_unavailable, "text/plain",
                        "usage spool cannot write to disk\n");
            } else if (!state_.upstream_ready.load()) {
                respond(bhttp::status::service_unavailable, "text/plain",
                        "upstream not accepting connections\n");
            } else {
                respond(bhttp::status::ok, "text/plain", "ready\n");
            }
        } else {
            respond(bhttp::status::not_found, "text/plain",
                    "not found; try /metrics, /healthz, /readyz, /drain, /undrain, / (the status "
                    "page) or /status.json\n");
        }
        write();
    }

    // The status page and its document; false when the path is none of theirs.
    bool serve_status_page(std::string_view path) {
        std::string_view type;
        std::string body;
        if (path == "/" || path == "/status") {
            type = "text/html; charset=utf-8";
            body = status_page::index_html;
        } else if (path == "/status.json") {
            type = "application/json";
        } else if (path == "/status/status.css") {
            type = "text/css; charset=utf-8";
            body = status_page::status_css;
        } else if (path == "/status/status.js") {
            type = "text/javascript; charset=utf-8";
            body = status_page::status_js;
        } else if (path == "/status/favicon.svg") {
            type = "image/svg+xml";
            body = status_page::favicon_svg;
        } else {
            return false;
        }
        if (state_.status == nullptr) {
            respond(bhttp::status::not_found, "text/plain",
                    "the status page is off (metrics.status_page: false)\n");
            return true;
        }
        if (path == "/status.json") {
            body = state_.status->snapshot_text();
        }
        respond(bhttp::status::ok, type, std::move(body));
        response_.set("Content-Security-Policy", status_page_csp);
        response_.set("X-Content-Type-Options", "nosniff");
        response_.set(bhttp::field::x_frame_options, "DENY");
        response_.set("Referrer-Policy", "no-referrer");
        return true;
    }

    void write() {
        if (request_.method() == bhttp::verb::head) {
            response_.body().clear();
        }
        lowest().expires_after(io_timeout);
        bhttp::async_write(
            stream_, response_,
            beast::bind_front_handler(&admin_session::on_write, this->shared_from_this()));
    }

    std::string peer() {
        error_code ec;
        const auto remote = lowest().socket().remote_endpoint(ec);
        if (ec) {
            return "an unknown address";
        }
        return remote.address().to_string() + ":" + std::to_string(remote.port());
    }

    // False, with the refusal answered, when this request may not start or end a drain.
    bool may_change_drain(std::string_view what) {
        const bool from_a_page = request_.find(bhttp::field::origin) != request_.end() ||
                                 request_.find(bhttp::field::referer) != request_.end();
        switch (judge_drain_request(from_a_page, request_[bhttp::field::authorization],
                                    state_.drain_token)) {
            case drain_verdict::allowed:
                return true;
            case drain_verdict::cross_site:
                spdlog::warn("{} from {} refused: sent by a web page (Origin or Referer)", what,
                             peer());
                respond(bhttp::status::forbidden, "application/json",
                        net::error_body("cross_site",
                                        "drain requests with an Origin or Referer header are "
                                        "refused: a web page cannot drain the proxy"));
                return false;
            case drain_verdict::unauthorized:
                spdlog::warn("{} from {} refused: no valid bearer token (admin_auth)", what,
                             peer());
                respond(bhttp::status::unauthorized, "application/json",
                        net::error_body("unauthorized",
                                        "Authorization: Bearer <admin_auth token> required"));
                response_.set(bhttp::field::www_authenticate, "Bearer");
                return false;
        }
        return false;
    }

    void undrain() {
        if (!may_change_drain("POST /undrain")) {
            return;
        }
        if (state_.exiting != nullptr && state_.exiting->load()) {
            spdlog::warn("POST /undrain from {} refused: the process is shutting down", peer());
            respond(bhttp::status::conflict, "application/json",
                    net::error_body("shutting_down",
                                    "a signal started the shutdown; it cannot be undone"));
            return;
        }
        const bool was = state_.draining.exchange(false);
        spdlog::warn("drain {} by POST /undrain from {}", was ? "ended" : "was not on; unchanged",
                     peer());
        respond(bhttp::status::ok, "text/plain", was ? "undrained\n" : "not draining\n");
    }

    // A GET, so that a Kubernetes preStop httpGet can call it: the model container's preStop
    // holds the model server up until the streams through the sidecar are done (Kubernetes stops
    // a native sidecar only after the main containers exit, so the sidecar's own preStop and
    // SIGTERM come too late to protect them).
    void start_drain(std::string_view target) {
        std::chrono::milliseconds wait = default_drain_wait;
        const std::string_view wait_text = query_value(target, "wait");
        if (!wait_text.empty()) {
            const auto parsed = parse_drain_wait(wait_text);
            if (!parsed) {
                respond(bhttp::status::bad_request, "text/plain",
                        "wait: a duration such as 30s, 500ms or 2m\n");
                write();
                return;
            }
            wait = std::min(*parsed, max_drain_wait);
        }
        const bool was = state_.draining.exchange(true);
        spdlog::warn("drain {} by GET /drain from {} (answers within {} ms)",
                     was ? "already on, requested again" : "started", peer(), wait.count());
        drain_deadline_ = std::chrono::steady_clock::now() + wait;
        check_drained();
    }

    void check_drained() {
        const std::int64_t in_flight =
            state_.requests_in_flight == nullptr ? 0 : state_.requests_in_flight->load();
        if (in_flight <= 0) {
            respond(bhttp::status::ok, "text/plain", "drained\n");
            write();
            return;
        }
        if (std::chrono::steady_clock::now() >= drain_deadline_) {
            respond(bhttp::status::service_unavailable, "text/plain",
                    std::to_string(in_flight) + " requests still in flight\n");
            write();
            return;
        }
        // Nothing else happens on this connection meanwhile: no read is pending.
        lowest().expires_never();
        drain_timer_.expires_after(drain_poll);
        drain_timer_.async_wait([self = this->shared_from_this()](error_code ec) {
            if (ec) {
                return;
            }
            self->check_drained();
        });
    }

    // The format the scraper asks for (native histograms exist only in the protobuf one),
    // gzip-compressed when it takes gzip.
    void serve_metrics() {
        const auto accept = request_[bhttp::field::accept];
        std::string_view type = metrics::prometheus_text_content_type;
        std::string body;
        switch (metrics::choose_exposition(std::string_view(accept.data(), accept.size()),
                                           state_.metrics.native_histograms_enabled())) {
            case metrics::exposition_format::protobuf:
                type = metrics::protobuf_content_type;
                body = state_.metrics.expose_protobuf();
                break;
            case metrics::exposition_format::openmetrics:
                type = metrics::openmetrics_content_type;
                body = state_.metrics.expose_openmetrics();
                break;
            case metrics::exposition_format::prometheus_text:
                body = state_.metrics.expose();
                break;
        }
        const auto encoding = request_[bhttp::field::accept_encoding];
        std::optional<std::string> compressed;
        if (metrics::accepts_gzip(std::string_view(encoding.data(), encoding.size()))) {
            compressed = metrics::gzip_compress(body);
        }
        respond(bhttp::status::ok, type, compressed ? std::move(*compressed) : std::move(body));
        if (compressed) {
            response_.set(bhttp::field::content_encoding, "gzip");
        }
        response_.set(bhttp::field::vary, "Accept, Accept-Encoding");
    }

    void respond(bhttp::status status, std::string_view type, std::string body) {
        response_.result(status);
        response_.set(bhttp::field::content_type, type);
        response_.set(bhttp::field::cache_control, "no-store");
        response_.body() = std::move(body);
        response_.prepare_payload();
    }

    void on_write(error_code ec, std::size_t /*bytes*/) {
        if (ec || !response_.keep_alive()) {
            error_code ignored;
            lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
            return;
        }
        do_read();
    }

    Stream stream_;
    steady_timer drain_timer_;
    std::chrono::steady_clock::time_point drain_deadline_{};
    beast::flat_buffer buffer_;
    bhttp::request<bhttp::string_body> request_;
    bhttp::response<bhttp::string_body> response_;
    admin_state& state_;
    net::tls_handshake_counters* handshakes_;
};

}  // namespace

bool bearer_token_matches(std::string_view authorization, std::string_view token) {
    constexpr std::string_view scheme = "bearer ";
    if (token.empty() || authorization.size() < scheme.size()) {
        return false;
    }
    for (std::size_t i = 0; i < scheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) {
            return false;
        }
    }
    const std::string_view sent = authorization.substr(scheme.size());
    // Every byte of the token is compared whatever the sent one holds; only the length (not a
    // secret worth keeping: tokens are generated at a fixed length) ends it early.
    unsigned difference = sent.size() == token.size() ? 0U : 1U;
    for (std::size_t i = 0; i < token.size(); ++i) {
        const unsigned char s = i < sent.size() ? static_cast<unsigned char>(sent[i]) : 0U;
        difference |= s ^ static_cast<unsigned char>(token[i]);
    }
    return difference == 0;
}

drain_verdict judge_drain_request(bool has_origin_or_referer, std::string_view authorization,
                                  std::string_view token) {
    if (has_origin_or_referer) {
        return drain_verdict::cross_site;
    }
    if (!token.empty() && !bearer_token_matches(authorization, token)) {
        return drain_verdict::unauthorized;
    }
    return drain_verdict::allowed;
}

std::optional<std::chrono::milliseconds> parse_drain_wait(std::string_view text) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc{} || n < 0 || n > 100'000'000) {
        return std::nullopt;
    }
    const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    if (unit == "ms") {
        return std::chrono::milliseconds(n);
    }
    if (unit.empty() || unit == "s") {
        return std::chrono::seconds(n);
    }
    if (unit == "m") {
        return std::chrono::minutes(n);
    }
    return std::nullopt;
}

admin_listener::admin_listener(asio::io_context& ioc, const tcp::endpoint& endpoint,
                               admin_state& state, net::edge_counters& edge, admin_tls tls)
    : state_(state),
      tls_(tls),
      listener_(
          ioc, "admin", endpoint, edge, [&ioc]() -> asio::io_context& { return ioc; },
          [this, &ioc](net::accepted_descriptor connection, asio::io_context&) {
              if (auto socket = connection.take(ioc)) {
                  serve(std::move(*socket));
              }
          }) {}

void admin_listener::serve(socket_type socket) {
    if (tls_.server != nullptr) {
        // The context current now; a certificate reload after this affects later connections.
        const auto context = tls_.server->current();
        std::make_shared<admin_session<net::tls_stream>>(
            net::tls_stream(std::move(socket), *context), state_, tls_.handshakes)
            ->start();
        return;
    }
    std::make_shared<admin_session<tcp_stream>>(tcp_stream(std::move(socket)), state_, nullptr)
        ->start();
}

void admin_listener::start() {
    listener_.start();
}

void admin_listener::stop() {
    listener_.stop();
}

}  // namespace tokenmeter::admin
