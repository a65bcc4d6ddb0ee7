// metrics/itl_batch: the buckets a request batches its inter-token latencies into
// (meter::histogram_batch), and where each lands in the classic and the native histogram.
#pragma once

#include <cstddef>
#include <vector>

namespace tokenmeter::metrics {

struct itl_batch {
    std::vector<double> bounds;              // the batch's bucket upper bounds, ascending
    std::vector<std::size_t> classic_index;  // per batch bucket (and overflow): its classic one
    std::vector<int> native_index;           // per batch bucket: its native one (when native)
};

// `classic`: the classic histogram's bounds. `fine`: the batch also holds every native boundary
// from 2^-17 s to 2^8 s (for native histograms or the status page's fine quantiles); without
// it the batch is the classic buckets and no index is needed.
[[nodiscard]] itl_batch make_itl_batch(const std::vector<double>& classic, bool fine, bool native);

}  // namespace tokenmeter::metrics
