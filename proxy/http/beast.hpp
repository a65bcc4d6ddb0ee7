// http/beast: the one place Boost.Asio and Boost.Beast are pulled in, with the names we use.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tokenmeter::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;

}  // namespace tokenmeter::http
