#include "http_get.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tokenmeter::load {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

http_get_result http_get(const loopback_url& url, std::chrono::milliseconds timeout) {
    http_get_result result;
    if (url.tls) {
        result.error = "https:// is not supported here; scrape the plain admin listener";
        return result;
    }
    asio::io_context ioc{1};
    beast::tcp_stream stream(ioc);
    beast::error_code ec;
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address(url.address, ec), url.port);
    if (ec) {
        result.error = "bad address: " + ec.message();
        return result;
    }
    // Blocking operations on tcp_stream ignore expires_after, so run the async ones to a deadline.
    http::request<http::empty_body> request{http::verb::get, url.path, 11};
    request.set(http::field::host, url.host_header);
    request.set(http::field::user_agent, "tokenmeter-load");
    request.set(http::field::connection, "close");
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);

    stream.expires_after(timeout);
    stream.async_connect(endpoint, [&](beast::error_code connect_ec) {
        if (connect_ec) {
            result.error = "connect: " + connect_ec.message();
            return;
        }
        http::async_write(stream, request, [&](beast::error_code write_ec, std::size_t) {
            if (write_ec) {
                result.error = "write: " + write_ec.message();
                return;
            }
            http::async_read(stream, buffer, parser, [&](beast::error_code read_ec, std::size_t) {
                if (read_ec) {
                    result.error = "read: " + read_ec.message();
                    return;
                }
                result.status = parser.get().result_int();
                result.body = std::move(parser.get().body());
            });
        });
    });
    ioc.run();
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    return result;
}

}  // namespace tokenmeter::load
