// tokenizer/catalog: the tokenizers one process uses, loaded once at start-up and shared
// read-only by every worker: the reference tokenizer that normalizes counts across models, and
// each configured model's own ("native") tokenizer. A spec used by several models loads once.
#pragma once

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

struct catalog_options {
    std::string reference;            // a spec, or "none"
    bool reference_required = false;  // false: a missing reference file only warns
    std::string search_dir;
    std::vector<std::pair<std::string, std::string>> models;  // model name → spec
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

  private:
    std::shared_ptr<const encoder> reference_;
    std::map<std::string, std::shared_ptr<const encoder>, std::less<>> by_model_;
};

}  // namespace tokenmeter::tokenizer
