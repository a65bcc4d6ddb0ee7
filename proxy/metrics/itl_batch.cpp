#include "metrics/itl_batch.hpp"

#include <algorithm>
#include <cmath>

#include "metrics/native_histogram.hpp"

namespace tokenmeter::metrics {

itl_batch make_itl_batch(const std::vector<double>& classic, bool fine, bool native) {
    itl_batch out;
    out.bounds = classic;
    if (!fine) {
        return out;
    }
    // Every native boundary from 2^-17 s (7.6 us: below it a gap counts as 0) to 2^8 s; a gap
    // above 256 s is counted in the top native bucket.
    for (int i = -17 * 16; i <= 8 * 16; ++i) {
        out.bounds.push_back(std::exp2(static_cast<double>(i) / 16.0));
    }
    std::sort(out.bounds.begin(), out.bounds.end());
    out.bounds.erase(std::unique(out.bounds.begin(), out.bounds.end()), out.bounds.end());
    // Each batch bucket (previous bound, bound] lies inside one classic and one native bucket,
    // since both sets of boundaries are among the batch's.
    for (std::size_t j = 0; j <= out.bounds.size(); ++j) {
        const bool overflow = j == out.bounds.size();
        const double upper = overflow ? out.bounds.back() : out.bounds[j];
        out.classic_index.push_back(
            overflow
                ? classic.size()
                : static_cast<std::size_t>(std::lower_bound(classic.begin(), classic.end(), upper) -
                                           classic.begin()));
        if (native) {
            out.native_index.push_back(native_bucket_index(upper));
        }
    }
    return out;
}

}  // namespace tokenmeter::metrics
