#include "protocol/usage_filter.hpp"

#include <utility>

namespace tokenmeter::protocol {
namespace {

constexpr bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Position just after `"key"` followed by optional space and ':' and optional space, searching
// from `from`; npos when absent. A key can only appear unescaped as a real member name: inside
// a JSON string every quote is escaped.
std::size_t after_key(std::string_view text, std::string_view quoted_key, std::size_t from = 0) {
    for (;;) {
        std::size_t at = text.find(quoted_key, from);
        if (at == std::string_view::npos) {
            return at;
        }
        std::size_t i = at + quoted_key.size();
        while (i < text.size() && is_space(text[i])) {
            ++i;
        }
        if (i < text.size() && text[i] == ':') {
            ++i;
            while (i < text.size() && is_space(text[i])) {
                ++i;
            }
            return i;
        }
        from = at + 1;
    }
}

}  // namespace

bool usage_filter::is_usage_only(std::string_view event) {
    std::size_t choices = after_key(event, "\"choices\"");
    if (choices == std::string_view::npos || choices >= event.size() || event[choices] != '[') {
        return false;
    }
    std::size_t i = choices + 1;
    while (i < event.size() && is_space(event[i])) {
        ++i;
    }
    if (i >= event.size() || event[i] != ']') {
        return false;  // a chunk with choices carries text: never the usage-only chunk
    }
    std::size_t usage = after_key(event, "\"usage\"");
    return usage != std::string_view::npos && usage < event.size() && event[usage] == '{';
}

namespace {

// The end (one past the closing brace) of the JSON object starting at `open`, skipping strings;
// npos when it does not close inside `text`.
std::size_t object_end(std::string_view text, std::size_t open) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = open; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{') {
            ++depth;
        } else if (c == '}' && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

}  // namespace

void usage_filter::append_without_null_usage(std::string_view event) {
    if (continuous_usage_) {
        // vLLM's continuous usage: a "usage":{...} member in every chunk (compact JSON).
        constexpr std::string_view member = ",\"usage\":{";
        if (auto at = event.find(member); at != std::string_view::npos) {
            std::size_t end = object_end(event, at + member.size() - 1);
            if (end != std::string_view::npos) {
                out_.append(event.substr(0, at));
                out_.append(event.substr(end));
                return;
            }
        }
    }
    // OpenAI adds "usage":null to every chunk once usage is requested; a client that did not
    // ask would not have seen it. Compact JSON only, as servers write it.
    for (std::string_view member :
         {std::string_view(",\"usage\":null"), std::string_view("\"usage\":null,")}) {
        if (auto at = event.find(member); at != std::string_view::npos) {
            out_.append(event.substr(0, at));
            out_.append(event.substr(at + member.size()));
            return;
        }
    }
    out_.append(event);
}

void usage_filter::end_event() {
    dropped_last_ = false;
    if (!passing_) {
        if (!removed_ && is_usage_only(event_)) {
            removed_ = true;
            dropped_last_ = true;
        } else {
            append_without_null_usage(event_);
        }
    }
    event_.clear();
    passing_ = false;
}

std::string_view usage_filter::feed(std::string_view bytes, bool last) {
    out_.clear();
    std::size_t run_start = 0;  // start of bytes in `bytes` not yet copied to out_ or event_
    auto flush_run = [&](std::size_t to) {
        std::string_view run = bytes.substr(run_start, to - run_start);
        (passing_ ? out_ : event_).append(run);
        run_start = to;
    };
    const bool cr_ended_event = !bytes.empty() && std::exchange(cr_ended_event_, false);
    if (lines_.begin(bytes) && cr_ended_event) {
        // The CR that ended an event ended the previous read; its LF belongs to that event,
        // which is already out (or removed with it). Any other such LF stays with its line.
        if (!dropped_last_) {
            out_.push_back('\n');
        }
        run_start = 1;
    }
    sse::line line;
    while (lines_.next(line)) {
        if (!line.text.empty()) {
            at_line_start_ = false;
        }
        if (!line.complete()) {
            break;
        }
        if (!at_line_start_) {
            at_line_start_ = true;
            continue;
        }
        // A blank line ends the event (or is stray, between events).
        flush_run(static_cast<std::size_t>(line.text.data() - bytes.data()) + line.end_size);
        end_event();
        cr_ended_event_ = lines_.after_cr();
    }
    flush_run(bytes.size());
    if (!passing_ && !event_.empty() && (last || event_.size() > max_held_bytes_)) {
        // An event too large to be a usage chunk, or cut off by the end of the body, goes out
        // as it is.
        out_.append(event_);
        event_.clear();
        passing_ = true;
    }
    if (last) {
        passing_ = false;
    }
    return out_;
}

}  // namespace tokenmeter::protocol
