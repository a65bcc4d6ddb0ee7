// config/walk: the walker (mappings, "did you mean", describe) and the checker. yaml-cpp's
// exceptions never leave config/; every problem becomes a config_error naming its dotted key.
#include "config/walk.hpp"

#include <algorithm>
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

}  // namespace tokenmeter::config::schema
