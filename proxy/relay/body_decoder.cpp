#include "relay/body_decoder.hpp"

#include <algorithm>
#include <cstring>

#include "core/text.hpp"

namespace tokenmeter::relay {
namespace {

using core::hex_digit_value;

// A byte a trailer field may hold: visible ASCII, space, tab, obs-text.
bool is_field_byte(char c) noexcept {
    const auto b = static_cast<unsigned char>(c);
    return b == '\t' || (b >= 0x20 && b != 0x7F);
}

// Chunk sizes stop at 2^56: far beyond any body, and no overflow while digits are added.
constexpr std::uint64_t max_chunk_size_before_digit = (std::uint64_t{1} << 52U) - 1;

// Where a read's payload goes: the first payload bytes stay where they are, and later ones are
// moved up to follow them.
struct payload_span {
    char* begin = nullptr;  // null until the first payload byte
    char* end = nullptr;
    void add(char* from, std::size_t n) noexcept {
        if (n == 0) {
            return;
        }
        if (begin == nullptr) {
            begin = from;
            end = from + n;
            return;
        }
        if (end != from) {
            std::memmove(end, from, n);
        }
        end += n;
    }
};

// A whole chunk of data at `in`: "<hex size>\r\n<data>\r\n" with a size of 1 to 14 digits
// (no extension, not the last chunk). Its data is added to `out` and the end of the chunk
// returned; anything else (a longer or odd size line, a chunk cut by the read, a fault) returns
// null with nothing done, for the byte-at-a-time states to take it as they would.
char* whole_chunk(char* in, const char* end, payload_span& out) noexcept {
    constexpr int max_fast_digits = 14;  // below 2^56, as the states allow
    std::uint64_t size = 0;
    int digits = 0;
    char* p = in;
    for (; p != end && digits < max_fast_digits; ++p, ++digits) {
        const int digit = hex_digit_value(*p);
        if (digit < 0) {
            break;
        }
        size = size * 16 + static_cast<std::uint64_t>(digit);
    }
    if (digits == 0 || size == 0 || end - p < 2 || p[0] != '\r' || p[1] != '\n') {
        return nullptr;
    }
    p += 2;
    if (static_cast<std::uint64_t>(end - p) < size + 2) {
        return nullptr;
    }
    const auto n = static_cast<std::size_t>(size);
    if (p[n] != '\r' || p[n + 1] != '\n') {
        return nullptr;
    }
    out.add(p, n);
    return p + n + 2;
}

}  // namespace

body_decoder body_decoder::with_length(std::uint64_t length) noexcept {
    return {framing::length, length == 0 ? state::done : state::data, length, 0};
}

body_decoder body_decoder::chunked(std::size_t max_trailer_bytes) noexcept {
    return {framing::chunked, state::size_first, 0, max_trailer_bytes};
}

body_decoder body_decoder::until_close() noexcept {
    return {framing::until_close, state::data, 0, 0};
}

// One loop over the bytes with the chunked state machine inline: split into functions per state,
// the hot path (data inside a chunk) would leave and re-enter the loop for every chunk.
// NOLINTNEXTLINE(readability-function-cognitive-complexity)
body_decoder::step body_decoder::decode(char* data, std::size_t size) noexcept {
    step result;
    if (state_ == state::failed) {
        result.error = error_;
        return result;
    }
    char* in = data;
    const char* const end = data + size;
    payload_span out;
    auto finish = [&] {
        if (out.begin != nullptr) {
            result.offset = static_cast<std::size_t>(out.begin - data);
            result.payload = static_cast<std::size_t>(out.end - out.begin);
        }
        result.consumed = static_cast<std::size_t>(in - data);
    };
    // What was decoded before a failure is still the body's.
    auto failed = [&](failure why) {
        finish();
        return fail(result, why);
    };
    while (in != end && state_ != state::done) {
        switch (state_) {
            case state::data: {
                auto n = static_cast<std::size_t>(end - in);
                if (framing_ != framing::until_close) {
                    n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, n));
                    remaining_ -= n;
                    if (remaining_ == 0) {
                        state_ = framing_ == framing::chunked ? state::data_cr : state::done;
                    }
                }
                out.add(in, n);
                in += n;
                break;
            }
            case state::size_first: {
                // The usual case first: a whole chunk in view, its size line without extension.
                if (char* after = whole_chunk(in, end, out)) {
                    in = after;
                    break;
                }
                const int digit = hex_digit_value(*in);
                if (digit < 0) {
                    return failed(failure::bad_chunk_size);
                }
                remaining_ = static_cast<std::uint64_t>(digit);
                line_bytes_ = 1;
                ++in;
                state_ = state::size;
                break;
            }
            case state::size: {
                const int digit = hex_digit_value(*in);
                if (digit >= 0) {
                    if (remaining_ > max_chunk_size_before_digit) {
                        return failed(failure::bad_chunk_size);
                    }
                    remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(digit);
                    ++in;
                    if (++line_bytes_ > max_line_bytes) {
                        return failed(failure::chunk_line_too_long);
                    }
                    break;
                }
                // The size ends at CR, or where an extension (";", perhaps after spaces) starts.
                if (*in != '\r' && *in != ';' && *in != ' ' && *in != '\t') {
                    return failed(failure::bad_chunk_size);
                }
                state_ = state::extension;
                break;
            }
            case state::extension: {
                const char c = *in++;
                // Extensions are dropped, so their content is not checked (Beast's parser let
                // control bytes through in quoted strings); a line still ends only at CRLF.
                if (c == '\r') {
                    state_ = state::size_lf;
                } else if (c == '\n') {
                    return failed(failure::bad_chunk_line);
                } else if (++line_bytes_ > max_line_bytes) {
                    return failed(failure::chunk_line_too_long);
                }
                break;
            }
            case state::size_lf:
                if (*in++ != '\n') {
                    return failed(failure::bad_chunk_line);
                }
                state_ = remaining_ == 0 ? state::trailer_start : state::data;
                break;
            case state::data_cr:
                if (*in++ != '\r') {
                    return failed(failure::bad_chunk_end);
                }
                state_ = state::data_lf;
                break;
            case state::data_lf:
                if (*in++ != '\n') {
                    return failed(failure::bad_chunk_end);
                }
                state_ = state::size_first;
                break;
            case state::trailer_start:
            case state::trailer: {
                const char c = *in++;
                if (++trailer_bytes_ > max_trailer_) {
                    return failed(failure::trailers_too_long);
                }
                if (c == '\r') {
                    state_ = state_ == state::trailer_start ? state::end_lf : state::trailer_lf;
                } else if (!is_field_byte(c)) {
                    return failed(failure::bad_trailer);
                } else {
                    state_ = state::trailer;
                }
                break;
            }
            case state::trailer_lf:
            case state::end_lf: {
                if (*in++ != '\n') {
                    return failed(failure::bad_trailer);
                }
                state_ = state_ == state::end_lf ? state::done : state::trailer_start;
                break;
            }
            case state::done:
            case state::failed:
                break;  // not reached: the loop stops at done, and failed returned above
        }
    }
    finish();
    return result;
}

body_decoder::failure body_decoder::at_close() noexcept {
    if (state_ == state::failed) {
        return error_;
    }
    if (state_ == state::done) {
        return failure::none;
    }
    if (framing_ == framing::until_close) {
        state_ = state::done;
        return failure::none;
    }
    state_ = state::failed;
    error_ = failure::cut_short;
    return error_;
}

std::string_view to_string(body_decoder::failure why) noexcept {
    switch (why) {
        case body_decoder::failure::none:
            return "none";
        case body_decoder::failure::bad_chunk_size:
            return "bad chunk size";
        case body_decoder::failure::bad_chunk_line:
            return "bad chunk size line";
        case body_decoder::failure::chunk_line_too_long:
            return "chunk size line too long";
        case body_decoder::failure::bad_chunk_end:
            return "chunk data not followed by CRLF";
        case body_decoder::failure::bad_trailer:
            return "bad trailer field";
        case body_decoder::failure::trailers_too_long:
            return "trailer fields too long";
        case body_decoder::failure::cut_short:
            return "connection closed before the end of the body";
    }
    return "unknown";
}

}  // namespace tokenmeter::relay
