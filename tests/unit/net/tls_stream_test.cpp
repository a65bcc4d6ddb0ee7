// net::classify_handshake_error: every reason it gives is one of the reasons whose series
// tokenmeter_tls_handshake_errors_total starts at 0 (metrics::handshake_error_reasons), so a
// first failure of any kind shows in rate() and increase().
#include "net/tls_stream.hpp"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <set>
#include <string>

#include "metrics/tls.hpp"

namespace tokenmeter::net {
namespace {

error_code ssl_reason(int reason) {
    return {static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, reason)), asio::error::get_ssl_category()};
}

TEST(TlsStream, EveryHandshakeErrorReasonStartsAtZero) {
    const error_code cases[] = {
        beast::error::timeout,
        asio::error::eof,
        asio::error::connection_reset,
        asio::error::broken_pipe,
        ssl::error::stream_truncated,
        asio::error::operation_aborted,
        ssl_reason(SSL_R_UNSUPPORTED_PROTOCOL),
        ssl_reason(SSL_R_WRONG_VERSION_NUMBER),
        ssl_reason(SSL_R_VERSION_TOO_LOW),
        ssl_reason(SSL_R_NO_SHARED_CIPHER),
        ssl_reason(SSL_R_NO_SUITABLE_KEY_SHARE),
        ssl_reason(SSL_R_NO_SHARED_GROUPS),
        ssl_reason(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE),
        ssl_reason(SSL_R_CERTIFICATE_VERIFY_FAILED),
        ssl_reason(SSL_R_NO_APPLICATION_PROTOCOL),
        ssl_reason(SSL_R_HTTP_REQUEST),
        ssl_reason(SSL_R_BAD_PACKET_LENGTH),
    };
    std::set<std::string> seen;
    for (const error_code& ec : cases) {
        const std::string_view reason = classify_handshake_error(ec);
        EXPECT_NE(std::find(metrics::handshake_error_reasons.begin(),
                            metrics::handshake_error_reasons.end(), reason),
                  metrics::handshake_error_reasons.end())
            << ec.message() << " -> " << reason;
        seen.emplace(reason);
    }
    EXPECT_EQ(seen.size(), metrics::handshake_error_reasons.size())
        << "each listed reason is one classify gives";
}

}  // namespace
}  // namespace tokenmeter::net
