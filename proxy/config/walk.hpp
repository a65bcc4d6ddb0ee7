// config/walk: the machinery under the schema tables (private to config/). A table is one row per
// YAML key of a section: the key, how to read it into its member, its range check and a one-line
// doc. The walker reads YAML through the tables; the checker runs their range checks.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace tokenmeter::config::schema {

using node_ref = const YAML::Node&;
using key_ref = const std::string&;

std::string join_key(const std::string& prefix, std::string_view name);
std::string index_key(const std::string& key, std::size_t i);
// What the user wrote, short enough to quote in one line of an error.
std::string describe(node_ref node);

// Reads YAML and collects every error; a value that fails keeps its default.
class walker {
  public:
    walker(std::vector<config_error>& errors, unknown_words& words)
        : errors_(errors), words_(words) {}

    void error(std::string key, std::string message);
    [[nodiscard]] std::size_t error_count() const { return errors_.size(); }
    // A mode's word that names none of its values, reported later by validate().
    void unknown_word(key_ref key, std::string word) { words_[key] = std::move(word); }

    // The scalar's text, or an error saying what was expected instead.
    std::optional<std::string> scalar(node_ref node, key_ref key, std::string_view expected);

    // A mapping of fixed keys: unknown keys get "did you mean", repeated keys are errors, and
    // each known key is handed to read(index of the name, value, dotted key).
    void read_mapping(node_ref node, key_ref key, const std::vector<std::string_view>& names,
                      const std::function<void(std::size_t, node_ref, key_ref)>& read);

  private:
    std::vector<config_error>& errors_;
    unknown_words& words_;
};

// Runs range checks; knows the unknown mode words so they are reported in check order.
class checker {
  public:
    explicit checker(const unknown_words& words) : words_(words) {}

    void error(std::string key, std::string message);
    [[nodiscard]] const std::string* unknown_word(key_ref key) const;
    std::vector<config_error> take() { return std::move(errors_); }

  private:
    const unknown_words& words_;
    std::vector<config_error> errors_;
};

template <typename S>
struct field {
    std::string_view key;
    value_shape shape = value_shape::scalar;
    std::string_view doc;
    std::function<void(walker&, node_ref, key_ref, S&)> read;
    std::function<void(checker&, key_ref, const S&)> check;  // empty: no range
    // Lists the child keys of a section under its dotted key; empty for a plain value.
    std::function<void(const std::string&, std::vector<documented_key>&)> children;
    // Adds the key and its value, as read would accept it, to a YAML mapping; an optional value
    // that is unset adds nothing.
    std::function<void(YAML::Node&, const S&)> write;
};

template <typename S>
using table = std::vector<field<S>>;

template <typename T>
using value_reader = void (*)(walker&, node_ref, key_ref, T&);
template <typename T>
using value_check = void (*)(checker&, key_ref, const T&);

// ---- value readers (walk.cpp); each reports its own errors under `key` ----
void read_endpoint(walker& w, node_ref node, key_ref key, endpoint& out);
void read_upstream(walker& w, node_ref node, key_ref key, upstream_target& out);
void read_duration(walker& w, node_ref node, key_ref key, milliseconds& out);
void read_optional_duration(walker& w, node_ref node, key_ref key,
                            std::optional<milliseconds>& out);
void read_size(walker& w, node_ref node, key_ref key, std::uint64_t& out);
void read_count(walker& w, node_ref node, key_ref key, std::uint32_t& out);
void read_bool(walker& w, node_ref node, key_ref key, bool& out);
void read_optional_bool(walker& w, node_ref node, key_ref key, std::optional<bool>& out);
void read_text(walker& w, node_ref node, key_ref key, std::string& out);    // trimmed
void read_word(walker& w, node_ref node, key_ref key, std::string& out);    // trimmed, lowercase
void read_string(walker& w, node_ref node, key_ref key, std::string& out);  // as written; null: ""
void read_rate(walker& w, node_ref node, key_ref key, double& out);
// A price per million tokens, "2.5" (at most 6 decimals), in micro-units.
void read_price(walker& w, node_ref node, key_ref key, std::optional<std::int64_t>& out);
void read_objective(walker& w, node_ref node, key_ref key, double& out);
void read_optional_objective(walker& w, node_ref node, key_ref key, std::optional<double>& out);
void read_model_names(walker& w, node_ref node, key_ref key, std::vector<std::string>& out);
void read_names(walker& w, node_ref node, key_ref key, std::vector<std::string>& out);
void read_bounds(walker& w, node_ref node, key_ref key, std::optional<std::vector<double>>& out);
void read_token_counts(walker& w, node_ref node, key_ref key, std::vector<std::uint64_t>& out);
void read_string_map(walker& w, node_ref node, key_ref key,
                     std::map<std::string, std::string>& out);

// ---- range checks (walk.cpp) ----
void check_positive(checker& c, key_ref key, const milliseconds& d);
void check_positive_optional(checker& c, key_ref key, const std::optional<milliseconds>& d);
void check_positive_bytes(checker& c, key_ref key, const std::uint64_t& bytes);
void check_at_least_one(checker& c, key_ref key, const std::uint32_t& n);
void check_objective(checker& c, key_ref key, const double& v);
void check_optional_objective(checker& c, key_ref key, const std::optional<double>& v);
void check_buckets(checker& c, key_ref key, const std::optional<std::vector<double>>& list);

// ---- value writers (values.cpp): the text each reader reads back as the same value; the reader
// picks the form where one type has several (a double is a percentage for read_objective).
// A null node: nothing to write (an unset optional).
YAML::Node to_node(value_reader<endpoint> read, const endpoint& v);
YAML::Node to_node(value_reader<upstream_target> read, const upstream_target& v);
YAML::Node to_node(value_reader<milliseconds> read, const milliseconds& v);
YAML::Node to_node(value_reader<std::optional<milliseconds>> read,
                   const std::optional<milliseconds>& v);
YAML::Node to_node(value_reader<std::uint64_t> read, const std::uint64_t& v);
YAML::Node to_node(value_reader<std::uint32_t> read, const std::uint32_t& v);
YAML::Node to_node(value_reader<bool> read, const bool& v);
YAML::Node to_node(value_reader<std::optional<bool>> read, const std::optional<bool>& v);
YAML::Node to_node(value_reader<std::string> read, const std::string& v);
YAML::Node to_node(value_reader<double> read, const double& v);
YAML::Node to_node(value_reader<std::optional<double>> read, const std::optional<double>& v);
YAML::Node to_node(value_reader<std::optional<std::int64_t>> read,
                   const std::optional<std::int64_t>& v);
YAML::Node to_node(value_reader<std::vector<std::string>> read, const std::vector<std::string>& v);
YAML::Node to_node(value_reader<std::optional<std::vector<double>>> read,
                   const std::optional<std::vector<double>>& v);
YAML::Node to_node(value_reader<std::vector<std::uint64_t>> read,
                   const std::vector<std::uint64_t>& v);
YAML::Node to_node(value_reader<std::map<std::string, std::string>> read,
                   const std::map<std::string, std::string>& v);

template <typename T>
constexpr value_shape shape_of() {
    if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                  std::is_same_v<T, std::vector<std::uint64_t>> ||
                  std::is_same_v<T, std::optional<std::vector<double>>>) {
        return value_shape::list;
    } else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) {
        return value_shape::mapping;
    } else {
        return value_shape::scalar;
    }
}

// Reads every key of `t` present in `node` into `s`.
template <typename S>
void read_section(walker& w, node_ref node, key_ref key, const table<S>& t, S& s) {
    std::vector<std::string_view> names;
    names.reserve(t.size());
    for (const field<S>& f : t) {
        names.push_back(f.key);
    }
    w.read_mapping(node, key, names, [&](std::size_t i, node_ref value, key_ref child) {
        t[i].read(w, value, child, s);
    });
}

// Runs every range check of `t` on `s`, in table order.
template <typename S>
void check_section(checker& c, key_ref key, const table<S>& t, const S& s) {
    for (const field<S>& f : t) {
        if (f.check) {
            f.check(c, join_key(key, f.key), s);
        }
    }
}

// Every key of `t` that has a value in `s`, as a YAML mapping.
template <typename S>
YAML::Node write_section(const table<S>& t, const S& s) {
    YAML::Node out(YAML::NodeType::Map);
    for (const field<S>& f : t) {
        f.write(out, s);
    }
    return out;
}

template <typename S>
void list_section(const std::string& prefix, const table<S>& t, std::vector<documented_key>& out) {
    for (const field<S>& f : t) {
        const std::string key = join_key(prefix, f.key);
        out.push_back({key, f.shape, static_cast<bool>(f.children), f.doc});
        if (f.children) {
            f.children(key, out);
        }
    }
}

// ---- row makers ----

// A plain value: read with `read`, checked with `check` (may be null).
template <typename S, typename T>
field<S> value(std::string_view key, T S::*member, value_reader<T> read, value_check<T> check,
               std::string_view doc) {
    field<S> f{key, shape_of<T>(), doc, {}, {}, {}, {}};
    f.read = [member, read](walker& w, node_ref n, key_ref k, S& s) { read(w, n, k, s.*member); };
    if (check != nullptr) {
        f.check = [member, check](checker& c, key_ref k, const S& s) { check(c, k, s.*member); };
    }
    f.write = [key, member, read](YAML::Node& out, const S& s) {
        if (YAML::Node node = to_node(read, s.*member); !node.IsNull()) {
            out[std::string(key)] = node;
        }
    };
    return f;
}

// One of a mode's spellings (any case). An unknown word is reported by validate() at this key,
// or at once when `at_load`; `complaint` words that report (default: "must be one of ...").
template <typename S, mode M>
field<S> choice(std::string_view key, M S::*member, std::string_view doc,
                std::string (*complaint)(const std::string& word) = nullptr, bool at_load = false) {
    const auto message = [complaint](const std::string& word) {
        return complaint != nullptr
                   ? complaint(word)
                   : "must be one of " + word_list<M>() + ", got " + detail::quote(word);
    };
    field<S> f{key, value_shape::scalar, doc, {}, {}, {}, {}};
    f.read = [member, message, at_load](walker& w, node_ref n, key_ref k, S& s) {
        std::string word;
        read_word(w, n, k, word);
        if (!n.IsScalar()) {
            return;
        }
        if (const auto m = mode_from_word<M>(word)) {
            s.*member = *m;
        } else if (at_load) {
            w.error(k, message(word));
        } else {
            w.unknown_word(k, word);
        }
    };
    f.check = [message](checker& c, key_ref k, const S&) {
        if (const std::string* word = c.unknown_word(k)) {
            c.error(k, message(*word));
        }
    };
    f.write = [key, member](YAML::Node& out, const S& s) {
        out[std::string(key)] = std::string(to_string(s.*member));
    };
    return f;
}

// A fixed sub-section; `whole` (may be null) checks it as one before its keys' own checks.
template <typename S, typename C>
field<S> section(std::string_view key, C S::*member, const table<C>& (*child)(),
                 std::string_view doc, value_check<C> whole = nullptr) {
    field<S> f{key, value_shape::mapping, doc, {}, {}, {}, {}};
    f.read = [member, child](walker& w, node_ref n, key_ref k, S& s) {
        read_section(w, n, k, child(), s.*member);
    };
    f.check = [member, child, whole](checker& c, key_ref k, const S& s) {
        if (whole != nullptr) {
            whole(c, k, s.*member);
        }
        check_section(c, k, child(), s.*member);
    };
    f.children = [child](const std::string& k, std::vector<documented_key>& out) {
        list_section(k, child(), out);
    };
    f.write = [key, member, child](YAML::Node& out, const S& s) {
        out[std::string(key)] = write_section(child(), s.*member);
    };
    return f;
}

// A sub-section that exists only when written (slo.default).
template <typename S, typename C>
field<S> optional_section(std::string_view key, std::optional<C> S::*member,
                          const table<C>& (*child)(), std::string_view doc,
                          value_check<C> whole = nullptr) {
    field<S> f{key, value_shape::mapping, doc, {}, {}, {}, {}};
    f.read = [member, child](walker& w, node_ref n, key_ref k, S& s) {
        C c{};
        read_section(w, n, k, child(), c);
        s.*member = std::move(c);
    };
    f.check = [member, child, whole](checker& c, key_ref k, const S& s) {
        if (const auto& v = s.*member) {
            if (whole != nullptr) {
                whole(c, k, *v);
            }
            check_section(c, k, child(), *v);
        }
    };
    f.children = [child](const std::string& k, std::vector<documented_key>& out) {
        list_section(k, child(), out);
    };
    f.write = [key, member, child](YAML::Node& out, const S& s) {
        if (const auto& v = s.*member) {
            out[std::string(key)] = write_section(child(), *v);
        }
    };
    return f;
}

// How a mapping from free names to sections words its errors.
struct name_map_words {
    std::string_view placeholder;  // "<name>" in documented keys
    std::string_view not_a_mapping;
    std::string_view bad_name;
    std::string_view duplicate;  // "": a repeated name replaces the earlier entry
    bool null_clears = false;
    bool empty_name_ok = true;
};

void read_name_map(walker& w, node_ref node, key_ref key, const name_map_words& words,
                   const std::function<bool(const std::string&)>& has,
                   const std::function<void()>& clear,
                   const std::function<void(const std::string&, node_ref, key_ref)>& read);

// A mapping from free names (models, tenants) to sections of the same keys.
template <typename S, typename C>
field<S> named(std::string_view key, std::map<std::string, C> S::*member,
               const table<C>& (*child)(), name_map_words words, std::string_view doc,
               value_check<C> whole = nullptr) {
    field<S> f{key, value_shape::mapping, doc, {}, {}, {}, {}};
    f.read = [member, child, words](walker& w, node_ref n, key_ref k, S& s) {
        auto& out = s.*member;
        read_name_map(
            w, n, k, words, [&](const std::string& name) { return out.contains(name); },
            [&] { out.clear(); },
            [&](const std::string& name, node_ref value, key_ref entry_key) {
                C c{};
                read_section(w, value, entry_key, child(), c);
                out[name] = std::move(c);
            });
    };
    f.check = [member, child, whole](checker& c, key_ref k, const S& s) {
        for (const auto& [name, entry] : s.*member) {
            const std::string entry_key = join_key(k, name);
            if (whole != nullptr) {
                whole(c, entry_key, entry);
            }
            check_section(c, entry_key, child(), entry);
        }
    };
    const std::string_view placeholder = words.placeholder;
    f.children = [child, placeholder](const std::string& k, std::vector<documented_key>& out) {
        list_section(join_key(k, placeholder), child(), out);
    };
    f.write = [key, member, child](YAML::Node& out, const S& s) {
        YAML::Node entries(YAML::NodeType::Map);
        for (const auto& [name, entry] : s.*member) {
            entries[name] = write_section(child(), entry);
        }
        out[std::string(key)] = entries;
    };
    return f;
}

// A list of sections of the same keys (routes); an empty value means none.
template <typename S, typename C>
field<S> section_list(std::string_view key, std::vector<C> S::*member, const table<C>& (*child)(),
                      std::string_view not_a_list, std::string_view doc) {
    field<S> f{key, value_shape::list, doc, {}, {}, {}, {}};
    f.read = [member, child, not_a_list](walker& w, node_ref n, key_ref k, S& s) {
        if (n.IsNull()) {
            (s.*member).clear();
            return;
        }
        if (!n.IsSequence()) {
            w.error(k, std::string(not_a_list) + describe(n));
            return;
        }
        std::vector<C> entries(n.size());
        for (std::size_t i = 0; i < n.size(); ++i) {
            read_section(w, n[i], index_key(k, i), child(), entries[i]);
        }
        s.*member = std::move(entries);
    };
    f.check = [member, child](checker& c, key_ref k, const S& s) {
        const auto& entries = s.*member;
        for (std::size_t i = 0; i < entries.size(); ++i) {
            check_section(c, index_key(k, i), child(), entries[i]);
        }
    };
    f.children = [child](const std::string& k, std::vector<documented_key>& out) {
        list_section(k + "[]", child(), out);
    };
    f.write = [key, member, child](YAML::Node& out, const S& s) {
        YAML::Node entries(YAML::NodeType::Sequence);
        for (const C& entry : s.*member) {
            entries.push_back(write_section(child(), entry));
        }
        out[std::string(key)] = entries;
    };
    return f;
}

// The top-level table (schema.cpp).
const table<settings>& root();

}  // namespace tokenmeter::config::schema
