// A walk_json on nlohmann/json's SAX parser, kept for the tests only as the oracle: the
// hand-written scanner must report exactly what this reports, for any bytes. The differential
// unit test, the json_walk fuzzer and the json_walk benchmark (as "before") use it.
#pragma once

#include <string_view>

#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol::reference {

walk_result walk_json(std::string_view text, json_visitor& visitor, json_path& path);

}  // namespace tokenmeter::protocol::reference
