#include "metrics/native_histogram.hpp"

#include <prometheus/metric_family.h>

#include <cmath>
#include <limits>

#include "core/protobuf_wire.hpp"
#include "metrics/exemplars.hpp"

namespace tokenmeter::metrics {

int native_bucket_index(double v, int schema) {
    const double per_octave = std::ldexp(1.0, schema);
    int i = static_cast<int>(std::ceil(std::log2(v) * per_octave));
    // log2 rounds; the bounds are what counts: 2^((i-1)/2^s) < v <= 2^(i/2^s).
    while (std::exp2(static_cast<double>(i - 1) / per_octave) >= v) {
        --i;
    }
    while (std::exp2(static_cast<double>(i) / per_octave) < v) {
        ++i;
    }
    return i;
}

void native_histogram::observe(double v) {
    ++count;
    sum += v;
    if (!(v > zero_threshold)) {  // also NaN and negative values: tokenmeter has none
        ++zero_count;
        return;
    }
    ++positive[native_bucket_index(v)];
}

void native_histograms::observe(const std::string& family, const labels& l, double v) {
    std::lock_guard lock(mutex_);
    histograms_[{family, l}].observe(v);
}

void native_histograms::observe(const std::string& family, const labels& l,
                                const native_batch& batch) {
    std::lock_guard lock(mutex_);
    native_histogram& h = histograms_[{family, l}];
    h.zero_threshold = batch.zero_threshold;
    h.zero_count += batch.zero_count;
    h.count += batch.count;
    h.sum += batch.sum;
    for (const auto& [index, n] : batch.positive) {
        h.positive[index] += n;
    }
}

std::map<std::pair<std::string, native_histograms::labels>, native_histogram>
native_histograms::snapshot() const {
    std::lock_guard lock(mutex_);
    return histograms_;
}

namespace {

using core::protobuf::put_bytes;
using core::protobuf::put_double;
using core::protobuf::put_sint;
using core::protobuf::put_uint;
using core::protobuf::put_varint;

// Field numbers of io.prometheus.client (proxy/metrics/metrics.proto).
namespace family_field {
constexpr int name = 1, help = 2, type = 3, metric = 4;
}
namespace metric_field {
constexpr int label = 1, gauge = 2, counter = 3, untyped = 5, histogram = 7;
}
namespace histogram_field {
constexpr int sample_count = 1, sample_sum = 2, bucket = 3, schema = 5, zero_threshold = 6,
              zero_count = 7, positive_span = 12, positive_delta = 13;
}
// MetricType values of the proto: COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4.
int proto_type(prometheus::MetricType t) {
    switch (t) {
        case prometheus::MetricType::Counter:
            return 0;
        case prometheus::MetricType::Gauge:
            return 1;
        case prometheus::MetricType::Summary:
            return 2;
        case prometheus::MetricType::Histogram:
            return 4;
        default:
            return 3;
    }
}

// io.prometheus.client.Exemplar: the trace and span labels, the value, and the time as a
// google.protobuf.Timestamp.
void put_exemplar(std::string& bucket, const exemplar& kept) {
    std::string message;
    const auto put_label = [&message](std::string_view name, std::string_view value) {
        std::string pair;
        put_bytes(pair, 1, name);
        put_bytes(pair, 2, value);
        put_bytes(message, 1, pair);
    };
    put_label("trace_id", core::to_hex(kept.trace));
    put_label("span_id", core::to_hex(kept.span));
    put_double(message, 2, kept.value);
    std::string timestamp;
    put_uint(timestamp, 1, static_cast<std::uint64_t>(kept.unix_ms / 1000));
    put_uint(timestamp, 2, static_cast<std::uint64_t>((kept.unix_ms % 1000) * 1'000'000));
    put_bytes(message, 3, timestamp);
    put_bytes(bucket, 3, message);
}

void put_native(std::string& h, const native_histogram& n) {
    put_sint(h, histogram_field::schema, native_schema);
    put_double(h, histogram_field::zero_threshold, n.zero_threshold);
    put_uint(h, histogram_field::zero_count, n.zero_count);
    // One span per run of consecutive buckets; the first offset is the absolute index, the
    // others the gap after the previous span. Deltas run on across spans.
    std::vector<std::pair<int, std::uint32_t>> spans;
    int next = 0;
    for (const auto& [index, count] : n.positive) {
        if (spans.empty() || index != next) {
            const int offset = spans.empty() ? index : index - next;
            spans.emplace_back(offset, 0);
        }
        ++spans.back().second;
        next = index + 1;
    }
    for (const auto& [offset, length] : spans) {
        std::string span;
        put_sint(span, 1, offset);
        put_uint(span, 2, length);
        put_bytes(h, histogram_field::positive_span, span);
    }
    std::int64_t previous = 0;
    for (const auto& [index, count] : n.positive) {
        const auto c = static_cast<std::int64_t>(count);
        put_sint(h, histogram_field::positive_delta, c - previous);
        previous = c;
    }
}

}  // namespace

std::string encode_protobuf(const std::vector<prometheus::MetricFamily>& families,
                            const native_histograms* natives, const exemplar_store* exemplars) {
    std::map<std::pair<std::string, native_histograms::labels>, native_histogram> native;
    if (natives != nullptr) {
        native = natives->snapshot();
    }
    std::string out;
    for (const auto& f : families) {
        std::string family;
        put_bytes(family, family_field::name, f.name);
        put_bytes(family, family_field::help, f.help);
        put_uint(family, family_field::type, static_cast<std::uint64_t>(proto_type(f.type)));
        for (const auto& m : f.metric) {
            std::string metric;
            native_histograms::labels labels;
            for (const auto& l : m.label) {
                std::string pair;
                put_bytes(pair, 1, l.name);
                put_bytes(pair, 2, l.value);
                put_bytes(metric, metric_field::label, pair);
                labels.emplace(l.name, l.value);
            }
            std::string value;
            switch (f.type) {
                case prometheus::MetricType::Counter:
                    put_double(value, 1, m.counter.value);
                    put_bytes(metric, metric_field::counter, value);
                    break;
                case prometheus::MetricType::Gauge:
                    put_double(value, 1, m.gauge.value);
                    put_bytes(metric, metric_field::gauge, value);
                    break;
                case prometheus::MetricType::Histogram: {
                    // With a native histogram its own count and sum, so that the native part
                    // is consistent even when an observation lands between the two copies.
                    const auto it = native.find({f.name, labels});
                    const bool has_native = it != native.end();
                    put_uint(value, histogram_field::sample_count,
                             has_native ? it->second.count : m.histogram.sample_count);
                    put_double(value, histogram_field::sample_sum,
                               has_native ? it->second.sum : m.histogram.sample_sum);
                    std::vector<exemplar> kept;
                    if (exemplars != nullptr) {
                        exemplar_store::label_pairs pairs;
                        for (const auto& l : m.label) {
                            pairs.emplace_back(l.name, l.value);
                        }
                        if (const auto* found = exemplars->find(f.name, std::move(pairs))) {
                            kept = found->snapshot();
                        }
                    }
                    std::size_t index = 0;
                    for (const auto& b : m.histogram.bucket) {
                        const std::size_t at = index++;
                        if (std::isinf(b.upper_bound)) {
                            continue;  // implied by sample_count in this format
                        }
                        std::string bucket;
                        put_uint(bucket, 1, b.cumulative_count);
                        put_double(bucket, 2, b.upper_bound);
                        if (at < kept.size() && !kept[at].empty()) {
                            put_exemplar(bucket, kept[at]);
                        }
                        put_bytes(value, histogram_field::bucket, bucket);
                    }
                    if (has_native) {
                        put_native(value, it->second);
                    }
                    put_bytes(metric, metric_field::histogram, value);
                    break;
                }
                default:
                    put_double(value, 1, m.untyped.value);
                    put_bytes(metric, metric_field::untyped, value);
                    break;
            }
            put_bytes(family, family_field::metric, metric);
        }
        put_varint(out, family.size());
        out.append(family);
    }
    return out;
}

bool accepts_protobuf(std::string_view accept) {
    return accept.find("application/vnd.google.protobuf") != std::string_view::npos &&
           accept.find("proto=io.prometheus.client.MetricFamily") != std::string_view::npos &&
           accept.find("encoding=delimited") != std::string_view::npos;
}

}  // namespace tokenmeter::metrics
