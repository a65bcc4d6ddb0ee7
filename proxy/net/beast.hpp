// net/beast: the one place Boost.Asio and Boost.Beast are pulled in, with the names we use.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "net/beast_http.hpp"

namespace tokenmeter {

namespace asio = boost::asio;
using tcp = boost::asio::ip::tcp;

// Every connection lives on one worker's io_context, so streams and sockets name that executor
// type directly: the default any_io_executor is type-erased and costs a copy per operation.
using executor = asio::io_context::executor_type;
using socket_type = asio::basic_stream_socket<tcp, executor>;
using tcp_stream = beast::basic_stream<tcp, executor, beast::unlimited_rate_policy>;
using resolver = asio::ip::basic_resolver<tcp, executor>;
using steady_timer =
    asio::basic_waitable_timer<std::chrono::steady_clock,
                               asio::wait_traits<std::chrono::steady_clock>, executor>;

}  // namespace tokenmeter
