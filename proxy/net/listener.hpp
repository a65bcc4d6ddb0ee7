// net/listener: one listening socket and its accept loop. Accepting never spins: when the
// process runs out of descriptors or memory it backs off (25 ms doubling to 1 s), and while the
// owner says it is at capacity it waits instead of accepting, leaving the connections queued in
// the kernel's backlog. Failures are counted and logged at most once a second (net/edge).
// Connections are accepted in batches, one wait for readiness and then accept4() until the
// backlog is empty (at most accept_batch in a row), and handed on as bare descriptors: a socket
// joins a reactor once, the one of the context that serves it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "net/beast.hpp"
#include "net/edge.hpp"

namespace tokenmeter::net {

// An accepted connection's descriptor, in no reactor yet: closed unless taken.
class accepted_descriptor {
  public:
    accepted_descriptor(tcp protocol, socket_type::native_handle_type fd) noexcept
        : protocol_(protocol), fd_(fd) {}
    accepted_descriptor(accepted_descriptor&& other) noexcept
        : protocol_(other.protocol_), fd_(std::exchange(other.fd_, -1)) {}
    accepted_descriptor(const accepted_descriptor&) = delete;
    accepted_descriptor& operator=(const accepted_descriptor&) = delete;
    accepted_descriptor& operator=(accepted_descriptor&&) = delete;
    ~accepted_descriptor();

    // The socket, registered with `ioc`'s reactor (call it on a thread running `ioc`); an empty
    // optional, the descriptor closed, if it cannot be.
    std::optional<socket_type> take(asio::io_context& ioc);

  private:
    tcp protocol_;
    socket_type::native_handle_type fd_;
};

class listener {
  public:
    // Chooses the io_context that will own the next connection.
    using pick_context = std::function<asio::io_context&()>;
    // A connection's descriptor and the context pick_context chose for it (called on the
    // listener's own context). The callee takes it on that context's own thread.
    using on_accept = std::function<void(accepted_descriptor, asio::io_context&)>;
    using at_capacity = std::function<bool()>;

    // Binds and listens; throws std::runtime_error naming the listener and the address.
    listener(asio::io_context& ioc, std::string name, const tcp::endpoint& endpoint,
             edge_counters& edge, pick_context pick, on_accept accepted, at_capacity full = {});
    listener(const listener&) = delete;
    listener& operator=(const listener&) = delete;
    listener(listener&&) = delete;
    listener& operator=(listener&&) = delete;
    ~listener() = default;

    void start();
    void stop();
    [[nodiscard]] tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
    [[nodiscard]] bool is_open() const { return acceptor_.is_open(); }

    // Connections accepted in a row before other handlers of the listener's context run.
    static constexpr int accept_batch = 64;

  private:
    void do_accept();
    void on_ready(error_code ec);
    void wait_then_accept(std::chrono::milliseconds delay);

    asio::io_context& ioc_;
    std::string name_;
    tcp::acceptor acceptor_;
    edge_counters& edge_;
    pick_context pick_;
    on_accept accepted_;
    at_capacity full_;
    asio::steady_timer retry_timer_;
    tcp protocol_;
    std::chrono::milliseconds backoff_{0};
    bool stopped_ = false;
};

// Answers a connection the proxy will not serve with 503 and a JSON body, then closes it.
void refuse_connection(socket_type socket, std::string_view code, std::string_view message);

// Raises the soft open-files limit to the hard limit; returns (before, after).
std::pair<std::uint64_t, std::uint64_t> raise_open_files_limit();

}  // namespace tokenmeter::net
