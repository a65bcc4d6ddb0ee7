// core/trace_context: W3C Trace Context (https://www.w3.org/TR/trace-context/) without I/O. It
// reads a client's traceparent, writes the one the upstream gets, and makes the random ids of
// new traces and of the proxy's own span. A traceparent is client input: every malformed value
// is refused, never repaired.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tokenmeter::core {

using trace_id = std::array<std::uint8_t, 16>;
using span_id = std::array<std::uint8_t, 8>;

inline constexpr std::uint8_t trace_flag_sampled = 0x01;
// "00-" 32 hex "-" 16 hex "-" 2 hex: the length of a version-00 traceparent.
inline constexpr std::size_t traceparent_length = 55;

// A traceparent as a client sent it, read by the rules of version 00.
struct trace_parent {
    trace_id trace{};
    span_id parent{};
    std::uint8_t flags = 0;
};

// The value of one traceparent field, or nullopt when it is malformed: not lowercase hex, a
// wrong length or separator, version ff, an all-zero trace or parent id, or a version-00 value
// with more after it. A later version (01 to fe) is read by the version-00 layout as the
// specification asks, and may carry more fields after a '-' at offset 55. Spaces and tabs
// around the value (HTTP's optional whitespace) are not part of it.
[[nodiscard]] std::optional<trace_parent> parse_traceparent(std::string_view value);

// The trace a request belongs to as the proxy passes it on: the trace id (the client's, or new),
// the proxy's own span id (what the upstream gets as its parent id), the client's parent id
// (zero when the trace starts at the proxy) and the flags.
struct trace_context {
    trace_id trace{};
    span_id span{};
    span_id parent{};
    std::uint8_t flags = 0;

    [[nodiscard]] bool valid() const noexcept;  // the trace id is set (not all zero)
    [[nodiscard]] bool sampled() const noexcept { return (flags & trace_flag_sampled) != 0; }
};

// "00-<trace>-<span>-<flags>": the traceparent the upstream gets, 55 characters.
[[nodiscard]] std::string format_traceparent(const trace_context& context);
// Lowercase hex of the bytes, appended.
void append_hex(std::string& out, std::span<const std::uint8_t> bytes);
[[nodiscard]] std::string to_hex(std::span<const std::uint8_t> bytes);

// A fast pseudo-random source (xoshiro256**), one per thread, seeded once from
// std::random_device when the thread first asks. Ids only need to be unique, not secret.
class trace_random {
  public:
    explicit trace_random(std::uint64_t seed) noexcept;
    // This thread's own source.
    static trace_random& for_thread();

    std::uint64_t next() noexcept;
    [[nodiscard]] trace_id new_trace_id() noexcept;  // never all zero
    [[nodiscard]] span_id new_span_id() noexcept;    // never all zero
    // True with probability `ratio` (at or below 0: never; at or above 1: always).
    [[nodiscard]] bool chance(double ratio) noexcept;

  private:
    std::array<std::uint64_t, 4> state_{};
};

// The trace of a request: the client's when `incoming` holds one (its trace id and flags kept,
// its id the parent), else a new trace whose sampled flag is set with probability
// `sampling_ratio`. Either way the proxy's span gets a new id.
[[nodiscard]] trace_context continue_trace(const std::optional<trace_parent>& incoming,
                                           double sampling_ratio, trace_random& random) noexcept;

}  // namespace tokenmeter::core
