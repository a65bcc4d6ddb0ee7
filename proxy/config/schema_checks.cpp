#include "config/schema_checks.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "core/text.hpp"

namespace tokenmeter::config::schema {

void check_host(checker& c, key_ref key, const endpoint& e) {
    if (e.host.empty()) {
        c.error(key, "the host must not be empty (0.0.0.0 listens on every interface)");
    }
}

void check_upstream(checker& c, key_ref key, const upstream_target& u) {
    if (u.scheme != "http" && u.scheme != "https") {
        c.error(key, "the scheme must be http:// or https://, got " + detail::quote(u.scheme));
    }
    if (u.host.empty()) {
        c.error(key, "the host must not be empty");
    }
    if (u.port == 0) {
        c.error(key, "the port must be between 1 and 65535");
    }
    if (!u.base_path.empty() && (u.base_path.front() != '/' || u.base_path.back() == '/')) {
        c.error(key, "the base path must start with '/' and not end with one, got " +
                         detail::quote(u.base_path));
    }
}

void check_threads(checker& c, key_ref key, const std::uint32_t& n) {
    if (n > 256) {
        c.error(key, "must be at most 256 (0 means one per core), got " + std::to_string(n));
    }
}

void check_json_depth(checker& c, key_ref key, const std::uint32_t& n) {
    if (n < 8 || n > 100'000) {
        c.error(key, "must be from 8 to 100000, got " + std::to_string(n));
    }
}

void check_model_labels(checker& c, key_ref key, const model_label_settings& m) {
    check_at_least_one(c, join_key(key, "max_models"), m.max_models);
    std::set<std::string_view> seen;
    for (std::size_t i = 0; i < m.allowlist.size(); ++i) {
        const std::string item = index_key(join_key(key, "allowlist"), i);
        const std::string& name = m.allowlist[i];
        if (name.empty()) {
            c.error(item, "a model name must not be empty");
        } else if (!seen.insert(name).second) {
            c.error(item, "duplicate model name " + detail::quote(name));
        }
    }
}

void check_prompt_classes(checker& c, key_ref key, const std::vector<std::uint64_t>& bounds) {
    // Each class is one more TTFT histogram per model and API: keep the label bounded.
    constexpr std::size_t max_classes = 15;
    if (bounds.empty()) {
        c.error(key, "must list at least one boundary (input tokens)");
    } else if (bounds.size() > max_classes) {
        c.error(key, "at most " + std::to_string(max_classes) + " boundaries, got " +
                         std::to_string(bounds.size()));
    }
    for (std::size_t i = 0; i < bounds.size(); ++i) {
        const std::string item = index_key(key, i);
        if (bounds[i] == 0) {
            c.error(item, "must be greater than 0");
        } else if (i > 0 && bounds[i] <= bounds[i - 1]) {
            c.error(item, "must be greater than the boundary before it (" +
                              std::to_string(bounds[i - 1]) + "), got " +
                              std::to_string(bounds[i]));
        }
    }
}

void check_rate(checker& c, key_ref key, const double& rate) {
    if (!std::isfinite(rate) || rate < 0) {
        c.error(key, "must be a finite number >= 0, got " + detail::format_number(rate));
    }
}

void check_ratio(checker& c, key_ref key, const double& ratio) {
    if (!std::isfinite(ratio) || ratio < 0 || ratio > 1) {
        c.error(key, "must be a number from 0 to 1, got " + detail::format_number(ratio));
    }
}

void check_segment_bytes(checker& c, key_ref key, const std::uint64_t& bytes) {
    if (bytes < 4096) {
        c.error(key, "must be at least 4KiB");
    }
}

void check_batch_size(checker& c, key_ref key, const std::uint32_t& n) {
    if (n < 1 || n > 10'000) {
        c.error(key, "must be between 1 and 10000");
    }
}

void check_reference(checker& c, key_ref key, const std::string& spec) {
    if (spec.empty()) {
        c.error(key, "must name a tokenizer (o200k_base, cl100k_base, a path) or be \"none\"");
    }
}

void check_model_tokenizer(checker& c, key_ref key, const std::string& spec) {
    if (spec.empty()) {
        c.error(key, "must name a tokenizer (o200k_base, cl100k_base or a path to tokenizer.json)");
    }
}

void check_required_price(checker& c, key_ref key, const std::optional<std::int64_t>& micros) {
    if (!micros) {
        c.error(key, "is required: the price per million tokens, like 2.5");
    }
}

// ISO 4217 style: three capital letters, as the currency label and the records carry it.
void check_currency(checker& c, key_ref key, const std::string& code) {
    const bool ok = code.size() == 3 && std::all_of(code.begin(), code.end(),
                                                    [](char ch) { return ch >= 'A' && ch <= 'Z'; });
    if (!ok) {
        c.error(key, "must be a three-letter currency code like USD, got " + detail::quote(code));
    }
}

std::string special_tokens_complaint(const std::string& word) {
    return "must be match or text (leave it out for the file type's default), got '" + word + "'";
}

void check_route_path(checker& c, key_ref key, const std::string& path) {
    if (path.empty() || path.front() != '/') {
        c.error(key, "must start with '/', got " + detail::quote(path));
    } else if (path.find('*') != std::string::npos && path.find('*') + 1 != path.size()) {
        c.error(key, "'*' may only end a path prefix, got " + detail::quote(path));
    }
}

void check_slo_entry(checker& c, key_ref key, const slo_target& t) {
    if (t.preset == slo_preset::none && !t.ttft && !t.tpot && !t.availability) {
        c.error(key, "set a preset (server, interactive) or a target (ttft, tpot, availability)");
    }
}

}  // namespace tokenmeter::config::schema
