#include "net/listener.hpp"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tokenmeter::net {
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

accepted_descriptor::~accepted_descriptor() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

std::optional<socket_type> accepted_descriptor::take(asio::io_context& ioc) {
    socket_type socket(ioc);
    error_code ec;
    socket.assign(protocol_, fd_, ec);
    if (ec) {
        return std::nullopt;  // fd_ is closed with this object
    }
    fd_ = -1;
    return socket;
}

listener::listener(asio::io_context& ioc, std::string name, const tcp::endpoint& endpoint,
                   edge_counters& edge, pick_context pick, on_accept accepted, at_capacity full)
    : ioc_(ioc),
      name_(std::move(name)),
      acceptor_(ioc),
      edge_(edge),
      pick_(std::move(pick)),
      accepted_(std::move(accepted)),
      full_(std::move(full)),
      retry_timer_(ioc),
      protocol_(endpoint.protocol()) {
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
    if (!ec) {
        // accept4() is called only after a readiness wait, but another process sharing the
        // socket, or a connection reset in the backlog, can leave nothing to take: never block.
        step = "make non-blocking";
        acceptor_.non_blocking(true, ec);
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
    acceptor_.async_wait(tcp::acceptor::wait_read, [this](error_code ec) { on_ready(ec); });
}

void listener::on_ready(error_code ec) {
    if (ec == asio::error::operation_aborted || stopped_ || !acceptor_.is_open()) {
        return;
    }
    if (ec) {
        edge_.accept_error(name_, ec.value(), ec.message());
        wait_then_accept(first_backoff);
        return;
    }
    for (int taken = 0; taken < accept_batch; ++taken) {
        if (full_ && full_()) {
            // At capacity: the kernel keeps queueing (up to the backlog); look again shortly.
            wait_then_accept(capacity_poll);
            return;
        }
        const int fd =
            ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            const int error = errno;
            if (error == EAGAIN || error == EWOULDBLOCK) {
                do_accept();  // the backlog is empty: wait for the next connection
                return;
            }
            if (error == EINTR || error == ECONNABORTED || error == EPROTO) {
                continue;  // a connection reset while in the backlog (Asio skipped these too)
            }
            if (edge_.accept_error(name_, error, std::system_category().message(error))) {
                // Out of descriptors or memory: retrying at once would spin. Wait, longer each
                // time.
                backoff_ =
                    backoff_.count() == 0 ? first_backoff : std::min(backoff_ * 2, max_backoff);
                wait_then_accept(backoff_);
                return;
            }
            continue;  // that connection failed (reset in the backlog, say); the next may not
        }
        backoff_ = std::chrono::milliseconds(0);
        accepted_descriptor connection(protocol_, fd);
        try {
            accepted_(std::move(connection), pick_());
        } catch (const std::exception& e) {
            edge_.internal_error(e.what());
        }
    }
    // A full batch: let the context's other handlers run, then go on.
    asio::post(ioc_, [this] { on_ready({}); });
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

}  // namespace tokenmeter::net
