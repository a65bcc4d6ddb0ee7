#include "core/secret_file.hpp"

#include <fstream>
#include <sstream>

namespace tokenmeter::core {

std::optional<std::string> read_secret_file(const std::string& path, std::string& why) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) {
        why = "cannot read " + path;
        return std::nullopt;
    }
    std::string secret = text.str();
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
        secret.pop_back();
    }
    if (secret.empty()) {
        why = path + " is empty";
        return std::nullopt;
    }
    return secret;
}

}  // namespace tokenmeter::core
