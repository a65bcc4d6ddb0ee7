// tokenizer/embedded: o200k_base and cl100k_base built into the binary, so that normalized counts
// and `tokenmeter tokenize` work with no file and no configuration. A file of the same name in
// the tokenizer search path still takes precedence (tokenizer::load decides).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::detail {

// True for the names built in: "o200k_base", "cl100k_base".
bool is_embedded(std::string_view name) noexcept;

// Decompresses and builds the named built-in encoder, matching its special tokens in the text when
// `match_special_tokens` (tiktoken's allowed_special="all"); nullptr with `error` set if `name`
// is not built in or its table is damaged (which a unit test rules out for the shipped tables).
std::shared_ptr<const encoder> load_embedded(std::string_view name, bool match_special_tokens,
                                             std::string& error);

// The special tokens of o200k_base and cl100k_base (content, id), as the "special_tokens" of the
// tiktoken npm package's encoder files the tables come from (embedded/SOURCES); empty for any
// other name. Also used for .tiktoken rank files, which carry none.
std::vector<std::pair<std::string, token_id>> builtin_special_tokens(std::string_view name);

// The built-in table as stored (compressed), for tests and size reports.
std::string_view embedded_blob(std::string_view name) noexcept;

}  // namespace tokenmeter::tokenizer::detail
