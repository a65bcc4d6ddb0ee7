#include "usage/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "usage/price.hpp"
#include "usage/spool.hpp"
#include "usage/timeline.hpp"

namespace tokenmeter::usage {
namespace {

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

std::string format_table(const usage_report& report) {
    std::string text;
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"TENANT", "MODEL", "REQUESTS", "NOT_COMPLETE", "INPUT", "OUTPUT", "REASONING",
                    "CACHED", "COST", "PEAK_TOK/S", "PEAK_SECOND"});
    auto row = [&](const std::string& tenant, const std::string& model, const usage_totals& t) {
        std::array<char, 32> peak{};
        std::snprintf(peak.data(), peak.size(), "%.1f", t.peak_tokens_per_second);
        rows.push_back({tenant, model, std::to_string(t.requests), partial_count(t),
                        std::to_string(t.input_tokens), std::to_string(t.output_tokens),
                        std::to_string(t.reasoning_tokens), std::to_string(t.cached_tokens),
                        cost_cell(t), peak.data(),
                        format_time(t.peak_second_unix_ms).substr(0, 19)});
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
        text += line + "\n";
    }
    text += std::to_string(report.records) + " record(s), " + std::to_string(report.duplicates) +
            " duplicate(s) ignored, " + std::to_string(report.malformed) + " unreadable line(s)\n";
    return text;
}

std::string report_json(const usage_report& report, const report_filter& filter) {
    nlohmann::ordered_json out;
    out["from"] = filter.from_unix_ms ? nlohmann::ordered_json(format_time(*filter.from_unix_ms))
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
    return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

spool_contents read_spool(const std::filesystem::path& dir) {
    spool_contents out;
    for (const auto& segment : list_segments(dir)) {
        auto counts = scan_segment(
            segment.path, 0,
            [&](const spool_entry& e, std::uint64_t) {
                if (e.kind == entry_kind::close) {
                    out.records.push_back(e.record);
                }
                return true;
            },
            [&](std::string_view, std::uint64_t line, std::uint64_t) {
                if (out.first_malformed.empty()) {
                    out.first_malformed = segment.path.string() + " line " + std::to_string(line);
                }
            });
        out.malformed += counts.malformed;
    }
    return out;
}

}  // namespace tokenmeter::usage
