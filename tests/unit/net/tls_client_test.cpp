// net/tls_client: the verifying client context (errors name the key) and per-connection SNI.
#include "net/tls_client.hpp"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace tokenmeter::net {
namespace {

std::string temp_file(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
}

struct ssl_deleter {
    void operator()(SSL* s) const { SSL_free(s); }
};

TEST(TlsClient, SystemBundleVerifiesPeersFromTls12) {
    auto loaded = load_tls_client_context({});
    ASSERT_TRUE(loaded.context) << loaded.error;
    SSL_CTX* ctx = loaded.context->native_handle();
    EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
    EXPECT_EQ(SSL_CTX_get_verify_mode(ctx), SSL_VERIFY_PEER);
}

TEST(TlsClient, CaFileErrorsNameTheKey) {
    auto missing = load_tls_client_context({"/nonexistent/ca.pem", "usage.sink.ca_file"});
    EXPECT_FALSE(missing.context);
    EXPECT_EQ(missing.error,
              "usage.sink.ca_file: cannot read /nonexistent/ca.pem: No such file or directory");
    const auto garbage = temp_file("tokenmeter-not-a-ca.pem", "not a certificate\n");
    auto bad = load_tls_client_context({garbage, "usage.sink.ca_file"});
    EXPECT_FALSE(bad.context);
    EXPECT_EQ(bad.error.rfind("usage.sink.ca_file: no PEM CA certificate in " + garbage, 0), 0u)
        << bad.error;
    std::filesystem::remove(garbage);
}

TEST(TlsClient, SniForHostNamesNotForAddresses) {
    auto loaded = load_tls_client_context({});
    ASSERT_TRUE(loaded.context);
    std::unique_ptr<SSL, ssl_deleter> named(SSL_new(loaded.context->native_handle()));
    std::string error;
    ASSERT_TRUE(prepare_tls_client(named.get(), "billing.example", error)) << error;
    ASSERT_NE(SSL_get_servername(named.get(), TLSEXT_NAMETYPE_host_name), nullptr);
    EXPECT_STREQ(SSL_get_servername(named.get(), TLSEXT_NAMETYPE_host_name), "billing.example");
    EXPECT_STREQ(X509_VERIFY_PARAM_get0_host(SSL_get0_param(named.get()), 0), "billing.example");

    std::unique_ptr<SSL, ssl_deleter> address(SSL_new(loaded.context->native_handle()));
    ASSERT_TRUE(prepare_tls_client(address.get(), "127.0.0.1", error)) << error;
    EXPECT_EQ(SSL_get_servername(address.get(), TLSEXT_NAMETYPE_host_name), nullptr);
}

TEST(TlsClient, ClientCertificateErrorsNameTheirKeys) {
    tls_client_options o;
    o.cert_file = "/nonexistent/client.pem";
    o.cert_file_key = "upstream_tls.cert_file";
    o.key_file = "/nonexistent/client.key";
    o.key_file_key = "upstream_tls.key_file";
    auto missing = load_tls_client_context(o);
    EXPECT_FALSE(missing.context);
    EXPECT_EQ(missing.error,
              "upstream_tls.cert_file: cannot read /nonexistent/client.pem: No such "
              "file or directory");
    o.key_file.clear();
    auto alone = load_tls_client_context(o);
    EXPECT_FALSE(alone.context);
    EXPECT_EQ(alone.error, "upstream_tls.key_file: is required with upstream_tls.cert_file");
    const auto garbage = temp_file("tokenmeter-not-a-cert.pem", "not a certificate\n");
    o.cert_file = garbage;
    o.key_file = garbage;
    auto bad = load_tls_client_context(o);
    EXPECT_FALSE(bad.context);
    EXPECT_EQ(bad.error.rfind("upstream_tls.cert_file: no PEM certificate in " + garbage, 0), 0u)
        << bad.error;
    std::filesystem::remove(garbage);
}

TEST(TlsClient, InsecureSkipVerifyIsTheOnlyWayVerificationIsOff) {
    tls_client_options o;
    o.insecure_skip_verify = true;
    auto loaded = load_tls_client_context(o);
    ASSERT_TRUE(loaded.context) << loaded.error;
    EXPECT_EQ(SSL_CTX_get_verify_mode(loaded.context->native_handle()), SSL_VERIFY_NONE);
}

TEST(TlsClient, SessionCacheIsClientSideWithoutOpenSslsStore) {
    auto loaded = load_tls_client_context({});
    ASSERT_TRUE(loaded.context);
    SSL_CTX* ctx = loaded.context->native_handle();
    tls_session_cache::enable(ctx);
    EXPECT_EQ(SSL_CTX_get_session_cache_mode(ctx),
              SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    EXPECT_NE(SSL_CTX_sess_get_new_cb(ctx), nullptr);
    // A connection attached to an empty cache offers no session.
    tls_session_cache cache;
    std::unique_ptr<SSL, ssl_deleter> ssl(SSL_new(ctx));
    cache.attach(ssl.get());
    EXPECT_EQ(SSL_get_session(ssl.get()), nullptr);
}

}  // namespace
}  // namespace tokenmeter::net
