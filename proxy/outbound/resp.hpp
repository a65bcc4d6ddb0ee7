// outbound/resp: RESP2, the Redis wire format, read from bytes a server sends, which may be
// anything. Incremental: fed any fragment, it yields one reply at a time and keeps a partial one
// across reads. Bounded: a reply may hold at most max_reply_bytes (counted on the wire, so one
// header cannot make it allocate more), max_elements array members in all and max_depth nested
// arrays; the stack of open arrays is explicit, so nothing recurses deeper than max_depth.
// Errors are values and sticky: after one, the connection the bytes came from is to be closed.
// No I/O and no exceptions (short of running out of memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmeter::outbound::resp {

enum class kind : std::uint8_t {
    simple,   // +OK
    error,    // -ERR ...
    integer,  // :1
    bulk,     // $3 abc
    null,     // $-1 or *-1
    array,    // *2 ...
};
std::string_view to_string(kind k) noexcept;

struct value {
    kind type = kind::null;
    long long integer = 0;
    std::string text;            // simple, error, bulk
    std::vector<value> members;  // array

    bool operator==(const value&) const = default;
};

struct limits {
    std::size_t max_reply_bytes = std::size_t{1024} * 1024;
    std::size_t max_elements = 1024;  // array members over the whole reply, nested ones too
    std::size_t max_depth = 8;        // arrays inside arrays
};

enum class parse_error : std::uint8_t {
    none,
    bad_type,      // a first byte that is not + - : $ * (RESP3 types included)
    bad_number,    // an integer or length that is not a plain decimal in range
    bad_line_end,  // CR without LF, LF without CR, or a bulk string not followed by CRLF
    too_large,     // more than max_reply_bytes
    too_many_elements,
    too_deep,
};
std::string_view to_string(parse_error e) noexcept;

class parser {
  public:
    explicit parser(limits bounds = {});

    // Reads from `bytes` until a reply is whole, an error, or the bytes end; returns how many
    // bytes it used. While a reply waits to be taken it uses none.
    std::size_t feed(std::string_view bytes);
    [[nodiscard]] bool has_reply() const noexcept { return ready_; }
    // The reply that is whole (has_reply()); the parser goes on with the next.
    value take_reply();
    [[nodiscard]] parse_error error() const noexcept { return error_; }
    // Between replies: nothing of a next one read yet, and no error.
    [[nodiscard]] bool idle() const noexcept;
    [[nodiscard]] const limits& bounds() const noexcept { return limits_; }

  private:
    enum class state : std::uint8_t { header, bulk, bulk_end };
    struct open_array {
        value array;
        std::size_t remaining = 0;
    };

    std::size_t read_header(std::string_view bytes);
    std::size_t read_bulk(std::string_view bytes);
    std::size_t read_bulk_end(std::string_view bytes);
    void on_header_line();
    void complete(value v);
    bool fail(parse_error e) noexcept;
    bool count_bytes(std::size_t n) noexcept;

    limits limits_;
    state state_ = state::header;
    std::string line_;     // the header line so far, without its CRLF
    bool saw_cr_ = false;  // the line's CR was read, its LF not yet
    value bulk_;           // the bulk string being read
    std::size_t bulk_left_ = 0;
    std::size_t end_left_ = 0;  // bytes of the CRLF after a bulk string still to read
    std::vector<open_array> stack_;
    std::size_t reply_bytes_ = 0;
    std::size_t reply_elements_ = 0;
    value reply_;
    bool ready_ = false;
    parse_error error_ = parse_error::none;
};

// The command `args` in RESP (an array of bulk strings), as a client sends it.
void append_command(std::string& out, const std::vector<std::string_view>& args);

}  // namespace tokenmeter::outbound::resp
