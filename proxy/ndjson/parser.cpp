#include "ndjson/parser.hpp"

namespace tokenmeter::ndjson {

void parser::keep_partial(std::string_view rest) {
    if (skipping_) {
        return;
    }
    if (line_buf_.size() + rest.size() > max_line_bytes_) {
        // Too long to ever be read: drop what is kept and skip to the end of the line.
        line_buf_.clear();
        line_buf_.shrink_to_fit();
        skipping_ = true;
        stats_.oversized_lines += 1;
        return;
    }
    line_buf_.append(rest);
}

}  // namespace tokenmeter::ndjson
