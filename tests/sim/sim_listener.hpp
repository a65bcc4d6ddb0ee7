#pragma once

// Accepts connections and hands each to a sim_session on its own strand.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <memory>

#include "sim_server.hpp"

namespace tokenmeter::sim {

class sim_listener : public std::enable_shared_from_this<sim_listener> {
  public:
    // Binds and listens at once, so a bad address fails at start-up with an exception.
    sim_listener(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint,
                 std::shared_ptr<server_state> state);

    boost::asio::ip::tcp::endpoint local_endpoint() const;
    void run();
    void stop();

  private:
    void do_accept();
    void on_accept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);
    void on_retry(boost::beast::error_code ec);

    boost::asio::io_context& io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_timer_;
    std::shared_ptr<server_state> state_;
};

}  // namespace tokenmeter::sim
