// http/relay_buffer: how large the upstream relay's read buffer is for the next read. It starts
// small (a streamed chunk is a few hundred bytes, and only the pages a read touches count in
// RSS), grows while reads keep filling it (a large body then moves in few big reads and writes),
// and goes back to its first size once reads have been small for a while: a stream that fell
// behind for a moment (a burst of new streams, a busy worker) gathers several chunks per read and
// grows its buffer, but need not keep the grown buffer for the rest of its response. Sans-I/O, so
// the rule is unit-tested on its own (tests/unit/http/relay_buffer_test).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tokenmeter::http {

struct relay_buffer_size {
    static constexpr std::size_t initial = 512;
    static constexpr std::size_t max = 256 * 1024;
    // Reads in a row that the first size would have held without filling it, after which a grown
    // buffer is made small again.
    static constexpr std::uint32_t shrink_after_small_reads = 16;

    // The capacity for the next read, given the current one and the bytes the previous read
    // took (0: none yet). `small_reads` is the caller's counter of small reads in a row.
    static std::size_t next(std::size_t capacity, std::size_t bytes_read,
                            std::uint32_t& small_reads) noexcept {
        if (bytes_read == 0) {
            return capacity;
        }
        if (bytes_read >= capacity && capacity < max) {
            small_reads = 0;
            return std::min(capacity * 4, max);
        }
        if (capacity <= initial) {
            return capacity;
        }
        if (bytes_read >= initial) {
            small_reads = 0;
            return capacity;
        }
        if (++small_reads < shrink_after_small_reads) {
            return capacity;
        }
        small_reads = 0;
        return initial;
    }
};

}  // namespace tokenmeter::http
