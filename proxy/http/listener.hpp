// http/listener: one listening socket and its accept loop. Accepting never spins: when the
// process runs out of descriptors or memory it backs off (25 ms doubling to 1 s), and while the
// owner says it is at capacity it waits instead of accepting, leaving the connections queued in
// the kernel's backlog. Failures are counted and logged at most once a second (http/edge).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "http/beast.hpp"
#include "http/edge.hpp"

namespace tokenmeter::http {

class listener {
  public:
    // Chooses the io_context that will own the next connection.
    using pick_context = std::function<asio::io_context&()>;
    // A connection, its socket still on the listener's own context, and the context
    // pick_context chose for it (called on the listener's own context). The socket is moved
    // there by the callee: a worker registers it with its reactor on its own thread.
    using on_accept = std::function<void(socket_type, asio::io_context&)>;
    using at_capacity = std::function<bool()>;

    // Binds and listens; throws std::runtime_error naming the listener and the address.
    listener(asio::io_context& ioc, std::string name, const tcp::endpoint& endpoint,
             edge_counters& edge, pick_context pick, on_accept accepted, at_capacity full = {});
    listener(const listener&) = delete;
    listener& operator=(const listener&) = delete;

    void start();
    void stop();
    [[nodiscard]] tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
    [[nodiscard]] bool is_open() const { return acceptor_.is_open(); }

  private:
    void do_accept();
    void on_accepted(error_code ec, socket_type socket);
    void wait_then_accept(std::chrono::milliseconds delay);

    asio::io_context& ioc_;
    std::string name_;
    tcp::acceptor acceptor_;
    edge_counters& edge_;
    pick_context pick_;
    on_accept accepted_;
    at_capacity full_;
    asio::steady_timer retry_timer_;
    asio::io_context* target_ = nullptr;
    std::chrono::milliseconds backoff_{0};
    bool stopped_ = false;
};

// Answers a connection the proxy will not serve with 503 and a JSON body, then closes it.
void refuse_connection(socket_type socket, std::string_view code, std::string_view message);

// Raises the soft open-files limit to the hard limit; returns (before, after).
std::pair<std::uint64_t, std::uint64_t> raise_open_files_limit();

}  // namespace tokenmeter::http
