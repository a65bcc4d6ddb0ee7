// ndjson/parser: incremental newline-delimited JSON framing (Ollama's application/x-ndjson).
// Sans-I/O like sse/parser: feed() takes any byte span, split anywhere, and hands each complete
// line to a callback as a view valid only during the call. Memory is bounded by max_line_bytes;
// a longer line is skipped (counted), never buffered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmeter::ndjson {

struct parser_stats {
    std::uint64_t lines = 0;            // non-blank lines dispatched
    std::uint64_t oversized_lines = 0;  // lines dropped because they exceeded max_line_bytes
    std::uint64_t bytes = 0;            // every byte fed
};

class parser {
  public:
    static constexpr std::size_t default_max_line_bytes = std::size_t{4} * 1024 * 1024;

    explicit parser(std::size_t max_line_bytes = default_max_line_bytes)
        : max_line_bytes_(max_line_bytes) {}

    // Calls on_line(std::string_view) for every complete non-blank line, without its LF (and
    // without a CR before it). on_line must not call back into this parser.
    template <typename OnLine>
    void feed(std::string_view bytes, OnLine&& on_line) {
        stats_.bytes += bytes.size();
        while (!bytes.empty()) {
            std::size_t lf = bytes.find('\n');
            if (lf == std::string_view::npos) {
                keep_partial(bytes);
                return;
            }
            std::string_view piece = bytes.substr(0, lf);
            bytes.remove_prefix(lf + 1);
            if (skipping_) {
                // The end of an oversized line: nothing of it was kept.
                skipping_ = false;
                continue;
            }
            std::string_view line = piece;
            if (!line_buf_.empty()) {
                if (line_buf_.size() + piece.size() > max_line_bytes_) {
                    line_buf_.clear();
                    stats_.oversized_lines += 1;
                    continue;
                }
                line_buf_.append(piece);
                line = line_buf_;
            } else if (line.size() > max_line_bytes_) {
                stats_.oversized_lines += 1;
                continue;
            }
            dispatch(line, on_line);
            line_buf_.clear();
        }
    }

    // End of body. A last line without a newline is still a whole JSON value when the server
    // simply did not terminate it, so it is dispatched. Returns false when the body ended
    // inside an oversized line.
    template <typename OnLine>
    bool finish(OnLine&& on_line) {
        bool clean = !skipping_;
        if (!line_buf_.empty()) {
            dispatch(std::string_view(line_buf_), on_line);
        }
        line_buf_.clear();
        skipping_ = false;
        return clean;
    }

    [[nodiscard]] const parser_stats& stats() const noexcept { return stats_; }
    [[nodiscard]] std::size_t buffered_bytes() const noexcept { return line_buf_.size(); }

  private:
    template <typename OnLine>
    void dispatch(std::string_view line, OnLine& on_line) {
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
            return;  // blank lines separate nothing in NDJSON; tolerated, not counted
        }
        stats_.lines += 1;
        on_line(line);
    }

    void keep_partial(std::string_view rest);

    std::size_t max_line_bytes_;
    parser_stats stats_;
    std::string line_buf_;   // only a line that spans two feeds is copied here
    bool skipping_ = false;  // inside an oversized line, until its newline
};

}  // namespace tokenmeter::ndjson
