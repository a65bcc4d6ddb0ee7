// usage/tenant: who a request belongs to. From a header a trusted authentication layer sets,
// or from a keyed hash (HMAC-SHA256) of the client's API key, never the key itself; otherwise
// "anonymous". When the tenant comes from the API key, a client-sent tenant header is ignored,
// so no client can bill its traffic to someone else.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/shared_snapshot.hpp"

namespace tokenmeter::usage {

inline constexpr std::string_view anonymous_tenant = "anonymous";
// A tenant header whose value is not a plausible name (too long, control characters).
inline constexpr std::string_view invalid_tenant = "invalid";

enum class tenant_source : std::uint8_t { none, header, api_key };

// An Authorization field value read as RFC 9110 §11.4 credentials: auth-scheme, then after one
// or more spaces (a tab is not a separator) either a token68 or a list of auth-params.
struct authorization_credentials {
    bool valid = false;        // the value is credentials syntax
    std::string_view scheme;   // as written; compared case-insensitively
    std::string_view token68;  // "" when auth-params or nothing follow the scheme
};
[[nodiscard]] authorization_credentials parse_authorization(std::string_view value) noexcept;

// The API key a Bearer credential carries (RFC 6750 §2.1: "Bearer" 1*SP token68), or "" for
// another scheme, a Bearer without a token68, or a value that is not credentials syntax.
[[nodiscard]] std::string_view bearer_token(std::string_view authorization) noexcept;

// The request headers the resolver looks at.
struct tenant_headers {
    std::string_view tenant;         // the configured tenant header ("" when absent)
    std::string_view authorization;  // "Bearer <key>"
    std::string_view x_api_key;      // Anthropic style
};

// Where tenants come from (app translates the tenants: section into it).
struct tenant_options {
    tenant_source source = tenant_source::none;
    std::string header = "x-tenant-id";                // source header
    std::string api_key_secret_env;                    // source api_key: env var with the secret
    std::string api_key_secret_file;                   // source api_key: file with the secret
    std::map<std::string, std::string> api_key_names;  // "key:<hash>" -> tenant name
};

class tenant_resolver {
  public:
    // secret: the HMAC key for source api_key (may be empty otherwise).
    tenant_resolver(const tenant_options& options, std::string secret);

    [[nodiscard]] std::string resolve(const tenant_headers& headers) const;
    [[nodiscard]] tenant_source source() const noexcept { return source_; }
    [[nodiscard]] const std::string& header_name() const noexcept { return header_; }

    // "key:" + the first 16 bytes of HMAC-SHA256(secret, api_key), as hex. For mapping tables.
    [[nodiscard]] std::string key_tenant(std::string_view api_key) const;

    // Replaces the "key:<hash>" -> name table (SIGHUP reload); safe while other threads resolve.
    void set_names(const std::map<std::string, std::string>& names);

  private:
    using name_table = std::map<std::string, std::string, std::less<>>;
    tenant_source source_;
    std::string header_;
    std::string secret_;
    core::shared_snapshot<const name_table> names_;
};

// The secret for source api_key from the environment variable or file the config names.
// Returns "" and sets `error` when it cannot be read or is empty. Never logs the secret.
std::string load_tenant_secret(const tenant_options& options, std::string& error);

}  // namespace tokenmeter::usage
