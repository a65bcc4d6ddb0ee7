// app/usage_command: see usage_command.hpp.
#include "app/usage_command.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "app/flags.hpp"
#include "app/module_options.hpp"
#include "config/config.hpp"
#include "usage/plan.hpp"
#include "usage/record.hpp"
#include "usage/report.hpp"

namespace tokenmeter::app {

namespace {

using usage::plan_options;

constexpr const char* help_text = R"(usage: tokenmeter usage [--spool DIR | --config FILE] [options]

Reads the usage spool and prints totals per tenant and model: requests, input, output,
reasoning and cached tokens, their cost (from the records: `prices` in the config), and the
peak tokens per second.

  --spool DIR      the spool directory (usage.spool_dir)
  --config FILE    take the spool directory from this config file instead
  --from TIME      records that started at or after TIME (UTC): 2026-11-21 or 2026-11-21T13:00[:00]
  --to TIME        records that started before TIME
  --tenant NAME    only this tenant
  --model NAME     only this model
  --json           JSON instead of a table
  --strict         exit 1 when a spool line is not a usage entry (by default such lines are
                   skipped, counted in the output and named in a warning on stderr)

  --plan           a capacity plan per model instead of totals: the mix of input and output
                   tokens (mean, p50, p95), tokens/s, concurrency and requests/s per one-minute
                   window (p50, p99, peak), and the provisioned-throughput band the peak needs,
                   beside the band the same request rate needs at the reference mix
  --band-size N    tokens/s per band step (default 100)
  --reference-mix IN/OUT   the reference mix (default 2048/256)
  --ttft-target D  with --plan: the share of requests with TTFT at most D (500ms, 2s)
  --tpot-target D  with --plan: the share with time per output token at most D (50ms)

Definitions: docs/usage-records.md. Peak tokens/s: input + output tokens per UTC second, summed over the group's records. A
record's input tokens count in the second of its first token (prefill ends there); its output
tokens are spread evenly from the first token to the end. Records sharing an id count once.
)";

// "500ms", "2s", "0.25s" -> seconds.
std::optional<double> parse_seconds(const std::string& text) {
    double scale = 1.0;
    std::string number = text;
    if (number.size() > 2 && number.ends_with("ms")) {
        scale = 0.001;
        number.resize(number.size() - 2);
    } else if (number.size() > 1 && number.ends_with('s')) {
        number.resize(number.size() - 1);
    } else {
        return std::nullopt;
    }
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !(v > 0) || !std::isfinite(v)) {
        return std::nullopt;
    }
    return v * scale;
}

// "2048/256" -> {2048, 256}.
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_mix(const std::string& text) {
    const auto slash = text.find('/');
    if (slash == std::string::npos) {
        return std::nullopt;
    }
    char* end = nullptr;
    const std::string in = text.substr(0, slash);
    const std::string out = text.substr(slash + 1);
    const unsigned long long i = std::strtoull(in.c_str(), &end, 10);
    if (in.empty() || end != in.c_str() + in.size()) {
        return std::nullopt;
    }
    const unsigned long long o = std::strtoull(out.c_str(), &end, 10);
    if (out.empty() || end != out.c_str() + out.size() || i + o == 0) {
        return std::nullopt;
    }
    return std::make_pair(static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(o));
}

// Sets one of --plan's options; false (after saying why) when the value is wrong.
bool set_plan_option(std::string_view arg, const std::string& v, plan_options& o) {
    const auto bad = [&](const char* expected) {
        std::fprintf(stderr, "tokenmeter usage: %s: expected %s, got '%s'\n",
                     std::string(arg).c_str(), expected, v.c_str());
        return false;
    };
    if (arg == "--band-size") {
        char* end = nullptr;
        const double size = std::strtod(v.c_str(), &end);
        if (end != v.c_str() + v.size() || !(size > 0) || !std::isfinite(size)) {
            return bad("a number of tokens/s above 0, like 100");
        }
        o.band_size = size;
    } else if (arg == "--reference-mix") {
        const auto mix = parse_mix(v);
        if (!mix) {
            return bad("input/output tokens like 2048/256");
        }
        o.reference_input = mix->first;
        o.reference_output = mix->second;
    } else {
        const auto seconds = parse_seconds(v);
        if (!seconds) {
            return bad("a duration like 500ms or 2s");
        }
        (arg == "--ttft-target" ? o.ttft_target_seconds : o.tpot_target_seconds) = *seconds;
    }
    return true;
}

constexpr std::array<std::string_view, 4> plan_flags = {"band-size", "ttft-target", "tpot-target",
                                                        "reference-mix"};

}  // namespace

std::optional<std::string> spool_dir_from_config(const std::string& path) {
    auto loaded = config::load_file(path);
    const auto modules = module_errors(loaded.value);
    loaded.errors.insert(loaded.errors.end(), modules.begin(), modules.end());
    if (!loaded.ok()) {
        for (const auto& e : loaded.errors) {
            std::fprintf(stderr, "%s: %s\n", path.c_str(), config::to_string(e).c_str());
        }
        return std::nullopt;
    }
    return loaded.value.usage.spool_dir;
}

int usage_command(const std::vector<std::string>& args) {
    const parsed_flags flags = parse_flags(args, {{"spool", true},
                                                  {"config", true},
                                                  {"from", true},
                                                  {"to", true},
                                                  {"tenant", true},
                                                  {"model", true},
                                                  {"json"},
                                                  {"strict"},
                                                  {"plan"},
                                                  {"band-size", true},
                                                  {"ttft-target", true},
                                                  {"tpot-target", true},
                                                  {"reference-mix", true}});
    if (!flags.ok()) {
        std::fprintf(stderr, "tokenmeter usage: %s (see --help)\n", flags.error.c_str());
        return 2;
    }
    if (flags.has("help")) {
        std::fputs(help_text, stdout);
        return 0;
    }
    usage::report_filter filter;
    filter.tenant = flags.value("tenant");
    filter.model = flags.value("model");
    for (const std::string_view bound : {"from", "to"}) {
        const auto text = flags.value(bound);
        if (!text) {
            continue;
        }
        const auto t = usage::parse_time(*text);
        if (!t) {
            std::fprintf(stderr,
                         "tokenmeter usage: --%s: expected a UTC time like 2026-11-21 or "
                         "2026-11-21T13:00:00Z, got '%s'\n",
                         std::string(bound).c_str(), text->c_str());
            return 2;
        }
        (bound == "from" ? filter.from_unix_ms : filter.to_unix_ms) = *t;
    }
    plan_options plan_opts;
    for (const std::string_view name : plan_flags) {
        if (const auto v = flags.value(name)) {
            if (!set_plan_option("--" + std::string(name), *v, plan_opts)) {
                return 2;
            }
        }
    }
    std::string spool = flags.value("spool").value_or("");
    const std::string config_file = flags.value("config").value_or("");
    if (spool.empty() && !config_file.empty()) {
        auto dir = spool_dir_from_config(config_file);
        if (!dir) {
            return 1;
        }
        spool = std::move(*dir);
    }
    if (spool.empty()) {
        std::fprintf(stderr, "tokenmeter usage: give --spool DIR or --config FILE (see --help)\n");
        return 2;
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(spool, ec)) {
        std::fprintf(stderr, "tokenmeter usage: %s is not a directory\n", spool.c_str());
        return 1;
    }
    const bool strict = flags.has("strict");
    const bool json = flags.has("json");
    const usage::spool_contents read = usage::read_spool(spool);
    if (read.malformed > 0) {
        std::fprintf(stderr,
                     "tokenmeter usage: %s: %llu line(s) that are not usage entries %s (the first: "
                     "%s; the proxy sets them aside in quarantine.jsonl)\n",
                     strict ? "error" : "warning", static_cast<unsigned long long>(read.malformed),
                     strict ? "(--strict)" : "skipped", read.first_malformed.c_str());
        if (strict) {
            return 1;
        }
    }
    if (flags.has("plan")) {
        const auto plans = usage::build_plan(read.records, filter, plan_opts);
        const std::string text =
            json ? usage::plan_json(plans, plan_opts) : usage::format_plan(plans, plan_opts);
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    usage::usage_report report = usage::build_report(read.records, filter);
    report.malformed = read.malformed;
    const std::string text =
        json ? usage::report_json(report, filter) : usage::format_table(report);
    std::fputs(text.c_str(), stdout);
    return 0;
}

}  // namespace tokenmeter::app
