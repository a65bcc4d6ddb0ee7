// otlp/encode: the OTLP/HTTP request bodies tokenmeter sends (ExportTraceServiceRequest and
// ExportMetricsServiceRequest of opentelemetry-proto), in the binary protobuf encoding or in
// OTLP/JSON (lowerCamelCase names, hex trace and span ids, 64-bit integers as decimal strings).
// Plain data in, bytes out: no I/O, no clock.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/trace_context.hpp"

namespace tokenmeter::otlp {

enum class encoding : std::uint8_t { protobuf, json };
// The Content-Type of a body in `e`.
[[nodiscard]] std::string_view content_type(encoding e) noexcept;

// A KeyValue whose AnyValue is a string, an int, a double or a bool.
struct attribute {
    std::string key;
    std::variant<std::string, std::int64_t, double, bool> value;
};
using attributes = std::vector<attribute>;

// Span.SpanKind values of the proto.
enum class span_kind : std::uint8_t { internal = 1, server = 2, client = 3 };
// Status.StatusCode values of the proto.
enum class status_code : std::uint8_t { unset = 0, ok = 1, error = 2 };

struct span_event {
    std::string name;
    std::int64_t time_unix_ns = 0;
    attributes attrs;
};

struct span {
    core::trace_id trace{};
    core::span_id id{};
    core::span_id parent{};  // all zero: a root span
    std::string name;
    span_kind kind = span_kind::client;
    std::int64_t start_unix_ns = 0;
    std::int64_t end_unix_ns = 0;
    attributes attrs;
    std::vector<span_event> events;
    status_code status = status_code::unset;
    std::string status_message;
};

// One series of an explicit-bucket histogram: its attributes and cumulative counts (one per
// bound plus the +Inf bucket, not cumulative across buckets as OTLP wants them).
struct histogram_point {
    attributes attrs;
    std::uint64_t count = 0;
    double sum = 0;
    double min = 0;
    double max = 0;
    std::vector<std::uint64_t> bucket_counts;
};

struct histogram {
    std::string name;
    std::string description;
    std::string unit;
    std::vector<double> bounds;
    std::vector<histogram_point> points;
};

// Who sends (Resource) and the instrumentation scope.
struct origin {
    attributes resource;
    std::string scope_name = "tokenmeter";
    std::string scope_version;
};

[[nodiscard]] std::string encode_traces(const origin& from, std::span<const span> spans,
                                        encoding e);
// Cumulative histograms over [start_unix_ns, time_unix_ns].
[[nodiscard]] std::string encode_metrics(const origin& from, std::span<const histogram> metrics,
                                         std::int64_t start_unix_ns, std::int64_t time_unix_ns,
                                         encoding e);

}  // namespace tokenmeter::otlp
