// outbound/otlp_exporter: OTLP over HTTP (otel.endpoint). A request's end only describes the
// request (otlp/genai) and puts it in a bounded queue, dropping and counting when the queue is
// full; the exporter's own thread takes the queue, posts the sampled spans to /v1/traces, keeps
// the GenAI metrics cumulatively and posts them to /v1/metrics every export interval. A failed
// post is retried as the OTLP specification asks (429, 502, 503, 504 and broken connections,
// with exponential backoff or the collector's Retry-After) a bounded number of times, then
// dropped and counted; any other answer is dropped and counted at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "metrics/otel.hpp"
#include "net/endpoint.hpp"
#include "observe/finished_sink.hpp"
#include "otlp/encode.hpp"
#include "otlp/genai.hpp"
#include "outbound/http_post.hpp"

namespace tokenmeter::outbound {

struct otlp_options {
    std::string url;               // the collector's base URL, for log lines
    net::upstream_address target;  // parsed from url; /v1/traces and /v1/metrics below it
    otlp::encoding encoding = otlp::encoding::protobuf;
    std::chrono::milliseconds export_interval{5'000};
    std::chrono::milliseconds request_timeout{10'000};
    std::string ca_file;
    std::string ca_file_key = "otel.ca_file";
    header_list headers;        // sent with every post (OTEL_EXPORTER_OTLP_HEADERS, headers_file)
    std::string headers_file;   // when set: re-read before every post (rotated credentials)
    header_list fixed_headers;  // the part of `headers` that does not come from headers_file
    std::size_t max_queue = 2048;    // finished requests waiting; past it they are dropped
    std::size_t max_batch = 512;     // spans per post
    std::uint32_t max_attempts = 5;  // posts of one batch before it is dropped
    std::chrono::milliseconds backoff_initial{500};
    std::chrono::milliseconds backoff_max{30'000};
    otlp::server_endpoint server;  // the upstream, as server.address and server.port
    otlp::origin origin;           // resource (service.name ...) and scope
};

// "Name: value" lines of a headers file, or of OTEL_EXPORTER_OTLP_HEADERS's "k=v,k=v" form
// (values percent-decoded). False with `why` on a malformed entry: a name that is not an HTTP
// token, or a value with a control character.
bool parse_header_lines(std::string_view text, header_list& out, std::string& why);
bool parse_otlp_headers_env(std::string_view text, header_list& out, std::string& why);

class otlp_exporter final : public observe::finished_sink {
  public:
    // Throws std::runtime_error naming otel.ca_file when https's CA file does not load.
    otlp_exporter(otlp_options options, metrics::otel_metrics& counters);
    ~otlp_exporter() override;
    otlp_exporter(const otlp_exporter&) = delete;
    otlp_exporter& operator=(const otlp_exporter&) = delete;

    void start();
    // Sends what is queued and the metrics once more (bounded by one attempt each), then ends.
    void stop();
    std::string reload_tls() { return poster_.reload_tls(); }

    void finished(const meter::request_summary& summary, const meter::billed_counts& counts,
                  const core::trace_context& trace) noexcept override;

  private:
    void run();
    void export_spans(std::vector<otlp::span>& spans, bool last);
    void export_metrics(bool last);
    // Posts with retries; true when the collector accepted. `items` are counted either way.
    bool deliver(const char* path, const std::string& body, metrics::otel_signal signal,
                 std::uint64_t items, bool last);
    void refresh_headers();
    // Waits up to `d` unless stopping; false when stopping.
    bool wait_for(std::chrono::milliseconds d);

    otlp_options options_;
    metrics::otel_metrics& counters_;
    http_poster poster_;
    otlp::genai_metrics aggregate_;  // the exporter thread's only
    std::int64_t start_unix_ns_ = 0;
    bool headers_warned_ = false;
    std::uint32_t failures_in_a_row_ = 0;

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<otlp::finished_request> queue_;  // under mutex_
    bool stopping_ = false;                     // under mutex_
    std::thread thread_;
};

}  // namespace tokenmeter::outbound
