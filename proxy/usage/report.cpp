#include "usage/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "usage/plan.hpp"
#include "usage/price.hpp"
#include "usage/spool.hpp"
#include "usage/timeline.hpp"

namespace tokenmeter::usage {
namespace {

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

void add_record(usage_totals& totals, bucket_timeline& timeline, const usage_record& r) {
    totals.requests += 1;
    totals.outcomes[r.outcome] += 1;
    const std::uint64_t input = r.input.value.value_or(0);
    const std::uint64_t output = r.output.value.value_or(0);
    // Token counts come from upstream reports: a sum stops at the largest count rather than
    // wrap around to a small one.
    const auto add = [](std::uint64_t& total, std::uint64_t n) {
        if (__builtin_add_overflow(total, n, &total)) {
            total = std::numeric_limits<std::uint64_t>::max();
        }
    };
    add(totals.input_tokens, input);
    add(totals.output_tokens, output);
    add(totals.reasoning_tokens, r.reasoning.value.value_or(0));
    add(totals.cached_tokens, r.cached_input.value.value_or(0));
    if (!r.currency.empty() && r.cost_picos) {
        totals.cost_picos[r.currency] += *r.cost_picos;
    } else {
        totals.unpriced_requests += 1;
    }
    std::int64_t first = r.end_unix_ms;
    if (r.ttft_seconds) {
        first = r.start_unix_ms + static_cast<std::int64_t>(std::llround(*r.ttft_seconds * 1000));
        first = std::min(first, r.end_unix_ms);
    }
    timeline.add_at(static_cast<double>(input), first);
    timeline.add_spread(static_cast<double>(output), first, r.end_unix_ms);
}

// The UTC second with the most tokens, the earliest of equals.
void finish_peak(usage_totals& totals, bucket_timeline& timeline) {
    timeline.for_each_run(1000, [&](std::int64_t second, std::uint64_t, double tokens) {
        if (tokens > totals.peak_tokens_per_second) {
            totals.peak_tokens_per_second = tokens;
            totals.peak_second_unix_ms = second * 1000;
        }
    });
}

int rank(const std::string& outcome) {
    return outcome == "crash_recovered" ? 0 : 1;
}

nlohmann::ordered_json totals_json(const usage_totals& t) {
    nlohmann::ordered_json j;
    j["requests"] = t.requests;
    j["outcomes"] = t.outcomes;
    j["input_tokens"] = t.input_tokens;
    j["output_tokens"] = t.output_tokens;
    j["reasoning_tokens"] = t.reasoning_tokens;
    j["cached_tokens"] = t.cached_tokens;
    // Exact decimals as strings (a sum can outgrow a double's digits), by currency.
    nlohmann::ordered_json cost = nlohmann::ordered_json::object();
    for (const auto& [currency, picos] : t.cost_picos) {
        cost[currency] = format_amount_sum(picos);
    }
    j["cost"] = cost;
    j["unpriced_requests"] = t.unpriced_requests;
    j["peak_tokens_per_second"] = std::round(t.peak_tokens_per_second * 1000) / 1000;
    j["peak_second"] = t.requests > 0 ? nlohmann::ordered_json(format_time(t.peak_second_unix_ms))
                                      : nlohmann::ordered_json(nullptr);
    return j;
}

// "12.345678 USD", currencies joined by " + ", rounded to micro-units; "-" without a cost.
std::string cost_cell(const usage_totals& t) {
    std::string out;
    for (const auto& [currency, picos] : t.cost_picos) {
        constexpr amount_sum micro = 1'000'000;
        const amount_sum rounded = (picos >= 0 ? picos + micro / 2 : picos - micro / 2) / micro;
        out += (out.empty() ? "" : " + ") + format_amount_sum(rounded * micro) + " " + currency;
    }
    return out.empty() ? "-" : out;
}

std::string partial_count(const usage_totals& t) {
    std::uint64_t complete = 0;
    if (auto it = t.outcomes.find("complete"); it != t.outcomes.end()) {
        complete = it->second;
    }
    return std::to_string(t.requests - complete);
}

void print_table(const usage_report& report) {
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"TENANT", "MODEL", "REQUESTS", "NOT_COMPLETE", "INPUT", "OUTPUT", "REASONING",
                    "CACHED", "COST", "PEAK_TOK/S", "PEAK_SECOND"});
    auto row = [&](const std::string& tenant, const std::string& model, const usage_totals& t) {
        std::array<char, 32> peak{};
        std::snprintf(peak.data(), peak.size(), "%.1f", t.peak_tokens_per_second);
        rows.push_back({tenant, model, std::to_string(t.requests), partial_count(t),
                        std::to_string(t.input_tokens), std::to_string(t.output_tokens),
                        std::to_string(t.reasoning_tokens), std::to_string(t.cached_tokens),
                        cost_cell(t), peak.data(), format_time(t.peak_second_unix_ms).substr(0, 19)});
    };
    for (const auto& [tenant, totals] : report.by_tenant) {
        for (const auto& [key, t] : report.by_tenant_model) {
            if (key.first == tenant) {
                row(key.first, key.second, t);
            }
        }
        row(tenant, "(all)", totals);
    }
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& r : rows) {
        for (std::size_t i = 0; i < r.size(); ++i) {
            widths[i] = std::max(widths[i], r[i].size());
        }
    }
    for (const auto& r : rows) {
        std::string line;
        for (std::size_t i = 0; i < r.size(); ++i) {
            std::string cell = r[i];
            // Names left, numbers right.
            if (i < 2 || i == r.size() - 1) {
                cell.resize(widths[i], ' ');
            } else {
                cell.insert(0, widths[i] - cell.size(), ' ');
            }
            line += (i == 0 ? "" : "  ") + cell;
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        std::printf("%s\n", line.c_str());
    }
    std::printf("%llu record(s), %llu duplicate(s) ignored, %llu unreadable line(s)\n",
                static_cast<unsigned long long>(report.records),
                static_cast<unsigned long long>(report.duplicates),
                static_cast<unsigned long long>(report.malformed));
}

}  // namespace

std::vector<const usage_record*> unique_records(const std::vector<usage_record>& records,
                                                std::uint64_t& duplicates) {
    std::unordered_map<std::string, const usage_record*> by_id;
    std::vector<const usage_record*> order;
    for (const auto& r : records) {
        auto [it, inserted] = by_id.emplace(r.id, &r);
        if (inserted) {
            order.push_back(&r);
            continue;
        }
        duplicates += 1;
        if (rank(r.outcome) > rank(it->second->outcome)) {
            std::replace(order.begin(), order.end(), it->second, &r);
            it->second = &r;
        }
    }
    return order;
}

bool passes(const usage_record& r, const report_filter& filter) {
    return !((filter.from_unix_ms && r.start_unix_ms < *filter.from_unix_ms) ||
             (filter.to_unix_ms && r.start_unix_ms >= *filter.to_unix_ms) ||
             (filter.tenant && r.tenant != *filter.tenant) ||
             (filter.model && r.model != *filter.model));
}

usage_report build_report(const std::vector<usage_record>& records, const report_filter& filter) {
    usage_report report;
    const std::vector<const usage_record*> order = unique_records(records, report.duplicates);
    std::map<std::pair<std::string, std::string>, bucket_timeline> model_bins;
    std::map<std::string, bucket_timeline> tenant_bins;
    for (const usage_record* r : order) {
        if (!passes(*r, filter)) {
            continue;
        }
        report.records += 1;
        auto key = std::make_pair(r->tenant, r->model);
        add_record(report.by_tenant_model[key], model_bins[key], *r);
        add_record(report.by_tenant[r->tenant], tenant_bins[r->tenant], *r);
    }
    for (auto& [key, totals] : report.by_tenant_model) {
        finish_peak(totals, model_bins[key]);
    }
    for (auto& [tenant, totals] : report.by_tenant) {
        finish_peak(totals, tenant_bins[tenant]);
    }
    return report;
}

namespace {

void print_json(const usage_report& report, const report_filter& filter) {
    nlohmann::ordered_json out;
    out["from"] = filter.from_unix_ms
                      ? nlohmann::ordered_json(format_time(*filter.from_unix_ms))
                      : nlohmann::ordered_json(nullptr);
    out["to"] = filter.to_unix_ms ? nlohmann::ordered_json(format_time(*filter.to_unix_ms))
                                  : nlohmann::ordered_json(nullptr);
    out["records"] = report.records;
    out["duplicates"] = report.duplicates;
    out["malformed_lines"] = report.malformed;
    auto rows = nlohmann::ordered_json::array();
    for (const auto& [key, t] : report.by_tenant_model) {
        nlohmann::ordered_json row;
        row["tenant"] = key.first;
        row["model"] = key.second;
        auto fields = totals_json(t);
        for (auto it = fields.begin(); it != fields.end(); ++it) {
            row[it.key()] = it.value();
        }
        rows.push_back(std::move(row));
    }
    out["rows"] = std::move(rows);
    auto tenants = nlohmann::ordered_json::array();
    for (const auto& [tenant, t] : report.by_tenant) {
        nlohmann::ordered_json row;
        row["tenant"] = tenant;
        auto fields = totals_json(t);
        for (auto it = fields.begin(); it != fields.end(); ++it) {
            row[it.key()] = it.value();
        }
        tenants.push_back(std::move(row));
    }
    out["tenants"] = std::move(tenants);
    std::printf(
        "%s\n",
        out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
}

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

bool is_plan_option(const std::string& arg) {
    return arg == "--band-size" || arg == "--ttft-target" || arg == "--tpot-target" ||
           arg == "--reference-mix";
}

// Sets one of --plan's options; false (after saying why) when the value is wrong.
bool set_plan_option(const std::string& arg, const std::string& v, plan_options& o) {
    const auto bad = [&](const char* expected) {
        std::fprintf(stderr, "tokenmeter usage: %s: expected %s, got '%s'\n", arg.c_str(),
                     expected, v.c_str());
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

}  // namespace

int run_usage_command(const std::vector<std::string>& args, const spool_dir_lookup& spool_dir_of) {
    std::string spool;
    std::string config_file;
    report_filter filter;
    bool json = false;
    bool plan = false;
    bool strict = false;
    plan_options plan_opts;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        auto value = [&]() -> std::optional<std::string> {
            if (i + 1 >= args.size()) {
                std::fprintf(stderr, "tokenmeter usage: %s needs a value\n", arg.c_str());
                return std::nullopt;
            }
            return args[++i];
        };
        if (arg == "--help" || arg == "-h") {
            std::fputs(help_text, stdout);
            return 0;
        }
        if (arg == "--json") {
            json = true;
            continue;
        }
        if (arg == "--plan") {
            plan = true;
            continue;
        }
        if (arg == "--strict") {
            strict = true;
            continue;
        }
        const bool takes_value = arg == "--spool" || arg == "--config" || arg == "--from" ||
                                 arg == "--to" || arg == "--tenant" || arg == "--model" ||
                                 is_plan_option(arg);
        if (!takes_value) {
            std::fprintf(stderr, "tokenmeter usage: unknown argument '%s' (see --help)\n",
                         arg.c_str());
            return 2;
        }
        auto v = value();
        if (!v) {
            return 2;
        }
        if (is_plan_option(arg)) {
            if (!set_plan_option(arg, *v, plan_opts)) {
                return 2;
            }
            continue;
        }
        if (arg == "--spool") {
            spool = *v;
        } else if (arg == "--config") {
            config_file = *v;
        } else if (arg == "--tenant") {
            filter.tenant = *v;
        } else if (arg == "--model") {
            filter.model = *v;
        } else {
            auto t = parse_time(*v);
            if (!t) {
                std::fprintf(stderr,
                             "tokenmeter usage: %s: expected a UTC time like 2026-11-21 or "
                             "2026-11-21T13:00:00Z, got '%s'\n",
                             arg.c_str(), v->c_str());
                return 2;
            }
            (arg == "--from" ? filter.from_unix_ms : filter.to_unix_ms) = *t;
        }
    }
    if (spool.empty() && !config_file.empty()) {
        auto dir = spool_dir_of(config_file);
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
    std::vector<usage_record> records;
    std::uint64_t malformed = 0;
    std::string first_malformed;
    for (const auto& segment : list_segments(spool)) {
        auto counts = scan_segment(
            segment.path, 0,
            [&](const spool_entry& e, std::uint64_t) {
                if (e.kind == entry_kind::close) {
                    records.push_back(e.record);
                }
                return true;
            },
            [&](std::string_view, std::uint64_t line, std::uint64_t) {
                if (first_malformed.empty()) {
                    first_malformed = segment.path.string() + " line " + std::to_string(line);
                }
            });
        malformed += counts.malformed;
    }
    if (malformed > 0) {
        std::fprintf(stderr,
                     "tokenmeter usage: %s: %llu line(s) that are not usage entries %s (the first: "
                     "%s; the proxy sets them aside in quarantine.jsonl)\n",
                     strict ? "error" : "warning", static_cast<unsigned long long>(malformed),
                     strict ? "(--strict)" : "skipped", first_malformed.c_str());
        if (strict) {
            return 1;
        }
    }
    if (plan) {
        const std::vector<model_plan> plans = build_plan(records, filter, plan_opts);
        const std::string text = json ? plan_json(plans, plan_opts) : format_plan(plans, plan_opts);
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    usage_report report = build_report(records, filter);
    report.malformed = malformed;
    if (json) {
        print_json(report, filter);
    } else {
        print_table(report);
    }
    return 0;
}

}  // namespace tokenmeter::usage
