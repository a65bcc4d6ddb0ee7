// tokenmeter: argv → settings → app::run. Subcommands first, then the proxy's own flags.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "app/app.hpp"
#include "app/command_line.hpp"
#include "app/healthcheck_command.hpp"
#include "app/tokenize_command.hpp"
#include "app/usage_command.hpp"

int main(int argc, char** argv) {
    using namespace tokenmeter;
    const std::vector<std::string> args(argv + 1, argv + argc);
    // A subcommand owns every argument after its name; the proxy's flags never mix with its own.
    if (!args.empty() && args.front() == "usage") {
        return app::usage_command({args.begin() + 1, args.end()});
    }
    if (!args.empty() && args.front() == "healthcheck") {
        return app::healthcheck_command({args.begin() + 1, args.end()});
    }
    if (!args.empty() && args.front() == "tokenize") {
        return app::tokenize_command({args.begin() + 1, args.end()});
    }
    const app::parsed_command_line parsed = app::parse_command_line(args);
    if (!parsed.value) {
        std::fprintf(stderr, "tokenmeter: %s (see --help)\n", parsed.error.c_str());
        return 2;
    }
    const app::command_line& flags = *parsed.value;
    switch (flags.what) {
        case app::command_line::action::help:
            std::fputs(std::string(app::usage_text()).c_str(), stdout);
            return 0;
        case app::command_line::action::version:
            std::printf("tokenmeter %s\n", TOKENMETER_VERSION);
            return 0;
        case app::command_line::action::check_config:
            return app::check_config(flags);
        case app::command_line::action::print_config:
            return app::print_config(flags);
        case app::command_line::action::run:
            break;
    }
    config::load_result loaded = app::build_settings(flags);
    if (!loaded.ok()) {
        app::print_errors(loaded.errors,
                          flags.config_path.empty() ? "tokenmeter" : flags.config_path);
        return 1;
    }
    app::reloader reload;
    if (!flags.config_path.empty()) {
        // A reload reads the same file and keeps the same flags.
        reload = [flags] { return app::build_settings(flags); };
    }
    return app::run(loaded.value, reload);
}
