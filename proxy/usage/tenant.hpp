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
#include "usage/credentials.hpp"

namespace tokenmeter::usage {

inline constexpr std::string_view anonymous_tenant = "anonymous";
// A tenant header whose value is not a plausible name (too long, control characters).
inline constexpr std::string_view invalid_tenant = "invalid";

enum class tenant_source : std::uint8_t { none, header, api_key };

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
