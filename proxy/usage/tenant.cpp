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

// `word` against a lower-case literal, ignoring ASCII case.
bool iequals_lower(std::string_view word, std::string_view lower) noexcept {
    if (word.size() != lower.size()) {
        return false;
    }
    for (std::size_t i = 0; i < word.size(); ++i) {
        char a = word[i];
        if (a >= 'A' && a <= 'Z') {
            a = static_cast<char>(a - 'A' + 'a');
        }
        if (a != lower[i]) {
            return false;
        }
    }
    return true;
}

// RFC 9110 §5.6.2 tchar.
bool is_tchar(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// RFC 9110 §11.2 token68: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
bool is_token68(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                            (s[i] >= '0' && s[i] <= '9') ||
                            std::string_view("-._~+/").find(s[i]) != std::string_view::npos)) {
        ++i;
    }
    if (i == 0) {
        return false;
    }
    while (i < s.size() && s[i] == '=') {
        ++i;
    }
    return i == s.size();
}

std::size_t skip_token(std::string_view s, std::size_t i) noexcept {
    while (i < s.size() && is_tchar(s[i])) {
        ++i;
    }
    return i;
}

std::size_t skip_ows(std::string_view s, std::size_t i) noexcept {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
        ++i;
    }
    return i;
}

// RFC 9110 §11.2: #auth-param, auth-param = token BWS "=" BWS ( token / quoted-string ), with
// empty list elements allowed (§5.6.1).
bool is_auth_param_list(std::string_view s) noexcept {
    std::size_t i = 0;
    bool any = false;
    while (true) {
        i = skip_ows(s, i);
        if (i == s.size()) {
            return any;
        }
        if (s[i] == ',') {
            ++i;
            continue;
        }
        const std::size_t name_end = skip_token(s, i);
        if (name_end == i) {
            return false;
        }
        i = skip_ows(s, name_end);
        if (i == s.size() || s[i] != '=') {
            return false;
        }
        i = skip_ows(s, i + 1);
        if (i < s.size() && s[i] == '"') {
            ++i;
            while (i < s.size() && s[i] != '"') {
                const auto u = static_cast<unsigned char>(s[i]);
                if (s[i] == '\\') {
                    ++i;
                    if (i == s.size()) {
                        return false;
                    }
                } else if ((u < 0x20 && s[i] != '\t') || u == 0x7f) {
                    return false;
                }
                ++i;
            }
            if (i == s.size()) {
                return false;
            }
            ++i;
        } else {
            const std::size_t value_end = skip_token(s, i);
            if (value_end == i) {
                return false;
            }
            i = value_end;
        }
        any = true;
        i = skip_ows(s, i);
        if (i == s.size()) {
            return true;
        }
        if (s[i] != ',') {
            return false;
        }
    }
}

}  // namespace

authorization_credentials parse_authorization(std::string_view value) noexcept {
    authorization_credentials out;
    value = core::trim(value, core::http_whitespace);  // OWS around a field value is not in it
    const std::size_t scheme_end = skip_token(value, 0);
    if (scheme_end == 0) {
        return out;
    }
    out.scheme = value.substr(0, scheme_end);
    if (scheme_end == value.size()) {
        out.valid = true;  // a scheme alone
        return out;
    }
    std::size_t i = scheme_end;
    while (i < value.size() && value[i] == ' ') {
        ++i;
    }
    if (i == scheme_end) {
        return out;  // "Bearer\tkey": only a space separates the scheme (RFC 9110 §11.4)
    }
    const std::string_view rest = value.substr(i);
    if (is_token68(rest)) {
        out.token68 = rest;
        out.valid = true;
    } else {
        out.valid = is_auth_param_list(rest);
    }
    return out;
}

std::string_view bearer_token(std::string_view authorization) noexcept {
    const authorization_credentials credentials = parse_authorization(authorization);
    if (!credentials.valid || !iequals_lower(credentials.scheme, "bearer")) {
        return {};
    }
    return credentials.token68;
}

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
