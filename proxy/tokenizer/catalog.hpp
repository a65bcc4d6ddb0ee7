// tokenizer/catalog: the tokenizers one process uses, loaded once at start-up and shared
// read-only by every worker: the reference tokenizer that normalizes counts across models, and
// each configured model's own ("native") tokenizer. A spec used by several models loads once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer {

struct selection {
    const encoder* native = nullptr;
    const encoder* reference = nullptr;
};

struct catalog_model {
    std::string model;  // the request's model name
    std::string spec;
    tokenizer::special_tokens special = special_tokens::file_default;
};

struct catalog_options {
    std::string reference;            // a spec, or "none"
    bool reference_required = false;  // false: a missing reference file only warns
    tokenizer::special_tokens reference_special = special_tokens::file_default;
    std::vector<std::string> search_dirs;  // in order; o200k_base/cl100k_base are also built in
    std::vector<catalog_model> models;
    // Start-up accounting, supplied by the caller (the core reads no clock and no /proc): the
    // time now in seconds and the process's resident bytes. Either may be empty.
    std::function<double()> seconds_now;
    std::function<std::int64_t()> resident_bytes;
};

// One tokenizer a role uses, for the start-up log and tokenmeter_tokenizer_info.
struct catalog_entry {
    std::string role;   // "reference" or "native"
    std::string model;  // "" for the reference
    std::string name;   // the encoder's name
    std::string spec;
    std::string source;         // "embedded" or the file's path
    std::string special_mode;   // "match" or "text": added tokens in text
    double load_seconds = 0;    // 0 when loaded for an earlier entry (shared)
    std::int64_t resident_growth_bytes = 0;  // resident memory the load added
    bool shared = false;        // the same instance as an earlier entry
};

struct catalog_problem {
    std::string key;  // the config key that named the tokenizer
    std::string message;
};

class catalog {
  public:
    struct load_result {
        std::shared_ptr<const catalog> value;  // null when there are errors
        std::vector<catalog_problem> errors;
        std::vector<std::string> warnings;
    };
    static load_result load(const catalog_options& options);

    [[nodiscard]] selection for_model(std::string_view model) const;
    // "o200k_base", or "" when normalized counts are off.
    [[nodiscard]] std::string reference_name() const;
    [[nodiscard]] std::size_t native_count() const noexcept { return by_model_.size(); }
    [[nodiscard]] const std::vector<catalog_entry>& entries() const noexcept { return entries_; }

  private:
    std::vector<catalog_entry> entries_;
    std::shared_ptr<const encoder> reference_;
    std::map<std::string, std::shared_ptr<const encoder>, std::less<>> by_model_;
};

}  // namespace tokenmeter::tokenizer
