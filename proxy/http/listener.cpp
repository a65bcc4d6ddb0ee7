#include "http/listener.hpp"

#include <sys/resource.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tokenmeter::http {
namespace {

constexpr std::chrono::milliseconds first_backoff{25};
constexpr std::chrono::milliseconds max_backoff{1000};
constexpr std::chrono::milliseconds capacity_poll{20};

std::string describe(const tcp::endpoint& endpoint) {
    std::ostringstream out;
    out << endpoint;
    return out.str();
}

}  // namespace

listener::listener(asio::io_context& ioc, std::string name, const tcp::endpoint& endpoint,
                   edge_counters& edge, pick_context pick, on_accept accepted, at_capacity full)
    : ioc_(ioc),
      name_(std::move(name)),
      acceptor_(ioc),
      edge_(edge),
      pick_(std::move(pick)),
      accepted_(std::move(accepted)),
      full_(std::move(full)),
      retry_timer_(ioc) {
    error_code ec;
    const char* step = "open";
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) {
        step = "set SO_REUSEADDR on";
        acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
        step = "bind";
        acceptor_.bind(endpoint, ec);
    }
    if (!ec) {
        step = "listen on";
        acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        throw std::runtime_error("cannot " + std::string(step) + " the " + name_ + " address " +
                                 describe(endpoint) + ": " + ec.message());
    }
}

void listener::start() {
    stopped_ = false;
    do_accept();
}

void listener::stop() {
    stopped_ = true;
    error_code ignored;
    retry_timer_.cancel();
    acceptor_.close(ignored);
}

void listener::do_accept() {
    if (stopped_ || !acceptor_.is_open()) {
        return;
    }
    if (full_ && full_()) {
        // At capacity: the kernel keeps queueing (up to the backlog); look again shortly.
        wait_then_accept(capacity_poll);
        return;
    }
    target_ = &pick_();
    // Accepted on the listener's own context: registering the socket with the target's reactor
    // is the target's own thread's job (see on_accept).
    acceptor_.async_accept(ioc_, [this](error_code ec, socket_type socket) {
        on_accepted(ec, std::move(socket));
    });
}

void listener::on_accepted(error_code ec, socket_type socket) {
    if (ec == asio::error::operation_aborted || stopped_ || !acceptor_.is_open()) {
        return;
    }
    if (ec) {
        if (edge_.accept_error(name_, ec.value(), ec.message())) {
            // Out of descriptors or memory: retrying at once would spin. Wait, longer each time.
            backoff_ = backoff_.count() == 0 ? first_backoff : std::min(backoff_ * 2, max_backoff);
            wait_then_accept(backoff_);
            return;
        }
        do_accept();
        return;
    }
    backoff_ = std::chrono::milliseconds(0);
    try {
        accepted_(std::move(socket), *target_);
    } catch (const std::exception& e) {
        edge_.internal_error(e.what());
    }
    do_accept();
}

void listener::wait_then_accept(std::chrono::milliseconds delay) {
    retry_timer_.expires_after(delay);
    retry_timer_.async_wait([this](error_code ec) {
        if (!ec) {
            do_accept();
        }
    });
}

namespace {

class refusal : public std::enable_shared_from_this<refusal> {
  public:
    refusal(socket_type socket, std::string response)
        : stream_(std::move(socket)), response_(std::move(response)) {}

    void start() {
        stream_.expires_after(std::chrono::seconds(5));
        asio::async_write(stream_, asio::buffer(response_),
                          [self = shared_from_this()](error_code, std::size_t) {
                              error_code ignored;
                              self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
                              self->stream_.socket().close(ignored);
                          });
    }

  private:
    tcp_stream stream_;
    std::string response_;
};

}  // namespace

void refuse_connection(socket_type socket, std::string_view code, std::string_view message) {
    const std::string body =
        nlohmann::json{
            {"error", {{"type", "tokenmeter_error"}, {"code", code}, {"message", message}}}}
            .dump();
    std::string response =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    std::make_shared<refusal>(std::move(socket), std::move(response))->start();
}

std::pair<std::uint64_t, std::uint64_t> raise_open_files_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        return {0, 0};
    }
    const std::uint64_t before = limit.rlim_cur;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
            return {before, before};
        }
    }
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return {before, limit.rlim_cur};
}

}  // namespace tokenmeter::http
