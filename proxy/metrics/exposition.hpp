// metrics/exposition: what a /metrics request gets, decided from its Accept and Accept-Encoding
// headers (no I/O): the Prometheus text format unless the scraper asks for another (OpenMetrics
// text, or the protobuf format when native histograms are on), gzip-compressed when it takes
// gzip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::metrics {

inline constexpr std::string_view prometheus_text_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

enum class exposition_format : std::uint8_t { prometheus_text, openmetrics, protobuf };

// The format for `accept` (RFC 9110 media ranges with q weights). protobuf only when
// `protobuf_available` and asked for (metrics::accepts_protobuf); OpenMetrics when a range
// application/openmetrics-text has a weight above 0 and at least that of any range the
// Prometheus text format matches (text/plain, text/*, */*).
[[nodiscard]] exposition_format choose_exposition(std::string_view accept, bool protobuf_available);

// Whether `accept_encoding` takes gzip: gzip (or x-gzip) with a weight above 0, or * with one
// when gzip is not listed.
[[nodiscard]] bool accepts_gzip(std::string_view accept_encoding);

// `data` as one gzip member (RFC 1952); nullopt when zlib fails (out of memory).
[[nodiscard]] std::optional<std::string> gzip_compress(std::string_view data);

}  // namespace tokenmeter::metrics
