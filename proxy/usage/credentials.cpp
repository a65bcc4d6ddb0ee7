#include "usage/credentials.hpp"

#include <cstddef>

#include "core/text.hpp"

namespace tokenmeter::usage {
namespace {

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

}  // namespace tokenmeter::usage
