// bench_report: summaries, ratios and rendering of a bench run.
#include "bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "load_runner.hpp"
#include "sample_set.hpp"
#include "text_table.hpp"

namespace tokenmeter::load {
namespace {

struct target_summary {
    std::string name;
    double delivery_p50 = no_value;
    double delivery_p99 = no_value;
    double added_p50 = no_value;
    double added_p99 = no_value;
    double added_first_chunks_p99 = no_value;  // by the chunk's place in its stream
    double added_later_chunks_p99 = no_value;
    double cpu_us_per_chunk = no_value;  // = CPU seconds per million chunks
    double user_us_per_chunk = no_value;  // its user-space part
    std::uint64_t peak_rss_kib = 0;
    double rss_per_stream_kib = no_value;
    std::uint64_t requests = 0;
    std::uint64_t errors = 0;
    std::uint64_t chunks = 0;
    double cpu_ratio = no_value;    // to the baseline's CPU per chunk
    double added_p99_ratio = no_value;
    double added_first_chunks_p99_ratio = no_value;
    double added_later_chunks_p99_ratio = no_value;
    double peak_rss_ratio = no_value;
};

double median_of(const std::vector<round_report>& reports, double round_report::*field) {
    std::vector<double> values;
    for (const round_report& report : reports) {
        values.push_back(report.*field);
    }
    return median(values);
}

double ratio(double value, double base) {
    return std::isfinite(value) && std::isfinite(base) && base > 0 ? value / base : no_value;
}

target_summary summarize(const target_results& target, const std::vector<round_report>& direct) {
    target_summary s;
    s.name = target.name;
    s.delivery_p50 = median_of(target.rounds, &round_report::delivery_p50);
    s.delivery_p99 = median_of(target.rounds, &round_report::delivery_p99);
    std::vector<double> added_p50;
    std::vector<double> added_p99;
    std::vector<double> added_first;
    std::vector<double> added_later;
    for (const round_report& r : target.rounds) {
        for (const round_report& d : direct) {
            if (d.round == r.round) {
                added_p50.push_back(r.delivery_p50 - d.delivery_p50);
                added_p99.push_back(r.delivery_p99 - d.delivery_p99);
                added_first.push_back(r.delivery_first_chunks_p99 - d.delivery_first_chunks_p99);
                added_later.push_back(r.delivery_later_chunks_p99 - d.delivery_later_chunks_p99);
            }
        }
        s.peak_rss_kib = std::max(s.peak_rss_kib, r.peak_rss_kib);
        s.requests += r.ok + r.failed;
        s.errors += r.failed;
        s.chunks += r.content_chunks;
    }
    s.added_p50 = median(added_p50);
    s.added_p99 = median(added_p99);
    s.added_first_chunks_p99 = median(added_first);
    s.added_later_chunks_p99 = median(added_later);
    if (target.measured) {
        s.cpu_us_per_chunk = median_of(target.rounds, &round_report::cpu_seconds_per_million_chunks);
        s.user_us_per_chunk =
            median_of(target.rounds, &round_report::user_seconds_per_million_chunks);
    }
    if (target.memory) {
        s.peak_rss_kib = std::max(s.peak_rss_kib, target.memory->peak_rss_kib);
        s.rss_per_stream_kib = target.memory->rss_per_stream_kib;
        s.requests += target.memory->ok + target.memory->failed;
        s.errors += target.memory->failed;
        s.chunks += target.memory->chunks;
    }
    return s;
}

std::vector<target_summary> summaries(const bench_options& options, const bench_results& results) {
    std::vector<target_summary> all;
    for (const target_results& t : results.targets) {
        all.push_back(summarize(t, results.direct));
    }
    auto base = std::find_if(all.begin(), all.end(),
                             [&](const target_summary& s) { return s.name == options.baseline; });
    if (base != all.end()) {
        const target_summary b = *base;
        for (target_summary& s : all) {
            s.cpu_ratio = ratio(s.cpu_us_per_chunk, b.cpu_us_per_chunk);
            s.added_p99_ratio = ratio(s.added_p99, b.added_p99);
            s.added_first_chunks_p99_ratio =
                ratio(s.added_first_chunks_p99, b.added_first_chunks_p99);
            s.added_later_chunks_p99_ratio =
                ratio(s.added_later_chunks_p99, b.added_later_chunks_p99);
            s.peak_rss_ratio = ratio(static_cast<double>(s.peak_rss_kib),
                                     static_cast<double>(b.peak_rss_kib));
        }
    }
    return all;
}

double us(double seconds) {
    return seconds * 1e6;
}
double ms(double seconds) {
    return seconds * 1e3;
}
double mib(std::uint64_t kib) {
    return kib == 0 ? no_value : static_cast<double>(kib) / 1024.0;
}

nlohmann::json number(double value) {
    return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json round_json(const round_report& r) {
    return {{"target", r.target},
            {"round", r.round},
            {"ok", r.ok},
            {"failed", r.failed},
            {"content_chunks", r.content_chunks},
            {"wall_seconds", r.wall_seconds},
            {"chunk_delivery_seconds",
             {{"p50", number(r.delivery_p50)},
              {"p90", number(r.delivery_p90)},
              {"p99", number(r.delivery_p99)},
              {"p99_first_chunks", number(r.delivery_first_chunks_p99)},
              {"p99_later_chunks", number(r.delivery_later_chunks_p99)}}},
            {"client_ttft_seconds",
             {{"p50", number(r.time_to_first_token_p50)},
              {"p99", number(r.time_to_first_token_p99)}}},
            {"cpu_seconds", number(r.cpu_seconds)},
            {"cpu_seconds_per_million_chunks", number(r.cpu_seconds_per_million_chunks)},
            {"user_seconds_per_million_chunks", number(r.user_seconds_per_million_chunks)},
            {"peak_rss_kib", r.peak_rss_kib}};
}

void print_json(const bench_options& options, const bench_results& results,
                const std::vector<target_summary>& all, std::ostream& out) {
    nlohmann::json rounds = nlohmann::json::array();
    for (const round_report& r : results.direct) {
        rounds.push_back(round_json(r));
    }
    nlohmann::json targets = nlohmann::json::array();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const target_summary& s = all[i];
        const target_results& t = results.targets[i];
        for (const round_report& r : t.rounds) {
            rounds.push_back(round_json(r));
        }
        nlohmann::json entry = {
            {"name", s.name},
            {"chunk_delivery_p50_seconds", number(s.delivery_p50)},
            {"chunk_delivery_p99_seconds", number(s.delivery_p99)},
            {"added_latency_p50_seconds", number(s.added_p50)},
            {"added_latency_p99_seconds", number(s.added_p99)},
            {"added_latency_p99_first_chunks_seconds", number(s.added_first_chunks_p99)},
            {"added_latency_p99_later_chunks_seconds", number(s.added_later_chunks_p99)},
            {"cpu_us_per_chunk", number(s.cpu_us_per_chunk)},
            {"user_us_per_chunk", number(s.user_us_per_chunk)},
            {"peak_rss_kib", s.peak_rss_kib},
            {"rss_per_stream_kib", number(s.rss_per_stream_kib)},
            {"requests", s.requests},
            {"errors", s.errors},
            {"chunks", s.chunks},
            {"ratio_to_baseline",
             {{"cpu_per_chunk", number(s.cpu_ratio)},
              {"added_latency_p99", number(s.added_p99_ratio)},
              {"added_latency_p99_first_chunks", number(s.added_first_chunks_p99_ratio)},
              {"added_latency_p99_later_chunks", number(s.added_later_chunks_p99_ratio)},
              {"peak_rss", number(s.peak_rss_ratio)}}}};
        if (t.memory) {
            entry["memory"] = {{"streams", t.memory->streams},
                               {"idle_rss_kib", t.memory->idle_rss_kib},
                               {"peak_rss_kib", t.memory->peak_rss_kib},
                               {"samples_all_open", t.memory->samples_all_open},
                               {"failed", t.memory->failed}};
        }
        targets.push_back(entry);
    }
    nlohmann::json doc = {
        {"config",
         {{"concurrency", options.concurrency},
          {"requests_per_round", options.requests},
          {"output_tokens", options.output_tokens},
          {"ttft_ms", options.time_to_first_token_ms},
          {"itl_ms", options.inter_token_latency_ms},
          {"rounds", options.rounds},
          {"hold_streams", options.hold_streams != 0 ? options.hold_streams : options.concurrency},
          {"baseline", options.baseline}}},
        {"direct",
         {{"chunk_delivery_p50_seconds", number(median_of(results.direct, &round_report::delivery_p50))},
          {"chunk_delivery_p99_seconds",
           number(median_of(results.direct, &round_report::delivery_p99))}}},
        {"targets", targets},
        {"rounds", rounds}};
    out << doc.dump(2) << "\n";
}

void print_text(const bench_options& options, const bench_results& results,
                const std::vector<target_summary>& all, std::ostream& out) {
    out << "tokenmeter-load bench: " << options.rounds << " rounds, concurrency "
        << options.concurrency << ", " << options.requests << " requests/round, "
        << options.output_tokens << " tokens at " << options.inter_token_latency_ms
        << " ms ITL (TTFT " << options.time_to_first_token_ms << " ms)\n\n";
    std::vector<text_column> columns = {
        {"", "round", false},          {"", "target", true},
        {"requests", "ok", false},     {"requests", "failed", false},
        {"", "chunks", false},         {"", "wall s", false},
        {"chunk delivery us", "p50", false}, {"chunk delivery us", "p90", false},
        {"chunk delivery us", "p99", false}, {"client TTFT ms", "p50", false},
        {"client TTFT ms", "p99", false},    {"CPU", "s", false},
        {"CPU", "us/chunk", false},          {"CPU", "user", false},
        {"", "peak RSS MiB", false},
    };
    std::vector<const round_report*> ordered;
    for (const round_report& r : results.direct) {
        ordered.push_back(&r);
    }
    for (const target_results& t : results.targets) {
        for (const round_report& r : t.rounds) {
            ordered.push_back(&r);
        }
    }
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const round_report* a, const round_report* b) { return a->round < b->round; });
    std::vector<std::vector<std::string>> rows;
    for (const round_report* r : ordered) {
        rows.push_back({std::to_string(r->round), r->target, std::to_string(r->ok),
                        std::to_string(r->failed), std::to_string(r->content_chunks),
                        format_number(r->wall_seconds, 1), format_short(us(r->delivery_p50)),
                        format_short(us(r->delivery_p90)), format_short(us(r->delivery_p99)),
                        format_short(ms(r->time_to_first_token_p50)),
                        format_short(ms(r->time_to_first_token_p99)), format_short(r->cpu_seconds),
                        format_short(r->cpu_seconds_per_million_chunks),
                        format_short(r->user_seconds_per_million_chunks),
                        format_short(mib(r->peak_rss_kib))});
    }
    out << render_table(columns, rows) << "\n";

    const bool ratios = !options.baseline.empty();
    std::vector<text_column> summary_columns = {
        {"", "target", true},
        {"CPU", "us/chunk", false},
        {"CPU", "user", false},
        {"added/chunk us", "p50", false},
        {"added/chunk us", "p99", false},
        {"", "peak RSS MiB", false},
        {"", "KiB/stream", false},
        {"", "errors", false},
        {"", "chunks", false},
    };
    if (ratios) {
        summary_columns.push_back({"ratio to " + options.baseline, "CPU", false});
        summary_columns.push_back({"ratio to " + options.baseline, "p99 added", false});
        summary_columns.push_back({"ratio to " + options.baseline, "peak RSS", false});
    }
    std::vector<std::vector<std::string>> summary_rows;
    summary_rows.push_back({"direct", "-", "-",
                            format_short(us(median_of(results.direct, &round_report::delivery_p50))),
                            format_short(us(median_of(results.direct, &round_report::delivery_p99))),
                            "-", "-", "-", "-"});
    if (ratios) {
        summary_rows.back().insert(summary_rows.back().end(), {"", "", ""});
    }
    // The direct row's p50/p99 columns hold its absolute delivery latency, not an added one.
    for (const target_summary& s : all) {
        std::vector<std::string> row = {s.name,
                                        format_short(s.cpu_us_per_chunk),
                                        format_short(s.user_us_per_chunk),
                                        format_short(us(s.added_p50)),
                                        format_short(us(s.added_p99)),
                                        format_short(mib(s.peak_rss_kib)),
                                        format_short(s.rss_per_stream_kib),
                                        std::to_string(s.errors),
                                        std::to_string(s.chunks)};
        if (ratios) {
            row.push_back(format_number(s.cpu_ratio, 2));
            row.push_back(format_number(s.added_p99_ratio, 2));
            row.push_back(format_number(s.peak_rss_ratio, 2));
        }
        summary_rows.push_back(std::move(row));
    }
    out << "medians across rounds (added latency: target minus direct, paired by round; the direct "
           "row shows its own delivery latency)\n";
    out << render_table(summary_columns, summary_rows) << "\n";

    // Where the tail is: each stream's first chunks (which a burst of new streams delays) or
    // the chunks after them.
    std::vector<text_column> place_columns = {
        {"", "target", true},
        {"p99 added/chunk us", "first " + std::to_string(load_result::first_chunks), false},
        {"p99 added/chunk us", "later", false},
    };
    if (ratios) {
        place_columns.push_back({"ratio to " + options.baseline,
                                 "first " + std::to_string(load_result::first_chunks), false});
        place_columns.push_back({"ratio to " + options.baseline, "later", false});
    }
    std::vector<std::vector<std::string>> place_rows;
    for (const target_summary& s : all) {
        std::vector<std::string> row = {s.name, format_short(us(s.added_first_chunks_p99)),
                                        format_short(us(s.added_later_chunks_p99))};
        if (ratios) {
            row.push_back(format_number(s.added_first_chunks_p99_ratio, 2));
            row.push_back(format_number(s.added_later_chunks_p99_ratio, 2));
        }
        place_rows.push_back(std::move(row));
    }
    out << "p99 added per chunk by the chunk's place in its stream (medians across rounds)\n";
    out << render_table(place_columns, place_rows) << "\n";
    for (const target_results& t : results.targets) {
        if (t.memory && t.memory->samples_all_open == 0) {
            out << "  " << t.name << ": never saw all " << t.memory->streams
                << " streams open at once (raise --hold-output-tokens or --hold-itl-ms)\n";
        }
        if (t.memory && t.memory->failed > 0) {
            out << "  " << t.name << ": " << t.memory->failed << " of " << t.memory->streams
                << " held streams failed (" << t.memory->first_error << ")\n";
        }
    }
}

}  // namespace

int print_bench(const bench_options& options, const bench_results& results, std::ostream& out) {
    const std::vector<target_summary> all = summaries(options, results);
    if (options.json) {
        print_json(options, results, all, out);
    } else {
        print_text(options, results, all, out);
    }
    std::uint64_t failed = 0;
    std::uint64_t unstamped = 0;
    for (const round_report& r : results.direct) {
        failed += r.failed;
        unstamped += r.unstamped_chunks;
    }
    for (const target_results& t : results.targets) {
        failed += t.memory ? t.memory->failed : 0;
        for (const round_report& r : t.rounds) {
            failed += r.failed;
            unstamped += r.unstamped_chunks;
        }
    }
    if (!options.json) {
        if (unstamped > 0) {
            out << "  warning: " << unstamped
                << " content chunks carried no sim_sent_ns (is the upstream tokenmeter-sim?)\n";
        }
        if (failed > 0) {
            out << "  FAILED requests: " << failed << "\n";
        }
    }
    return failed > 0 ? 1 : 0;
}

}  // namespace tokenmeter::load
