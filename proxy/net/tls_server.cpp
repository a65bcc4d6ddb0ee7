#include "net/tls_server.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509err.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "net/tls_stream.hpp"

namespace tokenmeter::net {
namespace {

// Mozilla's "intermediate" server profile (TLS 1.2 suites: forward secrecy and AEAD only; the
// TLS 1.3 suites are OpenSSL's defaults, all AEAD).
constexpr const char* tls12_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char* tls13_suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* groups = "X25519:P-256:P-384";
// The session ID context: resumed sessions must come from this proxy (required with client
// certificates, or OpenSSL refuses to resume).
constexpr std::array<unsigned char, 10> session_context = {'t', 'o', 'k', 'e', 'n',
                                                           'm', 'e', 't', 'e', 'r'};

// A readable error for a file that cannot be opened, before OpenSSL's vaguer one.
std::string unreadable(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        return "cannot read " + path + ": " + std::generic_category().message(errno);
    }
    std::fclose(f);
    return {};
}

// Only http/1.1 is spoken. A client that offers ALPN without it (h2 alone) gets a
// no_application_protocol alert: a clean failure instead of HTTP/1.1 bytes it cannot read.
int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_len,
                const unsigned char* in, unsigned int in_len, void* /*arg*/) {
    static constexpr std::array<unsigned char, 9> ours = {8,   'h', 't', 't', 'p',
                                                          '/', '1', '.', '1'};
    unsigned char* chosen = nullptr;
    unsigned char chosen_len = 0;
    if (SSL_select_next_proto(&chosen, &chosen_len, ours.data(), ours.size(), in, in_len) !=
        OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = chosen;
    *out_len = chosen_len;
    return SSL_TLSEXT_ERR_OK;
}

std::int64_t not_after_of(SSL_CTX* ctx) {
    X509* leaf = SSL_CTX_get0_certificate(ctx);
    if (leaf == nullptr) {
        return 0;
    }
    std::tm tm{};
    if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) != 1) {
        return 0;
    }
    return static_cast<std::int64_t>(timegm(&tm));
}

std::string key_name(const tls_server_options& o, const char* key) {
    return o.key_prefix + "." + key;
}

}  // namespace

tls_load_result load_tls_server_context(const tls_server_options& o) {
    tls_load_result result;
    auto fail = [&](const char* key, std::string why) {
        result.context.reset();
        result.error = key_name(o, key) + ": " + std::move(why);
        return result;
    };
    if (o.cert_file.empty()) {
        return fail("cert_file", "is required when TLS is on");
    }
    if (o.key_file.empty()) {
        return fail("key_file", "is required when TLS is on");
    }
    ERR_clear_error();
    auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
    SSL_CTX* ctx = context->native_handle();
    SSL_CTX_set_min_proto_version(
        ctx, o.min_version == tls_version::v1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    // An idle connection (a stream between chunks) gives its record buffers back.
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(ctx, tls12_ciphers) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, tls13_suites) != 1 ||
        SSL_CTX_set1_groups_list(ctx, groups) != 1) {
        return fail("min_version", "this OpenSSL lacks the intermediate profile's ciphers: " +
                                       take_openssl_error());
    }
    if (auto e = unreadable(o.cert_file); !e.empty()) {
        return fail("cert_file", e);
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
        return fail("cert_file",
                    "not a PEM certificate chain (" + o.cert_file + "): " + take_openssl_error());
    }
    if (auto e = unreadable(o.key_file); !e.empty()) {
        return fail("key_file", e);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        // OpenSSL compares the key with the certificate as it takes it.
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            return fail("key_file",
                        "does not match the certificate in " + key_name(o, "cert_file"));
        }
        return fail("key_file",
                    "not a PEM private key (" + o.key_file + "): " + take_openssl_error());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        return fail("key_file", "does not match the certificate in " + key_name(o, "cert_file"));
    }
    if (!o.client_ca_file.empty()) {
        if (auto e = unreadable(o.client_ca_file); !e.empty()) {
            return fail("client_ca_file", e);
        }
        STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str());
        if (names == nullptr ||
            SSL_CTX_load_verify_locations(ctx, o.client_ca_file.c_str(), nullptr) != 1) {
            if (names != nullptr) {
                sk_X509_NAME_pop_free(names, X509_NAME_free);
            }
            return fail("client_ca_file", "no PEM CA certificate in " + o.client_ca_file + ": " +
                                              take_openssl_error());
        }
        SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
    }
    switch (o.clients) {
        case client_auth::none:
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
            break;
        case client_auth::optional:
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
            break;
        case client_auth::require:
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
            break;
    }
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, nullptr);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_set_session_id_context(ctx, session_context.data(), session_context.size());
    result.not_after_unix = not_after_of(ctx);
    result.context = std::move(context);
    return result;
}

tls_files_stamp stamp_tls_files(const tls_server_options& o) {
    tls_files_stamp stamp;
    for (const std::string* path : {&o.cert_file, &o.key_file, &o.client_ca_file}) {
        struct stat st {};
        if (path->empty() || ::stat(path->c_str(), &st) != 0) {
            stamp.text += "-;";
            continue;
        }
        stamp.text += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
                      std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                      std::to_string(st.st_mtim.tv_nsec) + ";";
    }
    return stamp;
}

tls_server::tls_server(tls_server_options options) : options_(std::move(options)) {
    stamp_ = stamp_tls_files(options_);
    auto loaded = load_tls_server_context(options_);
    if (!loaded.context) {
        throw std::runtime_error(loaded.error);
    }
    context_.store(std::move(loaded.context));
    not_after_.store(loaded.not_after_unix);
}

std::string tls_server::reload() {
    stamp_ = stamp_tls_files(options_);
    auto loaded = load_tls_server_context(options_);
    if (!loaded.context) {
        return loaded.error;
    }
    context_.store(std::move(loaded.context));
    not_after_.store(loaded.not_after_unix);
    return {};
}

std::optional<std::string> tls_server::reload_if_changed() {
    if (stamp_tls_files(options_) == stamp_) {
        return std::nullopt;
    }
    return reload();
}

}  // namespace tokenmeter::net
