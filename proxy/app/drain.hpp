// app/drain: SIGTERM/SIGINT handling. The first signal starts the drain (stop accepting, fail
// /readyz, close idle connections, let in-flight streams finish within timeouts.drain), then
// stops the process; a second signal stops it at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "net/beast.hpp"

namespace tokenmeter::app {

class drain_controller {
  public:
    struct actions {
        std::function<void()> begin;  // stop accepting, close idle connections
        std::function<void()> stop;   // stop everything; run() then returns
        // At the end of the drain window: how many WebSocket tunnels are open, and closing them
        // with 1001 (Going Away). When some were, the endpoints get close_grace to answer the
        // close frames before the process exits (optional).
        std::function<std::int64_t()> open_tunnels;
        std::function<void()> close_tunnels;
    };
    static constexpr std::chrono::seconds close_grace{2};

    drain_controller(asio::io_context& ioc, std::chrono::milliseconds timeout,
                     std::atomic<bool>& draining, const std::atomic<std::int64_t>& in_flight,
                     actions act);
    drain_controller(const drain_controller&) = delete;
    drain_controller& operator=(const drain_controller&) = delete;
    drain_controller(drain_controller&&) = delete;
    drain_controller& operator=(drain_controller&&) = delete;
    ~drain_controller() = default;

    void start();
    void stop();

  private:
    void on_signal(error_code ec, int signal_number);
    void on_second_signal(error_code ec);
    void check();

    std::chrono::milliseconds timeout_;
    std::atomic<bool>& draining_;
    const std::atomic<std::int64_t>& in_flight_;
    actions actions_;
    asio::signal_set signals_;
    asio::steady_timer timer_;
    std::chrono::steady_clock::time_point deadline_{};
    bool stopped_ = false;
    bool tunnels_closed_ = false;
};

}  // namespace tokenmeter::app
