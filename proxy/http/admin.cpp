#include "http/admin.hpp"

#include <chrono>
#include <string>

namespace tokenmeter::http {
namespace {

class admin_session : public std::enable_shared_from_this<admin_session> {
  public:
    admin_session(socket_type socket, admin_state& state)
        : stream_(std::move(socket)), state_(state) {}

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
            respond(bhttp::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                    state_.metrics.expose());
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
                    "not found; try /metrics, /healthz or /readyz\n");
        }
        if (request_.method() == bhttp::verb::head) {
            response_.body().clear();
        }
        bhttp::async_write(stream_, response_,
                           beast::bind_front_handler(&admin_session::on_write, shared_from_this()));
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
    beast::flat_buffer buffer_;
    bhttp::request<bhttp::string_body> request_;
    bhttp::response<bhttp::string_body> response_;
    admin_state& state_;
};

}  // namespace

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
