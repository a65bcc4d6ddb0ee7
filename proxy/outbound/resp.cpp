#include "outbound/resp.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace tokenmeter::outbound::resp {
namespace {

// "-9223372036854775808" is 20 characters; a longer number is refused before it is read.
constexpr std::size_t max_number_chars = 21;

bool is_type_byte(char c) noexcept {
    return c == '+' || c == '-' || c == ':' || c == '$' || c == '*';
}

bool is_number_type(char c) noexcept {
    return c == ':' || c == '$' || c == '*';
}

// A plain decimal: an optional minus and digits, nothing else ("+1", " 1", "1e3" are refused).
bool read_number(std::string_view text, long long& out) noexcept {
    if (text.empty() || text.size() > max_number_chars) {
        return false;
    }
    const char* end = text.data() + text.size();
    auto [last, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc{} && last == end;
}

}  // namespace

std::string_view to_string(kind k) noexcept {
    switch (k) {
        case kind::simple:
            return "simple string";
        case kind::error:
            return "error";
        case kind::integer:
            return "integer";
        case kind::bulk:
            return "bulk string";
        case kind::null:
            return "null";
        case kind::array:
            return "array";
    }
    return "unknown";
}

std::string_view to_string(parse_error e) noexcept {
    switch (e) {
        case parse_error::none:
            return "none";
        case parse_error::bad_type:
            return "unknown reply type";
        case parse_error::bad_number:
            return "malformed number";
        case parse_error::bad_line_end:
            return "malformed line end";
        case parse_error::too_large:
            return "reply larger than max_reply_bytes";
        case parse_error::too_many_elements:
            return "reply with more elements than max_reply_elements";
        case parse_error::too_deep:
            return "arrays nested too deep";
    }
    return "unknown";
}

parser::parser(limits bounds) : limits_(bounds) {}

bool parser::idle() const noexcept {
    return error_ == parse_error::none && state_ == state::header && line_.empty() && !saw_cr_ &&
           stack_.empty() && !ready_;
}

bool parser::fail(parse_error e) noexcept {
    if (error_ == parse_error::none) {
        error_ = e;
    }
    return false;
}

bool parser::count_bytes(std::size_t n) noexcept {
    if (n > limits_.max_reply_bytes - std::min(reply_bytes_, limits_.max_reply_bytes)) {
        reply_bytes_ = limits_.max_reply_bytes;
        return fail(parse_error::too_large);
    }
    reply_bytes_ += n;
    return true;
}

std::size_t parser::feed(std::string_view bytes) {
    std::size_t used = 0;
    while (used < bytes.size() && !ready_ && error_ == parse_error::none) {
        const std::string_view rest = bytes.substr(used);
        switch (state_) {
            case state::header:
                used += read_header(rest);
                break;
            case state::bulk:
                used += read_bulk(rest);
                break;
            case state::bulk_end:
                used += read_bulk_end(rest);
                break;
        }
    }
    return used;
}

value parser::take_reply() {
    ready_ = false;
    reply_bytes_ = 0;
    reply_elements_ = 0;
    return std::exchange(reply_, value{});
}

std::size_t parser::read_header(std::string_view bytes) {
    if (saw_cr_) {
        saw_cr_ = false;
        if (bytes.front() != '\n') {
            fail(parse_error::bad_line_end);
            return 0;
        }
        if (count_bytes(1)) {
            on_header_line();
        }
        return 1;
    }
    if (line_.empty() && !is_type_byte(bytes.front())) {
        fail(parse_error::bad_type);
        return 0;
    }
    const std::size_t end = bytes.find_first_of("\r\n");
    const std::size_t take = end == std::string_view::npos ? bytes.size() : end;
    // The first byte past a bound decides which error it is (a number's length before the
    // reply's bytes when one byte breaks both), so any split of the bytes gives the same error.
    const char type = line_.empty() ? bytes.front() : line_.front();
    const std::size_t room =
        is_number_type(type) ? max_number_chars + 1 - line_.size() : std::string_view::npos;
    const std::size_t left = limits_.max_reply_bytes - reply_bytes_;
    if (take > std::min(room, left)) {
        fail(room <= left ? parse_error::bad_number : parse_error::too_large);
        return 0;
    }
    reply_bytes_ += take;
    line_.append(bytes.substr(0, take));
    if (end == std::string_view::npos) {
        return take;
    }
    if (bytes[end] == '\n' || !count_bytes(1)) {
        fail(parse_error::bad_line_end);
        return take;
    }
    if (end + 1 == bytes.size()) {
        saw_cr_ = true;
        return end + 1;
    }
    if (bytes[end + 1] != '\n') {
        fail(parse_error::bad_line_end);
        return end + 1;
    }
    if (count_bytes(1)) {
        on_header_line();
    }
    return end + 2;
}

void parser::on_header_line() {
    const char type = line_.front();
    std::string body = line_.substr(1);
    line_.clear();
    if (type == '+' || type == '-') {
        value v;
        v.type = type == '+' ? kind::simple : kind::error;
        v.text = std::move(body);
        complete(std::move(v));
        return;
    }
    long long number = 0;
    if (!read_number(body, number) || (type != ':' && number < -1)) {
        fail(parse_error::bad_number);
        return;
    }
    if (type == ':') {
        value v;
        v.type = kind::integer;
        v.integer = number;
        complete(std::move(v));
        return;
    }
    if (number == -1) {
        complete(value{});
        return;
    }
    const auto count = static_cast<std::size_t>(number);
    if (type == '$') {
        // The string and its CRLF must fit what is left of the reply's bytes: checked before
        // anything is allocated for it.
        const std::size_t left = limits_.max_reply_bytes - reply_bytes_;
        if (count > left || left - count < 2) {
            fail(parse_error::too_large);
            return;
        }
        bulk_ = value{};
        bulk_.type = kind::bulk;
        bulk_.text.reserve(count);
        bulk_left_ = count;
        state_ = count == 0 ? state::bulk_end : state::bulk;
        end_left_ = 2;
        return;
    }
    if (count > limits_.max_elements - reply_elements_) {
        fail(parse_error::too_many_elements);
        return;
    }
    if (stack_.size() >= limits_.max_depth) {
        fail(parse_error::too_deep);
        return;
    }
    reply_elements_ += count;
    value array;
    array.type = kind::array;
    if (count == 0) {
        complete(std::move(array));
        return;
    }
    // Grown as members arrive, from a small start: the count is the server's word.
    array.members.reserve(std::min<std::size_t>(count, 16));
    stack_.push_back(open_array{std::move(array), count});
}

std::size_t parser::read_bulk(std::string_view bytes) {
    const std::size_t take = std::min(bulk_left_, bytes.size());
    if (!count_bytes(take)) {
        return 0;
    }
    bulk_.text.append(bytes.substr(0, take));
    bulk_left_ -= take;
    if (bulk_left_ == 0) {
        state_ = state::bulk_end;
        end_left_ = 2;
    }
    return take;
}

std::size_t parser::read_bulk_end(std::string_view bytes) {
    std::size_t used = 0;
    while (end_left_ > 0 && used < bytes.size()) {
        const char expected = end_left_ == 2 ? '\r' : '\n';
        if (bytes[used] != expected || !count_bytes(1)) {
            fail(parse_error::bad_line_end);
            return used;
        }
        ++used;
        --end_left_;
    }
    if (end_left_ == 0) {
        state_ = state::header;
        complete(std::exchange(bulk_, value{}));
    }
    return used;
}

void parser::complete(value v) {
    // An array closes when its last member arrives, which may close the arrays around it: a
    // loop over the explicit stack, not recursion.
    for (;;) {
        if (stack_.empty()) {
            reply_ = std::move(v);
            ready_ = true;
            return;
        }
        open_array& top = stack_.back();
        top.array.members.push_back(std::move(v));
        if (--top.remaining > 0) {
            return;
        }
        v = std::move(top.array);
        stack_.pop_back();
    }
}

void append_command(std::string& out, const std::vector<std::string_view>& args) {
    out += '*';
    out += std::to_string(args.size());
    out += "\r\n";
    for (std::string_view arg : args) {
        out += '$';
        out += std::to_string(arg.size());
        out += "\r\n";
        out += arg;
        out += "\r\n";
    }
}

}  // namespace tokenmeter::outbound::resp
