#include "outbound/otlp_exporter.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "core/secret_file.hpp"
#include "core/text.hpp"
#include "core/thread_name.hpp"

namespace tokenmeter::outbound {

namespace {

// A collector's Retry-After is honoured up to this long; a longer one waits this long.
constexpr std::chrono::milliseconds max_retry_after{300'000};
// A headers file is a few credentials, not a document.
constexpr std::size_t max_headers = 32;

bool token_char(char ch) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f) {
        return false;
    }
    return std::string_view("\"(),/:;<=>?@[\\]{}").find(ch) == std::string_view::npos;
}

bool add_header(std::string_view name, std::string_view value, header_list& out, std::string& why) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), token_char)) {
        why =
            "a header name must be an HTTP token, got \"" + std::string(name.substr(0, 40)) + "\"";
        return false;
    }
    for (char ch : value) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c < 0x20 && ch != '\t') || c == 0x7f) {
            why = "the value of header " + std::string(name) + " has a control character";
            return false;
        }
    }
    if (out.size() >= max_headers) {
        why = "more than " + std::to_string(max_headers) + " headers";
        return false;
    }
    out.emplace_back(std::string(name), std::string(value));
    return true;
}

std::string percent_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            const int high = core::hex_digit_value(s[i + 1]);
            const int low = core::hex_digit_value(s[i + 2]);
            if (high >= 0 && low >= 0) {
                out.push_back(static_cast<char>(high * 16 + low));
                i += 2;
                continue;
            }
        }
        out.push_back(s[i]);
    }
    return out;
}

std::int64_t unix_ns_now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool retryable(const post_result& r) {
    return r.status == 0 || r.status == 429 || r.status == 502 || r.status == 503 ||
           r.status == 504;
}

}  // namespace

bool parse_header_lines(std::string_view text, header_list& out, std::string& why) {
    while (!text.empty()) {
        const auto eol = text.find('\n');
        const std::string_view line = core::trim(text.substr(0, eol));
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        if (line.empty() || line.front() == '#') {
            continue;
        }
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) {
            why = "expected \"Name: value\" lines";
            return false;
        }
        if (!add_header(core::trim(line.substr(0, colon)), core::trim(line.substr(colon + 1)), out,
                        why)) {
            return false;
        }
    }
    return true;
}

bool parse_otlp_headers_env(std::string_view text, header_list& out, std::string& why) {
    while (!text.empty()) {
        const auto comma = text.find(',');
        const std::string_view entry = core::trim(text.substr(0, comma));
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        if (entry.empty()) {
            continue;
        }
        const auto equals = entry.find('=');
        if (equals == std::string_view::npos) {
            why = "expected key=value pairs separated by commas";
            return false;
        }
        if (!add_header(percent_decoded(core::trim(entry.substr(0, equals))),
                        percent_decoded(core::trim(entry.substr(equals + 1))), out, why)) {
            return false;
        }
    }
    return true;
}

otlp_exporter::otlp_exporter(otlp_options options, metrics::otel_metrics& counters)
    : options_(std::move(options)),
      counters_(counters),
      poster_(post_options{options_.target, options_.request_timeout, options_.ca_file,
                           options_.ca_file_key, 64 * 1024}) {}

otlp_exporter::~otlp_exporter() {
    stop();
}

void otlp_exporter::start() {
    start_unix_ns_ = unix_ns_now();
    thread_ = std::thread([this] {
        core::name_this_thread("tm-otlp");
        run();
    });
}

void otlp_exporter::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
    }
}

void otlp_exporter::finished(const meter::request_summary& summary,
                             const meter::billed_counts& counts,
                             const core::trace_context& trace) noexcept {
    const bool traced = trace.valid() && trace.sampled();
    try {
        // The wall time of the summary's end: now, less the time since it.
        const auto since_end = std::chrono::steady_clock::now() - summary.end;
        const std::int64_t end_unix_ns =
            unix_ns_now() - std::chrono::duration_cast<std::chrono::nanoseconds>(since_end).count();
        otlp::finished_request request =
            otlp::describe(summary, counts, trace, options_.server, end_unix_ns);
        bool full = false;
        std::size_t queued = 0;
        {
            std::lock_guard lock(mutex_);
            if (queue_.size() >= options_.max_queue) {
                full = true;
            } else {
                queue_.push_back(std::move(request));
                queued = queue_.size();
            }
        }
        if (full) {
            counters_.dropped(metrics::otel_signal::metrics, metrics::otel_drop::queue_full, 1);
            if (traced) {
                counters_.dropped(metrics::otel_signal::traces, metrics::otel_drop::queue_full, 1);
            }
        } else {
            counters_.queue_size(queued);
            if (queued >= options_.max_batch) {
                wake_.notify_one();
            }
        }
    } catch (...) {
        // Out of memory while describing: the request's export is lost, and counted.
        counters_.dropped(metrics::otel_signal::metrics, metrics::otel_drop::queue_full, 1);
        if (traced) {
            counters_.dropped(metrics::otel_signal::traces, metrics::otel_drop::queue_full, 1);
        }
    }
}

bool otlp_exporter::wait_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    return !wake_.wait_for(lock, d, [&] { return stopping_; });
}

void otlp_exporter::refresh_headers() {
    if (options_.headers_file.empty()) {
        return;
    }
    std::string why;
    if (auto text = core::read_secret_file(options_.headers_file, why)) {
        header_list next = options_.fixed_headers;
        if (parse_header_lines(*text, next, why)) {
            options_.headers = std::move(next);
            headers_warned_ = false;
            return;
        }
    }
    if (!headers_warned_) {
        headers_warned_ = true;
        spdlog::warn("otel exporter: otel.headers_file: {}; the headers last read stay in use",
                     why);
    }
}

bool otlp_exporter::deliver(const char* path, const std::string& body, metrics::otel_signal signal,
                            std::uint64_t items, bool last) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    auto backoff = options_.backoff_initial;
    const std::uint32_t attempts = last ? 1 : std::max<std::uint32_t>(1, options_.max_attempts);
    post_result sent;
    for (std::uint32_t attempt = 1;; ++attempt) {
        refresh_headers();
        sent = poster_.post(path, otlp::content_type(options_.encoding), options_.headers, body);
        if (sent.status / 100 == 2) {
            counters_.exported(signal, items);
            if (failures_in_a_row_ > 0) {
                spdlog::info("otel exporter: collector {} accepts again after {} failed posts",
                             options_.url, failures_in_a_row_);
            }
            failures_in_a_row_ = 0;
            return true;
        }
        failures_in_a_row_ += 1;
        if (failures_in_a_row_ == 1 || failures_in_a_row_ % 10 == 0) {
            spdlog::warn("otel exporter: {}{} did not accept {} {} ({}: {}); failure {} in a row",
                         options_.url, path, items, metrics::to_string(signal),
                         to_string(sent.failure), sent.error, failures_in_a_row_);
        }
        if (!retryable(sent)) {
            counters_.dropped(signal, metrics::otel_drop::rejected, items);
            return false;
        }
        if (attempt >= attempts) {
            break;
        }
        auto wait = std::chrono::milliseconds(
            static_cast<std::int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
        if (sent.retry_after_seconds >= 0) {
            wait = std::min(std::chrono::milliseconds(sent.retry_after_seconds * 1000),
                            max_retry_after);
        }
        backoff = std::min(backoff * 2, options_.backoff_max);
        if (!wait_for(wait)) {
            break;
        }
    }
    counters_.dropped(signal, metrics::otel_drop::retries_exhausted, items);
    return false;
}

void otlp_exporter::export_spans(std::vector<otlp::span>& spans, bool last) {
    for (std::size_t at = 0; at < spans.size(); at += options_.max_batch) {
        const std::size_t n = std::min(options_.max_batch, spans.size() - at);
        const std::string body = otlp::encode_traces(
            options_.origin, std::span<const otlp::span>(spans).subspan(at, n), options_.encoding);
        if (!deliver("/v1/traces", body, metrics::otel_signal::traces, n, last) && last) {
            // Ending: one failed post is enough to know; the rest are not tried.
            const std::size_t rest = spans.size() - at - n;
            if (rest > 0) {
                counters_.dropped(metrics::otel_signal::traces,
                                  metrics::otel_drop::retries_exhausted, rest);
            }
            break;
        }
    }
    spans.clear();
}

void otlp_exporter::export_metrics(bool last) {
    if (aggregate_.empty()) {
        return;
    }
    const std::vector<otlp::histogram> metrics = aggregate_.snapshot();
    std::uint64_t points = 0;
    for (const otlp::histogram& h : metrics) {
        points += h.points.size();
    }
    const std::string body = otlp::encode_metrics(options_.origin, metrics, start_unix_ns_,
                                                  unix_ns_now(), options_.encoding);
    deliver("/v1/metrics", body, metrics::otel_signal::metrics, points, last);
}

void otlp_exporter::run() {
    auto next_metrics = std::chrono::steady_clock::now() + options_.export_interval;
    std::deque<otlp::finished_request> taken;
    std::vector<otlp::span> spans;
    for (;;) {
        bool last = false;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_until(lock, next_metrics,
                             [&] { return stopping_ || queue_.size() >= options_.max_batch; });
            last = stopping_;
            taken.swap(queue_);
        }
        counters_.queue_size(0);
        for (otlp::finished_request& r : taken) {
            aggregate_.record(r);
            if (r.traced) {
                spans.push_back(std::move(*r.traced));
            }
        }
        taken.clear();
        const bool metrics_due = std::chrono::steady_clock::now() >= next_metrics;
        // Spans go out when a batch is full and with the metrics at each interval.
        if (spans.size() >= options_.max_batch || metrics_due || last) {
            export_spans(spans, last);
        }
        if (metrics_due || last) {
            export_metrics(last);
            next_metrics = std::chrono::steady_clock::now() + options_.export_interval;
        }
        if (last) {
            break;
        }
    }
}

}  // namespace tokenmeter::outbound
