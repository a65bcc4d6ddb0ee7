#include "app/drain.hpp"

#include <spdlog/spdlog.h>

#include <csignal>

namespace tokenmeter::app {

drain_controller::drain_controller(asio::io_context& ioc, std::chrono::milliseconds timeout,
                                   std::atomic<bool>& draining,
                                   const std::atomic<std::int64_t>& in_flight, actions act)
    : timeout_(timeout),
      draining_(draining),
      in_flight_(in_flight),
      actions_(std::move(act)),
      signals_(ioc, SIGTERM, SIGINT),
      timer_(ioc) {}

void drain_controller::start() {
    signals_.async_wait([this](error_code ec, int n) { on_signal(ec, n); });
}

void drain_controller::stop() {
    stopped_ = true;
    error_code ignored;
    signals_.cancel(ignored);
    timer_.cancel();
}

void drain_controller::on_signal(error_code ec, int signal_number) {
    if (ec || stopped_) {
        return;
    }
    spdlog::warn(
        "drain started by signal {} ({}); exiting once no request is in flight, within {} ms",
        signal_number, signal_number == SIGTERM ? "SIGTERM" : "SIGINT", timeout_.count());
    draining_ = true;
    actions_.begin();
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    // A second signal cuts the drain short.
    signals_.async_wait([this](error_code second_ec, int) { on_second_signal(second_ec); });
    check();
}

// Not const: it ends the drain (actions_ holds references to what it stops).
// NOLINTNEXTLINE(readability-make-member-function-const)
void drain_controller::on_second_signal(error_code ec) {
    if (ec || stopped_) {
        return;
    }
    spdlog::warn("second signal: exiting now");
    actions_.stop();
}

void drain_controller::check() {
    if (stopped_) {
        return;
    }
    auto in_flight = in_flight_.load();
    if (in_flight == 0) {
        spdlog::info("drained; exiting");
        actions_.stop();
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline_ && !tunnels_closed_ && actions_.open_tunnels && actions_.close_tunnels) {
        tunnels_closed_ = true;
        if (const auto tunnels = actions_.open_tunnels(); tunnels > 0) {
            spdlog::warn("drain timeout: closing {} WebSocket tunnels (1001 Going Away)", tunnels);
            actions_.close_tunnels();
            deadline_ = now + close_grace;
        }
    }
    if (now >= deadline_) {
        spdlog::warn("drain timeout with {} requests in flight; exiting", in_flight);
        actions_.stop();
        return;
    }
    timer_.expires_after(std::chrono::milliseconds(20));
    timer_.async_wait([this](error_code ec) {
        if (!ec) {
            check();
        }
    });
}

}  // namespace tokenmeter::app
