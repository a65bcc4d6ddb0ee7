#include "usage/tenant.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/text.hpp"

namespace tokenmeter::usage {
namespace {

constexpr std::size_t max_tenant_length = 128;

bool plausible_name(std::string_view s) {
    if (s.empty() || s.size() > max_tenant_length) {
        return false;
    }
    return std::ranges::none_of(s, [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f || c == '"' || c == '\\';
    });
}

}  // namespace

tenant_resolver::tenant_resolver(const tenant_options& options, std::string secret)
    : source_(options.source),
      header_(options.header),
      secret_(std::move(secret)),
      names_(std::make_shared<const name_table>(options.api_key_names.begin(),
                                                options.api_key_names.end())) {}

void tenant_resolver::set_names(const std::map<std::string, std::string>& names) {
    names_.store(std::make_shared<const name_table>(names.begin(), names.end()));
}

std::string tenant_resolver::key_tenant(std::string_view api_key) const {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
         reinterpret_cast<const unsigned char*>(api_key.data()), api_key.size(), digest.data(),
         &length);
    static constexpr std::string_view hex = "0123456789abcdef";
    std::string out = "key:";
    // 128 bits: collisions are out of reach, and the full digest would only be longer.
    for (unsigned int i = 0; i < 16 && i < length; ++i) {
        out += hex[digest[i] >> 4];
        out += hex[digest[i] & 0x0f];
    }
    return out;
}

std::string tenant_resolver::resolve(const tenant_headers& headers) const {
    switch (source_) {
        case tenant_source::none:
            return std::string(anonymous_tenant);
        case tenant_source::header: {
            std::string_view value = core::trim(headers.tenant);
            if (value.empty()) {
                return std::string(anonymous_tenant);
            }
            return plausible_name(value) ? std::string(value) : std::string(invalid_tenant);
        }
        case tenant_source::api_key: {
            std::string_view key = bearer_token(headers.authorization);
            if (key.empty()) {
                key = core::trim(headers.x_api_key);
            }
            if (key.empty()) {
                return std::string(anonymous_tenant);
            }
            std::string hashed = key_tenant(key);
            const auto names = names_.load();
            if (auto it = names->find(hashed); it != names->end()) {
                return it->second;
            }
            return hashed;
        }
    }
    return std::string(anonymous_tenant);
}

std::string load_tenant_secret(const tenant_options& options, std::string& error) {
    if (options.source != tenant_source::api_key) {
        return {};
    }
    std::string secret;
    if (!options.api_key_secret_env.empty()) {
        // getenv races only with setenv, which tokenmeter never calls.
        // NOLINTNEXTLINE(concurrency-mt-unsafe)
        const char* value = std::getenv(options.api_key_secret_env.c_str());
        if (value == nullptr || *value == '\0') {
            error = "tenants.api_key_secret_env: environment variable " +
                    options.api_key_secret_env + " is not set or empty";
            return {};
        }
        secret = value;
    } else {
        std::ifstream in(options.api_key_secret_file, std::ios::binary);
        if (!in) {
            error = "tenants.api_key_secret_file: cannot read " + options.api_key_secret_file;
            return {};
        }
        std::ostringstream text;
        text << in.rdbuf();
        secret = std::string(core::trim(text.str()));
        if (secret.empty()) {
            error = "tenants.api_key_secret_file: " + options.api_key_secret_file + " is empty";
            return {};
        }
    }
    return secret;
}

}  // namespace tokenmeter::usage
