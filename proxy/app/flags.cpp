// app/flags: see flags.hpp.
#include "app/flags.hpp"

#include <boost/program_options.hpp>

namespace tokenmeter::app {

namespace po = boost::program_options;

std::optional<std::string> parsed_flags::value(std::string_view name) const {
    const auto it = given.find(name);
    if (it == given.end()) {
        return std::nullopt;
    }
    return it->second;
}

parsed_flags parse_flags(const std::vector<std::string>& args, std::initializer_list<flag> table) {
    using many = std::vector<std::string>;
    po::options_description options;
    // Every flag collects its occurrences (a switch takes none), so the last one counts.
    options.add_options()("help,h", po::value<many>()->zero_tokens(), "");
    for (const flag& f : table) {
        const std::string name(f.name);
        if (f.takes_value) {
            options.add_options()(name.c_str(), po::value<many>(), "");
        } else {
            options.add_options()(name.c_str(), po::value<many>()->zero_tokens(), "");
        }
    }
    // Words that are not flags are collected, to be refused by name below.
    options.add_options()("\x01stray", po::value<many>(), "");
    po::positional_options_description stray;
    stray.add("\x01stray", -1);
    // No guessing of abbreviations (allow_guessing is left out), -h the only short form.
    const auto style =
        po::command_line_style::allow_long | po::command_line_style::long_allow_adjacent |
        po::command_line_style::long_allow_next | po::command_line_style::allow_short |
        po::command_line_style::allow_dash_for_short | po::command_line_style::short_allow_next;
    parsed_flags out;
    po::variables_map vm;
    try {
        po::store(
            po::command_line_parser(args).options(options).positional(stray).style(style).run(),
            vm);
    } catch (const po::unknown_option& e) {
        out.error = "unknown argument '" + e.get_option_name() + "'";
        return out;
    } catch (const po::invalid_command_line_syntax& e) {
        out.error = e.kind() == po::invalid_syntax::missing_parameter
                        ? e.get_option_name() + " needs a value"
                        : std::string(e.what());
        return out;
    } catch (const po::error& e) {
        out.error = e.what();
        return out;
    }
    for (const auto& [name, value] : vm) {
        const auto& words = value.as<many>();
        if (name == "\x01stray") {
            out.error = "unknown argument '" + words.front() + "'";
            out.given.clear();
            return out;
        }
        out.given[name] = words.empty() ? std::string() : words.back();
    }
    return out;
}

}  // namespace tokenmeter::app
