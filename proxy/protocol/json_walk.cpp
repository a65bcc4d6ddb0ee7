#include "protocol/json_walk.hpp"

#include <array>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/text.hpp"
#include "protocol/json_limits.hpp"
#include "protocol/json_number.hpp"

namespace tokenmeter::protocol {

bool json_path::is(std::initializer_list<std::string_view> steps) const noexcept {
    return is_from(0, steps);
}

bool json_path::is_from(std::size_t skip,
                        std::initializer_list<std::string_view> steps) const noexcept {
    if (size_ < skip || size_ - skip != steps.size()) {
        return false;
    }
    std::size_t i = skip;
    for (std::string_view step : steps) {
        if (steps_[i] != step) {
            return false;
        }
        ++i;
    }
    return true;
}

void json_path::push(std::string_view step) {
    while (copies_.size() <= size_) {
        copies_.push_back(std::make_unique<std::string>());
    }
    copies_[size_]->assign(step);
    push_view(*copies_[size_]);
}

void json_path::push_view(std::string_view step) {
    if (size_ < steps_.size()) {
        steps_[size_] = step;
    } else {
        steps_.push_back(step);
    }
    ++size_;
}

namespace detail {

void report_json_unsigned(json_visitor& visitor, const json_path& path, std::uint64_t value) {
    visitor.on_count(path, value);
}

void report_json_integer(json_visitor& visitor, const json_path& path, std::int64_t value) {
    if (value >= 0) {
        visitor.on_count(path, static_cast<std::uint64_t>(value));
    } else {
        visitor.on_other(path);
    }
}

void report_json_float(json_visitor& visitor, const json_path& path, double value) {
    // Range first: converting an out-of-range double to an integer is undefined.
    if (value >= 0.0 && value < 1e18 &&
        static_cast<double>(static_cast<std::uint64_t>(value)) == value) {
        visitor.on_count(path, static_cast<std::uint64_t>(value));
    } else if (value >= 0.0 && value < 1e18) {
        visitor.on_fraction(path, value);
    } else {
        visitor.on_other(path);
    }
}

namespace {

// What "\x" stands for, for each one-character escape x; 0 for a byte that is none.
constexpr std::array<char, 256> one_character_escapes = [] {
    std::array<char, 256> escapes{};
    escapes['"'] = '"';
    escapes['\\'] = '\\';
    escapes['/'] = '/';
    escapes['b'] = '\b';
    escapes['f'] = '\f';
    escapes['n'] = '\n';
    escapes['r'] = '\r';
    escapes['t'] = '\t';
    return escapes;
}();

constexpr bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

constexpr bool is_whitespace(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

constexpr unsigned byte(char c) noexcept {
    return static_cast<unsigned char>(c);
}

// Length of the well-formed UTF-8 sequence (RFC 3629, as nlohmann's lexer checks it) whose lead
// byte, 0x80 or above, is at `p`; 0 if it is ill-formed or cut off by `end`.
std::size_t utf8_length(const char* p, const char* end) noexcept {
    const unsigned lead = byte(*p);
    std::size_t length = 0;
    unsigned second_min = 0x80;
    unsigned second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        second_min = lead == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
        second_max = lead == 0xED ? 0x9F : 0xBF;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        second_min = lead == 0xF0 ? 0x90 : 0x80;  // no overlong forms
        second_max = lead == 0xF4 ? 0x8F : 0xBF;  // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (static_cast<std::size_t>(end - p) < length || byte(p[1]) < second_min ||
        byte(p[1]) > second_max) {
        return 0;
    }
    for (std::size_t i = 2; i < length; ++i) {
        if ((byte(p[i]) & 0xC0U) != 0x80U) {
            return 0;
        }
    }
    return length;
}

void append_utf8(std::string& out, unsigned code_point) {
    if (code_point < 0x80) {
        out.push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
        out.push_back(static_cast<char>(0xC0U | (code_point >> 6U)));
        out.push_back(static_cast<char>(0x80U | (code_point & 0x3FU)));
    } else if (code_point < 0x10000) {
        out.push_back(static_cast<char>(0xE0U | (code_point >> 12U)));
        out.push_back(static_cast<char>(0x80U | ((code_point >> 6U) & 0x3FU)));
        out.push_back(static_cast<char>(0x80U | (code_point & 0x3FU)));
    } else {
        out.push_back(static_cast<char>(0xF0U | (code_point >> 18U)));
        out.push_back(static_cast<char>(0x80U | ((code_point >> 12U) & 0x3FU)));
        out.push_back(static_cast<char>(0x80U | ((code_point >> 6U) & 0x3FU)));
        out.push_back(static_cast<char>(0x80U | (code_point & 0x3FU)));
    }
}

// The four hex digits after "\u" at `p`, or -1.
int hex4(const char* p, const char* end) noexcept {
    if (end - p < 4) {
        return -1;
    }
    int value = 0;
    for (int i = 0; i < 4; ++i) {
        const int digit = core::hex_digit_value(p[i]);
        if (digit < 0) {
            return -1;
        }
        value = value * 16 + digit;
    }
    return value;
}

}  // namespace

// One pass, one byte of lookahead, no recursion: a value, then the punctuation up to the next
// value, in a loop; the open containers are a stack of bits. It reports what nlohmann's parser
// reported, and when: a scalar once its whole token is read, an opening bracket before anything
// after it is read, so a text that turns out invalid has produced the same events up to there.
// Where nlohmann's lexer expects a token, a NUL byte counts as the end of the input.
class json_scanner {
  public:
    json_scanner(std::string_view text, json_visitor& visitor, json_path& path)
        : p_(text.data()),
          end_(text.data() + text.size()),
          visitor_(visitor),
          path_(path),
          arrays_(path.arrays_),
          max_depth_(max_json_depth()) {}

    bool walk() {
        depth_ = 0;
        if (!skip_bom()) {
            return false;
        }
        while (true) {
            skip_whitespace();
            if (p_ == end_) {
                return false;
            }
            switch (*p_) {
                case '{':
                case '[': {
                    const bool object = *p_ == '{';
                    ++p_;
                    if (!open(object)) {
                        return false;
                    }
                    skip_whitespace();
                    if (p_ != end_ && *p_ == (object ? '}' : ']')) {
                        ++p_;
                        close(object);
                        break;
                    }
                    if (object && !member_key()) {
                        return false;
                    }
                    continue;
                }
                case '"': {
                    std::string_view value;
                    if (!scan_string(path_.value_scratch_, value)) {
                        return false;
                    }
                    scalar([&] { visitor_.on_string(path_, value); });
                    break;
                }
                case 't':
                    if (!literal("true")) {
                        return false;
                    }
                    scalar([&] { visitor_.on_bool(path_, true); });
                    break;
                case 'f':
                    if (!literal("false")) {
                        return false;
                    }
                    scalar([&] { visitor_.on_bool(path_, false); });
                    break;
                case 'n':
                    if (!literal("null")) {
                        return false;
                    }
                    scalar([&] { visitor_.on_null(path_); });
                    break;
                default:
                    if (!number()) {
                        return false;
                    }
                    break;
            }
            switch (after_value()) {
                case next::value:
                    continue;
                case next::end:
                    return true;
                case next::error:
                    return false;
            }
        }
    }

  private:
    enum class next : std::uint8_t { value, end, error };

    // Past a complete value: closes containers until another value is due or the text ends.
    next after_value() {
        while (true) {
            skip_whitespace();
            if (depth_ == 0) {
                return p_ == end_ || *p_ == '\0' ? next::end : next::error;
            }
            if (p_ == end_) {
                return next::error;
            }
            const bool array = innermost_is_array();
            if (*p_ == ',') {
                ++p_;
                if (array) {
                    return next::value;
                }
                skip_whitespace();
                return member_key() ? next::value : next::error;
            }
            if (*p_ != (array ? ']' : '}')) {
                return next::error;
            }
            ++p_;
            close(!array);
        }
    }

    bool skip_bom() noexcept {
        if (p_ == end_ || byte(*p_) != 0xEF) {
            return true;
        }
        if (end_ - p_ < 3 || byte(p_[1]) != 0xBB || byte(p_[2]) != 0xBF) {
            return false;
        }
        p_ += 3;
        return true;
    }

    void skip_whitespace() noexcept {
        // JSON's four whitespace bytes are all at or below a space: one comparison passes the rest.
        while (p_ != end_ && byte(*p_) <= 0x20U && is_whitespace(*p_)) {
            ++p_;
        }
    }

    // A key and its colon, the next value's step in the path.
    bool member_key() {
        if (p_ == end_ || *p_ != '"' || !scan_string(path_.key_scratch_, key_)) {
            return false;
        }
        skip_whitespace();
        if (p_ == end_ || *p_ != ':') {
            return false;
        }
        ++p_;
        return true;
    }

    bool literal(std::string_view word) noexcept {
        if (static_cast<std::size_t>(end_ - p_) < word.size() ||
            std::memcmp(p_, word.data(), word.size()) != 0) {
            return false;
        }
        p_ += word.size();
        return true;
    }

    // The string at the opening quote at p_. Without escapes `out` views the input; with escapes
    // it views `scratch`, which holds the unescaped text. Inlined for the common case (plain
    // bytes up to the closing quote); anything else continues out of line.
    [[gnu::always_inline]] bool scan_string(std::string& scratch, std::string_view& out) {
        ++p_;
        const char* start = p_;
        p_ = skip_plain_bytes(p_, end_);
        if (p_ != end_ && *p_ == '"') {
            out = std::string_view(start, static_cast<std::size_t>(p_ - start));
            ++p_;
            return true;
        }
        return scan_string_rest(start, scratch, out);
    }

    // The string from `start`, p_ at its first byte that is not plain.
    [[gnu::noinline]] bool scan_string_rest(const char* start, std::string& scratch,
                                            std::string_view& out) {
        while (true) {
            if (p_ == end_) {
                return false;
            }
            if (*p_ == '"') {
                out = std::string_view(start, static_cast<std::size_t>(p_ - start));
                ++p_;
                return true;
            }
            if (*p_ == '\\') {
                scratch.assign(start, p_);
                return scan_escaped_string(scratch, out);
            }
            if (!skip_utf8()) {
                return false;
            }
            p_ = skip_plain_bytes(p_, end_);
        }
    }

    // The rest of a string from its first backslash at p_, unescaped into `scratch`.
    bool scan_escaped_string(std::string& scratch, std::string_view& out) {
        while (true) {
            const char* run = p_;
            p_ = skip_plain_bytes(p_, end_);
            scratch.append(run, p_);
            if (p_ == end_) {
                return false;
            }
            if (*p_ == '"') {
                out = scratch;
                ++p_;
                return true;
            }
            if (*p_ == '\\') {
                if (!unescape(scratch)) {
                    return false;
                }
                continue;
            }
            const char* sequence = p_;
            if (!skip_utf8()) {
                return false;
            }
            scratch.append(sequence, p_);
        }
    }

    // A byte that is neither plain, a quote nor a backslash: a control character is an error, a
    // UTF-8 sequence must be well-formed.
    bool skip_utf8() noexcept {
        if (byte(*p_) < 0x80) {
            return false;
        }
        const std::size_t length = utf8_length(p_, end_);
        p_ += length;
        return length != 0;
    }

    // The escape at the backslash at p_, appended to `out`.
    bool unescape(std::string& out) {
        ++p_;
        if (p_ == end_) {
            return false;
        }
        const char c = *p_++;
        if (c == 'u') {
            return unescape_code_point(out);
        }
        const char unescaped = one_character_escapes[byte(c)];
        if (unescaped == 0) {
            return false;
        }
        out.push_back(unescaped);
        return true;
    }

    // The hex digits after "\u" at p_, a surrogate pair as one code point.
    bool unescape_code_point(std::string& out) {
        const int first = hex4(p_, end_);
        if (first < 0) {
            return false;
        }
        p_ += 4;
        auto code_point = static_cast<unsigned>(first);
        if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
            return false;
        }
        if (code_point >= 0xD800 && code_point <= 0xDBFF) {
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
                return false;
            }
            const int second = hex4(p_ + 2, end_);
            if (second < 0xDC00 || second > 0xDFFF) {
                return false;
            }
            p_ += 6;
            code_point =
                0x10000 + ((code_point - 0xD800) << 10U) + (static_cast<unsigned>(second) - 0xDC00);
        }
        append_utf8(out, code_point);
        return true;
    }

    // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? at p_, typed as nlohmann's lexer types it: an
    // integer is unsigned or (with a minus) signed while it fits, anything else is strtod's
    // double, which must be finite.
    bool number() {
        const char* start = p_;
        const bool negative = *p_ == '-';
        if (negative) {
            ++p_;
        }
        if (p_ == end_ || !is_digit(*p_)) {
            return false;
        }
        std::uint64_t magnitude = 0;
        bool overflow = false;
        if (*p_ == '0') {
            ++p_;
        } else {
            const char* digits = p_;
            do {
                magnitude = magnitude * 10 + static_cast<std::uint64_t>(*p_ - '0');
                ++p_;
            } while (p_ != end_ && is_digit(*p_));
            // Nineteen digits always fit in 64 bits; past that the sum may have wrapped, so it is
            // done again with overflow checks.
            if (p_ - digits > 19) {
                magnitude = 0;
                for (const char* d = digits; d != p_; ++d) {
                    const auto digit = static_cast<std::uint64_t>(*d - '0');
                    overflow |= __builtin_mul_overflow(magnitude, 10U, &magnitude);
                    overflow |= __builtin_add_overflow(magnitude, digit, &magnitude);
                }
            }
        }
        bool integer = true;
        if (p_ != end_ && *p_ == '.') {
            ++p_;
            if (!skip_digits()) {
                return false;
            }
            integer = false;
        }
        if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
            ++p_;
            if (p_ != end_ && (*p_ == '+' || *p_ == '-')) {
                ++p_;
            }
            if (!skip_digits()) {
                return false;
            }
            integer = false;
        }
        constexpr std::uint64_t int64_min_magnitude = std::uint64_t{1} << 63U;
        if (integer && !overflow && !negative) {
            scalar([&] { report_json_unsigned(visitor_, path_, magnitude); });
            return true;
        }
        if (integer && !overflow && magnitude <= int64_min_magnitude) {
            // -magnitude in two's complement, without overflowing at INT64_MIN.
            const auto value = static_cast<std::int64_t>(~magnitude + 1);
            scalar([&] { report_json_integer(visitor_, path_, value); });
            return true;
        }
        const double value = to_double(start);
        if (!std::isfinite(value)) {
            return false;
        }
        scalar([&] { report_json_float(visitor_, path_, value); });
        return true;
    }

    // One or more digits.
    bool skip_digits() noexcept {
        if (p_ == end_ || !is_digit(*p_)) {
            return false;
        }
        do {
            ++p_;
        } while (p_ != end_ && is_digit(*p_));
        return true;
    }

    // The number text from `start` to p_ through strtod, with the locale's decimal point for '.'
    // as nlohmann's lexer does.
    double to_double(const char* start) {
        std::string& text = path_.number_scratch_;
        text.assign(start, p_);
        // Read-only here; nothing in the proxy calls setlocale.
        const char* point = std::localeconv()->decimal_point;  // NOLINT(concurrency-mt-unsafe)
        const char decimal_point = point == nullptr ? '.' : *point;
        for (char& c : text) {
            if (c == '.') {
                c = decimal_point;
            }
        }
        return std::strtod(text.c_str(), nullptr);
    }

    // The step a value takes in its parent: its key, or "[]" in an array; none at the root.
    bool push_step() {
        if (depth_ == 0) {
            return false;
        }
        if (innermost_is_array()) {
            path_.push_view(json_path::element);
        } else if (key_.data() == path_.key_scratch_.data()) {
            path_.push(key_);  // unescaped into the scratch, which the next key overwrites
        } else {
            path_.push_view(key_);  // a view of the text, valid for the whole walk
        }
        return true;
    }

    template <typename Report>
    void scalar(Report&& report) {
        const bool pushed = push_step();
        std::forward<Report>(report)();
        if (pushed) {
            path_.pop();
        }
    }

    // False past the depth limit: the walk stops there and the text counts as not parsed.
    bool open(bool object) {
        if (depth_ >= max_depth_) {
            return false;
        }
        push_step();
        visitor_.on_open(path_, object);
        if (depth_ == arrays_.size()) {
            arrays_.push_back(0);
        }
        arrays_[depth_++] = object ? 0 : 1;
        return true;
    }

    // A container added a path step unless it was the root.
    void close(bool object) {
        --depth_;
        visitor_.on_close(path_, object);
        if (depth_ != 0) {
            path_.pop();
        }
    }

    const char* p_;
    const char* end_;
    json_visitor& visitor_;
    json_path& path_;
    [[nodiscard]] bool innermost_is_array() const noexcept { return arrays_[depth_ - 1] != 0; }

    std::vector<std::uint8_t>& arrays_;  // [0, depth_) in use; grown, never shrunk
    std::size_t depth_ = 0;
    std::string_view key_;
    std::size_t max_depth_;
};

}  // namespace detail

walk_result walk_json(std::string_view text, json_visitor& visitor, json_path& path) {
    path.clear();
    detail::json_scanner scanner(text, visitor, path);
    return scanner.walk() ? walk_result::ok : walk_result::invalid_json;
}

walk_result walk_json_scratch(std::string_view text, json_visitor& visitor) {
    thread_local json_path scratch;
    thread_local bool in_use = false;
    if (in_use) {
        json_path own;
        return walk_json(text, visitor, own);
    }
    in_use = true;
    struct release {
        release() = default;
        release(const release&) = delete;
        release& operator=(const release&) = delete;
        ~release() { in_use = false; }
    } on_exit;
    return walk_json(text, visitor, scratch);
}

}  // namespace tokenmeter::protocol
