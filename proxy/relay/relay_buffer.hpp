// relay/relay_buffer: how large the upstream relay's read buffer is for the next read. It starts
// small (a streamed chunk is a few hundred bytes, and only the pages a read touches count in
// RSS), grows while reads keep filling it (a large body then moves in few big reads and writes),
// and goes back to its first size once reads have been small for a while: a stream that fell
// behind for a moment (a burst of new streams, a busy worker) gathers several chunks per read and
// grows its buffer, but need not keep the grown buffer for the rest of its response. Sans-I/O, so
// the rule is unit-tested on its own (tests/unit/relay/relay_buffer_test).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace tokenmeter::relay {

struct relay_buffer_size {
    static constexpr std::size_t initial = 512;
    static constexpr std::size_t max = std::size_t{256} * 1024;
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

// A worker's spare relay buffers of the first size. A stream that waits for its next chunk need
// not hold one: its read takes a buffer when the socket has data (relay/drained_read), and the
// exchange gives it back when it starts the next read, the bytes written and observed. So the
// buffers in use follow the reads in flight, not the open streams (a thousand streams at 20 ms
// between chunks had 512 bytes each, waiting). Per thread, never shared; a bounded number of
// spares is kept, the rest freed.
class relay_buffer_pool {
  public:
    static constexpr std::size_t buffer_size = relay_buffer_size::initial;
    static constexpr std::size_t max_spare = 256;  // 128 KiB per worker at most

    relay_buffer_pool() { spare_.reserve(max_spare); }
    ~relay_buffer_pool() {
        for (char* p : spare_) {
            delete[] p;
        }
    }
    relay_buffer_pool(const relay_buffer_pool&) = delete;
    relay_buffer_pool& operator=(const relay_buffer_pool&) = delete;

    // A buffer of buffer_size bytes (uninitialised), or nullptr when memory ran out.
    [[nodiscard]] char* take() noexcept {
        if (spare_.empty()) {
            return new (std::nothrow) char[buffer_size];
        }
        char* p = spare_.back();
        spare_.pop_back();
        return p;
    }
    // Takes back a buffer from take() (or any new char[buffer_size]); nullptr is ignored.
    void give(char* p) noexcept {
        if (p == nullptr) {
            return;
        }
        if (spare_.size() < max_spare) {
            spare_.push_back(p);  // reserved: never allocates
        } else {
            delete[] p;
        }
    }
    [[nodiscard]] std::size_t spare() const noexcept { return spare_.size(); }
    // Frees the spares (a worker gone idle; the next reads allocate again).
    void release_spares() noexcept {
        for (char* p : spare_) {
            delete[] p;
        }
        spare_.clear();
    }

    static relay_buffer_pool& for_thread() {
        thread_local relay_buffer_pool pool;
        return pool;
    }

  private:
    std::vector<char*> spare_;
};

// One read buffer that follows relay_buffer_size: its first size taken from the worker's
// relay_buffer_pool and given back, a grown one allocated and freed. For a reader that keeps its
// buffer between reads (a WebSocket tunnel's direction); uninitialised, so untouched pages cost
// no RSS.
class sized_relay_buffer {
  public:
    sized_relay_buffer() = default;
    sized_relay_buffer(const sized_relay_buffer&) = delete;
    sized_relay_buffer& operator=(const sized_relay_buffer&) = delete;
    sized_relay_buffer(sized_relay_buffer&&) = delete;
    sized_relay_buffer& operator=(sized_relay_buffer&&) = delete;
    ~sized_relay_buffer() { release(); }

    // The buffer for the next read, or nullptr when memory ran out.
    [[nodiscard]] char* data() noexcept {
        if (!bytes_) {
            if (capacity_ <= relay_buffer_size::initial) {
                capacity_ = relay_buffer_size::initial;
                bytes_.reset(relay_buffer_pool::for_thread().take());
            } else {
                bytes_.reset(new (std::nothrow) char[capacity_]);
            }
        }
        return bytes_.get();
    }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    // The previous read took `bytes_read` and nothing refers to its bytes any more: the size
    // for the next read.
    void after_read(std::size_t bytes_read) noexcept {
        const std::size_t next = relay_buffer_size::next(capacity_, bytes_read, small_reads_);
        if (next != capacity_) {
            release();
            capacity_ = next;
        }
    }
    void release() noexcept {
        if (!bytes_) {
            return;
        }
        if (capacity_ <= relay_buffer_size::initial) {
            relay_buffer_pool::for_thread().give(bytes_.release());
        } else {
            bytes_.reset();
        }
    }

  private:
    std::unique_ptr<char[]> bytes_;  // NOLINT(modernize-avoid-c-arrays): a vector zeroes
    std::size_t capacity_ = relay_buffer_size::initial;
    std::uint32_t small_reads_ = 0;
};

}  // namespace tokenmeter::relay
