// tls and forwarded_for (issue 12): loading, and the combinations that can never work, each
// error naming its key. The files themselves are read by app/ at start (integration tests).
#include <gtest/gtest.h>

#include <string>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

TEST(TlsConfig, LoadsEveryKey) {
    auto r = load_yaml(R"(forwarded_for: append
tls:
  cert_file: /etc/tls/tls.crt
  key_file: /etc/tls/tls.key
  client_ca_file: /etc/tls/ca.crt
  client_auth: require
  min_version: "1.3"
  watch_interval: 2s
)");
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    EXPECT_EQ(r.value.forwarded_for, forwarded_for_mode::append);
    const tls_settings& t = r.value.tls;
    EXPECT_TRUE(t.enabled());
    EXPECT_EQ(t.cert_file, "/etc/tls/tls.crt");
    EXPECT_EQ(t.key_file, "/etc/tls/tls.key");
    EXPECT_EQ(t.client_ca_file, "/etc/tls/ca.crt");
    EXPECT_EQ(t.client_auth, tls_client_auth::require);
    EXPECT_EQ(t.min_version, tls_min_version::v1_3);
    EXPECT_EQ(t.watch_interval, std::chrono::seconds(2));
}

TEST(TlsConfig, OffByDefault) {
    const settings s = default_settings();
    EXPECT_FALSE(s.tls.enabled());
    EXPECT_EQ(s.forwarded_for, forwarded_for_mode::keep);
    EXPECT_EQ(s.tls.min_version, tls_min_version::v1_2);
}

TEST(TlsConfig, CertWithoutKeyNamesTheMissingKey) {
    auto r = load_yaml("tls:\n  cert_file: /x.pem\n");
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].key, "tls.key_file");
    auto k = load_yaml("tls:\n  key_file: /x.key\n");
    ASSERT_EQ(k.errors.size(), 1u);
    EXPECT_EQ(k.errors[0].key, "tls.cert_file");
}

TEST(TlsConfig, ClientAuthNeedsACaFile) {
    for (const char* mode : {"optional", "require"}) {
        auto r = load_yaml(std::string("tls:\n  cert_file: /c\n  key_file: /k\n  client_auth: ") +
                           mode + "\n");
        ASSERT_EQ(r.errors.size(), 1u) << mode;
        EXPECT_EQ(r.errors[0].key, "tls.client_ca_file") << mode;
        EXPECT_NE(r.errors[0].message.find(mode), std::string::npos);
    }
}

TEST(TlsConfig, BadWordsNameTheKeyAndTheChoices) {
    auto v = load_yaml("tls:\n  cert_file: /c\n  key_file: /k\n  min_version: \"1.1\"\n");
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.errors[0].key, "tls.min_version");
    EXPECT_NE(v.errors[0].message.find("1.2"), std::string::npos);
    auto a = load_yaml("tls:\n  cert_file: /c\n  key_file: /k\n  client_auth: maybe\n");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.errors[0].key, "tls.client_auth");
    auto f = load_yaml("forwarded_for: trust\n");
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.errors[0].key, "forwarded_for");
    EXPECT_NE(f.errors[0].message.find("append"), std::string::npos);
}

TEST(UpstreamTlsConfig, HttpsUpstreamAndEveryKey) {
    auto r = load_yaml(R"(
upstream: https://api.example.com/openai
upstream_tls:
  ca_file: /etc/ca.pem
  cert_file: /etc/client.pem
  key_file: /etc/client.key
  server_name: model.internal
)");
    ASSERT_TRUE(r.ok()) << to_string(r.errors.at(0));
    EXPECT_EQ(r.value.upstream.scheme, "https");
    EXPECT_EQ(r.value.upstream.port, 443);
    EXPECT_EQ(r.value.upstream.base_path, "/openai");
    const upstream_tls_settings& t = r.value.upstream_tls;
    EXPECT_EQ(t.ca_file, "/etc/ca.pem");
    EXPECT_EQ(t.cert_file, "/etc/client.pem");
    EXPECT_EQ(t.key_file, "/etc/client.key");
    EXPECT_EQ(t.server_name, "model.internal");
    EXPECT_FALSE(t.insecure_skip_verify);
    EXPECT_EQ(default_settings().upstream_tls, upstream_tls_settings{});
}

TEST(UpstreamTlsConfig, ImpossibleCombinationsNameTheKey) {
    auto no_key = load_yaml("upstream: https://m\nupstream_tls:\n  cert_file: /c\n");
    ASSERT_EQ(no_key.errors.size(), 1u);
    EXPECT_EQ(no_key.errors[0].key, "upstream_tls.key_file");
    auto no_cert = load_yaml("upstream: https://m\nupstream_tls:\n  key_file: /k\n");
    ASSERT_EQ(no_cert.errors.size(), 1u);
    EXPECT_EQ(no_cert.errors[0].key, "upstream_tls.cert_file");
    auto both = load_yaml(
        "upstream: https://m\nupstream_tls:\n  ca_file: /ca\n  insecure_skip_verify: true\n");
    ASSERT_EQ(both.errors.size(), 1u);
    EXPECT_EQ(both.errors[0].key, "upstream_tls.ca_file");
    auto scheme = load_yaml("upstream: ftp://m\n");
    ASSERT_FALSE(scheme.ok());
    EXPECT_EQ(scheme.errors[0].key, "upstream");
    auto typo = load_yaml("upstream: https://m\nupstream_tls:\n  insecure_skip_verify: maybe\n");
    ASSERT_FALSE(typo.ok());
    EXPECT_EQ(typo.errors[0].key, "upstream_tls.insecure_skip_verify");
}

}  // namespace
}  // namespace tokenmeter::config
