// sse/parser: field interpretation and event dispatch for text/event-stream, over the lines
// sse/line_splitter finds.
#include "sse/parser.hpp"

namespace tokenmeter::sse {

namespace {

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";
constexpr std::string_view default_event_type = "message";

// A stream that once carried a large event should not pin that much memory for its whole life;
// below this, buffers keep their capacity so steady traffic allocates nothing per event.
constexpr std::size_t retained_capacity = std::size_t{64} * 1024;

void clear_buffer(std::string& buffer) noexcept {
    if (buffer.capacity() > retained_capacity) {
        std::string{}.swap(buffer);
    } else {
        buffer.clear();
    }
}

}  // namespace

parser::parser(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

void parser::begin_feed(std::string_view bytes) {
    stats_.bytes += bytes.size();
    std::size_t start = 0;
    if (!bom_done_) {
        const std::size_t held = bom_matched_;
        while (bom_matched_ < utf8_bom.size() && start != bytes.size() &&
               bytes[start] == utf8_bom[bom_matched_]) {
            ++start;
            ++bom_matched_;
        }
        if (bom_matched_ == utf8_bom.size()) {
            bom_done_ = true;
        } else if (start != bytes.size()) {
            // Not a BOM after all: the bytes matched in this span are scanned where they lie,
            // those held from earlier feeds become the start of the first line.
            bom_done_ = true;
            start -= bom_matched_ - held;
            bom_matched_ = 0;
            if (held > 0) {
                stash_partial(utf8_bom.data(), held);
            }
        }
    }
    lines_.begin(bytes.substr(start));
}

bool parser::whole_data_event() {
    if (event_has_fields_ || data_in_view_ || skipping_ || partial_ != partial_line::none ||
        !line_buf_.empty() || !data_buf_.empty() || !type_buf_.empty()) {
        return false;
    }
    const std::string_view rest = lines_.rest();
    constexpr std::string_view field = "data:";
    if (rest.size() < field.size() + 2 || rest.compare(0, field.size(), field) != 0) {
        return false;
    }
    const std::size_t end =
        field.size() + line_splitter::find_line_end(rest.substr(field.size()));
    // The line ends in LF and a blank line (LF) follows: the event is complete here.
    if (end + 1 >= rest.size() || rest[end] != '\n' || rest[end + 1] != '\n' || !fits(end)) {
        return false;
    }
    std::string_view value = rest.substr(field.size(), end - field.size());
    if (!value.empty() && value.front() == ' ') {
        value.remove_prefix(1);
    }
    event_has_fields_ = true;
    ready_.data = value;
    ready_.type = default_event_type;
    ready_.id = id_buf_;
    ++stats_.events;
    lines_.skip(end + 2);
    return true;
}

bool parser::next_event() {
    if (dispatched_) {
        dispatched_ = false;
        reset_event();
    }
    if (whole_data_event()) {
        dispatched_ = true;
        return true;
    }
    line next;
    while (lines_.next(next)) {
        if (!next.complete()) {
            keep_data_view();
            stash_partial(next.text.data(), next.text.size());
            break;
        }
        const std::string_view piece = next.text;
        bool ready = false;
        if (partial_ != partial_line::none) {
            if (partial_ == partial_line::comment) {
                ++stats_.comments;
            }
            partial_ = partial_line::none;
            continue;
        }
        if (!line_buf_.empty()) {
            if (!fits(line_buf_.size() + piece.size())) {
                drop_oversized_event();
                clear_buffer(line_buf_);
                continue;
            }
            line_buf_.append(piece);
            ready = handle_line(line_buf_, false);
            clear_buffer(line_buf_);
        } else {
            ready = handle_line(piece, true);
        }
        if (ready) {
            dispatched_ = true;
            return true;
        }
    }
    keep_data_view();  // the feed's bytes go away on return
    return false;
}

void parser::keep_data_view() {
    if (data_in_view_) {
        data_in_view_ = false;
        data_buf_.append(data_view_);
        data_buf_.push_back('\n');
    }
}

bool parser::handle_line(std::string_view line, bool in_span) {
    if (line.empty()) {
        if (skipping_) {
            skipping_ = false;
            reset_event();
            return false;
        }
        if (data_in_view_) {
            ready_.data = data_view_;
        } else if (data_buf_.empty()) {
            reset_event();
            return false;
        } else {
            ready_.data = std::string_view(data_buf_.data(), data_buf_.size() - 1);
        }
        ready_.type = type_buf_.empty() ? default_event_type : std::string_view(type_buf_);
        ready_.id = id_buf_;
        ++stats_.events;
        return true;
    }
    if (skipping_) {
        return false;
    }
    if (line.front() == ':') {
        ++stats_.comments;
        return false;
    }
    // Judged on the whole line, as stash_partial() judges its prefix, so that where the
    // stream is split never changes which events are dropped.
    if (!fits(line.size())) {
        drop_oversized_event();
        return false;
    }
    handle_field(line, in_span);
    return false;
}

void parser::handle_field(std::string_view line, bool in_span) {
    event_has_fields_ = true;
    std::string_view name = line;
    std::string_view value;
    if (const auto colon = line.find(':'); colon != std::string_view::npos) {
        name = line.substr(0, colon);
        value = line.substr(colon + 1);
        if (!value.empty() && value.front() == ' ') {
            value.remove_prefix(1);
        }
    }
    if (name == "data") {
        if (in_span && !data_in_view_ && data_buf_.empty()) {
            data_view_ = value;
            data_in_view_ = true;
            return;
        }
        keep_data_view();
        data_buf_.append(value);
        data_buf_.push_back('\n');
    } else if (name == "event") {
        type_buf_.assign(value);
    } else if (name == "id") {
        if (value.find('\0') == std::string_view::npos) {
            id_buf_.assign(value);
        }
    }
    // retry and unknown fields are ignored: the proxy never reconnects on a client's behalf.
}

void parser::stash_partial(const char* first, std::size_t size) {
    if (size == 0 || partial_ != partial_line::none) {
        return;
    }
    if (skipping_) {
        partial_ = partial_line::discard;
        return;
    }
    if (line_buf_.empty() && *first == ':') {
        partial_ = partial_line::comment;
        return;
    }
    if (!fits(line_buf_.size() + size)) {
        drop_oversized_event();
        clear_buffer(line_buf_);
        partial_ = partial_line::discard;
        return;
    }
    line_buf_.append(first, size);
}

bool parser::fits(std::size_t line_bytes) const noexcept {
    const std::size_t data = data_in_view_ ? data_view_.size() + 1 : data_buf_.size();
    return line_bytes <= max_event_bytes_ && data + type_buf_.size() <= max_event_bytes_ - line_bytes;
}

void parser::drop_oversized_event() noexcept {
    ++stats_.oversized_events;
    skipping_ = true;
    reset_event();
}

void parser::reset_event() noexcept {
    data_in_view_ = false;
    clear_buffer(data_buf_);
    clear_buffer(type_buf_);
    event_has_fields_ = false;
}

bool parser::finish() noexcept {
    const bool partial_bom = !bom_done_ && bom_matched_ > 0;
    const bool clean = line_buf_.empty() && partial_ == partial_line::none && !partial_bom &&
                       !skipping_ && !event_has_fields_;

    clear_buffer(line_buf_);
    reset_event();
    partial_ = partial_line::none;
    bom_matched_ = 0;
    bom_done_ = false;
    skipping_ = false;
    dispatched_ = false;
    lines_.reset();
    return clean;
}

std::size_t parser::buffered_bytes() const noexcept {
    const std::size_t bom_bytes = bom_done_ ? 0 : bom_matched_;
    const std::size_t data = data_in_view_ ? data_view_.size() + 1 : data_buf_.size();
    return line_buf_.size() + data + type_buf_.size() + bom_bytes;
}

}  // namespace tokenmeter::sse
