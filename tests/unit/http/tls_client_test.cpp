// http/tls_client: the verifying client context (errors name the key) and per-connection SNI.
#include "http/tls_client.hpp"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace tokenmeter::http {
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

}  // namespace
}  // namespace tokenmeter::http
