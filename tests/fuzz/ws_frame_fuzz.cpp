// Fuzz target for the WebSocket frame reader (relay/ws_frame): arbitrary bytes as one direction of
// a tunnel, read as a client's frames and as a server's, with tight size limits and with
// permessage-deflate's RSV1 allowed. Read whole and in the pieces the first byte chooses, the
// verdict, the accepted bytes, the frame count and the unmasked payload must be the same; the
// accepted bytes never exceed what was given; and when the input was refused, what was accepted
// read alone by a fresh reader is accepted whole.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "relay/ws_frame.hpp"

namespace {

using namespace tokenmeter::relay::ws;

struct collecting : frame_observer {
    std::string text;
    void payload(opcode, std::string_view unmasked, bool, bool) override { text.append(unmasked); }
};

struct outcome {
    std::size_t accepted = 0;
    frame_error error = frame_error::none;
    std::uint64_t frames = 0;
    std::string payload;
    bool boundary = false;
};

outcome read(std::string_view wire, std::size_t piece, sender from, const frame_limits& limits) {
    collecting seen;
    frame_reader reader(from, limits, &seen);
    outcome out;
    for (std::size_t at = 0; at < wire.size(); at += piece) {
        const auto chunk = wire.substr(at, piece);
        const auto result = reader.feed(chunk);
        if (result.accepted > chunk.size()) {
            std::abort();
        }
        out.accepted += result.accepted;
        if (result.error != frame_error::none) {
            out.error = result.error;
            break;
        }
    }
    out.frames = reader.frames();
    out.payload = std::move(seen.text);
    out.boundary = reader.at_frame_boundary();
    return out;
}

void check(std::string_view wire, std::size_t piece, sender from, const frame_limits& limits) {
    const auto whole = read(wire, wire.size() == 0 ? 1 : wire.size(), from, limits);
    const auto split = read(wire, piece, from, limits);
    if (whole.error != split.error || whole.frames != split.frames ||
        whole.payload != split.payload) {
        std::abort();
    }
    if (whole.accepted > wire.size() ||
        (whole.error == frame_error::none && whole.accepted != wire.size())) {
        std::abort();
    }
    // Read whole, a refusal always leaves the accepted bytes on a frame boundary.
    if (whole.error != frame_error::none) {
        if (!whole.boundary) {
            std::abort();
        }
        const auto prefix = read(wire.substr(0, whole.accepted), 1, from, limits);
        if (prefix.error != frame_error::none || prefix.accepted != whole.accepted) {
            std::abort();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::size_t piece = 1 + data[0] % 17;
    const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
    frame_limits open;
    frame_limits tight;
    tight.max_frame_bytes = 64;
    tight.max_message_bytes = 100;
    tight.allowed_reserved_bits = reserved_bits_for_extensions("permessage-deflate");
    for (const sender from : {sender::client, sender::server}) {
        check(wire, piece, from, open);
        check(wire, piece, from, tight);
    }
    return 0;
}
