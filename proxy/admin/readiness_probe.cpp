#include "admin/readiness_probe.hpp"

#include <spdlog/spdlog.h>

#include "net/tls_client.hpp"

namespace tokenmeter::admin {

readiness_probe::readiness_probe(asio::io_context& ioc, std::string host, std::string port,
                                 std::chrono::milliseconds interval,
                                 std::chrono::milliseconds connect_timeout,
                                 std::atomic<bool>& ready)
    : ioc_(ioc),
      host_(std::move(host)),
      port_(std::move(port)),
      interval_(interval),
      connect_timeout_(connect_timeout),
      ready_(ready),
      resolver_(ioc),
      timer_(ioc) {}

void readiness_probe::use_tls(std::shared_ptr<ssl::context> context, std::string server_name) {
    tls_ = std::move(context);
    server_name_ = std::move(server_name);
}

void readiness_probe::start() {
    stopped_ = false;
    probe();
}

void readiness_probe::stop() {
    stopped_ = true;
    timer_.cancel();
    resolver_.cancel();
    if (tls_stream_) {
        tls_stream_->next_layer().cancel();
    }
    if (stream_) {
        stream_->cancel();
    }
}

void readiness_probe::probe() {
    resolver_.async_resolve(host_, port_,
                            [this](error_code ec, const tcp::resolver::results_type& results) {
                                on_resolved(ec, results);
                            });
}

void readiness_probe::on_resolved(error_code ec, const tcp::resolver::results_type& results) {
    if (stopped_) {
        return;
    }
    if (ec) {
        ready_ = false;
        rearm();
        return;
    }
    tls_stream_.reset();
    stream_.reset();
    tcp_stream* lowest = nullptr;
    if (tls_) {
        tls_stream_ = std::make_unique<net::tls_stream>(ioc_, *tls_);
        lowest = &tls_stream_->next_layer();
    } else {
        stream_ = std::make_unique<tcp_stream>(ioc_.get_executor());
        lowest = stream_.get();
    }
    // One deadline for the connect and the handshake.
    lowest->expires_after(connect_timeout_);
    lowest->async_connect(
        results, [this](error_code connect_ec, const tcp::endpoint&) { on_connected(connect_ec); });
}

void readiness_probe::on_connected(error_code ec) {
    if (stopped_) {
        return;
    }
    if (ec || !tls_stream_) {
        report(!ec, ec ? ec.message() : std::string());
        return;
    }
    std::string error;
    if (!net::prepare_tls_client(tls_stream_->native_handle(), server_name_, error)) {
        report(false, error);
        return;
    }
    tls_stream_->async_handshake(ssl::stream_base::client, [this](error_code handshake_ec) {
        if (stopped_) {
            return;
        }
        report(!handshake_ec,
               handshake_ec ? "TLS handshake: " + net::describe_tls_client_error(
                                                      handshake_ec, tls_stream_->native_handle())
                            : std::string());
    });
}

void readiness_probe::report(bool ready, const std::string& why) {
    if (ready != ready_.load()) {
        spdlog::info("upstream {}{}{}", ready ? "reachable" : "unreachable",
                     why.empty() ? "" : ": ", why);
    }
    ready_ = ready;
    // Closed without close_notify: the probe sent nothing, and the server sees a plain hang-up.
    error_code ignored;
    (tls_stream_ ? tls_stream_->next_layer() : *stream_).socket().close(ignored);
    rearm();
}

void readiness_probe::rearm() {
    timer_.expires_after(interval_);
    timer_.async_wait([this](error_code ec) {
        if (!ec && !stopped_) {
            probe();
        }
    });
}

}  // namespace tokenmeter::admin
