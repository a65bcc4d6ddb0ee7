// sse/line_splitter: splits a byte stream, fed as spans cut anywhere, into lines ended by CR, LF
// or CR LF, where the bytes lie. A CR that ends one span and the LF that starts the next are one
// line end. It holds no bytes (only that one-CR state), so it is bounded by construction: a line
// that spans two reads is the caller's to keep, within the caller's own limit. Shared by the
// SSE parser and the relay's usage filter, so both split the same stream the same way.
#pragma once

#include <cstddef>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tokenmeter::sse {

struct line {
    std::string_view text;     // the line without its end
    std::size_t end_size = 0;  // 1 (CR or LF) or 2 (CR LF); 0: the span ended inside the line
    [[nodiscard]] bool complete() const noexcept { return end_size != 0; }
};

class line_splitter {
  public:
    // Starts the next span. Returns true when the span began with the LF of a CR LF whose CR
    // ended the previous span; that LF ends no line of its own and is skipped.
    bool begin(std::string_view span) noexcept {
        cur_ = span.data();
        end_ = span.data() + span.size();
        if (after_cr_ && cur_ != end_) {
            after_cr_ = false;
            if (*cur_ == '\n') {
                ++cur_;
                return true;
            }
        }
        return false;
    }

    // The next line of the span: a complete one, or last the span's unterminated rest (never
    // empty). False when the span is used up.
    bool next(line& out) noexcept {
        if (cur_ == end_) {
            return false;
        }
        // One scan for either end, stopping at the first: each byte is looked at once.
        const char* eol = cur_ + find_line_end(rest());
        out.text = std::string_view(cur_, static_cast<std::size_t>(eol - cur_));
        if (eol == end_) {
            out.end_size = 0;
            cur_ = end_;
            return true;
        }
        cur_ = eol + 1;
        out.end_size = 1;
        if (*eol == '\r') {
            if (cur_ == end_) {
                after_cr_ = true;
            } else if (*cur_ == '\n') {
                ++cur_;
                out.end_size = 2;
            }
        }
        return true;
    }

    // The last span ended in a CR: an LF at the start of the next belongs to that line end.
    [[nodiscard]] bool after_cr() const noexcept { return after_cr_; }

    // The span's bytes not yet split into lines, for a caller that reads a common shape of
    // lines itself; skip(n) then moves past n of them (whole lines with their ends).
    [[nodiscard]] std::string_view rest() const noexcept {
        return {cur_, static_cast<std::size_t>(end_ - cur_)};
    }
    void skip(std::size_t n) noexcept { cur_ += n; }

    // The offset of the first CR or LF in `text`, or text.size(): one pass for both bytes.
    [[nodiscard]] static std::size_t find_line_end(std::string_view text) noexcept {
        const char* p = text.data();
        const char* const end = p + text.size();
#if defined(__SSE2__)
        const __m128i lf = _mm_set1_epi8('\n');
        const __m128i cr = _mm_set1_epi8('\r');
        // Long lines (an SSE event's JSON is a few hundred bytes) are skipped 64 bytes at a time
        // with one compare per 16: a byte OR 0x07 is 0x0F for every byte from 0x08 to 0x0F, CR
        // (0x0D) and LF (0x0A) among them. A block with no such byte holds no line end; one with
        // some (a tab, or the end) is left to the exact scan below, which starts there.
        const __m128i low3 = _mm_set1_epi8(0x07);
        const __m128i candidate = _mm_set1_epi8(0x0F);
        const auto near_end = [&](const char* at) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
            return _mm_cmpeq_epi8(_mm_or_si128(v, low3), candidate);
        };
        while (end - p >= 64) {
            const __m128i any = _mm_or_si128(_mm_or_si128(near_end(p), near_end(p + 16)),
                                             _mm_or_si128(near_end(p + 32), near_end(p + 48)));
            if (_mm_movemask_epi8(any) != 0) {
                break;
            }
            p += 64;
        }
        while (end - p >= 16) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
            const auto mask = static_cast<unsigned>(
                _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr))));
            if (mask != 0) {
                return static_cast<std::size_t>(p - text.data()) +
                       static_cast<std::size_t>(__builtin_ctz(mask));
            }
            p += 16;
        }
        if (p != end && text.size() >= 16) {
            // The last 1-15 bytes: one more load of the final 16 (the bytes before p in it are
            // known to hold neither end, so they are masked off).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
// Inlined for a short constant text, GCC warns about this load on the path the size test above
// rules out.
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
            const char* const last = end - 16;
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(last));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
            const auto mask =
                static_cast<unsigned>(_mm_movemask_epi8(
                    _mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)))) >>
                static_cast<unsigned>(p - last);
            return static_cast<std::size_t>(p - text.data()) +
                   (mask != 0 ? static_cast<std::size_t>(__builtin_ctz(mask))
                              : static_cast<std::size_t>(end - p));
        }
#endif
        while (p != end && *p != '\n' && *p != '\r') {
            ++p;
        }
        return static_cast<std::size_t>(p - text.data());
    }

    // Back to the start of a stream.
    void reset() noexcept { *this = line_splitter{}; }

  private:
    const char* cur_ = nullptr;
    const char* end_ = nullptr;
    bool after_cr_ = false;
};

}  // namespace tokenmeter::sse
