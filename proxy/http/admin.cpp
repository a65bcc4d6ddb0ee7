#include "http/admin.hpp"

#include <charconv>
#include <chrono>
#include <string>

#include "http/status_page.hpp"
#include "metrics/native_histogram.hpp"

namespace tokenmeter::http {
namespace {

// Longer than any terminationGracePeriodSeconds worth waiting for; kubelet gives up before.
constexpr std::chrono::milliseconds max_drain_wait{std::chrono::hours(1)};
constexpr std::chrono::milliseconds default_drain_wait{std::chrono::seconds(60)};
constexpr std::chrono::milliseconds drain_poll{20};

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

class admin_session : public std::enable_shared_from_this<admin_session> {
  public:
    admin_session(socket_type socket, admin_state& state)
        : stream_(std::move(socket)), drain_timer_(stream_.get_executor()), state_(state) {}

    void start() { do_read(); }

  private:
    void do_read() {
        request_ = {};
        stream_.expires_after(std::chrono::seconds(30));
        bhttp::async_read(stream_, buffer_, request_,
                          beast::bind_front_handler(&admin_session::on_read, shared_from_this()));
    }

    void on_read(error_code ec, std::size_t bytes) {
        try {
            handle(ec, bytes);
        } catch (const std::exception&) {
            // One scrape failed (out of memory, say): close it, keep the listener.
            error_code ignored;
            stream_.socket().close(ignored);
        }
    }

    void handle(error_code ec, std::size_t /*bytes*/) {
        if (ec) {
            error_code ignored;
            stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
            return;
        }
        response_ = {};
        response_.version(request_.version());
        response_.keep_alive(request_.keep_alive());
        std::string_view target = request_.target();
        std::string_view path = target.substr(0, target.find('?'));
        bool get = request_.method() == bhttp::verb::get || request_.method() == bhttp::verb::head;
        if (!get) {
            respond(bhttp::status::method_not_allowed, "text/plain", "only GET\n");
        } else if (path == "/metrics") {
            if (state_.before_scrape) {
                state_.before_scrape();
            }
            // Native histograms exist only in the protobuf format: served when asked for.
            if (state_.metrics.native_histograms_enabled() &&
                metrics::accepts_protobuf(request_[bhttp::field::accept])) {
                respond(bhttp::status::ok, metrics::protobuf_content_type,
                        state_.metrics.expose_protobuf());
            } else {
                respond(bhttp::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                        state_.metrics.expose());
            }
        } else if (serve_status_page(path)) {
            // answered
        } else if (path == "/drain") {
            start_drain(target);
            return;
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
                    "not found; try /metrics, /healthz, /readyz, /drain, / (the status page) or "
                    "/status.json\n");
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
        stream_.expires_after(std::chrono::seconds(30));
        bhttp::async_write(stream_, response_,
                           beast::bind_front_handler(&admin_session::on_write, shared_from_this()));
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
        state_.draining.store(true);
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
        stream_.expires_never();
        drain_timer_.expires_after(drain_poll);
        drain_timer_.async_wait([self = shared_from_this()](error_code ec) {
            if (ec) {
                return;
            }
            self->check_drained();
        });
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
            stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
            return;
        }
        do_read();
    }

    tcp_stream stream_;
    steady_timer drain_timer_;
    std::chrono::steady_clock::time_point drain_deadline_{};
    beast::flat_buffer buffer_;
    bhttp::request<bhttp::string_body> request_;
    bhttp::response<bhttp::string_body> response_;
    admin_state& state_;
};

}  // namespace

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
                               admin_state& state, edge_counters& edge)
    : state_(state),
      listener_(
          ioc, "admin", endpoint, edge, [&ioc]() -> asio::io_context& { return ioc; },
          [this](socket_type socket, asio::io_context&) {
              std::make_shared<admin_session>(std::move(socket), state_)->start();
          }) {}

void admin_listener::start() {
    listener_.start();
}

void admin_listener::stop() {
    listener_.stop();
}

}  // namespace tokenmeter::http
