// prom_text: the Prometheus text exposition format (version 0.0.4) read back into samples, and the
// histogram_quantile estimate, so tokenmeter's /metrics can be summarised without a Prometheus.
// The one exposition parser of the C++ tests and tools; its JavaScript counterpart is
// tests/integration/lib/prom.mjs, and both are held to tests/fixtures/prometheus/exposition.prom.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokenmeter::load {

using label_set = std::vector<std::pair<std::string, std::string>>;  // sorted by label name

struct prom_sample {
    std::string name;
    label_set labels;
    double value = 0;
};

struct exposition {
    std::vector<prom_sample> samples;
    std::map<std::string, std::string, std::less<>> types;  // family name -> "histogram", ...
};

struct exposition_result {
    std::optional<exposition> value;
    std::string error;  // names the line number
};

exposition_result parse_exposition(std::string_view text);

struct histogram_bucket {
    double upper_bound = 0;
    double cumulative_count = 0;
};

struct histogram_series {
    label_set labels;                       // without le
    std::vector<histogram_bucket> buckets;  // sorted by upper bound
    double sum = 0;
    double count = 0;
};

// Every series of one histogram family (name without _bucket/_sum/_count).
std::vector<histogram_series> histogram_family(const exposition& metrics, std::string_view family);

// Adds the buckets of b into a; both must come from the same family (same bounds).
void merge_into(histogram_series& a, const histogram_series& b);

// Prometheus's histogram_quantile: linear interpolation inside the bucket holding the rank; the
// highest finite bound when the rank falls in +Inf; NaN without observations or a +Inf bucket.
double histogram_quantile(double q, std::vector<histogram_bucket> buckets);

std::string_view label_value(const label_set& labels, std::string_view name);

}  // namespace tokenmeter::load
