#include "metrics/exposition.hpp"

// zlib's input pointer is const (z_const) with ZLIB_CONST.
#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/text.hpp"
#include "metrics/native_histogram.hpp"

namespace tokenmeter::metrics {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               const auto lower = [](char c) {
                   return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
               };
               return lower(x) == lower(y);
           });
}

// The weight of one list element's parameters ("q=0.5"); 1 when it names none, or one that is
// not a number.
double weight_of(std::string_view parameters) {
    while (!parameters.empty()) {
        const auto semicolon = parameters.find(';');
        const std::string_view parameter = core::trim(parameters.substr(0, semicolon), " \t");
        parameters = semicolon == std::string_view::npos ? std::string_view()
                                                         : parameters.substr(semicolon + 1);
        if (parameter.size() >= 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
            parameter[1] == '=') {
            const std::string_view number = core::trim(parameter.substr(2), " \t");
            double q = 1.0;
            const auto result = std::from_chars(number.data(), number.data() + number.size(), q);
            return result.ec == std::errc() ? std::clamp(q, 0.0, 1.0) : 1.0;
        }
    }
    return 1.0;
}

// f(name, weight) for each element of a comma-separated header list ("a;q=0.5, b").
template <typename F>
void for_each_weighted(std::string_view list, F&& f) {
    while (!list.empty()) {
        const auto comma = list.find(',');
        const std::string_view element = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        const auto semicolon = element.find(';');
        const std::string_view name = core::trim(element.substr(0, semicolon), " \t");
        if (!name.empty()) {
            f(name,
              semicolon == std::string_view::npos ? 1.0 : weight_of(element.substr(semicolon + 1)));
        }
    }
}

}  // namespace

exposition_format choose_exposition(std::string_view accept, bool protobuf_available) {
    if (protobuf_available && accepts_protobuf(accept)) {
        return exposition_format::protobuf;
    }
    double openmetrics = 0.0;
    double text = 0.0;
    for_each_weighted(accept, [&](std::string_view type, double q) {
        if (equals_ignoring_case(type, "application/openmetrics-text")) {
            openmetrics = std::max(openmetrics, q);
        } else if (equals_ignoring_case(type, "text/plain") ||
                   equals_ignoring_case(type, "text/*") || type == "*/*") {
            text = std::max(text, q);
        }
    });
    return openmetrics > 0.0 && openmetrics >= text ? exposition_format::openmetrics
                                                    : exposition_format::prometheus_text;
}

bool accepts_gzip(std::string_view accept_encoding) {
    std::optional<double> gzip;
    double any = 0.0;
    for_each_weighted(accept_encoding, [&](std::string_view coding, double q) {
        if (equals_ignoring_case(coding, "gzip") || equals_ignoring_case(coding, "x-gzip")) {
            gzip = std::max(gzip.value_or(0.0), q);
        } else if (coding == "*") {
            any = std::max(any, q);
        }
    });
    return gzip ? *gzip > 0.0 : any > 0.0;
}

std::optional<std::string> gzip_compress(std::string_view data) {
    if (data.size() > std::numeric_limits<uInt>::max() / 2) {
        return std::nullopt;  // far beyond any exposition: one call of zlib's 32-bit sizes
    }
    z_stream stream{};
    // 15 window bits + 16: a gzip header and trailer around the deflate stream. The fastest
    // level: an exposition's repeated names and labels shrink about twentyfold even so, and the
    // admin thread compresses in half the time of the default level.
    if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return std::nullopt;
    }
    std::string out(deflateBound(&stream, static_cast<uLong>(data.size())), '\0');
    stream.next_in = reinterpret_cast<const Bytef*>(data.data());
    stream.avail_in = static_cast<uInt>(data.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    // deflateBound leaves room for the whole stream, so one call finishes it.
    const int result = deflate(&stream, Z_FINISH);
    const uLong written = stream.total_out;
    deflateEnd(&stream);
    if (result != Z_STREAM_END) {
        return std::nullopt;
    }
    out.resize(written);
    return out;
}

}  // namespace tokenmeter::metrics
