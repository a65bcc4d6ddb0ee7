#include "http/tls_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "http/tls_stream.hpp"

namespace tokenmeter::http {
namespace {

bool is_ip_address(const std::string& host) {
    error_code ec;
    (void)boost::asio::ip::make_address(host, ec);
    return !ec;
}

}  // namespace

tls_client_load_result load_tls_client_context(const tls_client_options& o) {
    tls_client_load_result result;
    ERR_clear_error();
    auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
    SSL_CTX* ctx = context->native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    static constexpr unsigned char alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn);  // 0 on success
    if (o.ca_file.empty()) {
        if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            result.error = o.ca_file_key + ": the system CA bundle did not load (" +
                           take_openssl_error() + "); set it to a PEM CA file";
            return result;
        }
    } else {
        std::FILE* f = std::fopen(o.ca_file.c_str(), "rb");
        if (f == nullptr) {
            result.error =
                o.ca_file_key + ": cannot read " + o.ca_file + ": " + std::strerror(errno);
            return result;
        }
        std::fclose(f);
        if (SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
            result.error = o.ca_file_key + ": no PEM CA certificate in " + o.ca_file + ": " +
                           take_openssl_error();
            return result;
        }
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    result.context = std::move(context);
    return result;
}

bool prepare_tls_client(SSL* ssl, const std::string& host, std::string& error) {
    ERR_clear_error();
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (is_ip_address(host)) {
        // No SNI for an address; the certificate must name it as an IP subjectAltName.
        if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
            error = "cannot verify against address " + host + ": " + take_openssl_error();
            return false;
        }
        return true;
    }
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    // SSL_set_tlsext_host_name without its C cast.
    if (SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(host.c_str())) != 1 ||
        X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) != 1) {
        error = "cannot use host name " + host + " for TLS: " + take_openssl_error();
        return false;
    }
    return true;
}

std::string describe_tls_client_error(const error_code& ec, SSL* ssl) {
    std::string out = ec.message();
    if (ssl != nullptr) {
        const long verdict = SSL_get_verify_result(ssl);
        if (verdict != X509_V_OK) {
            out += ": ";
            out += X509_verify_cert_error_string(verdict);
        }
    }
    return out;
}

}  // namespace tokenmeter::http
