#include "relay/request_target.hpp"

#include <vector>

#include "core/text.hpp"

namespace tokenmeter::relay {
namespace {

bool iequals_ascii(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i];
        char y = b[i];
        if (x >= 'A' && x <= 'Z') {
            x = static_cast<char>(x - 'A' + 'a');
        }
        if (y >= 'A' && y <= 'Z') {
            y = static_cast<char>(y - 'A' + 'a');
        }
        if (x != y) {
            return false;
        }
    }
    return true;
}

// How many dots a segment stands for: "." or "%2e" is 1, ".." (any mix with "%2e") is 2.
int dot_count(std::string_view segment) noexcept {
    int dots = 0;
    while (!segment.empty()) {
        if (segment.front() == '.') {
            segment.remove_prefix(1);
        } else if (segment.size() >= 3 && iequals_ascii(segment.substr(0, 3), "%2e")) {
            segment.remove_prefix(3);
        } else {
            return 0;
        }
        if (++dots > 2) {
            return 0;
        }
    }
    return dots;
}

// RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~".
bool is_unreserved(unsigned char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

// The byte a valid escape at path[i] ('%' and two hex digits) stands for, or -1.
int escaped_byte(std::string_view path, std::size_t i) noexcept {
    if (path[i] != '%' || i + 2 >= path.size()) {
        return -1;
    }
    const int high = core::hex_digit_value(path[i + 1]);
    const int low = core::hex_digit_value(path[i + 2]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// `path` with its valid escapes decoded: every one, or only those of unreserved characters (RFC
// 3986 §6.2.2.2); every other byte as it came.
std::string decode_escapes(std::string_view path, bool only_unreserved) {
    std::string out;
    out.reserve(path.size());
    for (std::size_t i = 0; i < path.size(); ++i) {
        const int decoded = escaped_byte(path, i);
        if (decoded >= 0 &&
            (!only_unreserved || is_unreserved(static_cast<unsigned char>(decoded)))) {
            out.push_back(static_cast<char>(decoded));
            i += 2;
        } else {
            out.push_back(path[i]);
        }
    }
    return out;
}

bool has_valid_escape(std::string_view path) noexcept {
    for (std::size_t i = path.find('%'); i != std::string_view::npos; i = path.find('%', i + 1)) {
        if (escaped_byte(path, i) >= 0) {
            return true;
        }
    }
    return false;
}

bool might_have_dot_segment(std::string_view path) noexcept {
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
        if (path[i] == '/' && (path[i + 1] == '.' || path[i + 1] == '%')) {
            return true;
        }
    }
    return false;
}

}  // namespace

bool remove_dot_segments(std::string_view path, std::string& out, bool clamp_at_root) {
    // `path` starts with '/'. Segments are what lies between slashes; a dot segment at the end
    // leaves a trailing slash ("/a/b/.." is "/a/").
    std::vector<std::string_view> kept;
    std::string_view rest = path.substr(1);
    while (true) {
        auto slash = rest.find('/');
        std::string_view segment = rest.substr(0, slash);
        const bool last = slash == std::string_view::npos;
        const int dots = dot_count(segment);
        if (dots == 2) {
            if (kept.empty() && !clamp_at_root) {
                return false;
            }
            if (!kept.empty()) {
                kept.pop_back();
            }
        } else if (dots == 0) {
            kept.push_back(segment);
        }
        if (last) {
            if (dots != 0) {
                kept.emplace_back();
            }
            break;
        }
        rest.remove_prefix(slash + 1);
    }
    out.clear();
    for (auto segment : kept) {
        out.push_back('/');
        out.append(segment);
    }
    if (out.empty()) {
        out = "/";
    }
    return true;
}

std::variant<std::string, target_refusal> normalize_target(std::string_view target) {
    if (target == "*") {
        return std::string(target);
    }
    if (target.find('#') != std::string_view::npos) {
        return target_refusal{"bad_target", "a request target cannot carry a fragment ('#')"};
    }
    std::string_view origin = target;
    if (!target.starts_with('/')) {
        // Absolute-form (RFC 9112 §3.2.2): keep the path and query, drop scheme and authority.
        auto colon = target.find("://");
        std::string_view scheme =
            colon == std::string_view::npos ? std::string_view{} : target.substr(0, colon);
        if (!iequals_ascii(scheme, "http") && !iequals_ascii(scheme, "https")) {
            return target_refusal{
                "bad_target",
                "the request target must be a path (/v1/...) or an http:// or https:// URL"};
        }
        std::string_view after = target.substr(colon + 3);
        auto path_start = after.find_first_of("/?");
        std::string_view authority = after.substr(0, path_start);
        if (authority.empty() || authority.find('@') != std::string_view::npos) {
            return target_refusal{"bad_target",
                                  "an absolute-form target needs a host and no user info"};
        }
        origin =
            path_start == std::string_view::npos ? std::string_view{} : after.substr(path_start);
    }
    auto question = origin.find('?');
    std::string_view path = origin.substr(0, question);
    std::string_view query =
        question == std::string_view::npos ? std::string_view{} : origin.substr(question);
    std::string decoded;
    if (path.find('%') != std::string_view::npos) {
        decoded = decode_escapes(path, true);
        path = decoded;
    }
    std::string out;
    if (path.empty()) {
        out = "/";
    } else if (!might_have_dot_segment(path)) {
        out.assign(path);
    } else if (!remove_dot_segments(path, out)) {
        return target_refusal{"path_escapes_base",
                              "the path's '..' segments climb above the root; refused"};
    }
    out.append(query);
    return out;
}

std::string percent_decode_path(std::string_view path) {
    return decode_escapes(path, false);
}

std::optional<target_refusal> refuse_escaped_api_path(std::string_view target,
                                                      const protocol::route_table& routes) {
    const std::string_view path = target.substr(0, target.find('?'));
    if (!has_valid_escape(path)) {
        return std::nullopt;  // every server reads this path as it is written
    }
    const std::string decoded = percent_decode_path(path);
    std::string without_dots;
    const bool metered =
        routes.choose(path).api != protocol::api_kind::none ||
        routes.choose(decoded).api != protocol::api_kind::none ||
        (decoded.starts_with('/') && remove_dot_segments(decoded, without_dots, true) &&
         routes.choose(without_dots).api != protocol::api_kind::none);
    if (!metered) {
        return std::nullopt;
    }
    return target_refusal{"escaped_api_path",
                          "a metered API's path carries a percent escape that a model server "
                          "decodes (such as %2F); send the path unescaped"};
}

}  // namespace tokenmeter::relay
