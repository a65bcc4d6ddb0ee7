// tokenmeter: argv → settings → app::run. Nothing else lives here.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "app/app.hpp"
#include "app/tokenize_command.hpp"
#include "app/tokenizers.hpp"
#include "config/config.hpp"
#include "usage/report.hpp"

namespace {

constexpr const char* usage_text = R"(usage: tokenmeter [options]
       tokenmeter --check-config FILE
       tokenmeter usage [--spool DIR] [--from T] [--to T] [--tenant X] [--json]
       tokenmeter tokenize --tokenizer SPEC [--ids] [--tokenizer-dir DIR]   (see tokenize --help)

A reverse proxy that meters LLM inference traffic (TTFT, ITL, TPOT, tokens/s) and exports
Prometheus metrics. Bytes are forwarded unchanged.

options (flags override the config file):
  --config FILE        YAML config (see config/README.md)
  --listen HOST:PORT   where clients connect          (default 127.0.0.1:8080)
  --upstream URL       the model server, http://HOST:PORT[/base]   (default http://127.0.0.1:8000)
  --admin HOST:PORT    /metrics, /healthz, /readyz    (default 127.0.0.1:9090)
  --threads N          worker threads (0 = one per core)
  --log-level LEVEL    trace|debug|info|warn|error|off
  --access-log         log one line per request
  --check-config FILE  validate FILE, print every error with its key, exit 0 if valid
  --version            print the version
  --help               this text
)";

void print_errors(const std::vector<tokenmeter::config::config_error>& errors,
                  const std::string& source) {
    for (const auto& error : errors) {
        if (error.key.empty()) {
            std::fprintf(stderr, "%s: %s\n", source.c_str(), error.message.c_str());
        } else {
            std::fprintf(stderr, "%s: %s: %s\n", source.c_str(), error.key.c_str(),
                         error.message.c_str());
        }
    }
}

int check_config(const std::string& path) {
    auto result = tokenmeter::config::load_file(path);
    if (result.ok()) {
        // The tokenizer files the config names must exist and load, or start-up would fail.
        auto tokenizers = tokenmeter::app::load_tokenizers(result.value);
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
    std::printf("%s: ok\n", path.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace tokenmeter;
    if (argc > 1 && std::string_view(argv[1]) == "usage") {
        return usage::run_usage_command(std::vector<std::string>(argv + 2, argv + argc));
    }
    if (argc >= 2 && std::string_view(argv[1]) == "tokenize") {
        return app::tokenize_command(argc - 2, argv + 2);
    }
    std::vector<std::string_view> args(argv + 1, argv + argc);

    std::string config_path;
    struct override_flag {
        std::string_view flag;
        std::string value;
        bool set = false;
    };
    override_flag listen{"--listen", {}, false};
    override_flag upstream{"--upstream", {}, false};
    override_flag admin{"--admin", {}, false};
    override_flag threads{"--threads", {}, false};
    override_flag log_level{"--log-level", {}, false};
    bool access_log = false;

    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view arg = args[i];
        auto value_of = [&](std::string_view flag) -> std::string {
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "tokenmeter: %.*s needs a value\n",
                             static_cast<int>(flag.size()), flag.data());
                std::exit(2);
            }
            return std::string(args[++i]);
        };
        if (arg == "--help" || arg == "-h") {
            std::fputs(usage_text, stdout);
            return 0;
        }
        if (arg == "--version") {
            std::printf("tokenmeter %s\n", TOKENMETER_VERSION);
            return 0;
        }
        if (arg == "--check-config") {
            return check_config(value_of(arg));
        }
        if (arg == "--config") {
            config_path = value_of(arg);
            continue;
        }
        if (arg == "--access-log") {
            access_log = true;
            continue;
        }
        bool matched = false;
        for (auto* flag : {&listen, &upstream, &admin, &threads, &log_level}) {
            if (arg == flag->flag) {
                flag->value = value_of(arg);
                flag->set = true;
                matched = true;
            }
        }
        if (!matched) {
            std::fprintf(stderr, "tokenmeter: unknown argument '%.*s' (see --help)\n",
                         static_cast<int>(arg.size()), arg.data());
            return 2;
        }
    }

    // The file (when given) with the flags on top, validated. Called again on SIGHUP, so a reload
    // reads the same file and keeps the same flags.
    auto build_settings = [&]() -> config::load_result {
        config::load_result loaded;
        loaded.value = config::default_settings();
        if (!config_path.empty()) {
            loaded = config::load_file(config_path);
            if (!loaded.ok()) {
                return loaded;
            }
        }
        auto& settings = loaded.value;
        std::vector<config::config_error>& errors = loaded.errors;
        if (listen.set) {
            if (auto e = config::parse_endpoint(listen.value)) {
                settings.listen = *e;
            } else {
                errors.push_back({"--listen", "expected HOST:PORT, got '" + listen.value + "'"});
            }
        }
        if (admin.set) {
            if (auto e = config::parse_endpoint(admin.value)) {
                settings.admin = *e;
            } else {
                errors.push_back({"--admin", "expected HOST:PORT, got '" + admin.value + "'"});
            }
        }
        if (upstream.set) {
            if (auto u = config::parse_upstream(upstream.value)) {
                settings.upstream = *u;
            } else {
                errors.push_back({"--upstream", "expected http://HOST:PORT[/base], got '" +
                                                    upstream.value + "'"});
            }
        }
        if (threads.set) {
            char* end = nullptr;
            unsigned long n = std::strtoul(threads.value.c_str(), &end, 10);
            if (end == threads.value.c_str() || *end != '\0' || n > 256) {
                errors.push_back({"--threads", "expected a number from 0 to 256"});
            } else {
                settings.threads = static_cast<std::uint32_t>(n);
            }
        }
        if (log_level.set) {
            settings.log.level = log_level.value;
        }
        if (access_log) {
            settings.log.access_log = true;
        }
        auto semantic = config::validate(settings);
        errors.insert(errors.end(), semantic.begin(), semantic.end());
        return loaded;
    };
    config::load_result loaded = build_settings();
    if (!loaded.ok()) {
        print_errors(loaded.errors, config_path.empty() ? "tokenmeter" : config_path);
        return 1;
    }
    app::reloader reload;
    if (!config_path.empty()) {
        reload = build_settings;
    }
    return app::run(loaded.value, reload);
}
