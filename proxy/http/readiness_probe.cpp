#include "http/readiness_probe.hpp"

#include <spdlog/spdlog.h>

namespace tokenmeter::http {

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

void readiness_probe::start() {
    stopped_ = false;
    probe();
}

void readiness_probe::stop() {
    stopped_ = true;
    timer_.cancel();
    resolver_.cancel();
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
    stream_ = std::make_unique<beast::tcp_stream>(ioc_);
    stream_->expires_after(connect_timeout_);
    stream_->async_connect(results, [this](error_code connect_ec, const tcp::endpoint&) {
        on_connected(connect_ec);
    });
}

void readiness_probe::on_connected(error_code ec) {
    if (stopped_) {
        return;
    }
    const bool ready = !ec;
    if (ready != ready_.load()) {
        spdlog::info("upstream {} {}", ready ? "reachable" : "unreachable",
                     ec ? ec.message() : "");
    }
    ready_ = ready;
    error_code ignored;
    stream_->socket().close(ignored);
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

}  // namespace tokenmeter::http
