// tls, admin_tls and forwarded_for: loading, and the combinations that can never
// work, each error naming its key. The files themselves are read by app/ at start (integration
// tests).
#include <gtest/gtest.h>

#include <string>

#include "config/config.hpp"

namespace tokenmeter::config {
namespace {

TEST(TlsConfig, OffByDefault) {
    const settings s = default_settings();
    EXPECT_FALSE(s.tls.enabled());
    EXPECT_EQ(s.forwarded_for, forwarded_for_mode::keep);
    EXPECT_EQ(s.tls.min_version, tls_min_version::v1_2);
}

// tls and admin_tls take the same keys under the same rules; every error names its own section.
class TlsSections : public testing::TestWithParam<std::string> {
  protected:
    // The YAML of the section under test with `body` (indented keys) inside.
    [[nodiscard]] std::string section(const std::string& body) const {
        return GetParam() + ":\n" + body;
    }
    [[nodiscard]] std::string key(const std::string& name) const { return GetParam() + "." + name; }
};

TEST_P(TlsSections, LoadsEveryKeyAndLeavesTheOtherSectionOff) {
    auto r = load_yaml(section(R"(  cert_file: /etc/tls/tls.crt
  key_file: /etc/tls/tls.key
  client_ca_file: /etc/tls/ca.crt
  client_auth: require
  min_version: "1.3"
  watch_interval: 2s
)"));
    ASSERT_TRUE(r.ok()) << to_string(r.errors.front());
    const bool proxy = GetParam() == "tls";
    const tls_settings& t = proxy ? r.value.tls : r.value.admin_tls;
    EXPECT_TRUE(t.enabled());
    EXPECT_EQ(t.cert_file, "/etc/tls/tls.crt");
    EXPECT_EQ(t.key_file, "/etc/tls/tls.key");
    EXPECT_EQ(t.client_ca_file, "/etc/tls/ca.crt");
    EXPECT_EQ(t.client_auth, tls_client_auth::require);
    EXPECT_EQ(t.min_version, tls_min_version::v1_3);
    EXPECT_EQ(t.watch_interval, std::chrono::seconds(2));
    const tls_settings& other = proxy ? r.value.admin_tls : r.value.tls;
    EXPECT_FALSE(other.enabled()) << "one section does not turn on the other listener's TLS";
    EXPECT_EQ(other, tls_settings{});
}

TEST_P(TlsSections, CertWithoutKeyNamesTheMissingKey) {
    auto r = load_yaml(section("  cert_file: /x.pem\n"));
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].key, key("key_file"));
    auto k = load_yaml(section("  key_file: /x.key\n"));
    ASSERT_EQ(k.errors.size(), 1u);
    EXPECT_EQ(k.errors[0].key, key("cert_file"));
}

TEST_P(TlsSections, ClientAuthNeedsACaFile) {
    for (const char* mode : {"optional", "require"}) {
        auto r = load_yaml(
            section(std::string("  cert_file: /c\n  key_file: /k\n  client_auth: ") + mode + "\n"));
        ASSERT_EQ(r.errors.size(), 1u) << mode;
        EXPECT_EQ(r.errors[0].key, key("client_ca_file")) << mode;
        EXPECT_NE(r.errors[0].message.find(mode), std::string::npos);
    }
}

TEST_P(TlsSections, BadWordsNameTheKeyAndTheChoices) {
    auto v = load_yaml(section("  cert_file: /c\n  key_file: /k\n  min_version: \"1.1\"\n"));
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.errors[0].key, key("min_version"));
    EXPECT_NE(v.errors[0].message.find("1.2"), std::string::npos);
    auto a = load_yaml(section("  cert_file: /c\n  key_file: /k\n  client_auth: maybe\n"));
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.errors[0].key, key("client_auth"));
    auto w = load_yaml(section("  cert_file: /c\n  key_file: /k\n  watch_interval: -1s\n"));
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.errors[0].key, key("watch_interval"));
    auto typo = load_yaml(section("  cert_fil: /c\n"));
    ASSERT_FALSE(typo.ok());
    EXPECT_EQ(typo.errors[0].key, key("cert_fil"));
}

INSTANTIATE_TEST_SUITE_P(ProxyAndAdmin, TlsSections, testing::Values("tls", "admin_tls"));

TEST(TlsConfig, ForwardedForLoadsAndNamesItsChoices) {
    auto append = load_yaml("forwarded_for: append\n");
    ASSERT_TRUE(append.ok()) << to_string(append.errors.front());
    EXPECT_EQ(append.value.forwarded_for, forwarded_for_mode::append);
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

// admin_tls: a section of its own, apart from tls.
TEST(AdminTlsConfig, OffByDefaultAndNotTurnedOnByTls) {
    const settings s = default_settings();
    EXPECT_FALSE(s.admin_tls.enabled());
    EXPECT_EQ(s.admin_tls, tls_settings{});
    auto only_proxy = load_yaml("tls:\n  cert_file: /c\n  key_file: /k\n");
    ASSERT_TRUE(only_proxy.ok()) << to_string(only_proxy.errors.front());
    EXPECT_FALSE(only_proxy.value.admin_tls.enabled());
}

// Both sections wrong at once: each error under its own section.
TEST(AdminTlsConfig, BothSectionsAreCheckedApart) {
    auto r = load_yaml("tls:\n  cert_file: /c\nadmin_tls:\n  key_file: /k\n");
    ASSERT_EQ(r.errors.size(), 2u);
    EXPECT_EQ(r.errors[0].key, "tls.key_file");
    EXPECT_EQ(r.errors[1].key, "admin_tls.cert_file");
}

}  // namespace
}  // namespace tokenmeter::config
