// admin/readiness_probe: whether the upstream accepts connections, checked every interval on the
// admin thread; /readyz reports it. For an https:// upstream "accepts" means a verified TLS
// handshake, not just a TCP connect. A change is logged once, not every probe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "net/beast.hpp"
#include "net/tls_stream.hpp"

namespace tokenmeter::admin {

class readiness_probe {
  public:
    readiness_probe(asio::io_context& ioc, std::string host, std::string port,
                    std::chrono::milliseconds interval, std::chrono::milliseconds connect_timeout,
                    std::atomic<bool>& ready);
    // https:// upstreams: the handshake uses this context and name (SNI and verification).
    void use_tls(std::shared_ptr<ssl::context> context, std::string server_name);
    readiness_probe(const readiness_probe&) = delete;
    readiness_probe& operator=(const readiness_probe&) = delete;
    readiness_probe(readiness_probe&&) = delete;
    readiness_probe& operator=(readiness_probe&&) = delete;
    ~readiness_probe() = default;

    void start();
    void stop();

  private:
    void probe();
    void on_resolved(error_code ec, const tcp::resolver::results_type& results);
    void on_connected(error_code ec);
    void report(bool ready, const std::string& why);
    void rearm();

    asio::io_context& ioc_;
    std::string host_;
    std::string port_;
    std::chrono::milliseconds interval_;
    std::chrono::milliseconds connect_timeout_;
    std::atomic<bool>& ready_;
    tcp::resolver resolver_;
    std::shared_ptr<ssl::context> tls_;
    std::string server_name_;
    std::unique_ptr<tcp_stream> stream_;
    std::unique_ptr<net::tls_stream> tls_stream_;
    asio::steady_timer timer_;
    bool stopped_ = false;
};

}  // namespace tokenmeter::admin
