// sse/line_splitter: splits a byte stream, fed as spans cut anywhere, into lines ended by CR, LF
// or CR LF, where the bytes lie. A CR that ends one span and the LF that starts the next are one
// line end. It holds no bytes (only that one-CR state), so it is bounded by construction: a line
// that spans two reads is the caller's to keep, within the caller's own limit. Shared by the
// SSE parser and the relay's usage filter, so both split the same stream the same way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

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
        next_lf_ = nullptr;
        next_cr_ = nullptr;
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
        // Each position is searched for at most once per span, whatever the mix of endings, so
        // a stream that uses only CR (or only LF) does not rescan the span on every line.
        if (next_lf_ == nullptr || next_lf_ < cur_) {
            next_lf_ = find_or_end('\n');
        }
        if (next_cr_ == nullptr || next_cr_ < cur_) {
            next_cr_ = find_or_end('\r');
        }
        const char* eol = std::min(next_lf_, next_cr_);
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

    // Back to the start of a stream.
    void reset() noexcept { *this = line_splitter{}; }

  private:
    [[nodiscard]] const char* find_or_end(char wanted) const noexcept {
        const void* found = std::memchr(cur_, wanted, static_cast<std::size_t>(end_ - cur_));
        return found != nullptr ? static_cast<const char*>(found) : end_;
    }

    const char* cur_ = nullptr;
    const char* end_ = nullptr;
    const char* next_lf_ = nullptr;
    const char* next_cr_ = nullptr;
    bool after_cr_ = false;
};

}  // namespace tokenmeter::sse
