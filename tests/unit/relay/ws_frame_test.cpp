#include "relay/ws_frame.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tokenmeter::relay::ws;

constexpr std::array<std::uint8_t, 4> test_mask{0x37, 0xfa, 0x21, 0x3d};

// One frame as an endpoint writes it: a client's masked, a server's not.
std::string frame(std::uint8_t first, std::string_view payload, sender from,
                  std::uint64_t claimed_length = UINT64_MAX) {
    const std::uint64_t length = claimed_length == UINT64_MAX ? payload.size() : claimed_length;
    std::string out;
    out.push_back(static_cast<char>(first));
    const std::uint8_t mask_bit = from == sender::client ? 0x80 : 0x00;
    if (length < 126) {
        out.push_back(static_cast<char>(mask_bit | length));
    } else if (length <= 0xFFFF) {
        out.push_back(static_cast<char>(mask_bit | 126));
        out.push_back(static_cast<char>(length >> 8));
        out.push_back(static_cast<char>(length & 0xFF));
    } else {
        out.push_back(static_cast<char>(mask_bit | 127));
        for (int shift = 56; shift >= 0; shift -= 8) {
            out.push_back(static_cast<char>((length >> shift) & 0xFF));
        }
    }
    if (from == sender::client) {
        out.append(reinterpret_cast<const char*>(test_mask.data()), 4);
        for (std::size_t i = 0; i < payload.size(); ++i) {
            out.push_back(
                static_cast<char>(static_cast<std::uint8_t>(payload[i]) ^ test_mask[i % 4]));
        }
    } else {
        out.append(payload);
    }
    return out;
}

struct recording : frame_observer {
    struct piece {
        opcode message;
        std::string text;
        bool frame_end;
        bool message_end;
    };
    std::vector<piece> pieces;
    void payload(opcode message, std::string_view unmasked, bool frame_end,
                 bool message_end) override {
        if (!pieces.empty() && !pieces.back().frame_end) {
            pieces.back().text += unmasked;
            pieces.back().frame_end = frame_end;
            pieces.back().message_end = message_end;
            return;
        }
        pieces.push_back({message, std::string(unmasked), frame_end, message_end});
    }
};

struct outcome {
    std::size_t accepted = 0;
    frame_error error = frame_error::none;
    bool boundary = false;
    std::uint64_t frames = 0;
    std::vector<recording::piece> pieces;
};

// Feeds `wire` in pieces of `step` bytes (0: whole).
outcome read_all(std::string_view wire, sender from, std::size_t step = 0,
                 frame_limits limits = {}) {
    recording seen;
    frame_reader reader(from, limits, &seen);
    outcome out;
    if (step == 0) {
        step = wire.size() == 0 ? 1 : wire.size();
    }
    for (std::size_t at = 0; at < wire.size(); at += step) {
        const auto result = reader.feed(wire.substr(at, step));
        out.accepted += result.accepted;
        if (result.error != frame_error::none) {
            out.error = result.error;
            break;
        }
    }
    out.boundary = reader.at_frame_boundary();
    out.frames = reader.frames();
    out.pieces = seen.pieces;
    return out;
}

// Every split gives the same verdict, the same accepted bytes and the same payloads.
void expect_every_split_same(std::string_view wire, sender from, frame_limits limits = {}) {
    const auto whole = read_all(wire, from, 0, limits);
    for (std::size_t step = 1; step < wire.size(); ++step) {
        const auto split = read_all(wire, from, step, limits);
        ASSERT_EQ(split.error, whole.error) << "step " << step;
        ASSERT_EQ(split.frames, whole.frames) << "step " << step;
        ASSERT_EQ(split.pieces.size(), whole.pieces.size()) << "step " << step;
        for (std::size_t i = 0; i < whole.pieces.size(); ++i) {
            ASSERT_EQ(split.pieces[i].text, whole.pieces[i].text) << "step " << step;
            ASSERT_EQ(split.pieces[i].message_end, whole.pieces[i].message_end);
        }
        if (whole.error == frame_error::none) {
            ASSERT_EQ(split.accepted, wire.size());
        }
    }
}

TEST(WsFrame, MaskedClientTextIsUnmaskedForTheObserver) {
    const auto wire = frame(0x81, "hello", sender::client);
    const auto out = read_all(wire, sender::client);
    EXPECT_EQ(out.error, frame_error::none);
    EXPECT_EQ(out.accepted, wire.size());
    EXPECT_TRUE(out.boundary);
    ASSERT_EQ(out.pieces.size(), 1U);
    EXPECT_EQ(out.pieces[0].text, "hello");
    EXPECT_EQ(out.pieces[0].message, opcode::text);
    EXPECT_TRUE(out.pieces[0].message_end);
    expect_every_split_same(wire, sender::client);
}

TEST(WsFrame, SixteenAndSixtyFourBitLengths) {
    const std::string medium(300, 'm');
    const std::string large(70'000, 'L');
    const auto wire = frame(0x82, medium, sender::server) + frame(0x82, large, sender::server);
    const auto out = read_all(wire, sender::server);
    EXPECT_EQ(out.error, frame_error::none);
    EXPECT_EQ(out.frames, 2U);
    ASSERT_EQ(out.pieces.size(), 2U);
    EXPECT_EQ(out.pieces[0].text, medium);
    EXPECT_EQ(out.pieces[1].text, large);
    for (std::size_t step : {1U, 2U, 3U, 7U, 100U, 4096U}) {
        const auto split = read_all(wire, sender::server, step);
        EXPECT_EQ(split.pieces.size(), 2U);
        EXPECT_EQ(split.pieces[1].text, large);
        EXPECT_EQ(split.accepted, wire.size());
    }
}

TEST(WsFrame, FragmentedMessageWithPingAndCloseBetweenFragments) {
    // A close in the middle of a fragmented message is legal framing (control frames may come
    // between fragments); what comes after the close is not.
    const auto wire = frame(0x01, "frag", sender::client) + frame(0x89, "p", sender::client) +
                      frame(0x00, "men", sender::client) + frame(0x88, "\x03\xe8", sender::client);
    const auto out = read_all(wire, sender::client);
    EXPECT_EQ(out.error, frame_error::none);
    EXPECT_EQ(out.frames, 4U);
    ASSERT_EQ(out.pieces.size(), 4U);
    EXPECT_EQ(out.pieces[0].message, opcode::text);
    EXPECT_FALSE(out.pieces[0].message_end);
    EXPECT_EQ(out.pieces[1].message, opcode::ping);
    EXPECT_TRUE(out.pieces[1].message_end);
    EXPECT_EQ(out.pieces[2].message, opcode::text);  // a continuation of the text message
    EXPECT_FALSE(out.pieces[2].message_end);
    expect_every_split_same(wire, sender::client);

    const auto after = wire + frame(0x80, "ts", sender::client);
    const auto refused = read_all(after, sender::client);
    EXPECT_EQ(refused.error, frame_error::frame_after_close);
    EXPECT_EQ(refused.accepted, wire.size());
    EXPECT_TRUE(refused.boundary);
}

TEST(WsFrame, CloseCodeIsRead) {
    frame_reader reader(sender::server, {});
    const auto wire = frame(0x88, std::string("\x0f\xa0") + "bye", sender::server);
    EXPECT_EQ(reader.feed(wire).error, frame_error::none);
    EXPECT_TRUE(reader.close_seen());
    EXPECT_EQ(reader.close_status(), 4000);

    frame_reader empty(sender::server, {});
    EXPECT_EQ(empty.feed(frame(0x88, "", sender::server)).error, frame_error::none);
    EXPECT_EQ(empty.close_status(), 1005);
}

struct refused_case {
    const char* name;
    std::string wire;
    sender from;
    frame_error error;
};

TEST(WsFrame, ProtocolViolationsAreRefusedBeforeTheFrame) {
    const std::vector<refused_case> cases{
        {"reserved bit", frame(0xC1, "x", sender::client), sender::client,
         frame_error::reserved_bits},
        {"reserved opcode", frame(0x83, "x", sender::client), sender::client,
         frame_error::reserved_opcode},
        {"reserved control opcode", frame(0x8B, "x", sender::client), sender::client,
         frame_error::reserved_opcode},
        {"fragmented ping", frame(0x09, "x", sender::client), sender::client,
         frame_error::fragmented_control},
        {"long ping", frame(0x89, std::string(126, 'p'), sender::client), sender::client,
         frame_error::control_too_long},
        {"unmasked client frame", frame(0x81, "x", sender::server), sender::client,
         frame_error::unmasked_client_frame},
        {"masked server frame", frame(0x81, "x", sender::client), sender::server,
         frame_error::masked_server_frame},
        {"continuation first", frame(0x80, "x", sender::client), sender::client,
         frame_error::unexpected_continuation},
        {"2^63 length", frame(0x82, "", sender::client, std::uint64_t{1} << 63), sender::client,
         frame_error::length_too_large},
        {"2^64-1 length", frame(0x82, "", sender::server, UINT64_MAX - 1), sender::server,
         frame_error::length_too_large},
    };
    for (const auto& c : cases) {
        const std::string good = frame(0x81, "ok", c.from);
        const std::string wire = good + c.wire;
        for (std::size_t step : {0U, 1U, 3U}) {
            const auto out = read_all(wire, c.from, step);
            EXPECT_EQ(out.error, c.error) << c.name << " step " << step;
            if (step == 0) {
                // The frames before it are forwarded, the refused one is not.
                EXPECT_EQ(out.accepted, good.size()) << c.name;
                EXPECT_TRUE(out.boundary) << c.name;
            }
        }
    }
}

TEST(WsFrame, NewMessageInsideAFragmentedOneIsRefused) {
    const auto wire = frame(0x01, "a", sender::client) + frame(0x82, "b", sender::client);
    const auto out = read_all(wire, sender::client);
    EXPECT_EQ(out.error, frame_error::expected_continuation);
    EXPECT_EQ(out.accepted, frame(0x01, "a", sender::client).size());
}

TEST(WsFrame, HeaderSplitAcrossReadsIsNotAClearBoundaryWhenRefused) {
    frame_reader reader(sender::client, {});
    const auto wire = frame(0x81, "", sender::server);  // unmasked from a client
    EXPECT_EQ(reader.feed(wire.substr(0, 1)).error, frame_error::none);
    const auto result = reader.feed(wire.substr(1));
    EXPECT_EQ(result.error, frame_error::unmasked_client_frame);
    EXPECT_EQ(result.accepted, 0U);
    // Its first byte went out with the earlier read: no frame of the proxy's may follow.
    EXPECT_FALSE(reader.at_frame_boundary());
    // Sticky.
    EXPECT_EQ(reader.feed("\x81").error, frame_error::unmasked_client_frame);
}

TEST(WsFrame, SizeLimitsPerFrameAndPerMessage) {
    frame_limits limits;
    limits.max_frame_bytes = 10;
    limits.max_message_bytes = 15;
    EXPECT_EQ(read_all(frame(0x82, std::string(10, 'a'), sender::server), sender::server, 0, limits)
                  .error,
              frame_error::none);
    EXPECT_EQ(read_all(frame(0x82, std::string(11, 'a'), sender::server), sender::server, 0, limits)
                  .error,
              frame_error::frame_too_big);
    const auto message = frame(0x02, std::string(8, 'a'), sender::server) +
                         frame(0x00, std::string(8, 'b'), sender::server);
    const auto out = read_all(message, sender::server, 0, limits);
    EXPECT_EQ(out.error, frame_error::message_too_big);
    EXPECT_EQ(out.accepted, 10U);  // the first fragment's header and payload
    EXPECT_EQ(close_code_for(frame_error::message_too_big), close_code::message_too_big);
    EXPECT_EQ(close_code_for(frame_error::reserved_bits), close_code::protocol_error);
    // A frame's announced length is refused at its header, before its payload arrives.
    const auto huge = frame(0x82, "", sender::server, std::uint64_t{1} << 40);
    EXPECT_EQ(read_all(huge, sender::server, 0, limits).error, frame_error::frame_too_big);
}

TEST(WsFrame, PermessageDeflateAllowsRsv1OnAMessagesFirstFrameOnly) {
    frame_limits limits;
    limits.allowed_reserved_bits =
        reserved_bits_for_extensions("permessage-deflate; client_max_window_bits=15");
    EXPECT_EQ(limits.allowed_reserved_bits, 0x40);
    EXPECT_EQ(read_all(frame(0xC1, "z", sender::server), sender::server, 0, limits).error,
              frame_error::none);
    EXPECT_EQ(read_all(frame(0x41, "z", sender::server) + frame(0xC0, "z", sender::server),
                       sender::server, 0, limits)
                  .error,
              frame_error::reserved_bits);
    EXPECT_EQ(read_all(frame(0xC9, "z", sender::server), sender::server, 0, limits).error,
              frame_error::reserved_bits);
    EXPECT_EQ(read_all(frame(0xE1, "z", sender::server), sender::server, 0, limits).error,
              frame_error::reserved_bits);
    EXPECT_EQ(reserved_bits_for_extensions(""), 0);
    EXPECT_EQ(reserved_bits_for_extensions("x-custom, permessage-deflate"), 0x70);
}

TEST(WsFrame, CloseFramesTheProxyWrites) {
    const auto to_client = close_frame(1001, "going away", sender::server);
    EXPECT_EQ(to_client, std::string("\x88\x0c\x03\xe9", 4) + "going away");
    frame_reader client_side(sender::server, {});
    EXPECT_EQ(client_side.feed(to_client).error, frame_error::none);
    EXPECT_EQ(client_side.close_status(), 1001);

    const auto to_upstream = close_frame(1009, "too big", sender::client, test_mask);
    EXPECT_EQ(static_cast<std::uint8_t>(to_upstream[1]), 0x80 | 9);
    frame_reader upstream_side(sender::client, {});
    EXPECT_EQ(upstream_side.feed(to_upstream).error, frame_error::none);
    EXPECT_EQ(upstream_side.close_status(), 1009);

    // A reason longer than a control frame holds is cut to fit.
    const auto long_reason = close_frame(1000, std::string(300, 'r'), sender::server);
    EXPECT_EQ(long_reason.size(), 2U + 125U);
}

}  // namespace
