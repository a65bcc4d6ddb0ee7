// relay/body_decoder: the body of an upstream response, decoded in place as the relay reads it.
// Content-Length, chunked transfer coding (RFC 9112 §7.1) or "until the connection closes":
// each decode() leaves the payload bytes of one read together where the first of them lay
// (later ones are moved up behind it), so the relay forwards and meters them where they lie, with
// no copy through a parser's buffer; a read of one chunk moves nothing. Sans-I/O and
// Asio-free; every split of the input gives the same payload (tests/unit/relay/body_decoder_test).
// Bounded: a chunk line over max_line_bytes, trailers over max_trailer_bytes and a chunk size
// over 2^56 are errors, never growth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tokenmeter::relay {

class body_decoder {
  public:
    enum class framing : std::uint8_t { length, chunked, until_close };
    enum class failure : std::uint8_t {
        none,
        bad_chunk_size,  // no hex digit where a chunk size is due, or one too large
        bad_chunk_line,  // a chunk size line not ended by CRLF
        chunk_line_too_long,
        bad_chunk_end,  // chunk data not followed by CRLF
        bad_trailer,    // a control byte in a trailer field, or no LF after its CR
        trailers_too_long,
        cut_short,  // the connection closed before the body's end
    };
    // A chunk size line ("1a;ext=x\r\n") longer than this is refused.
    static constexpr std::size_t max_line_bytes = 4096;

    // No body: done from the start.
    body_decoder() noexcept : body_decoder(framing::length, state::done, 0, 0) {}
    static body_decoder with_length(std::uint64_t length) noexcept;
    static body_decoder chunked(std::size_t max_trailer_bytes) noexcept;
    static body_decoder until_close() noexcept;

    struct step {
        std::size_t offset = 0;    // where the payload now starts in the decoded span
        std::size_t payload = 0;   // payload bytes, from data + offset on
        std::size_t consumed = 0;  // input bytes used; less than given when the body ended first
        failure error = failure::none;
    };
    // Decodes `size` bytes read at `data`. After an error the decoder stays failed.
    [[nodiscard]] step decode(char* data, std::size_t size) noexcept;
    // The connection closed: ends a body read until close; any other unfinished body was cut.
    [[nodiscard]] failure at_close() noexcept;

    [[nodiscard]] bool done() const noexcept { return state_ == state::done; }
    [[nodiscard]] framing kind() const noexcept { return framing_; }

  private:
    enum class state : std::uint8_t {
        size_first,  // the first hex digit of a chunk size
        size,        // more hex digits, or the end of the size
        extension,   // after the size, up to CR
        size_lf,     // the LF of the size line
        data,        // chunk data (or the whole body for length / until_close)
        data_cr,
        data_lf,
        trailer_start,  // a trailer line or the final empty line
        trailer,        // inside a trailer line, up to CR
        trailer_lf,
        end_lf,  // the LF of the final empty line
        done,
        failed,
    };

    body_decoder(framing kind, state start, std::uint64_t remaining,
                 std::size_t max_trailer_bytes) noexcept
        : framing_(kind), state_(start), remaining_(remaining), max_trailer_(max_trailer_bytes) {}

    step fail(step result, failure why) noexcept {
        state_ = state::failed;
        error_ = why;
        result.error = why;
        return result;
    }

    framing framing_;
    state state_;
    failure error_ = failure::none;
    std::uint64_t remaining_;  // chunk data (or body) bytes still due
    std::size_t line_bytes_ = 0;
    std::size_t trailer_bytes_ = 0;
    std::size_t max_trailer_;
};

[[nodiscard]] std::string_view to_string(body_decoder::failure why) noexcept;

}  // namespace tokenmeter::relay
