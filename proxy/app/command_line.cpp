// app/command_line: flags → command_line → settings. app/flags parses the words; validation stays
// in config/.
#include "app/command_line.hpp"

#include <cstdio>

#include "app/config_files.hpp"
#include "app/flags.hpp"
#include "app/module_options.hpp"
#include "app/tokenizers.hpp"

namespace tokenmeter::app {

namespace {

constexpr std::string_view help_text = R"(usage: tokenmeter [options]
       tokenmeter --check-config FILE [options] [--print-config]
       tokenmeter --print-config [options]
       tokenmeter usage [--spool DIR] [--from T] [--to T] [--tenant X] [--plan] [--json]
       tokenmeter tokenize --tokenizer SPEC [--ids] [--tokenizer-dir DIR]   (see tokenize --help)
       tokenmeter healthcheck [--admin HOST:PORT] [--config FILE] [--ready]  (see healthcheck --help)

A reverse proxy that meters LLM inference traffic (TTFT, ITL, TPOT, tokens/s) and exports
Prometheus metrics. Bytes are forwarded unchanged.

options (flags override the config file; --flag VALUE or --flag=VALUE):
  --config FILE        YAML config (see config/README.md)
  --listen HOST:PORT   where clients connect          (default 127.0.0.1:8080)
  --upstream URL       the model server, http[s]://HOST:PORT[/base] (default http://127.0.0.1:8000)
  --admin HOST:PORT    /metrics, /healthz, /readyz    (default 127.0.0.1:9090)
  --threads N          worker threads (0 = one per usable CPU, at most 8)
  --log-level LEVEL    trace|debug|info|warn|error|off
  --access-log         log one line per request
  --check-config FILE  validate FILE with the other flags on top, loading every certificate,
                       key, CA, token file, environment variable and tokenizer it names; print
                       every error with its key, exit 0 if valid
  --print-config       print the effective configuration (file, then flags) as YAML, with the
                       API-key hashes of tenants.api_key_names redacted
  --version            print the version
  --help               this text
)";

}  // namespace

std::string_view usage_text() {
    return help_text;
}

parsed_command_line parse_command_line(const std::vector<std::string>& args) {
    const parsed_flags vm = parse_flags(args, {{"version"},
                                               {"check-config", true},
                                               {"config", true},
                                               {"listen", true},
                                               {"upstream", true},
                                               {"admin", true},
                                               {"threads", true},
                                               {"log-level", true},
                                               {"access-log"},
                                               {"print-config"}});
    if (!vm.ok()) {
        return {std::nullopt, vm.error};
    }
    command_line out;
    if (vm.has("help")) {
        out.what = command_line::action::help;
    } else if (vm.has("version")) {
        out.what = command_line::action::version;
    } else if (vm.has("check-config")) {
        out.what = command_line::action::check_config;
        out.check_config_path = *vm.value("check-config");
    } else if (vm.has("print-config")) {
        out.what = command_line::action::print_config;
    }
    out.print_config = vm.has("print-config");
    out.config_path = vm.value("config").value_or("");
    if (!out.check_config_path.empty()) {
        // The file checked is the file the proxy would run with.
        if (!out.config_path.empty() && out.config_path != out.check_config_path) {
            return {std::nullopt, "--check-config and --config name different files"};
        }
        out.config_path = out.check_config_path;
    }
    out.listen = vm.value("listen");
    out.upstream = vm.value("upstream");
    out.admin = vm.value("admin");
    out.threads = vm.value("threads");
    out.log_level = vm.value("log-level");
    out.access_log = vm.has("access-log");
    return {out, {}};
}

namespace {

// The flags on top of `settings`; a flag that does not parse is an error in `errors`, a log
// level that names none is left in `words` for config::validate.
void apply_flags(const command_line& flags, config::settings& settings,
                 std::vector<config::config_error>& errors, config::unknown_words& words) {
    if (flags.listen) {
        if (auto e = config::parse_endpoint(*flags.listen)) {
            settings.listen = *e;
        } else {
            errors.push_back({"--listen", "expected HOST:PORT, got '" + *flags.listen + "'"});
        }
    }
    if (flags.admin) {
        if (auto e = config::parse_endpoint(*flags.admin)) {
            settings.admin = *e;
        } else {
            errors.push_back({"--admin", "expected HOST:PORT, got '" + *flags.admin + "'"});
        }
    }
    if (flags.upstream) {
        if (auto u = config::parse_upstream(*flags.upstream)) {
            settings.upstream = *u;
        } else {
            errors.push_back({"--upstream", "expected http[s]://HOST:PORT[/base], got '" +
                                                *flags.upstream + "'"});
        }
    }
    if (flags.threads) {
        // The range is config's rule ("threads: must be at most 256"), checked by validate below.
        const auto n = config::detail::parse_count(*flags.threads);
        if (n.value) {
            settings.threads = *n.value;
        } else {
            errors.push_back({"--threads", "expected a whole number, got '" + *flags.threads +
                                               "' (" + n.why + ")"});
        }
    }
    if (flags.log_level) {
        if (const auto level = config::mode_from_word<config::log_level>(*flags.log_level)) {
            settings.log.level = *level;
        } else {
            words["log.level"] = *flags.log_level;
        }
    }
    if (flags.access_log) {
        settings.log.access_log = true;
    }
}

}  // namespace

config::load_result build_settings(const command_line& flags) {
    config::load_result loaded;
    loaded.value = config::default_settings();
    config::settings& settings = loaded.value;
    std::vector<config::config_error>& errors = loaded.errors;
    config::unknown_words words;
    if (!flags.config_path.empty()) {
        loaded = config::load_file(flags.config_path);
        if (!loaded.ok()) {
            // The file's errors include its validation; the flags' own are added, so that one
            // run names every error.
            apply_flags(flags, settings, errors, words);
            for (const auto& [key, word] : words) {
                errors.push_back({key, "unknown value '" + word + "'"});
            }
            auto modules = module_errors(settings);
            errors.insert(errors.end(), modules.begin(), modules.end());
            return loaded;
        }
    }
    apply_flags(flags, settings, errors, words);
    auto semantic = config::validate(settings, words);
    errors.insert(errors.end(), semantic.begin(), semantic.end());
    auto modules = module_errors(settings);
    errors.insert(errors.end(), modules.begin(), modules.end());
    return loaded;
}

void print_errors(const std::vector<config::config_error>& errors, const std::string& source) {
    for (const auto& error : errors) {
        if (error.key.empty()) {
            std::fprintf(stderr, "%s: %s\n", source.c_str(), error.message.c_str());
        } else {
            std::fprintf(stderr, "%s: %s: %s\n", source.c_str(), error.key.c_str(),
                         error.message.c_str());
        }
    }
}

int check_config(const command_line& flags) {
    const std::string& path = flags.config_path;
    auto result = build_settings(flags);
    // The files are checked even when keys are wrong: one run lists every error.
    const auto files = referenced_file_errors(result.value);
    result.errors.insert(result.errors.end(), files.begin(), files.end());
    if (result.ok()) {
        // The tokenizer files the config names must exist and load, or start-up would fail.
        auto tokenizers = load_tokenizers(result.value);
        for (const auto& e : tokenizers.errors) {
            result.errors.push_back({e.key, e.message});
        }
        for (const auto& warning : tokenizers.warnings) {
            std::fprintf(stderr, "%s: warning: %s\n", path.c_str(), warning.c_str());
        }
    }
    if (!result.ok()) {
        print_errors(result.errors, path);
        std::fprintf(stderr, "%s: %zu error(s)\n", path.c_str(), result.errors.size());
        return 1;
    }
    if (flags.print_config) {
        std::fputs(config::to_yaml(redacted(result.value)).c_str(), stdout);
        return 0;
    }
    std::printf("%s: ok\n", path.c_str());
    return 0;
}

int print_config(const command_line& flags) {
    const auto result = build_settings(flags);
    if (!result.ok()) {
        print_errors(result.errors, flags.config_path.empty() ? "tokenmeter" : flags.config_path);
        return 1;
    }
    std::fputs(config::to_yaml(redacted(result.value)).c_str(), stdout);
    return 0;
}

}  // namespace tokenmeter::app
