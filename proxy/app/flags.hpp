// app/flags: the one argv parser, for the proxy's own flags and for every subcommand. Long flags
// only ("--name VALUE" or "--name=VALUE"), -h for --help; no abbreviations; a flag given twice
// keeps its last value; a word that is not a flag is an error. Boost.Program_options parses.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::app {

struct flag {
    std::string_view name;  // without the dashes: "spool"
    bool takes_value = false;
};

struct parsed_flags {
    // Each flag given, with its last value ("" for a switch).
    std::map<std::string, std::string, std::less<>> given;
    // When not empty: one line, "unknown argument '--x'" or "--x needs a value"; `given` is then
    // empty.
    std::string error;

    bool ok() const { return error.empty(); }
    bool has(std::string_view name) const { return given.find(name) != given.end(); }
    std::optional<std::string> value(std::string_view name) const;
};

// args: the words after the program's (or the subcommand's) name. "help" is always known and
// also answers to -h.
parsed_flags parse_flags(const std::vector<std::string>& args, std::initializer_list<flag> table);

}  // namespace tokenmeter::app
