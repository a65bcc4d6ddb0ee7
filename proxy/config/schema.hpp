// config/schema: the keys the schema tables (config/schema.cpp) define, for documentation and
// for the test that holds config/README.md to them. The same tables drive loading and checks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::config {

// What a key's value looks like in YAML.
enum class value_shape { scalar, list, mapping };

struct documented_key {
    // Dotted, with "<name>" (or "<tenant>") for a mapping's free names and "[]" for a list's
    // entries: "timeouts.drain", "models.<name>.tokenizer", "routes[].path".
    std::string key;
    value_shape shape = value_shape::scalar;
    bool section = false;  // a fixed set of child keys (listed too), not a value of its own
    std::string_view doc;  // one line
};

// Every key, parents before their children, in the order the tables list them.
std::vector<documented_key> documented_keys();

}  // namespace tokenmeter::config
