// net/tls_stream: the TLS client stream (Beast's ssl_stream over the same TCP stream as plain
// connections), apart from net/beast.hpp so that only the files that instantiate TLS sessions
// pay for the OpenSSL headers.
#pragma once

#include <boost/beast/ssl.hpp>
#include <string>
#include <string_view>
#include <type_traits>

#include "net/beast.hpp"

namespace tokenmeter {
namespace ssl = boost::asio::ssl;
}  // namespace tokenmeter

namespace tokenmeter::net {

using tls_stream = beast::ssl_stream<tcp_stream>;

template <class Stream>
inline constexpr bool is_tls_stream = std::is_same_v<Stream, tls_stream>;

// The oldest error OpenSSL queued on this thread, in words; clears the queue.
std::string take_openssl_error();

// A failed server handshake's reason, for tokenmeter_tls_handshake_errors_total: one of
// protocol_version, no_shared_cipher, no_client_certificate, bad_client_certificate,
// no_application_protocol, plaintext_http, timeout, closed, other.
std::string_view classify_handshake_error(const error_code& ec);

// What a client that speaks plain HTTP to a TLS port (a handshake failed as "plaintext_http") is
// sent, in plain HTTP on the TCP socket, before the connection closes: a 400 with the JSON error
// body, as nginx answers, rather than a closed connection it cannot explain.
std::string_view plain_http_on_tls_port_answer();

}  // namespace tokenmeter::net
