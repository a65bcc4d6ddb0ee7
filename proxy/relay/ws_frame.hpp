// relay/ws_frame: the frames of one direction of a WebSocket tunnel (RFC 6455 §5), read as the
// bytes pass. The tunnel forwards bytes unchanged; this reader says where frames begin and end,
// which frames break the protocol or the size limits (so the tunnel can end before forwarding
// them), and what a close frame said. Sans-I/O and Asio-free; any split of the input gives the
// same result (tests/unit/relay/ws_frame_test, tests/fuzz/ws_frame_fuzz). Bounded: a header is at
// most 14 bytes, a close payload at most 125, and nothing else is kept.
//
// Payload bytes are shown (unmasked) to an optional frame_observer: the hook through which a
// tunnel's messages can be metered. Without one the reader touches no payload byte.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tokenmeter::relay::ws {

enum class opcode : std::uint8_t {
    continuation = 0x0,
    text = 0x1,
    binary = 0x2,
    close = 0x8,
    ping = 0x9,
    pong = 0xA,
};

// Close codes the proxy itself sends (RFC 6455 §7.4.1).
namespace close_code {
constexpr std::uint16_t normal = 1000;
constexpr std::uint16_t going_away = 1001;
constexpr std::uint16_t protocol_error = 1002;
constexpr std::uint16_t policy_violation = 1008;
constexpr std::uint16_t message_too_big = 1009;
}  // namespace close_code

// Which endpoint sent the frames: a client's frames are masked, a server's are not (§5.1).
enum class sender : std::uint8_t { client, server };

enum class frame_error : std::uint8_t {
    none,
    reserved_bits,            // RSV1-3 set without an extension that defines them
    reserved_opcode,          // 0x3-0x7, 0xB-0xF
    fragmented_control,       // a close, ping or pong with FIN clear
    control_too_long,         // a control frame's payload over 125 bytes
    length_too_large,         // a 64-bit length with its most significant bit set (§5.2)
    unmasked_client_frame,    // a client's frame without a mask
    masked_server_frame,      // a server's frame with one
    unexpected_continuation,  // a continuation frame with no message begun
    expected_continuation,    // a new text or binary frame inside a fragmented message
    frame_after_close,        // anything after the sender's close frame
    frame_too_big,            // a frame's payload over max_frame_bytes
    message_too_big,          // a message's payload over max_message_bytes
};

// The close code the proxy sends to the sender of a frame it refused: 1009 for a size, 1002
// for everything else.
[[nodiscard]] std::uint16_t close_code_for(frame_error error) noexcept;
[[nodiscard]] std::string_view to_string(frame_error error) noexcept;

struct frame_limits {
    std::uint64_t max_frame_bytes = std::uint64_t{16} * 1024 * 1024;
    std::uint64_t max_message_bytes = std::uint64_t{16} * 1024 * 1024;
    // The RSV bits an extension the handshake agreed on may set (0x40: RSV1 for
    // permessage-deflate; 0x70 for an extension the proxy does not know). Never on control frames
    // when only RSV1 is allowed (RFC 7692 §6).
    std::uint8_t allowed_reserved_bits = 0;
};

struct frame_header {
    bool fin = false;
    std::uint8_t reserved = 0;  // RSV1-3 as they sit in the first byte (mask 0x70)
    opcode op = opcode::continuation;
    bool masked = false;
    std::uint64_t length = 0;
    std::array<std::uint8_t, 4> mask{};
};

// Shown each frame's payload, unmasked, in pieces (a frame spans reads). `message` is the opcode
// of the message a continuation belongs to.
class frame_observer {
  public:
    frame_observer() = default;
    virtual ~frame_observer() = default;
    frame_observer(const frame_observer&) = delete;
    frame_observer& operator=(const frame_observer&) = delete;
    frame_observer(frame_observer&&) = delete;
    frame_observer& operator=(frame_observer&&) = delete;
    virtual void payload(opcode message, std::string_view unmasked, bool frame_end,
                         bool message_end) = 0;
};

class frame_reader {
  public:
    frame_reader(sender from, const frame_limits& limits, frame_observer* observer = nullptr)
        : from_(from), limits_(limits), observer_(observer) {}

    struct result {
        // Bytes of this input that belong to frames the reader accepted (all of them unless
        // there was an error): the bytes to forward.
        std::size_t accepted = 0;
        frame_error error = frame_error::none;
    };
    // Reads the next bytes. After an error the reader stays failed and accepts nothing more.
    [[nodiscard]] result feed(std::string_view bytes) noexcept;

    // Every byte accepted so far ends a whole frame: a frame of the proxy's own may follow.
    [[nodiscard]] bool at_frame_boundary() const noexcept {
        return header_size_ == 0 && remaining_ == 0 && !in_frame_;
    }
    [[nodiscard]] bool close_seen() const noexcept { return close_done_; }
    // The code of the sender's close frame; 1005 (no status) when it carried none.
    [[nodiscard]] std::uint16_t close_status() const noexcept { return close_status_; }
    [[nodiscard]] frame_error error() const noexcept { return error_; }
    [[nodiscard]] std::uint64_t frames() const noexcept { return frames_; }

  private:
    // How many header bytes the frame needs, from its first two; 0 while fewer are in.
    [[nodiscard]] std::size_t header_needed() const noexcept;
    [[nodiscard]] frame_error check_first_bytes() const noexcept;
    [[nodiscard]] frame_error begin_frame() noexcept;
    void take_payload(std::string_view bytes) noexcept;
    [[nodiscard]] frame_error end_frame() noexcept;

    sender from_;
    frame_limits limits_;
    frame_observer* observer_;
    std::array<std::uint8_t, 14> header_bytes_{};
    std::size_t header_size_ = 0;
    frame_header frame_;
    bool in_frame_ = false;          // a header was read and its payload is not all in
    std::uint64_t remaining_ = 0;    // payload bytes of the current frame still to come
    std::uint64_t mask_offset_ = 0;  // payload bytes of the current frame seen so far
    bool in_message_ = false;        // a fragmented text or binary message is open
    opcode message_op_ = opcode::continuation;
    std::uint64_t message_bytes_ = 0;
    std::array<std::uint8_t, 125> close_payload_{};
    std::size_t close_size_ = 0;
    bool close_done_ = false;
    std::uint16_t close_status_ = 1005;
    frame_error error_ = frame_error::none;
    std::uint64_t frames_ = 0;
};

// A close frame (code, and a reason of at most 123 bytes, cut if longer): unmasked when the proxy
// speaks as the server (to the client), masked with `mask` when it speaks as the client (to the
// upstream), as RFC 6455 §5.1 requires of each.
[[nodiscard]] std::string close_frame(std::uint16_t code, std::string_view reason, sender as,
                                      std::array<std::uint8_t, 4> mask = {});

// Whether a handshake's Sec-WebSocket-Extensions value lets frames set reserved bits, as a
// frame_limits::allowed_reserved_bits value: 0 without extensions, RSV1 for permessage-deflate.
[[nodiscard]] std::uint8_t reserved_bits_for_extensions(std::string_view extensions) noexcept;

}  // namespace tokenmeter::relay::ws
