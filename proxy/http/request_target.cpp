#include "http/request_target.hpp"

#include <vector>

namespace tokenmeter::http {
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

bool might_have_dot_segment(std::string_view path) noexcept {
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
        if (path[i] == '/' && (path[i + 1] == '.' || path[i + 1] == '%')) {
            return true;
        }
    }
    return false;
}

}  // namespace

bool remove_dot_segments(std::string_view path, std::string& out) {
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
            if (kept.empty()) {
                return false;
            }
            kept.pop_back();
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

}  // namespace tokenmeter::http
