// tokenizer/embedded: o200k_base and cl100k_base built into the binary, so that normalized counts
// and `tokenmeter tokenize` work with no file and no configuration. A file of the same name in
// the tokenizer search path still takes precedence (tokenizer::load decides).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::tokenizer::detail {

// True for the names built in: "o200k_base", "cl100k_base".
bool is_embedded(std::string_view name) noexcept;

// Decompresses and builds the named built-in encoder; nullptr with `error` set if `name` is not
// built in or its table is damaged (which a unit test rules out for the shipped tables).
std::shared_ptr<const encoder> load_embedded(std::string_view name, std::string& error);

// The built-in table as stored (compressed), for tests and size reports.
std::string_view embedded_blob(std::string_view name) noexcept;

}  // namespace tokenmeter::tokenizer::detail
