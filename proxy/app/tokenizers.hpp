// app/tokenizers: loads the tokenizers the settings name (start-up and --check-config), on the
// search path every command shares, and describes them for the start-up log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "tokenizer/catalog.hpp"

namespace tokenmeter::app {

// Where named tokenizers are looked for, in order: `configured_dir` (tokenizer_dir or
// --tokenizer-dir) if not empty, $TOKENMETER_TOKENIZER_DIR if set, <exe>/../share/tokenmeter/
// tokenizers (where `cmake --install` and the .deb put them), /usr/local/share/tokenmeter/
// tokenizers. o200k_base and cl100k_base are also built in, used when no file is found.
std::vector<std::string> tokenizer_search_dirs(const std::string& configured_dir);

// The config's special_tokens setting as the tokenizer module names it.
tokenizer::special_tokens special_tokens_mode(config::special_tokens_mode setting);

tokenizer::catalog::load_result load_tokenizers(const config::settings& settings);

// The process's resident memory in bytes, after handing memory that loading freed (a parsed
// tokenizer.json) back to the system, so that the number is what stays resident; 0 if unknown.
std::int64_t settled_resident_bytes();
// The process's peak resident memory (VmHWM) in bytes; 0 if unknown.
std::int64_t peak_resident_bytes();
// A monotonic time in seconds, for load times.
double seconds_now();

// One line per tokenizer a role uses: role, model, name, source, load time, memory.
std::vector<std::string> describe_tokenizers(const tokenizer::catalog& catalog);

}  // namespace tokenmeter::app
