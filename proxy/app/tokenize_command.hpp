// app/tokenize_command: `tokenmeter tokenize`, re-tokenizes stdin with a configured encoder and
// prints the token count (and ids). For checking a tokenizer file and for parity scripts.
#pragma once

namespace tokenmeter::app {

// argc/argv are those after "tokenize". Returns the process exit code (2 on any error).
int tokenize_command(int argc, char** argv);

}  // namespace tokenmeter::app
