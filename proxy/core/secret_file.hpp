// core/secret_file: reads a secret (a password, a bearer token) from a file, the way Kubernetes
// and Docker mount them: the whole file, less the trailing newline `echo` leaves.
#pragma once

#include <optional>
#include <string>

namespace tokenmeter::core {

// The secret, or nullopt with `why` set ("cannot read /x" or "/x is empty"). `why` never holds
// any of the file's content.
std::optional<std::string> read_secret_file(const std::string& path, std::string& why);

}  // namespace tokenmeter::core
