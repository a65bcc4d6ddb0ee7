// tokenmeter-load: load driver, /metrics summariser and proxy benchmark for tokenmeter, talking
// only to this machine. Argument handling and reports live here; the work is in the modules.
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_runner.hpp"
#include "http_get.hpp"
#include "load_runner.hpp"
#include "loopback_url.hpp"
#include "metrics_summary.hpp"
#include "prom_text.hpp"
#include "text_table.hpp"

namespace {

using namespace tokenmeter::load;

constexpr std::string_view usage_text = R"(usage:
  tokenmeter-load --target http[s]://127.0.0.1:PORT [options]  run streamed chat-completion load
      --ca-file PEM          an https:// target's certificate must chain to this CA (default:
                             the system's trust store) and name the target's address
      --concurrency N        connections, each sending one request after another (default 8)
      --requests N           total requests (default 200; unlimited if only --duration-s is given)
      --duration-s S         stop after S seconds, whichever comes first (at most 600)
      --models a,b,c         model names, used round-robin (default sim-model)
      --output-tokens N      sets x-sim-output-tokens (and max_tokens)
      --ttft-ms N            sets x-sim-ttft-ms
      --itl-ms N             sets x-sim-itl-ms
      --tokens-per-chunk N   sets x-sim-tokens-per-chunk
      --path P               request path (default /v1/chat/completions)
      --stamp                sets x-sim-stamp: 1 and reports chunk delivery latency
      --header 'NAME: VALUE' adds a request header (repeatable), e.g. 'x-sim-fail: status:503'
      --idle-timeout-s S     per-read timeout (default 60)
      --json                 machine-readable report

  tokenmeter-load summary --metrics http://127.0.0.1:ADMIN/metrics [--json]
      [--wait-requests N] [--timeout-s S]   poll until tokenmeter_requests_total reaches N

  tokenmeter-load bench --direct http://127.0.0.1:S
      --via NAME=http[s]://127.0.0.1:P[,PID[+PID...]]   a proxy in front of S (repeatable;
                             its CPU and memory are summed over the PIDs, e.g. nginx's master and
                             worker; https:// targets trust --ca-file)
      [--baseline NAME]      adds each target's CPU, p99 and RSS ratios to this one
      [--proxy http://127.0.0.1:P [--proxy-pid PID]]  the same as --via proxy=URL,PID
      [--concurrency 64] [--requests 1000] [--output-tokens 100] [--itl-ms 5] [--ttft-ms 10]
      [--tokens-per-chunk N] [--rounds 3] [--hold-streams N] [--hold-output-tokens 200]
      [--hold-itl-ms 20] [--model bench-model] [--path P] [--ca-file PEM] [--json]

Only loopback targets are accepted: 127.0.0.0/8, [::1] and localhost.
Exit status: 0 all requests succeeded, 1 some failed, 2 usage error.
)";

// Flags as name -> value; a flag without a value maps to "".
struct parsed_args {
    std::map<std::string, std::string, std::less<>> values;
    std::vector<std::string> headers;  // --header may repeat
    std::vector<std::string> vias;     // so may bench's --via
    std::string error;
};

parsed_args parse_flags(std::span<char* const> args,
                        const std::vector<std::string_view>& with_value,
                        const std::vector<std::string_view>& switches) {
    parsed_args parsed;
    auto known = [](const std::vector<std::string_view>& names, std::string_view name) {
        return std::find(names.begin(), names.end(), name) != names.end();
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view arg = args[i];
        if (!arg.starts_with("--")) {
            parsed.error = "unexpected argument: " + std::string(arg);
            return parsed;
        }
        std::string_view name = arg.substr(2);
        std::optional<std::string_view> inline_value;
        if (std::size_t equals = name.find('='); equals != std::string_view::npos) {
            inline_value = name.substr(equals + 1);
            name = name.substr(0, equals);
        }
        if (known(switches, name) && !inline_value) {
            parsed.values[std::string(name)] = "";
        } else if (known(with_value, name)) {
            std::string value;
            if (inline_value) {
                value = std::string(*inline_value);
            } else if (i + 1 < args.size()) {
                value = args[++i];
            } else {
                parsed.error = "--" + std::string(name) + " needs a value";
                return parsed;
            }
            if (name == "header") {
                parsed.headers.push_back(std::move(value));
            } else if (name == "via") {
                parsed.vias.push_back(std::move(value));
            } else {
                parsed.values[std::string(name)] = std::move(value);
            }
        } else {
            parsed.error = "unknown option: " + std::string(arg);
            return parsed;
        }
    }
    return parsed;
}

class flag_reader {
  public:
    explicit flag_reader(const parsed_args& parsed) : parsed_(parsed) {}

    bool has(std::string_view name) const {
        return parsed_.values.find(name) != parsed_.values.end();
    }

    std::optional<std::string> text(std::string_view name) const {
        auto it = parsed_.values.find(name);
        return it == parsed_.values.end() ? std::nullopt : std::optional<std::string>(it->second);
    }

    template <typename Integer>
    std::optional<Integer> integer(std::string_view name, Integer min, Integer max) {
        std::optional<std::string> value = text(name);
        if (!value) {
            return std::nullopt;
        }
        Integer number{};
        auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), number);
        if (ec != std::errc() || end != value->data() + value->size() || number < min ||
            number > max) {
            fail("--" + std::string(name) + " must be an integer in [" + std::to_string(min) +
                 ", " + std::to_string(max) + "]");
            return std::nullopt;
        }
        return number;
    }

    std::optional<double> real(std::string_view name, double min, double max) {
        std::optional<std::string> value = text(name);
        if (!value) {
            return std::nullopt;
        }
        double number = 0;
        auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), number);
        if (ec != std::errc() || end != value->data() + value->size() ||
            !(number >= min && number <= max)) {
            fail("--" + std::string(name) + " must be a number in [" + format_short(min) + ", " +
                 format_short(max) + "]");
            return std::nullopt;
        }
        return number;
    }

    std::optional<loopback_url> url(std::string_view name) {
        std::optional<std::string> value = text(name);
        if (!value) {
            return std::nullopt;
        }
        url_result parsed = parse_loopback_url(*value);
        if (!parsed.url) {
            fail("--" + std::string(name) + ": " + parsed.error);
        }
        return parsed.url;
    }

    void fail(std::string message) {
        if (error_.empty()) {
            error_ = std::move(message);
        }
    }

    [[nodiscard]] const std::string& error() const { return error_; }

  private:
    const parsed_args& parsed_;
    std::string error_;
};

int usage_error(const std::string& message) {
    std::cerr << "tokenmeter-load: " << message << "\n\n" << usage_text;
    return 2;
}

std::vector<std::string> split_commas(std::string_view text) {
    std::vector<std::string> parts;
    while (!text.empty()) {
        std::size_t comma = text.find(',');
        std::string_view part = text.substr(0, comma);
        if (!part.empty()) {
            parts.emplace_back(part);
        }
        text.remove_prefix(comma == std::string_view::npos ? text.size() : comma + 1);
    }
    return parts;
}

nlohmann::json json_number(double value) {
    return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json quantiles_json(const sample_set& samples) {
    return {{"count", samples.count()},
            {"p50", json_number(samples.quantile(0.50))},
            {"p90", json_number(samples.quantile(0.90))},
            {"p99", json_number(samples.quantile(0.99))},
            {"mean", json_number(samples.mean())},
            {"max", json_number(samples.max())}};
}

void print_load_text(const load_options& options, const load_result& r) {
    auto rate = [&](double count) {
        return r.wall_seconds > 0 ? count / r.wall_seconds : std::nan("");
    };
    std::cout << "tokenmeter-load: " << (options.target.tls ? "https://" : "http://")
              << options.target.host_header << options.path << ", concurrency "
              << options.concurrency << ", models";
    for (const std::string& model : options.models) {
        std::cout << " " << model;
    }
    std::cout << "\n";
    std::cout << "  requests   ok " << r.requests_ok << ", failed " << r.requests_failed
              << ", cancelled at deadline " << r.requests_cancelled << "   status";
    for (const auto& [status, count] : r.status_counts) {
        std::cout << " " << status << "x" << count;
    }
    std::cout << "\n";
    std::cout << "  stream     " << r.content_chunks << " content chunks, " << r.sse_events
              << " SSE events, " << r.body_bytes << " body bytes, " << r.completion_tokens
              << " completion tokens (usage)\n";
    std::cout << "  throughput " << format_number(r.wall_seconds, 2) << " s wall, "
              << format_short(rate(static_cast<double>(r.requests_ok))) << " req/s, "
              << format_short(rate(static_cast<double>(r.content_chunks))) << " chunks/s, "
              << format_short(rate(static_cast<double>(r.completion_tokens))) << " tokens/s, peak "
              << r.peak_open_streams << " streams open\n";
    auto line = [](const char* label, const sample_set& s, double scale, const char* unit) {
        std::cout << "  " << label << " p50 " << format_short(s.quantile(0.50) * scale) << "  p90 "
                  << format_short(s.quantile(0.90) * scale) << "  p99 "
                  << format_short(s.quantile(0.99) * scale) << "  max "
                  << format_short(s.max() * scale) << " " << unit << "  (n=" << s.count() << ")\n";
    };
    line("client TTFT      ", r.time_to_first_token_seconds, 1e3, "ms");
    line("chunk gap        ", r.chunk_gap_seconds, 1e3, "ms");
    line("request duration ", r.request_duration_seconds, 1e3, "ms");
    if (options.stamp) {
        line("chunk delivery   ", r.delivery_latency_seconds, 1e6,
             "us (client receive - sim_sent_ns)");
        if (r.unstamped_chunks > 0) {
            std::cout << "  warning: " << r.unstamped_chunks
                      << " content chunks had no sim_sent_ns\n";
        }
    }
    if (r.models.size() > 1) {
        std::vector<text_column> columns = {{"", "model", true},
                                            {"", "ok", false},
                                            {"", "failed", false},
                                            {"client TTFT ms", "p50", false},
                                            {"client TTFT ms", "p99", false}};
        std::vector<std::vector<std::string>> rows;
        for (const auto& [model, m] : r.models) {
            rows.push_back({model, std::to_string(m.ok), std::to_string(m.failed),
                            format_short(m.time_to_first_token_seconds.quantile(0.50) * 1e3),
                            format_short(m.time_to_first_token_seconds.quantile(0.99) * 1e3)});
        }
        std::cout << "\n" << render_table(columns, rows);
    }
    if (!r.errors.empty()) {
        std::cout << "  errors:\n";
        for (const auto& [error, count] : r.errors) {
            std::cout << "    " << count << " x " << error << "\n";
        }
    }
}

void print_load_json(const load_options& options, const load_result& r) {
    nlohmann::json models = nlohmann::json::object();
    for (const auto& [model, m] : r.models) {
        models[model] = {{"ok", m.ok},
                         {"failed", m.failed},
                         {"client_ttft_seconds", quantiles_json(m.time_to_first_token_seconds)}};
    }
    nlohmann::json status = nlohmann::json::object();
    for (const auto& [code, count] : r.status_counts) {
        status[std::to_string(code)] = count;
    }
    nlohmann::json doc = {
        {"target",
         (options.target.tls ? "https://" : "http://") + options.target.host_header + options.path},
        {"concurrency", options.concurrency},
        {"requests",
         {{"ok", r.requests_ok},
          {"failed", r.requests_failed},
          {"cancelled", r.requests_cancelled}}},
        {"status", status},
        {"errors", r.errors},
        {"content_chunks", r.content_chunks},
        {"sse_events", r.sse_events},
        {"body_bytes", r.body_bytes},
        {"completion_tokens", r.completion_tokens},
        {"wall_seconds", r.wall_seconds},
        {"peak_open_streams", r.peak_open_streams},
        {"client_ttft_seconds", quantiles_json(r.time_to_first_token_seconds)},
        {"chunk_gap_seconds", quantiles_json(r.chunk_gap_seconds)},
        {"request_duration_seconds", quantiles_json(r.request_duration_seconds)},
        {"models", models},
    };
    if (options.stamp) {
        doc["chunk_delivery_seconds"] = quantiles_json(r.delivery_latency_seconds);
        doc["unstamped_chunks"] = r.unstamped_chunks;
    }
    std::cout << doc.dump(2) << "\n";
}

int run_load_command(std::span<char* const> args) {
    parsed_args parsed = parse_flags(
        args,
        {"target", "concurrency", "requests", "duration-s", "models", "output-tokens", "ttft-ms",
         "itl-ms", "tokens-per-chunk", "path", "idle-timeout-s", "header", "ca-file"},
        {"stamp", "json"});
    if (!parsed.error.empty()) {
        return usage_error(parsed.error);
    }
    flag_reader flags(parsed);
    load_options options;
    std::optional<loopback_url> target = flags.url("target");
    if (!target && flags.error().empty()) {
        return usage_error("--target is required");
    }
    constexpr std::uint32_t max_u32 = 100'000'000;
    options.concurrency = flags.integer<std::size_t>("concurrency", 1, 10'000).value_or(8);
    std::optional<std::uint64_t> requests =
        flags.integer<std::uint64_t>("requests", 1, 100'000'000);
    std::optional<double> duration = flags.real("duration-s", 0.001, max_duration_seconds);
    // A run given only a duration is meant to last that long, not stop at the default count.
    options.requests =
        requests ? requests : (duration ? std::nullopt : std::optional<std::uint64_t>(200));
    options.duration_seconds = duration.value_or(max_duration_seconds);
    if (std::optional<std::string> models = flags.text("models")) {
        options.models = split_commas(*models);
        if (options.models.empty()) {
            flags.fail("--models needs at least one name");
        }
    }
    options.output_tokens = flags.integer<std::uint32_t>("output-tokens", 0, max_u32);
    options.time_to_first_token_ms = flags.integer<std::uint32_t>("ttft-ms", 0, 3'600'000);
    options.inter_token_latency_ms = flags.integer<std::uint32_t>("itl-ms", 0, 3'600'000);
    options.tokens_per_chunk = flags.integer<std::uint32_t>("tokens-per-chunk", 1, max_u32);
    options.path = flags.text("path").value_or(options.path);
    if (!options.path.starts_with('/')) {
        flags.fail("--path must start with /");
    }
    options.idle_timeout_seconds =
        flags.real("idle-timeout-s", 0.01, max_duration_seconds).value_or(60);
    options.stamp = flags.has("stamp");
    options.ca_file = flags.text("ca-file").value_or("");
    for (const std::string& header : parsed.headers) {
        std::size_t colon = header.find(':');
        std::string name = header.substr(0, colon);
        if (colon == std::string::npos || name.empty() ||
            name.find_first_of(" \t\r\n") != std::string::npos ||
            header.find_first_of("\r\n") != std::string::npos) {
            flags.fail("--header must look like 'name: value': " + header);
            break;
        }
        std::string_view value = std::string_view(header).substr(colon + 1);
        while (value.starts_with(' ')) {
            value.remove_prefix(1);
        }
        options.extra_headers.emplace_back(std::move(name), std::string(value));
    }
    if (!flags.error().empty()) {
        return usage_error(flags.error());
    }
    options.target = *target;

    load_result result = run_load(options);
    if (flags.has("json")) {
        print_load_json(options, result);
    } else {
        print_load_text(options, result);
    }
    return result.requests_failed == 0 && result.requests_ok > 0 ? 0 : 1;
}

int run_summary_command(std::span<char* const> args) {
    parsed_args parsed = parse_flags(args, {"metrics", "wait-requests", "timeout-s"}, {"json"});
    if (!parsed.error.empty()) {
        return usage_error(parsed.error);
    }
    flag_reader flags(parsed);
    std::optional<loopback_url> metrics_url = flags.url("metrics");
    std::optional<double> wait_requests = flags.real("wait-requests", 0, 1e12);
    double timeout = flags.real("timeout-s", 0.1, 600).value_or(10);
    if (!metrics_url && flags.error().empty()) {
        return usage_error("--metrics is required");
    }
    if (!flags.error().empty()) {
        return usage_error(flags.error());
    }

    // The proxy records a request just after its last byte reaches the client, so a scrape taken
    // the instant a load run ends can miss the last few; --wait-requests closes that gap.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    std::optional<exposition> metrics;
    std::string last_error;
    while (true) {
        http_get_result response = http_get(*metrics_url, std::chrono::milliseconds(5000));
        if (!response.error.empty()) {
            last_error = response.error;
        } else if (response.status != 200) {
            last_error = "HTTP " + std::to_string(response.status);
        } else {
            exposition_result parsed_metrics = parse_exposition(response.body);
            if (!parsed_metrics.value) {
                std::cerr << "tokenmeter-load summary: cannot parse /metrics: "
                          << parsed_metrics.error << "\n";
                return 1;
            }
            metrics = std::move(parsed_metrics.value);
            if (!wait_requests || total_requests(*metrics) >= *wait_requests) {
                break;
            }
            last_error = "only " + format_number(total_requests(*metrics), 0) + " of " +
                         format_number(*wait_requests, 0) + " requests recorded";
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            std::cerr << "tokenmeter-load summary: " << metrics_url->host_header
                      << metrics_url->path << ": " << last_error << "\n";
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }

    std::vector<model_summary> rows = summarize_metrics(*metrics);
    if (flags.has("json")) {
        std::cout << summary_json(rows).dump(2) << "\n";
    } else if (rows.empty()) {
        std::cout << "no tokenmeter requests recorded yet\n";
    } else {
        std::cout << format_summary_table(rows);
    }
    return 0;
}

int run_bench_command(std::span<char* const> args) {
    parsed_args parsed = parse_flags(
        args,
        {"proxy", "direct", "proxy-pid", "via", "baseline", "concurrency", "requests",
         "output-tokens", "itl-ms", "ttft-ms", "tokens-per-chunk", "rounds", "hold-streams",
         "hold-output-tokens", "hold-itl-ms", "model", "path", "ca-file"},
        {"json"});
    if (!parsed.error.empty()) {
        return usage_error(parsed.error);
    }
    flag_reader flags(parsed);
    bench_options options;
    std::optional<loopback_url> proxy = flags.url("proxy");
    std::optional<loopback_url> direct = flags.url("direct");
    if ((!direct || (!proxy && parsed.vias.empty())) && flags.error().empty()) {
        return usage_error("bench needs --direct and at least one --via (or --proxy)");
    }
    if (proxy) {
        bench_target legacy{"proxy", *proxy, {}};
        if (std::optional<int> pid = flags.integer<int>("proxy-pid", 1, 1 << 30)) {
            legacy.pids.push_back(static_cast<pid_t>(*pid));
        }
        options.targets.push_back(std::move(legacy));
    }
    for (const std::string& via : parsed.vias) {
        target_parse target = parse_bench_target(via);
        if (!target.target) {
            return usage_error("--via " + target.error);
        }
        for (const bench_target& existing : options.targets) {
            if (existing.name == target.target->name) {
                return usage_error("--via: the name '" + existing.name + "' is given twice");
            }
        }
        options.targets.push_back(std::move(*target.target));
    }
    options.baseline = flags.text("baseline").value_or("");
    if (!options.baseline.empty() &&
        std::none_of(options.targets.begin(), options.targets.end(),
                     [&](const bench_target& t) { return t.name == options.baseline; })) {
        return usage_error("--baseline " + options.baseline + " is not one of the --via names");
    }
    options.hold_streams = flags.integer<std::size_t>("hold-streams", 1, 20'000).value_or(0);
    options.concurrency =
        flags.integer<std::size_t>("concurrency", 1, 10'000).value_or(options.concurrency);
    options.requests =
        flags.integer<std::uint64_t>("requests", 1, 10'000'000).value_or(options.requests);
    options.output_tokens =
        flags.integer<std::uint32_t>("output-tokens", 1, 1'000'000).value_or(options.output_tokens);
    options.inter_token_latency_ms =
        flags.integer<std::uint32_t>("itl-ms", 0, 60'000).value_or(options.inter_token_latency_ms);
    options.time_to_first_token_ms =
        flags.integer<std::uint32_t>("ttft-ms", 0, 60'000).value_or(options.time_to_first_token_ms);
    options.tokens_per_chunk = flags.integer<std::uint32_t>("tokens-per-chunk", 1, 1'000'000);
    options.rounds = flags.integer<unsigned>("rounds", 1, 20).value_or(options.rounds);
    options.hold_output_tokens = flags.integer<std::uint32_t>("hold-output-tokens", 1, 1'000'000)
                                     .value_or(options.hold_output_tokens);
    options.hold_inter_token_latency_ms = flags.integer<std::uint32_t>("hold-itl-ms", 0, 60'000)
                                              .value_or(options.hold_inter_token_latency_ms);
    options.model = flags.text("model").value_or(options.model);
    options.path = flags.text("path").value_or(options.path);
    options.ca_file = flags.text("ca-file").value_or("");
    options.json = flags.has("json");
    if (!flags.error().empty()) {
        return usage_error(flags.error());
    }
    options.direct = *direct;
    return run_bench(options, std::cout, std::cerr);
}

// Each stream is a socket; the default soft limit of 1024 descriptors would turn
// --concurrency 2000 into connect errors that measure the shell, not the proxy.
void raise_file_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::span<char* const> args(argv + 1, static_cast<std::size_t>(argc > 0 ? argc - 1 : 0));
    raise_file_limit();
    try {
        if (!args.empty() &&
            (std::string_view(args[0]) == "--help" || std::string_view(args[0]) == "-h")) {
            std::cout << usage_text;
            return 0;
        }
        if (!args.empty() && std::string_view(args[0]) == "summary") {
            return run_summary_command(args.subspan(1));
        }
        if (!args.empty() && std::string_view(args[0]) == "bench") {
            return run_bench_command(args.subspan(1));
        }
        return run_load_command(args);
    } catch (const std::exception& error) {
        // Asio and the standard library report resource exhaustion (file descriptors, memory) by
        // throwing; say so plainly instead of aborting.
        std::cerr << "tokenmeter-load: " << error.what() << "\n";
        return 1;
    }
}
