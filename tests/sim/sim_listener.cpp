#include "sim_listener.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <iostream>

#include "sim_session.hpp"

namespace tokenmeter::sim {

sim_listener::sim_listener(net::io_context& io, const tcp::endpoint& endpoint,
                           std::shared_ptr<server_state> state)
    : io_(io),
      acceptor_(net::make_strand(io)),
      retry_timer_(acceptor_.get_executor()),
      state_(std::move(state)) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    // Benchmarks open thousands of connections at once; let the kernel queue them all.
    acceptor_.listen(net::socket_base::max_listen_connections);
}

tcp::endpoint sim_listener::local_endpoint() const {
    return acceptor_.local_endpoint();
}

void sim_listener::run() {
    net::dispatch(acceptor_.get_executor(),
                  beast::bind_front_handler(&sim_listener::do_accept, shared_from_this()));
}

void sim_listener::stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
        beast::error_code ignored;
        self->retry_timer_.cancel();
        self->acceptor_.close(ignored);
    });
}

void sim_listener::do_accept() {
    acceptor_.async_accept(net::make_strand(io_),
                           beast::bind_front_handler(&sim_listener::on_accept, shared_from_this()));
}

void sim_listener::on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) {
        return;
    }
    if (ec) {
        // Typically EMFILE under a connection storm: back off briefly instead of spinning
        // or giving up on accepting for good.
        std::cerr << "tokenmeter-sim: accept: " << ec.message() << '\n';
        retry_timer_.expires_after(std::chrono::milliseconds{50});
        retry_timer_.async_wait(
            beast::bind_front_handler(&sim_listener::on_retry, shared_from_this()));
        return;
    }
    beast::error_code ignored;
    // Every chunk must leave when it is scheduled, not when Nagle decides.
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<sim_session>(std::move(socket), state_)->run();
    do_accept();
}

void sim_listener::on_retry(beast::error_code ec) {
    if (ec || !acceptor_.is_open()) {
        return;
    }
    do_accept();
}

}  // namespace tokenmeter::sim
