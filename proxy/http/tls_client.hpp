// http/tls_client: the proxy's outgoing TLS (the usage sink now, https upstreams next). Builds a
// verifying OpenSSL client context (TLS 1.2 minimum, ALPN http/1.1, the system CA bundle or a
// PEM CA file) and prepares each connection: SNI set to the host, the certificate checked
// against the host name (or IP address). Verification is never off.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "http/beast.hpp"

namespace tokenmeter::http {

struct tls_client_options {
    std::string ca_file;  // PEM CAs trusted instead of the system bundle; "" = system bundle
    // The config key ca_file came from ("usage.sink.ca_file"): errors name it.
    std::string ca_file_key = "ca_file";
};

// A context, or the reason it could not be built ("usage.sink.ca_file: cannot read /x: ...").
struct tls_client_load_result {
    std::shared_ptr<boost::asio::ssl::context> context;
    std::string error;
};

tls_client_load_result load_tls_client_context(const tls_client_options& options);

// Sets SNI (host names only, as RFC 6066 asks) and the name the peer's certificate must carry
// on a connection made from a load_tls_client_context context. False with `error` set when
// OpenSSL refuses (an unusable host name).
bool prepare_tls_client(SSL* ssl, const std::string& host, std::string& error);

// A failed client handshake or TLS read in words, with the certificate verdict when that was
// the cause ("certificate verify failed: Hostname mismatch").
std::string describe_tls_client_error(const error_code& ec, SSL* ssl);

}  // namespace tokenmeter::http
