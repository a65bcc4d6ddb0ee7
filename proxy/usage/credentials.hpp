// usage/credentials: the API key a request's Authorization field carries, read as RFC 9110
// credentials. No OpenSSL here: the edge's checks (relay/headers) read credentials too, and the
// request fuzzers build them without the tenant hash.
#pragma once

#include <string_view>

namespace tokenmeter::usage {

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

}  // namespace tokenmeter::usage
