// app/tokenize_command: `tokenmeter tokenize`, re-tokenizes stdin with a configured encoder and
// prints the token count (and ids). For checking a tokenizer file and for parity scripts.
#pragma once

#include <string>
#include <vector>

namespace tokenmeter::app {

// args: the words after "tokenize". Returns the process exit code (2 on any error).
int tokenize_command(const std::vector<std::string>& args);

}  // namespace tokenmeter::app
