#include "app/config_files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <system_error>

#include "app/http_settings.hpp"
#include "app/module_options.hpp"
#include "app/start_up.hpp"
#include "app/tls_watch.hpp"
#include "net/tls_client.hpp"
#include "net/tls_server.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::app {
namespace {

class collector {
  public:
    explicit collector(std::vector<config::config_error>& out) : out_(out) {}

    // True when `path` (named by `key`) opens for reading; else one error for it.
    bool readable(const std::string& key, const std::string& path) {
        if (path.empty()) {
            return true;
        }
        const std::ifstream file(path);
        if (file) {
            return true;
        }
        out_.push_back(
            {key, "cannot read " + path + ": " + std::generic_category().message(errno)});
        return false;
    }

    // A loader's error already names its key ("tls.key_file: ..."): kept as one message.
    void loader_error(const std::string& error) {
        if (!error.empty()) {
            out_.push_back({"", error});
        }
    }

    // A secret by environment variable or file, as start-up reads it.
    void secret(const std::string& env_key, const std::string& env_name,
                const std::string& file_key, const std::string& file_path) {
        try {
            (void)configured_secret(env_key, env_name, file_key, file_path);
        } catch (const std::exception& e) {
            out_.push_back({"", e.what()});
        }
    }

  private:
    std::vector<config::config_error>& out_;
};

void check_listener_tls(collector& c, const config::tls_settings& tls, const std::string& prefix) {
    if (!tls.enabled()) {
        return;
    }
    // Each missing file on its own line first; only when all open does the full load (PEM, the
    // key matching the certificate, the client CAs) have something to say.
    const bool cert = c.readable(prefix + ".cert_file", tls.cert_file);
    const bool key = c.readable(prefix + ".key_file", tls.key_file);
    const bool cas = c.readable(prefix + ".client_ca_file", tls.client_ca_file);
    if (cert && key && cas) {
        c.loader_error(net::load_tls_server_context(tls_options_from(tls, prefix)).error);
    }
}

}  // namespace

std::vector<config::config_error> referenced_file_errors(const config::settings& s) {
    std::vector<config::config_error> out;
    collector c(out);
    check_listener_tls(c, s.tls, "tls");
    check_listener_tls(c, s.admin_tls, "admin_tls");
    if (!s.admin_auth.token_file.empty()) {
        c.secret("", "", "admin_auth.token_file", s.admin_auth.token_file);
    }
    if (s.upstream.scheme == "https") {
        const auto& t = s.upstream_tls;
        const bool ca = c.readable("upstream_tls.ca_file", t.ca_file);
        const bool cert = c.readable("upstream_tls.cert_file", t.cert_file);
        const bool key = c.readable("upstream_tls.key_file", t.key_file);
        if (ca && cert && key) {
            c.loader_error(net::load_tls_client_context(upstream_tls_options(t)).error);
        }
    }
    const auto& sink = s.usage.sink;
    if (!sink.url.empty()) {
        if (!sink.ca_file.empty() && c.readable("usage.sink.ca_file", sink.ca_file)) {
            c.loader_error(
                net::load_tls_client_context({sink.ca_file, "usage.sink.ca_file"}).error);
        }
        c.secret("usage.sink.token_env", sink.token_env, "usage.sink.token_file", sink.token_file);
    }
    if (s.tenants.source == config::tenant_source::api_key) {
        std::string error;
        (void)usage::load_tenant_secret(tenant_options(s), error);
        c.loader_error(error);
    }
    const auto& redis = s.tenants.shared_limits.redis;
    c.secret("tenants.shared_limits.redis.password_env", redis.password_env,
             "tenants.shared_limits.redis.password_file", redis.password_file);
    return out;
}

config::settings redacted(config::settings s) {
    std::map<std::string, std::string> names;
    std::size_t n = 0;
    for (const auto& [hash, tenant] : s.tenants.api_key_names) {
        names["key:redacted-" + std::to_string(++n)] = tenant;
    }
    s.tenants.api_key_names = std::move(names);
    return s;
}

}  // namespace tokenmeter::app
