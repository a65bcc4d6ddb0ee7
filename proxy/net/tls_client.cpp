#include "net/tls_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <array>
#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "net/tls_stream.hpp"

namespace tokenmeter::net {
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
    static constexpr std::array<unsigned char, 9> alpn = {8,   'h', 't', 't', 'p',
                                                          '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(ctx, alpn.data(), alpn.size());  // 0 on success
    if (o.ca_file.empty()) {
        if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            result.error = o.ca_file_key + ": the system CA bundle did not load (" +
                           take_openssl_error() + "); set it to a PEM CA file";
            return result;
        }
    } else {
        std::FILE* f = std::fopen(o.ca_file.c_str(), "rb");
        if (f == nullptr) {
            result.error = o.ca_file_key + ": cannot read " + o.ca_file + ": " +
                           std::generic_category().message(errno);
            return result;
        }
        std::fclose(f);
        if (SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
            result.error = o.ca_file_key + ": no PEM CA certificate in " + o.ca_file + ": " +
                           take_openssl_error();
            return result;
        }
    }
    if (o.cert_file.empty() != o.key_file.empty()) {
        result.error = (o.cert_file.empty() ? o.cert_file_key : o.key_file_key) +
                       ": is required with " +
                       (o.cert_file.empty() ? o.key_file_key : o.cert_file_key);
        return result;
    }
    if (!o.cert_file.empty()) {
        for (const auto* f : {&o.cert_file, &o.key_file}) {
            std::FILE* file = std::fopen(f->c_str(), "rb");
            if (file == nullptr) {
                result.error = (f == &o.cert_file ? o.cert_file_key : o.key_file_key) +
                               ": cannot read " + *f + ": " +
                               std::generic_category().message(errno);
                return result;
            }
            std::fclose(file);
        }
        if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
            result.error = o.cert_file_key + ": no PEM certificate in " + o.cert_file + ": " +
                           take_openssl_error();
            return result;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
            const std::string why = take_openssl_error();
            result.error = o.key_file_key + ": " +
                           (why.find("mismatch") != std::string::npos
                                ? o.key_file + " is not the key of " + o.cert_file_key
                                : "no PEM private key in " + o.key_file) +
                           ": " + why;
            return result;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            result.error = o.key_file_key + ": " + o.key_file + " is not the key of " +
                           o.cert_file_key + " (" + take_openssl_error() + ")";
            return result;
        }
    }
    SSL_CTX_set_verify(ctx, o.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
    result.context = std::move(context);
    return result;
}

namespace {

// Where a connection's SSL finds the cache it reports new sessions to.
int cache_index() {
    static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

}  // namespace

tls_session_cache::~tls_session_cache() {
    forget();
}

void tls_session_cache::enable(SSL_CTX* ctx) {
    // Client mode without OpenSSL's own store: the callback hands each session to the cache of
    // the connection's thread.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, &tls_session_cache::on_new_session);
}

void tls_session_cache::attach(SSL* ssl) {
    if (!sessions_.empty()) {
        SSL_SESSION* newest = sessions_.back();
        SSL_set_session(ssl, newest);  // takes its own reference
        if (SSL_SESSION_get_protocol_version(newest) >= TLS1_3_VERSION) {
            sessions_.pop_back();
            SSL_SESSION_free(newest);
        }
    }
    SSL_set_ex_data(ssl, cache_index(), this);
}

void tls_session_cache::forget() {
    for (SSL_SESSION* session : sessions_) {
        SSL_SESSION_free(session);
    }
    sessions_.clear();
}

int tls_session_cache::on_new_session(SSL* ssl, SSL_SESSION* session) {
    auto* cache = static_cast<tls_session_cache*>(SSL_get_ex_data(ssl, cache_index()));
    if (cache == nullptr || SSL_SESSION_is_resumable(session) != 1) {
        return 0;  // not kept: OpenSSL frees it
    }
    if (SSL_SESSION_get_protocol_version(session) < TLS1_3_VERSION) {
        cache->forget();  // a TLS 1.2 session replaces the others: it can be offered again
    } else if (cache->sessions_.size() >= max_sessions) {
        SSL_SESSION_free(cache->sessions_.front());
        cache->sessions_.erase(cache->sessions_.begin());
    }
    cache->sessions_.push_back(session);  // returning 1 keeps OpenSSL's reference for us
    return 1;
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
    // SSL_set_tlsext_host_name without its C cast; OpenSSL copies the name (its parameter is not
    // const, hence the copy).
    std::string sni = host;
    if (SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, sni.data()) != 1 ||
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

}  // namespace tokenmeter::net
