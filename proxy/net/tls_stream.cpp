#include "net/tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "net/error_body.hpp"

namespace tokenmeter::net {

std::string take_openssl_error() {
    const unsigned long code = ERR_peek_error();
    std::string out;
    if (code != 0) {
        const char* reason = ERR_reason_error_string(code);
        out = reason != nullptr ? reason : "OpenSSL error " + std::to_string(code);
    }
    ERR_clear_error();
    return out.empty() ? "unknown OpenSSL error" : out;
}

std::string_view classify_handshake_error(const error_code& ec) {
    if (ec == beast::error::timeout) {
        return "timeout";
    }
    if (ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == ssl::error::stream_truncated || ec == asio::error::broken_pipe) {
        return "closed";
    }
    if (ec.category() != asio::error::get_ssl_category()) {
        return "other";
    }
    switch (ERR_GET_REASON(static_cast<unsigned long>(ec.value()))) {
        case SSL_R_UNSUPPORTED_PROTOCOL:
        case SSL_R_WRONG_VERSION_NUMBER:
        case SSL_R_VERSION_TOO_LOW:
            return "protocol_version";
        case SSL_R_NO_SHARED_CIPHER:
        case SSL_R_NO_SUITABLE_KEY_SHARE:
        case SSL_R_NO_SHARED_GROUPS:
            return "no_shared_cipher";
        case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
            return "no_client_certificate";
        case SSL_R_CERTIFICATE_VERIFY_FAILED:
            return "bad_client_certificate";
        case SSL_R_NO_APPLICATION_PROTOCOL:
            return "no_application_protocol";
        case SSL_R_HTTP_REQUEST:
            return "plaintext_http";
        default:
            return "other";
    }
}

std::string_view plain_http_on_tls_port_answer() {
    static const std::string answer = [] {
        const std::string body =
            error_body("plain_http_on_tls_port", "this port speaks TLS; connect with https://") +
            "\n";
        return "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
               "connection: close\r\ncontent-length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
    }();
    return answer;
}

}  // namespace tokenmeter::net
