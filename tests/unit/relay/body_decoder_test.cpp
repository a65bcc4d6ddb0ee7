// body_decoder: every framing, every split point, every fault, and the same verdicts as Beast's
// parser (which decoded upstream bodies before) on generated and mutated chunked bodies.
#include "relay/body_decoder.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "net/beast.hpp"

namespace tokenmeter::relay {
namespace {

using failure = body_decoder::failure;

struct outcome {
    std::string payload;
    std::size_t consumed = 0;
    failure error = failure::none;
    bool done = false;
};

// Feeds `wire` in pieces ending at each of `cuts`, as reads would bring it.
outcome decode_in_pieces(body_decoder decoder, const std::string& wire,
                         const std::vector<std::size_t>& cuts) {
    outcome result;
    std::size_t from = 0;
    std::vector<std::size_t> ends = cuts;
    ends.push_back(wire.size());
    for (std::size_t end : ends) {
        std::string read = wire.substr(from, end - from);
        from = end;
        if (read.empty()) {
            continue;
        }
        const auto step = decoder.decode(read.data(), read.size());
        result.payload.append(read.data() + step.offset, step.payload);
        result.consumed += step.consumed;
        if (step.error != failure::none) {
            result.error = step.error;
            break;
        }
        if (step.consumed < read.size()) {
            break;  // the body ended inside this read
        }
    }
    result.done = decoder.done();
    return result;
}

outcome decode_whole(body_decoder decoder, const std::string& wire) {
    return decode_in_pieces(decoder, wire, {});
}

body_decoder chunked() {
    return body_decoder::chunked(8192);
}

TEST(BodyDecoder, ContentLengthStopsAtTheLength) {
    auto out = decode_whole(body_decoder::with_length(5), "helloEXTRA");
    EXPECT_EQ(out.payload, "hello");
    EXPECT_EQ(out.consumed, 5U);
    EXPECT_TRUE(out.done);
    EXPECT_EQ(out.error, failure::none);
}

TEST(BodyDecoder, ContentLengthCutShortAtClose) {
    auto decoder = body_decoder::with_length(10);
    std::string read = "hello";
    auto step = decoder.decode(read.data(), read.size());
    EXPECT_EQ(step.payload, 5U);
    EXPECT_FALSE(decoder.done());
    EXPECT_EQ(decoder.at_close(), failure::cut_short);
}

TEST(BodyDecoder, ZeroLengthIsDoneAtOnce) {
    EXPECT_TRUE(body_decoder::with_length(0).done());
    EXPECT_TRUE(body_decoder().done());
}

TEST(BodyDecoder, UntilCloseTakesEverythingAndEndsAtClose) {
    auto decoder = body_decoder::until_close();
    std::string read = "0\r\n\r\nnot chunked";
    auto step = decoder.decode(read.data(), read.size());
    EXPECT_EQ(std::string(read.data() + step.offset, step.payload), "0\r\n\r\nnot chunked");
    EXPECT_FALSE(decoder.done());
    EXPECT_EQ(decoder.at_close(), failure::none);
    EXPECT_TRUE(decoder.done());
}

TEST(BodyDecoder, ChunkedPayloadIsJoinedWhereItStarts) {
    std::string read = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    auto decoder = chunked();
    auto step = decoder.decode(read.data(), read.size());
    // The first chunk's data stays where it lay; the second is moved up behind it.
    EXPECT_EQ(step.offset, 3U);
    EXPECT_EQ(std::string(read.data() + step.offset, step.payload), "hello world");
    EXPECT_EQ(step.consumed, read.size());
    EXPECT_TRUE(decoder.done());
}

TEST(BodyDecoder, AReadOfOneChunkMovesNothing) {
    const std::string wire = "9\r\ndata: x\n\n\r\n";
    std::string read = wire;
    auto decoder = chunked();
    auto step = decoder.decode(read.data(), read.size());
    EXPECT_EQ(step.offset, 3U);
    EXPECT_EQ(std::string(read.data() + step.offset, step.payload), "data: x\n\n");
    EXPECT_EQ(read, wire);  // not a byte moved
}

// Valid chunked bodies: extensions, trailers, upper-case hex, leading zeros, empty-looking data.
const std::vector<std::pair<std::string, std::string>> valid_bodies = {
    {"0\r\n\r\n", ""},
    {"5\r\nhello\r\n0\r\n\r\n", "hello"},
    {"1\r\n\r\r\n2\r\n\r\n\r\n0\r\n\r\n", "\r\r\n"},
    {"00A\r\n0123456789\r\n0000\r\n\r\n", "0123456789"},
    {"3;name=value\r\nabc\r\n2 ; x=\"q;uoted\"\r\nde\r\n0;last\r\n\r\n", "abcde"},
    {"4\r\ndata\r\n0\r\nExpires: never\r\nX-Checksum: abc\r\n\r\n", "data"},
    {"c4\r\n" + std::string(196, 'x') + "\r\n0\r\n\r\n", std::string(196, 'x')},
};

TEST(BodyDecoder, EverySplitGivesTheSamePayload) {
    for (const auto& [wire, payload] : valid_bodies) {
        const std::string with_extra = wire + "HTTP/1.1 200 OK\r\n";
        for (std::size_t a = 0; a <= with_extra.size(); ++a) {
            for (std::size_t b = a; b <= with_extra.size(); ++b) {
                auto out = decode_in_pieces(chunked(), with_extra, {a, b});
                ASSERT_EQ(out.error, failure::none) << wire << " cut at " << a << "," << b;
                ASSERT_EQ(out.payload, payload) << wire << " cut at " << a << "," << b;
                ASSERT_TRUE(out.done) << wire << " cut at " << a << "," << b;
                ASSERT_EQ(out.consumed, wire.size()) << wire << " cut at " << a << "," << b;
            }
        }
    }
}

TEST(BodyDecoder, FaultsAreNamedAndKeepThePayloadBeforeThem) {
    struct fault {
        std::string wire;
        failure expected;
        std::string payload_before;
    };
    const std::vector<fault> faults = {
        {"g\r\n", failure::bad_chunk_size, ""},
        {"\r\n", failure::bad_chunk_size, ""},
        {"5x\r\nhello\r\n", failure::bad_chunk_size, ""},
        {"-5\r\nhello\r\n", failure::bad_chunk_size, ""},
        {"5\nhello\r\n", failure::bad_chunk_size, ""},
        {"5\r\rhello\r\n", failure::bad_chunk_line, ""},
        {"5;a\nhello\r\n", failure::bad_chunk_line, ""},
        {"5\r\nhelloXX", failure::bad_chunk_end, "hello"},
        {"5\r\nhello\rX", failure::bad_chunk_end, "hello"},
        {"5\r\nhello\r\n0\r\nX-A: \x01\r\n\r\n", failure::bad_trailer, "hello"},
        {"5\r\nhello\r\n0\r\n\rX", failure::bad_trailer, "hello"},
        {"100000000000000\r\n", failure::bad_chunk_size, ""},
        {"1;" + std::string(5000, 'e') + "\r\nx\r\n", failure::chunk_line_too_long, ""},
        {std::string(5000, '0') + "1\r\nx\r\n", failure::chunk_line_too_long, ""},
        {"1\r\nx\r\n0\r\nX-Long: " + std::string(9000, 't') + "\r\n\r\n",
         failure::trailers_too_long, "x"},
    };
    for (const auto& f : faults) {
        auto out = decode_whole(chunked(), f.wire);
        EXPECT_EQ(out.error, f.expected) << f.wire.substr(0, 40);
        EXPECT_EQ(out.payload, f.payload_before) << f.wire.substr(0, 40);
        EXPECT_FALSE(out.done);
        EXPECT_FALSE(to_string(f.expected).empty());
    }
}

TEST(BodyDecoder, AFailedDecoderStaysFailed) {
    auto decoder = chunked();
    std::string bad = "zz";
    EXPECT_EQ(decoder.decode(bad.data(), bad.size()).error, failure::bad_chunk_size);
    std::string good = "0\r\n\r\n";
    auto step = decoder.decode(good.data(), good.size());
    EXPECT_EQ(step.error, failure::bad_chunk_size);
    EXPECT_EQ(step.payload, 0U);
    EXPECT_EQ(decoder.at_close(), failure::bad_chunk_size);
}

TEST(BodyDecoder, ChunkedCutShortAtClose) {
    for (std::string wire : {"5\r\nhel", "5\r\nhello", "5\r\nhello\r\n", "5\r\nhello\r\n0\r\n"}) {
        auto decoder = chunked();
        (void)decoder.decode(wire.data(), wire.size());
        EXPECT_EQ(decoder.at_close(), failure::cut_short) << wire;
    }
}

// Beast's parser, the decoder before this one: fed the same chunked body behind a head.
outcome beast_decode(const std::string& wire) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.eager(true);
    parser.body_limit(boost::none);
    const std::string message = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + wire;
    error_code ec;
    std::size_t used = 0;
    while (used < message.size() && !parser.is_done()) {
        const std::size_t n =
            parser.put(asio::buffer(message.data() + used, message.size() - used), ec);
        used += n;
        if (ec || n == 0) {
            break;
        }
    }
    outcome result;
    result.done = parser.is_done() && !ec;
    if (result.done) {
        result.payload = parser.get().body();
    }
    return result;
}

// Random chunked bodies, then each with one byte changed: wherever Beast's parser accepted a
// body, this decoder accepts it with the same payload; wherever this decoder refuses one, Beast
// refused it too. (This decoder is more lenient in what trailers may hold, and stricter in that
// a chunk size line must end at CRLF.)
TEST(BodyDecoder, AgreesWithBeastOnGeneratedAndMutatedBodies) {
    std::mt19937 random(20261126);
    const std::string alphabet = "0123456789abcdefABCDEF\r\n;= \t\"xX:-\x01\x7f";
    int agreed_accept = 0;
    int agreed_refuse = 0;
    for (int round = 0; round < 3000; ++round) {
        std::string wire;
        std::string payload;
        const int chunks = static_cast<int>(random() % 4);
        for (int c = 0; c < chunks; ++c) {
            const std::size_t size = 1 + random() % 40;
            std::string data;
            for (std::size_t i = 0; i < size; ++i) {
                data.push_back(static_cast<char>(random() % 256));
            }
            char head[32];
            std::snprintf(head, sizeof head, random() % 2 ? "%zx" : "%zX", size);
            wire += head;
            if (random() % 4 == 0) {
                wire += ";ext=v";
            }
            wire += "\r\n" + data + "\r\n";
            payload += data;
        }
        wire += "0\r\n";
        if (random() % 4 == 0) {
            wire += "X-Trailer: yes\r\n";
        }
        wire += "\r\n";
        auto ours = decode_whole(chunked(), wire);
        ASSERT_EQ(ours.error, failure::none);
        ASSERT_EQ(ours.payload, payload);
        auto beast = beast_decode(wire);
        ASSERT_TRUE(beast.done);
        ASSERT_EQ(beast.payload, payload);

        std::string mutated = wire;
        mutated[random() % mutated.size()] = alphabet[random() % alphabet.size()];
        ours = decode_whole(chunked(), mutated);
        beast = beast_decode(mutated);
        const bool ours_ok = ours.error == failure::none && ours.done;
        // Stricter by design: a chunk line ends only at CRLF (Beast let a bare LF through
        // inside a quoted extension).
        if (ours.error == failure::bad_chunk_line) {
            continue;
        }
        if (beast.done) {
            ASSERT_TRUE(ours_ok) << testing::PrintToString(mutated);
            ASSERT_EQ(ours.payload, beast.payload) << testing::PrintToString(mutated);
            ++agreed_accept;
        }
        if (ours.error != failure::none) {
            ASSERT_FALSE(beast.done) << testing::PrintToString(mutated);
            ++agreed_refuse;
        }
    }
    // Both kinds of case occurred, so neither assertion above held vacuously.
    EXPECT_GT(agreed_accept, 100);
    EXPECT_GT(agreed_refuse, 100);
}

}  // namespace
}  // namespace tokenmeter::relay
