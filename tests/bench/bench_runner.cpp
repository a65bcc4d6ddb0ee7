#include "bench_runner.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <thread>
#include <vector>

#include "load_runner.hpp"
#include "proc_stats.hpp"
#include "sample_set.hpp"
#include "text_table.hpp"

namespace tokenmeter::load {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

struct round_report {
    std::string target;  // "direct" or "proxy"
    unsigned round = 0;
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    std::uint64_t content_chunks = 0;
    std::uint64_t unstamped_chunks = 0;
    double wall_seconds = 0;
    double delivery_p50 = nan;
    double delivery_p90 = nan;
    double delivery_p99 = nan;
    double time_to_first_token_p50 = nan;
    double time_to_first_token_p99 = nan;
    double proxy_cpu_seconds = nan;
    double cpu_seconds_per_million_chunks = nan;
    std::string first_error;
};

struct memory_report {
    std::uint64_t idle_rss_kib = 0;
    std::uint64_t peak_rss_kib = 0;  // highest sample while every stream was open
    std::size_t streams = 0;
    std::size_t samples_all_open = 0;
    std::uint64_t ok = 0;
    std::uint64_t failed = 0;
    double rss_per_stream_kib = nan;
    std::string first_error;
};

load_options round_options(const bench_options& options, const loopback_url& target) {
    load_options load;
    load.target = target;
    load.path = options.path;
    load.concurrency = options.concurrency;
    load.requests = options.requests;
    load.duration_seconds = options.round_duration_limit_seconds;
    load.models = {options.model};
    load.output_tokens = options.output_tokens;
    load.time_to_first_token_ms = options.time_to_first_token_ms;
    load.inter_token_latency_ms = options.inter_token_latency_ms;
    load.tokens_per_chunk = options.tokens_per_chunk;
    load.stamp = true;
    return load;
}

round_report run_round(const bench_options& options, bool through_proxy, unsigned round) {
    load_options load = round_options(options, through_proxy ? options.proxy : options.direct);
    std::optional<double> cpu_before;
    if (through_proxy && options.proxy_pid) {
        cpu_before = process_cpu_seconds(*options.proxy_pid);
    }
    load_result result = run_load(load);
    round_report report;
    report.target = through_proxy ? "proxy" : "direct";
    report.round = round;
    report.ok = result.requests_ok;
    report.failed = result.requests_failed + result.requests_cancelled;
    report.content_chunks = result.content_chunks;
    report.unstamped_chunks = result.unstamped_chunks;
    if (!result.errors.empty()) {
        report.first_error = result.errors.begin()->first;
    }
    report.wall_seconds = result.wall_seconds;
    report.delivery_p50 = result.delivery_latency_seconds.quantile(0.50);
    report.delivery_p90 = result.delivery_latency_seconds.quantile(0.90);
    report.delivery_p99 = result.delivery_latency_seconds.quantile(0.99);
    report.time_to_first_token_p50 = result.time_to_first_token_seconds.quantile(0.50);
    report.time_to_first_token_p99 = result.time_to_first_token_seconds.quantile(0.99);
    if (cpu_before) {
        if (std::optional<double> cpu_after = process_cpu_seconds(*options.proxy_pid)) {
            report.proxy_cpu_seconds = *cpu_after - *cpu_before;
            if (result.content_chunks > 0) {
                report.cpu_seconds_per_million_chunks =
                    report.proxy_cpu_seconds / static_cast<double>(result.content_chunks) * 1e6;
            }
        }
    }
    return report;
}

// Must run on a proxy that has not served traffic yet: once streams have come and gone, the
// allocator keeps their memory and a second measurement in the same process shows almost nothing.
memory_report measure_memory(const bench_options& options) {
    memory_report report;
    report.streams = options.concurrency;
    pid_t pid = *options.proxy_pid;
    report.idle_rss_kib = process_rss_kib(pid).value_or(0);

    std::atomic<std::size_t> open_streams{0};
    std::atomic<std::uint64_t> peak_all_open{0};
    std::atomic<std::size_t> samples_all_open{0};
    {
        std::jthread sampler([&](std::stop_token stop) {
            while (!stop.stop_requested()) {
                if (open_streams.load(std::memory_order_relaxed) == options.concurrency) {
                    if (std::optional<std::uint64_t> rss = process_rss_kib(pid)) {
                        peak_all_open.store(std::max(peak_all_open.load(), *rss));
                        samples_all_open.fetch_add(1);
                    }
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        });
        load_options load = round_options(options, options.proxy);
        load.requests = options.concurrency;  // one long stream per connection, all at once
        load.output_tokens = options.hold_output_tokens;
        load.inter_token_latency_ms = options.hold_inter_token_latency_ms;
        load.stamp = false;
        load.open_streams = &open_streams;
        load_result result = run_load(load);
        report.ok = result.requests_ok;
        report.failed = result.requests_failed + result.requests_cancelled;
        if (!result.errors.empty()) {
            report.first_error = result.errors.begin()->first;
        }
    }
    report.peak_rss_kib = peak_all_open.load();
    report.samples_all_open = samples_all_open.load();
    if (report.samples_all_open > 0 && report.streams > 0) {
        report.rss_per_stream_kib =
            (static_cast<double>(report.peak_rss_kib) - static_cast<double>(report.idle_rss_kib)) /
            static_cast<double>(report.streams);
    }
    return report;
}

double us(double seconds) {
    return seconds * 1e6;
}
double ms(double seconds) {
    return seconds * 1e3;
}

nlohmann::json number(double value) {
    return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

int run_bench(const bench_options& options, std::ostream& out, std::ostream& log) {
    std::optional<memory_report> memory;
    if (options.proxy_pid) {
        if (!process_rss_kib(*options.proxy_pid)) {
            log << "tokenmeter-load bench: cannot read /proc/" << *options.proxy_pid << "/status\n";
            return 2;
        }
        log << "memory phase: " << options.concurrency << " streams held open through the proxy ("
            << options.hold_output_tokens << " tokens, " << options.hold_inter_token_latency_ms
            << " ms apart)\n";
        memory = measure_memory(options);
        if (memory->failed > 0) {
            log << "tokenmeter-load bench: " << memory->failed
                << " requests through the proxy failed (" << memory->first_error << "); stopping\n";
            return 1;
        }
    }

    // Warm-up: connections, upstream pool and caches on both paths, not reported.
    {
        bench_options warm = options;
        warm.requests = options.concurrency;
        warm.output_tokens = 16;
        log << "warm-up: direct and proxy\n";
        for (bool through_proxy : {false, true}) {
            round_report report = run_round(warm, through_proxy, 0);
            if (report.failed > 0) {
                log << "tokenmeter-load bench: warm-up " << report.target << ": " << report.failed
                    << " requests failed (" << report.first_error << "); stopping\n";
                return 1;
            }
        }
    }

    std::vector<round_report> direct;
    std::vector<round_report> proxied;
    for (unsigned round = 1; round <= options.rounds; ++round) {
        // ABBA order, so a drift in machine load over the run does not favour either path.
        bool proxy_first = round % 2 == 0;
        for (int leg = 0; leg < 2; ++leg) {
            bool through_proxy = (leg == 0) == proxy_first;
            log << "round " << round << ": " << (through_proxy ? "proxy" : "direct") << "\n";
            round_report report = run_round(options, through_proxy, round);
            (through_proxy ? proxied : direct).push_back(report);
        }
    }

    std::vector<double> added_p50;
    std::vector<double> added_p99;
    for (std::size_t i = 0; i < direct.size() && i < proxied.size(); ++i) {
        added_p50.push_back(proxied[i].delivery_p50 - direct[i].delivery_p50);
        added_p99.push_back(proxied[i].delivery_p99 - direct[i].delivery_p99);
    }
    auto median_of = [](const std::vector<round_report>& reports, double round_report::*field) {
        std::vector<double> values;
        for (const round_report& report : reports) {
            values.push_back(report.*field);
        }
        return median(values);
    };
    double median_added_p50 = median(added_p50);
    double median_added_p99 = median(added_p99);
    double median_cpu = median_of(proxied, &round_report::cpu_seconds_per_million_chunks);

    std::uint64_t failed = memory ? memory->failed : 0;
    std::uint64_t unstamped = 0;
    for (const auto* reports : {&direct, &proxied}) {
        for (const round_report& report : *reports) {
            failed += report.failed;
            unstamped += report.unstamped_chunks;
        }
    }

    if (options.json) {
        nlohmann::json rounds = nlohmann::json::array();
        for (const auto* reports : {&direct, &proxied}) {
            for (const round_report& r : *reports) {
                rounds.push_back(
                    {{"target", r.target},
                     {"round", r.round},
                     {"ok", r.ok},
                     {"failed", r.failed},
                     {"content_chunks", r.content_chunks},
                     {"wall_seconds", r.wall_seconds},
                     {"chunk_delivery_seconds",
                      {{"p50", number(r.delivery_p50)},
                       {"p90", number(r.delivery_p90)},
                       {"p99", number(r.delivery_p99)}}},
                     {"client_ttft_seconds",
                      {{"p50", number(r.time_to_first_token_p50)},
                       {"p99", number(r.time_to_first_token_p99)}}},
                     {"proxy_cpu_seconds", number(r.proxy_cpu_seconds)},
                     {"cpu_seconds_per_million_chunks", number(r.cpu_seconds_per_million_chunks)}});
            }
        }
        nlohmann::json doc = {
            {"config",
             {{"concurrency", options.concurrency},
              {"requests_per_round", options.requests},
              {"output_tokens", options.output_tokens},
              {"ttft_ms", options.time_to_first_token_ms},
              {"itl_ms", options.inter_token_latency_ms},
              {"rounds", options.rounds}}},
            {"rounds", rounds},
            {"median",
             {{"direct_chunk_delivery_p50_seconds",
               number(median_of(direct, &round_report::delivery_p50))},
              {"direct_chunk_delivery_p99_seconds",
               number(median_of(direct, &round_report::delivery_p99))},
              {"proxy_chunk_delivery_p50_seconds",
               number(median_of(proxied, &round_report::delivery_p50))},
              {"proxy_chunk_delivery_p99_seconds",
               number(median_of(proxied, &round_report::delivery_p99))},
              {"added_latency_p50_seconds", number(median_added_p50)},
              {"added_latency_p99_seconds", number(median_added_p99)},
              {"proxy_cpu_seconds_per_million_chunks", number(median_cpu)}}},
            {"failed_requests", failed},
            {"unstamped_chunks", unstamped},
        };
        if (memory) {
            doc["memory"] = {{"streams", memory->streams},
                             {"idle_rss_kib", memory->idle_rss_kib},
                             {"peak_rss_kib", memory->peak_rss_kib},
                             {"samples_all_open", memory->samples_all_open},
                             {"rss_per_stream_kib", number(memory->rss_per_stream_kib)}};
        }
        out << doc.dump(2) << "\n";
    } else {
        out << "tokenmeter-load bench: " << options.rounds << " rounds each way, concurrency "
            << options.concurrency << ", " << options.requests << " requests/round, "
            << options.output_tokens << " tokens at " << options.inter_token_latency_ms
            << " ms ITL (TTFT " << options.time_to_first_token_ms << " ms)\n\n";
        std::vector<text_column> columns = {
            {"", "round", false},
            {"", "target", true},
            {"requests", "ok", false},
            {"requests", "failed", false},
            {"", "chunks", false},
            {"", "wall s", false},
            {"chunk delivery us", "p50", false},
            {"chunk delivery us", "p90", false},
            {"chunk delivery us", "p99", false},
            {"client TTFT ms", "p50", false},
            {"client TTFT ms", "p99", false},
            {"proxy CPU", "s", false},
            {"proxy CPU", "s/M chunks", false},
        };
        std::vector<std::vector<std::string>> rows;
        for (std::size_t i = 0; i < options.rounds; ++i) {
            for (const auto* reports : {&direct, &proxied}) {
                if (i >= reports->size()) {
                    continue;
                }
                const round_report& r = (*reports)[i];
                rows.push_back({std::to_string(r.round), r.target, std::to_string(r.ok),
                                std::to_string(r.failed), std::to_string(r.content_chunks),
                                format_number(r.wall_seconds, 1), format_short(us(r.delivery_p50)),
                                format_short(us(r.delivery_p90)), format_short(us(r.delivery_p99)),
                                format_short(ms(r.time_to_first_token_p50)),
                                format_short(ms(r.time_to_first_token_p99)),
                                format_short(r.proxy_cpu_seconds),
                                format_short(r.cpu_seconds_per_million_chunks)});
            }
        }
        out << render_table(columns, rows) << "\n";
        out << "medians across rounds\n";
        out << "  chunk delivery p50   direct "
            << format_short(us(median_of(direct, &round_report::delivery_p50))) << " us, proxy "
            << format_short(us(median_of(proxied, &round_report::delivery_p50))) << " us\n";
        out << "  chunk delivery p99   direct "
            << format_short(us(median_of(direct, &round_report::delivery_p99))) << " us, proxy "
            << format_short(us(median_of(proxied, &round_report::delivery_p99))) << " us\n";
        out << "  added latency/chunk  p50 " << format_short(us(median_added_p50)) << " us, p99 "
            << format_short(us(median_added_p99)) << " us (proxy minus direct, paired by round)\n";
        if (options.proxy_pid) {
            out << "  proxy CPU            " << format_short(median_cpu)
                << " s per million forwarded content chunks (utime+stime, clock-tick resolution)\n";
        }
        if (memory) {
            out << "  proxy memory         " << format_short(memory->rss_per_stream_kib)
                << " KiB RSS per open stream ("
                << "peak " << memory->peak_rss_kib << " KiB with " << memory->streams
                << " streams open, idle " << memory->idle_rss_kib << " KiB before; "
                << memory->samples_all_open << " samples)\n";
            if (memory->samples_all_open == 0) {
                out << "  (never saw all streams open at once: raise --hold-output-tokens or "
                       "--hold-itl-ms)\n";
            }
        }
        if (unstamped > 0) {
            out << "  warning: " << unstamped
                << " content chunks carried no sim_sent_ns (is the target tokenmeter-sim?)\n";
        }
        if (failed > 0) {
            out << "  FAILED requests: " << failed << "\n";
        }
    }
    return failed > 0 ? 1 : 0;
}

}  // namespace tokenmeter::load
