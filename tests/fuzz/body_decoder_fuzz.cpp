// Fuzz target for the relay's body decoder (relay/body_decoder): arbitrary bytes as the chunked
// body of an upstream response. Decoded whole and in the pieces the first byte chooses, the
// payload, the bytes used and the verdict must be the same; payload never exceeds what was
// given; and wherever Beast's parser (the relay's decoder before it) accepts the body, the
// decoder accepts it with the same payload, while a body the decoder refuses Beast refuses too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "net/beast.hpp"
#include "relay/body_decoder.hpp"

namespace {

using tokenmeter::relay::body_decoder;

struct outcome {
    std::string payload;
    std::size_t consumed = 0;
    body_decoder::failure error = body_decoder::failure::none;
    bool done = false;
};

outcome decode(std::string_view wire, std::size_t piece) {
    auto decoder = body_decoder::chunked(1024);
    outcome out;
    std::string read;
    for (std::size_t from = 0; from < wire.size(); from += piece) {
        read.assign(wire.substr(from, piece));
        const auto step = decoder.decode(read.data(), read.size());
        if (step.offset > read.size() || step.payload > read.size() - step.offset ||
            step.consumed > read.size()) {
            std::abort();
        }
        out.payload.append(read.data() + step.offset, step.payload);
        out.consumed += step.consumed;
        if (step.error != body_decoder::failure::none) {
            out.error = step.error;
            break;
        }
        if (step.consumed < read.size()) {
            break;
        }
    }
    out.done = decoder.done();
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::size_t piece = 1 + data[0] % 17;
    std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
    const outcome whole = decode(wire, wire.empty() ? 1 : wire.size());
    const outcome split = decode(wire, piece);
    if (whole.payload != split.payload || whole.consumed != split.consumed ||
        whole.error != split.error || whole.done != split.done) {
        std::abort();
    }

    namespace bhttp = tokenmeter::bhttp;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.eager(true);
    parser.body_limit(boost::none);
    parser.header_limit(64 * 1024);
    std::string message = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    message.append(wire);
    tokenmeter::error_code ec;
    std::size_t used = 0;
    while (used < message.size() && !parser.is_done()) {
        const std::size_t n = parser.put(
            tokenmeter::asio::const_buffer(message.data() + used, message.size() - used), ec);
        used += n;
        if (ec || n == 0) {
            break;
        }
    }
    const bool beast_done = parser.is_done() && !ec;
    // Where the decoder is deliberately stricter than Beast, the two may differ: its own bounds
    // (a chunk line of 4 KiB, trailers of 1 KiB here, where Beast has its header limit) and a
    // chunk line must end at CRLF (Beast let a bare LF through inside a quoted extension).
    const bool stricter = whole.error == body_decoder::failure::trailers_too_long ||
                          whole.error == body_decoder::failure::chunk_line_too_long ||
                          whole.error == body_decoder::failure::bad_chunk_line;
    if (beast_done && !stricter && (!whole.done || whole.payload != parser.get().body())) {
        std::abort();
    }
    if (whole.error != body_decoder::failure::none && !stricter && beast_done) {
        std::abort();
    }
    return 0;
}
