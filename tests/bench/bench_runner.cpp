// bench_runner: the rounds and the memory phase; bench_report.cpp prints what they found.
#include "bench_runner.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <stop_token>
#include <thread>

#include "bench_report.hpp"
#include "load_runner.hpp"
#include "proc_stats.hpp"

namespace tokenmeter::load {
namespace {

std::optional<cpu_times> cpu_seconds(const std::vector<pid_t>& pids) {
    if (pids.empty()) {
        return std::nullopt;
    }
    cpu_times total;
    for (pid_t pid : pids) {
        std::optional<cpu_times> cpu = process_cpu_seconds(pid);
        if (!cpu) {
            return std::nullopt;
        }
        total.user += cpu->user;
        total.system += cpu->system;
    }
    return total;
}

std::optional<std::uint64_t> rss_kib(const std::vector<pid_t>& pids) {
    if (pids.empty()) {
        return std::nullopt;
    }
    std::uint64_t total = 0;
    for (pid_t pid : pids) {
        std::optional<std::uint64_t> rss = process_rss_kib(pid);
        if (!rss) {
            return std::nullopt;
        }
        total += *rss;
    }
    return total;
}

// Samples the summed RSS of `pids` every 5 ms while alive; `ready()` gates which samples count.
class rss_sampler {
  public:
    template <typename Ready>
    rss_sampler(const std::vector<pid_t>& pids, Ready ready)
        : thread_([this, pids, ready](std::stop_token stop) {
              while (!stop.stop_requested()) {
                  if (ready()) {
                      if (std::optional<std::uint64_t> rss = rss_kib(pids)) {
                          peak_.store(std::max(peak_.load(), *rss));
                          samples_.fetch_add(1);
                      }
                  }
                  std::this_thread::sleep_for(std::chrono::milliseconds(5));
              }
          }) {}
    std::uint64_t stop() {
        thread_.request_stop();
        thread_.join();
        return peak_.load();
    }
    [[nodiscard]] std::size_t samples() const { return samples_.load(); }

  private:
    std::atomic<std::uint64_t> peak_{0};
    std::atomic<std::size_t> samples_{0};
    std::jthread thread_;
};

load_options round_options(const bench_options& options, const loopback_url& target) {
    load_options load;
    load.target = target;
    load.ca_file = options.ca_file;
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

// target == nullptr: straight to the simulator.
round_report run_round(const bench_options& options, const bench_target* target, unsigned round) {
    load_options load = round_options(options, target ? target->url : options.direct);
    static const std::vector<pid_t> none;
    const std::vector<pid_t>& pids = target ? target->pids : none;
    const std::optional<cpu_times> cpu_before = cpu_seconds(pids);
    std::optional<rss_sampler> sampler;
    if (!pids.empty()) {
        sampler.emplace(pids, [] { return true; });
    }
    load_result result = run_load(load);
    round_report report;
    if (sampler) {
        report.peak_rss_kib = sampler->stop();
    }
    report.target = target ? target->name : "direct";
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
    report.delivery_first_chunks_p99 = result.delivery_first_chunks_seconds.quantile(0.99);
    report.delivery_later_chunks_p99 = result.delivery_later_chunks_seconds.quantile(0.99);
    report.time_to_first_token_p50 = result.time_to_first_token_seconds.quantile(0.50);
    report.time_to_first_token_p99 = result.time_to_first_token_seconds.quantile(0.99);
    if (cpu_before) {
        if (std::optional<cpu_times> cpu_after = cpu_seconds(pids)) {
            report.cpu_seconds = cpu_after->total() - cpu_before->total();
            const double user = cpu_after->user - cpu_before->user;
            if (result.content_chunks > 0) {
                const auto chunks = static_cast<double>(result.content_chunks);
                report.cpu_seconds_per_million_chunks = report.cpu_seconds / chunks * 1e6;
                report.user_seconds_per_million_chunks = user / chunks * 1e6;
            }
        }
    }
    return report;
}

// Must run on a process that has not served traffic yet: once streams have come and gone, the
// allocator keeps their memory and a second measurement in the same process shows almost nothing.
memory_report measure_memory(const bench_options& options, const bench_target& target) {
    memory_report report;
    report.streams = options.hold_streams != 0 ? options.hold_streams : options.concurrency;
    report.idle_rss_kib = rss_kib(target.pids).value_or(0);

    std::atomic<std::size_t> open_streams{0};
    rss_sampler sampler(target.pids, [&] {
        return open_streams.load(std::memory_order_relaxed) == report.streams;
    });
    load_options load = round_options(options, target.url);
    load.concurrency = report.streams;
    load.requests = report.streams;  // one long stream per connection, all at once
    load.output_tokens = options.hold_output_tokens;
    load.inter_token_latency_ms = options.hold_inter_token_latency_ms;
    load.stamp = false;
    load.open_streams = &open_streams;
    load_result result = run_load(load);
    report.peak_rss_kib = sampler.stop();
    report.samples_all_open = sampler.samples();
    report.ok = result.requests_ok;
    report.failed = result.requests_failed + result.requests_cancelled;
    report.chunks = result.content_chunks;
    if (!result.errors.empty()) {
        report.first_error = result.errors.begin()->first;
    }
    if (report.samples_all_open > 0 && report.streams > 0) {
        report.rss_per_stream_kib =
            (static_cast<double>(report.peak_rss_kib) - static_cast<double>(report.idle_rss_kib)) /
            static_cast<double>(report.streams);
    }
    return report;
}

}  // namespace

target_parse parse_bench_target(const std::string& text) {
    target_parse parsed;
    const auto equals = text.find('=');
    if (equals == 0 || equals == std::string::npos) {
        parsed.error = "expected NAME=URL[,PID[+PID...]], got '" + text + "'";
        return parsed;
    }
    bench_target target;
    target.name = text.substr(0, equals);
    if (target.name == "direct") {
        parsed.error = "'direct' is the simulator itself; name the proxy something else";
        return parsed;
    }
    std::string rest = text.substr(equals + 1);
    std::string pid_text;
    if (const auto comma = rest.find(','); comma != std::string::npos) {
        pid_text = rest.substr(comma + 1);
        rest.resize(comma);
    }
    url_result url = parse_loopback_url(rest);
    if (!url.url) {
        parsed.error = target.name + ": " + url.error;
        return parsed;
    }
    target.url = *url.url;
    std::size_t at = 0;
    while (at < pid_text.size()) {
        auto end = pid_text.find('+', at);
        if (end == std::string::npos) {
            end = pid_text.size();
        }
        int pid = 0;
        const char* first = pid_text.data() + at;
        const char* last = pid_text.data() + end;
        const auto [stop, ec] = std::from_chars(first, last, pid);
        if (ec != std::errc() || stop != last || pid <= 0) {
            parsed.error = target.name + ": '" + pid_text + "' is not a list of PIDs like 12+13";
            return parsed;
        }
        target.pids.push_back(static_cast<pid_t>(pid));
        at = end + 1;
    }
    parsed.target = std::move(target);
    return parsed;
}

int run_bench(const bench_options& options, std::ostream& out, std::ostream& log) {
    bench_results results;
    for (const bench_target& target : options.targets) {
        results.targets.push_back({target.name, !target.pids.empty(), {}, std::nullopt});
        if (target.pids.empty()) {
            continue;
        }
        if (!rss_kib(target.pids)) {
            log << "tokenmeter-load bench: " << target.name << ": cannot read /proc of its PIDs\n";
            return 2;
        }
        const std::size_t streams =
            options.hold_streams != 0 ? options.hold_streams : options.concurrency;
        log << "memory phase, " << target.name << ": " << streams << " streams held open ("
            << options.hold_output_tokens << " tokens, " << options.hold_inter_token_latency_ms
            << " ms apart)\n";
        results.targets.back().memory = measure_memory(options, target);
    }

    // Warm-up: connections, upstream pools and caches on every path, not reported.
    {
        bench_options warm = options;
        warm.requests = options.concurrency;
        warm.output_tokens = 16;
        log << "warm-up: direct and every target\n";
        std::vector<const bench_target*> all{nullptr};
        for (const bench_target& t : options.targets) {
            all.push_back(&t);
        }
        for (const bench_target* t : all) {
            round_report report = run_round(warm, t, 0);
            if (report.failed > 0) {
                log << "tokenmeter-load bench: warm-up " << report.target << ": " << report.failed
                    << " requests failed (" << report.first_error << "); stopping\n";
                return 1;
            }
        }
    }

    for (unsigned round = 1; round <= options.rounds; ++round) {
        // Each round starts at a different target and odd rounds run backwards, so a drift in
        // machine load over the run does not favour any one of them.
        std::vector<const bench_target*> order{nullptr};
        for (const bench_target& t : options.targets) {
            order.push_back(&t);
        }
        std::rotate(order.begin(), order.begin() + (round - 1) % order.size(), order.end());
        if (round % 2 == 0) {
            std::reverse(order.begin(), order.end());
        }
        for (const bench_target* t : order) {
            log << "round " << round << ": " << (t ? t->name : "direct") << "\n";
            round_report report = run_round(options, t, round);
            if (!t) {
                results.direct.push_back(report);
                continue;
            }
            for (target_results& r : results.targets) {
                if (r.name == t->name) {
                    r.rounds.push_back(report);
                }
            }
        }
    }
    return print_bench(options, results, out);
}

}  // namespace tokenmeter::load
