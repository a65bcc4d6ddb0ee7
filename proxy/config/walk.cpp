// config/walk: reading YAML values into settings members and their range checks. yaml-cpp's
// exceptions never leave here; every problem becomes a config_error naming its dotted key.
#include "config/walk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace tokenmeter::config::schema {

std::string join_key(const std::string& prefix, std::string_view name) {
    return prefix.empty() ? std::string(name) : prefix + "." + std::string(name);
}

std::string index_key(const std::string& key, std::size_t i) {
    return key + "[" + std::to_string(i) + "]";
}

std::string describe(node_ref node) {
    if (!node.IsDefined() || node.IsNull()) {
        return "an empty value";
    }
    if (node.IsScalar()) {
        return detail::quote(node.Scalar());
    }
    YAML::Emitter out;
    out.SetSeqFormat(YAML::Flow);
    out.SetMapFormat(YAML::Flow);
    out << node;
    std::string text = out.good() ? out.c_str() : "a structure";
    constexpr std::size_t max_shown = 60;
    if (text.size() > max_shown) {
        text = text.substr(0, max_shown - 3) + "...";
    }
    return text;
}

namespace {

// Optimal string alignment distance, ignoring case: Levenshtein plus adjacent transpositions,
// which together cover the usual typos.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    const std::string la = detail::lowercase(a);
    const std::string lb = detail::lowercase(b);
    const std::size_t n = la.size();
    const std::size_t m = lb.size();
    std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
    for (std::size_t i = 0; i <= n; ++i) {
        d[i][0] = i;
    }
    for (std::size_t j = 0; j <= m; ++j) {
        d[0][j] = j;
    }
    for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t j = 1; j <= m; ++j) {
            const std::size_t cost = la[i - 1] == lb[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && la[i - 1] == lb[j - 2] && la[i - 2] == lb[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[n][m];
}

std::string unknown_key_message(std::string_view name, const std::vector<std::string_view>& known) {
    std::string_view best;
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (const std::string_view k : known) {
        const std::size_t dist = edit_distance(name, k);
        if (dist < best_distance) {
            best = k;
            best_distance = dist;
        }
    }
    // A third of the length keeps "tread" -> "threads" while not offering "log" for "foo".
    const std::size_t tolerance = std::max<std::size_t>(1, best.size() / 3);
    if (!best.empty() && best_distance <= tolerance) {
        return "unknown key (did you mean " + detail::quote(best) + "?)";
    }
    std::string list;
    for (const std::string_view k : known) {
        list += (list.empty() ? "" : ", ") + std::string(k);
    }
    return "unknown key (expected one of: " + list + ")";
}

}  // namespace

void walker::error(std::string key, std::string message) {
    errors_.push_back(config_error{std::move(key), std::move(message)});
}

std::optional<std::string> walker::scalar(node_ref node, key_ref key, std::string_view expected) {
    if (!node.IsScalar()) {
        error(key, "expected " + std::string(expected) + ", got " + describe(node));
        return std::nullopt;
    }
    return node.Scalar();
}

void walker::read_mapping(node_ref node, key_ref key, const std::vector<std::string_view>& names,
                          const std::function<void(std::size_t, node_ref, key_ref)>& read) {
    // "timeouts:" with every child commented out is an empty section, not a mistake.
    if (node.IsNull()) {
        return;
    }
    if (!node.IsMap()) {
        error(key, "expected a mapping of keys, got " + describe(node));
        return;
    }
    // yaml-cpp keeps both entries of a repeated key; silently taking one would hide a mistake.
    std::set<std::string> seen;
    for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
            error(key, "keys must be plain names, got " + describe(entry.first));
            continue;
        }
        const std::string& name = entry.first.Scalar();
        const std::string child = join_key(key, name);
        if (!seen.insert(name).second) {
            error(child, "duplicate key");
            continue;
        }
        const auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) {
            error(child, unknown_key_message(name, names));
            continue;
        }
        read(static_cast<std::size_t>(it - names.begin()), entry.second, child);
    }
}

void checker::error(std::string key, std::string message) {
    errors_.push_back(config_error{std::move(key), std::move(message)});
}

const std::string* checker::unknown_word(key_ref key) const {
    const auto it = words_.find(key);
    return it == words_.end() ? nullptr : &it->second;
}

void read_name_map(walker& w, node_ref node, key_ref key, const name_map_words& words,
                   const std::function<bool(const std::string&)>& has,
                   const std::function<void()>& clear,
                   const std::function<void(const std::string&, node_ref, key_ref)>& read) {
    if (node.IsNull()) {
        if (words.null_clears) {
            clear();
        }
        return;
    }
    if (!node.IsMap()) {
        w.error(key, std::string(words.not_a_mapping) + describe(node));
        return;
    }
    for (const auto& entry : node) {
        if (!entry.first.IsScalar() || (!words.empty_name_ok && entry.first.Scalar().empty())) {
            w.error(key, std::string(words.bad_name) + describe(entry.first));
            continue;
        }
        const std::string& name = entry.first.Scalar();
        const std::string child = join_key(key, name);
        if (!words.duplicate.empty() && has(name)) {
            w.error(child, std::string(words.duplicate));
            continue;
        }
        read(name, entry.second, child);
    }
}

namespace {

template <typename T, typename Parse>
void read_parsed(walker& w, node_ref node, key_ref key, std::string_view expected, Parse parse,
                 T& out) {
    const auto text = w.scalar(node, key, expected);
    if (!text) {
        return;
    }
    auto result = parse(*text);
    if (!result.value) {
        w.error(key, "expected " + std::string(expected) + ", got " + detail::quote(*text) + " (" +
                         result.why + ")");
        return;
    }
    out = std::move(*result.value);
}

// Sets `out` only when `read` added no error.
template <typename T, typename Read>
void read_optional(walker& w, node_ref node, key_ref key, std::optional<T>& out, Read read) {
    T v{};
    const std::size_t before = w.error_count();
    read(w, node, key, v);
    if (w.error_count() == before) {
        out = v;
    }
}

}  // namespace

void read_endpoint(walker& w, node_ref node, key_ref key, endpoint& out) {
    read_parsed(w, node, key, "\"host:port\"", detail::parse_endpoint_detailed, out);
}

void read_upstream(walker& w, node_ref node, key_ref key, upstream_target& out) {
    read_parsed(w, node, key, "a URL like http://host:port", detail::parse_upstream_detailed, out);
}

void read_duration(walker& w, node_ref node, key_ref key, milliseconds& out) {
    read_parsed(w, node, key, "a duration like 30s", detail::parse_duration_detailed, out);
}

void read_optional_duration(walker& w, node_ref node, key_ref key,
                            std::optional<milliseconds>& out) {
    read_optional(w, node, key, out, read_duration);
}

void read_size(walker& w, node_ref node, key_ref key, std::uint64_t& out) {
    read_parsed(w, node, key, "a size like 65536 or 64KiB", detail::parse_size_detailed, out);
}

void read_count(walker& w, node_ref node, key_ref key, std::uint32_t& out) {
    read_parsed(w, node, key, "a whole number", detail::parse_count, out);
}

void read_bool(walker& w, node_ref node, key_ref key, bool& out) {
    read_parsed(w, node, key, "true or false", detail::parse_bool, out);
}

void read_optional_bool(walker& w, node_ref node, key_ref key, std::optional<bool>& out) {
    read_optional(w, node, key, out, read_bool);
}

void read_text(walker& w, node_ref node, key_ref key, std::string& out) {
    if (const auto text = w.scalar(node, key, "a string")) {
        out = std::string(detail::trim(*text));
    }
}

// Validity against the allowed set is checked later; case is forgiven here.
void read_word(walker& w, node_ref node, key_ref key, std::string& out) {
    if (const auto text = w.scalar(node, key, "a word")) {
        out = detail::lowercase(detail::trim(*text));
    }
}

void read_string(walker& w, node_ref node, key_ref key, std::string& out) {
    if (node.IsNull()) {
        out.clear();
        return;
    }
    if (const auto text = w.scalar(node, key, "a string")) {
        out = *text;
    }
}

void read_rate(walker& w, node_ref node, key_ref key, double& out) {
    const auto text = w.scalar(node, key, "a number");
    if (!text) {
        return;
    }
    if (const auto v = detail::parse_number(*text)) {
        out = *v;
    } else {
        w.error(key, "expected a number, got " + detail::quote(*text));
    }
}

void read_objective(walker& w, node_ref node, key_ref key, double& out) {
    read_parsed(w, node, key, "a percentage like 99%", detail::parse_objective, out);
}

void read_optional_objective(walker& w, node_ref node, key_ref key, std::optional<double>& out) {
    read_optional(w, node, key, out, read_objective);
}

// An empty "allowlist:" means no allowlist, the same as leaving the key out.
void read_model_names(walker& w, node_ref node, key_ref key, std::vector<std::string>& out) {
    if (node.IsNull()) {
        out.clear();
        return;
    }
    if (!node.IsSequence()) {
        w.error(key, "expected a list of model names, got " + describe(node));
        return;
    }
    std::vector<std::string> names;
    bool ok = true;
    for (std::size_t i = 0; i < node.size(); ++i) {
        if (const auto text = w.scalar(node[i], index_key(key, i), "a model name")) {
            names.push_back(*text);
        } else {
            ok = false;
        }
    }
    if (ok) {
        out = std::move(names);
    }
}

void read_names(walker& w, node_ref node, key_ref key, std::vector<std::string>& out) {
    if (node.IsNull()) {
        out.clear();
        return;
    }
    if (!node.IsSequence()) {
        w.error(key, "expected a list of names, got " + describe(node));
        return;
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < node.size(); ++i) {
        if (const auto text = w.scalar(node[i], index_key(key, i), "a name")) {
            names.push_back(*text);
        }
    }
    out = std::move(names);
}

// A list with a bad element keeps its defaults, so the checks do not pile on more errors.
void read_bounds(walker& w, node_ref node, key_ref key, std::optional<std::vector<double>>& out) {
    if (!node.IsSequence()) {
        w.error(key,
                "expected a list of bucket boundaries like [0.1, 0.5, 1], got " + describe(node));
        return;
    }
    std::vector<double> bounds;
    bool ok = true;
    for (std::size_t i = 0; i < node.size(); ++i) {
        const std::string item = index_key(key, i);
        const auto text = w.scalar(node[i], item, "a number");
        if (!text) {
            ok = false;
            continue;
        }
        const auto v = detail::parse_number(*text);
        if (!v) {
            w.error(item, "expected a number, got " + detail::quote(*text));
            ok = false;
            continue;
        }
        bounds.push_back(*v);
    }
    if (ok) {
        out = std::move(bounds);
    }
}

// A list of input-token counts; a bad element keeps the defaults (as read_bounds does).
void read_token_counts(walker& w, node_ref node, key_ref key, std::vector<std::uint64_t>& out) {
    if (!node.IsSequence()) {
        w.error(key,
                "expected a list of input-token counts like [512, 2048], got " + describe(node));
        return;
    }
    std::vector<std::uint64_t> counts;
    const std::size_t errors_before = w.error_count();
    for (std::size_t i = 0; i < node.size(); ++i) {
        std::uint32_t v = 0;
        read_count(w, node[i], index_key(key, i), v);
        counts.push_back(v);
    }
    if (w.error_count() == errors_before) {
        out = std::move(counts);
    }
}

void read_string_map(walker& w, node_ref node, key_ref key,
                     std::map<std::string, std::string>& out) {
    if (node.IsNull()) {
        out.clear();
        return;
    }
    if (!node.IsMap()) {
        w.error(key, "expected a mapping of names, got " + describe(node));
        return;
    }
    for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
            w.error(key, "keys must be plain names, got " + describe(entry.first));
            continue;
        }
        const std::string child = join_key(key, entry.first.Scalar());
        if (const auto text = w.scalar(entry.second, child, "a tenant name")) {
            out[entry.first.Scalar()] = *text;
        }
    }
}

void check_positive(checker& c, key_ref key, const milliseconds& d) {
    if (d <= milliseconds::zero()) {
        c.error(key, "must be greater than 0");
    }
}

void check_positive_optional(checker& c, key_ref key, const std::optional<milliseconds>& d) {
    if (d) {
        check_positive(c, key, *d);
    }
}

void check_positive_bytes(checker& c, key_ref key, const std::uint64_t& bytes) {
    if (bytes == 0) {
        c.error(key, "must be at least 1 byte");
    }
}

void check_at_least_one(checker& c, key_ref key, const std::uint32_t& n) {
    if (n < 1) {
        c.error(key, "must be at least 1");
    }
}

void check_objective(checker& c, key_ref key, const double& v) {
    if (!(v > 0.0 && v < 1.0)) {
        c.error(key, "must be between 0% and 100% (exclusive), got " +
                         detail::format_number(v * 100) + "%");
    }
}

void check_optional_objective(checker& c, key_ref key, const std::optional<double>& v) {
    if (v) {
        check_objective(c, key, *v);
    }
}

void check_buckets(checker& c, key_ref key, const std::optional<std::vector<double>>& list) {
    if (!list) {
        return;  // the default list, which metrics/ keeps valid
    }
    const std::vector<double>& bounds = *list;
    if (bounds.empty()) {
        c.error(key, "must list at least one boundary");
        return;
    }
    for (std::size_t i = 0; i < bounds.size(); ++i) {
        const std::string item = index_key(key, i);
        const double v = bounds[i];
        if (!std::isfinite(v)) {
            // Prometheus adds the +Inf bucket itself.
            c.error(item, "must be a finite number");
        } else if (v <= 0) {
            c.error(item, "must be greater than 0, got " + detail::format_number(v));
        } else if (i > 0 && std::isfinite(bounds[i - 1]) && v <= bounds[i - 1]) {
            c.error(item, "must be greater than the boundary before it (" +
                              detail::format_number(bounds[i - 1]) + "), got " +
                              detail::format_number(v));
        }
    }
}

}  // namespace tokenmeter::config::schema
