// net/beast_http: Beast's HTTP messages, fields and parser, without Asio's sockets and event
// loop, for the headers that only describe messages (request and response plans, header rules,
// local answers). A translation unit that does I/O includes net/beast.hpp.
#pragma once

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>

namespace tokenmeter {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using error_code = boost::system::error_code;

}  // namespace tokenmeter
