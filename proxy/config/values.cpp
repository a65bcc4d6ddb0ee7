// config/values: the value readers and range checks the schema tables name. Each reader takes
// the node of one key and reports its own errors under that key; a value that fails keeps its
// default.
#include <cmath>

#include "config/walk.hpp"
#include "core/text.hpp"

namespace tokenmeter::config::schema {

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
        out = std::string(core::trim(*text));
    }
}

// Validity against the allowed set is checked later; case is forgiven here.
void read_word(walker& w, node_ref node, key_ref key, std::string& out) {
    if (const auto text = w.scalar(node, key, "a word")) {
        out = detail::lowercase(core::trim(*text));
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

void read_price(walker& w, node_ref node, key_ref key, std::optional<std::int64_t>& out) {
    const auto text = w.scalar(node, key, "a price per million tokens");
    if (!text) {
        return;
    }
    const std::string_view digits = core::trim(*text);
    const auto complain = [&](std::string_view why) {
        out = 0;  // present but wrong: this error, not also "is required"
        w.error(key, "expected a price per million tokens like 2.5, got " + detail::quote(*text) +
                         " (" + std::string(why) + ")");
    };
    // Read as text, not as a double: 0.15 stays exactly 150000 micro-units.
    std::int64_t whole = 0;
    std::int64_t fraction = 0;
    int decimals = 0;
    bool point = false;
    bool any_digit = false;
    for (const char c : digits) {
        if (c == '.' && !point) {
            point = true;
            continue;
        }
        if (c < '0' || c > '9') {
            complain("digits and an optional decimal point; no sign, no exponent");
            return;
        }
        any_digit = true;
        if (point) {
            if (++decimals > 6) {
                complain("at most 6 decimal places");
                return;
            }
            fraction = fraction * 10 + (c - '0');
        } else if ((whole = whole * 10 + (c - '0')) > 1'000'000) {
            complain("at most 1000000 per million tokens");
            return;
        }
    }
    if (!any_digit) {
        complain("no digits");
        return;
    }
    for (int i = decimals; i < 6; ++i) {
        fraction *= 10;
    }
    out = whole * 1'000'000 + fraction;
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
