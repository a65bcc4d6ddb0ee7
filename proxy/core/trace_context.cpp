#include "core/trace_context.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>

namespace tokenmeter::core {
namespace {

// The value of a lowercase hex digit, or -1 (uppercase is not allowed by the specification).
int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

// 2 * out.size() lowercase hex digits at the start of `text` into `out`.
bool read_hex(std::string_view text, std::span<std::uint8_t> out) noexcept {
    if (text.size() < 2 * out.size()) {
        return false;
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int high = hex_value(text[2 * i]);
        const int low = hex_value(text[2 * i + 1]);
        if (high < 0 || low < 0) {
            return false;
        }
        out[i] = static_cast<std::uint8_t>((high << 4) | low);
    }
    return true;
}

bool all_zero(std::span<const std::uint8_t> bytes) noexcept {
    return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}

std::string_view trim_whitespace(std::string_view value) noexcept {
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
        value.remove_suffix(1);
    }
    return value;
}

std::uint64_t rotate_left(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
}

// splitmix64: spreads one seed over xoshiro's state (its authors' advice).
std::uint64_t splitmix(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

template <std::size_t N>
void fill_nonzero(trace_random& random, std::array<std::uint8_t, N>& bytes) noexcept {
    do {
        for (std::size_t i = 0; i < N; i += 8) {
            std::uint64_t word = random.next();
            for (std::size_t j = 0; j < 8 && i + j < N; ++j) {
                bytes[i + j] = static_cast<std::uint8_t>(word & 0xffU);
                word >>= 8U;
            }
        }
    } while (all_zero(bytes));
}

}  // namespace

std::optional<trace_parent> parse_traceparent(std::string_view value) {
    value = trim_whitespace(value);
    // version "-" trace-id "-" parent-id "-" trace-flags
    if (value.size() < traceparent_length) {
        return std::nullopt;
    }
    std::array<std::uint8_t, 1> version{};
    if (!read_hex(value, version) || version[0] == 0xff) {
        return std::nullopt;
    }
    // Version 00 is exactly 55 characters; a later one may add fields after a '-'.
    if (version[0] == 0 ? value.size() != traceparent_length
                        : value.size() > traceparent_length && value[traceparent_length] != '-') {
        return std::nullopt;
    }
    if (value[2] != '-' || value[35] != '-' || value[52] != '-') {
        return std::nullopt;
    }
    trace_parent parsed;
    std::array<std::uint8_t, 1> flags{};
    if (!read_hex(value.substr(3), parsed.trace) || !read_hex(value.substr(36), parsed.parent) ||
        !read_hex(value.substr(53), flags)) {
        return std::nullopt;
    }
    if (all_zero(parsed.trace) || all_zero(parsed.parent)) {
        return std::nullopt;
    }
    parsed.flags = flags[0];
    return parsed;
}

bool trace_context::valid() const noexcept {
    return !all_zero(trace);
}

void append_hex(std::string& out, std::span<const std::uint8_t> bytes) {
    static constexpr std::string_view digits = "0123456789abcdef";
    for (const std::uint8_t b : bytes) {
        out.push_back(digits[b >> 4U]);
        out.push_back(digits[b & 0x0fU]);
    }
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
    std::string out;
    out.reserve(2 * bytes.size());
    append_hex(out, bytes);
    return out;
}

std::string format_traceparent(const trace_context& context) {
    std::string out;
    out.reserve(traceparent_length);
    out += "00-";
    append_hex(out, context.trace);
    out.push_back('-');
    append_hex(out, context.span);
    out.push_back('-');
    append_hex(out, std::span<const std::uint8_t>(&context.flags, 1));
    return out;
}

trace_random::trace_random(std::uint64_t seed) noexcept {
    for (std::uint64_t& word : state_) {
        word = splitmix(seed);
    }
}

trace_random& trace_random::for_thread() {
    thread_local trace_random random([]() noexcept {
        // A count of seeded threads and a stack address keep threads apart should the system's
        // entropy source fail (random_device may throw).
        static std::atomic<std::uint64_t> threads_seeded{0};
        std::uint64_t seed = threads_seeded.fetch_add(1, std::memory_order_relaxed);
        seed ^= static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&seed)) << 16U;
        try {
            std::random_device device;
            seed ^= (std::uint64_t{device()} << 32U) ^ device();
        } catch (...) {  // NOLINT(bugprone-empty-catch): the fallback seed above stands
        }
        return seed;
    }());
    return random;
}

std::uint64_t trace_random::next() noexcept {
    const std::uint64_t result = rotate_left(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17U;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotate_left(state_[3], 45);
    return result;
}

trace_id trace_random::new_trace_id() noexcept {
    trace_id id{};
    fill_nonzero(*this, id);
    return id;
}

span_id trace_random::new_span_id() noexcept {
    span_id id{};
    fill_nonzero(*this, id);
    return id;
}

bool trace_random::chance(double ratio) noexcept {
    if (!(ratio > 0.0)) {
        return false;
    }
    if (ratio >= 1.0) {
        return true;
    }
    // 53 random bits as a fraction in [0, 1).
    const double fraction = static_cast<double>(next() >> 11U) * 0x1p-53;
    return fraction < ratio;
}

trace_context continue_trace(const std::optional<trace_parent>& incoming, double sampling_ratio,
                             trace_random& random) noexcept {
    trace_context context;
    if (incoming) {
        context.trace = incoming->trace;
        context.parent = incoming->parent;
        context.flags = incoming->flags;
    } else {
        context.trace = random.new_trace_id();
        context.flags = random.chance(sampling_ratio) ? trace_flag_sampled : 0;
    }
    context.span = random.new_span_id();
    return context;
}

}  // namespace tokenmeter::core
