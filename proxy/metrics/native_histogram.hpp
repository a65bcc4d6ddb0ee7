// metrics/native_histogram: Prometheus native (sparse exponential) histograms, which
// prometheus-cpp does not have, and the protobuf exposition that carries them (the text format
// cannot). Bucket i of schema s holds the values in (2^((i-1)/2^s), 2^(i/2^s)]; only buckets
// that were hit are kept.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
struct MetricFamily;
}

namespace tokenmeter::metrics {

// Schema 4: each bucket is 2^(1/16) = 4.4 % wider than the one below, so a quantile read with
// histogram_quantile is within 4.4 % of the truth whatever the distribution (the truth and the
// estimate lie in the same bucket), and a median of equal values within 2.2 %.
inline constexpr int native_schema = 4;
// Values at or below it land in the zero bucket. A positive threshold also tells Prometheus the
// histogram is native even before it has any positive bucket.
inline constexpr double native_zero_threshold = 0x1p-128;

// The index of the schema-`schema` bucket that holds v (v > native_zero_threshold).
int native_bucket_index(double v, int schema = native_schema);

struct native_histogram {
    std::map<int, std::uint64_t> positive;  // bucket index -> count
    std::uint64_t zero_count = 0;
    std::uint64_t count = 0;
    double sum = 0;
    double zero_threshold = native_zero_threshold;
    void observe(double v);
};

// Observations already sorted into native buckets (a request's inter-token latencies), with the
// zero threshold below which they were not told apart.
struct native_batch {
    std::map<int, std::uint64_t> positive;
    std::uint64_t zero_count = 0;
    std::uint64_t count = 0;
    double sum = 0;
    double zero_threshold = native_zero_threshold;
};

// Every native histogram of a registry, keyed by family name and label set.
class native_histograms {
  public:
    using labels = std::map<std::string, std::string>;
    void observe(const std::string& family, const labels& l, double v);
    void observe(const std::string& family, const labels& l, const native_batch& batch);
    // A copy, for one exposition.
    [[nodiscard]] std::map<std::pair<std::string, labels>, native_histogram> snapshot() const;

  private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, labels>, native_histogram> histograms_;
};

// The families as length-delimited io.prometheus.client.MetricFamily messages
// (proxy/metrics/metrics.proto), the format Prometheus asks for with
// Accept:
// application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited. A
// histogram family whose series has a native histogram carries both: its classic buckets and the
// native schema, zero bucket, spans and deltas. A classic bucket with an exemplar in `exemplars`
// carries it (Bucket.exemplar); the +Inf bucket, which this format leaves out, cannot.
class exemplar_store;
std::string encode_protobuf(const std::vector<prometheus::MetricFamily>& families,
                            const native_histograms* natives,
                            const exemplar_store* exemplars = nullptr);

// The Content-Type of encode_protobuf's output, and whether an Accept header asks for it.
inline constexpr std::string_view protobuf_content_type =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
    "encoding=delimited";
bool accepts_protobuf(std::string_view accept);

}  // namespace tokenmeter::metrics
