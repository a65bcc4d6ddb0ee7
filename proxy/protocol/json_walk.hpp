// protocol/json_walk: one SAX pass over a JSON text that reports every value with the path of
// keys that leads to it, so an adapter can pick out the few fields it meters without building a
// DOM per chunk. A hand-written scanner that accepts and reports exactly what nlohmann/json's SAX
// parser (3.11) did before it, at a fraction of the cost; it runs on every streamed chunk. The
// path's storage, and the scanner's scratch kept with it, are reused from walk to walk: after
// warm-up a walk allocates nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tokenmeter::protocol {

namespace detail {
class json_scanner;

// Bytes a string copies as they are: printable ASCII but the quote and the backslash. Everything
// else ends a run: the closing quote, an escape, a control character (an error) or the lead byte
// of a UTF-8 sequence (validated).
constexpr std::array<bool, 256> plain_string_bytes = [] {
    std::array<bool, 256> plain{};
    for (std::size_t c = 0x20; c < 0x80; ++c) {
        plain[c] = c != '"' && c != '\\';
    }
    return plain;
}();

// The first byte at or after `p` that is not plain: a quote, a backslash, a control character
// or a byte of a UTF-8 sequence. Sixteen bytes at a time where SSE2 is there (every x86-64),
// since most of a chunk's bytes are inside strings; the table decides the rest.
[[gnu::always_inline]] inline const char* skip_plain_bytes(const char* p,
                                                           const char* end) noexcept {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // As signed bytes, 0x80-0xFF are negative: "less than a space" catches them and the
        // control characters in one comparison.
        const __m128i special =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                         _mm_cmplt_epi8(v, space));
        const auto mask = static_cast<unsigned>(_mm_movemask_epi8(special));
        if (mask != 0) {
            return p + __builtin_ctz(mask);
        }
        p += 16;
    }
#endif
    while (p != end && plain_string_bytes[static_cast<unsigned char>(*p)]) {
        ++p;
    }
    return p;
}

}  // namespace detail

// Keys from the root to the current value; an array element's step is "[]".
class json_path {
  public:
    static constexpr std::string_view element = "[]";

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::string_view operator[](std::size_t i) const noexcept { return steps_[i]; }
    [[nodiscard]] std::string_view back() const noexcept { return steps_[size_ - 1]; }

    // The whole path is exactly these steps.
    [[nodiscard]] bool is(std::initializer_list<std::string_view> steps) const noexcept;
    // The path without its first `skip` steps is exactly these steps.
    [[nodiscard]] bool is_from(std::size_t skip,
                               std::initializer_list<std::string_view> steps) const noexcept;

    // Adds a copy of `step`.
    void push(std::string_view step);
    void pop() noexcept { --size_; }
    void clear() noexcept { size_ = 0; }

  private:
    friend class detail::json_scanner;
    // Adds `step` without a copy: it must outlive the path's use (walk_json's keys that view
    // the text being walked, and "[]").
    void push_view(std::string_view step);

    std::vector<std::string_view> steps_;
    // Per depth, for pushed copies: each string where it was made (steps_ view them), and nothing
    // allocated until the first copy (a std::deque allocates a map and a 512-byte block when it
    // is made, and every streamed response's adapter has a path).
    std::vector<std::unique_ptr<std::string>> copies_;
    std::size_t size_ = 0;
    // walk_json's scratch: unescaped keys and string values apart (a key is still needed when its
    // value has been unescaped), a number's text for strtod, and per open container: an array?
    // (a byte each, not vector<bool>: its bit arithmetic was a sixth of a walk's instructions)
    std::string key_scratch_;
    std::string value_scratch_;
    std::string number_scratch_;
    std::vector<std::uint8_t> arrays_;
};

class json_visitor {
  public:
    json_visitor() = default;
    json_visitor(const json_visitor&) = default;
    json_visitor& operator=(const json_visitor&) = default;
    json_visitor(json_visitor&&) = default;
    json_visitor& operator=(json_visitor&&) = default;
    virtual ~json_visitor() = default;

    virtual void on_string(const json_path& /*path*/, std::string_view /*value*/) {}
    // Non-negative integers (and floats with an integral value), the only numbers metered.
    virtual void on_count(const json_path& /*path*/, std::uint64_t /*value*/) {}
    virtual void on_bool(const json_path& /*path*/, bool /*value*/) {}
    // Any other scalar: a negative or out-of-range number, and by default null and fractions.
    virtual void on_other(const json_path& /*path*/) {}
    virtual void on_null(const json_path& path) { on_other(path); }
    // A non-negative number with a fraction, below 1e18 (OpenAI truncates these to counts).
    virtual void on_fraction(const json_path& path, double /*value*/) { on_other(path); }
    virtual void on_open(const json_path& /*path*/, bool /*object*/) {}
    virtual void on_close(const json_path& /*path*/, bool /*object*/) {}
};

enum class walk_result : std::uint8_t { ok, invalid_json };

// Walks `text` (one JSON value, nothing after it but whitespace). `path` is scratch space
// reused across walks; it is cleared first.
walk_result walk_json(std::string_view text, json_visitor& visitor, json_path& path);
// The same with the calling thread's scratch path: a response adapter walks one event at a time,
// and need not carry a path (and its buffers) through every open stream. A walk started from
// another's callbacks gets a path of its own.
walk_result walk_json_scratch(std::string_view text, json_visitor& visitor);

}  // namespace tokenmeter::protocol
