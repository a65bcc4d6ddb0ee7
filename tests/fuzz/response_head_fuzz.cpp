// Fuzz target for the upstream response head: arbitrary bytes as what a model server answers,
// parsed as the proxy parses it (non-eager put into a response parser, heads taken one at a time,
// interim 1xx heads skipped up to a bound, then the final head's fields copied for the client).
// Nothing may crash or throw out; a parsed 1xx head is complete with no body; the bytes the parser
// reports as used never exceed what it was given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "net/beast.hpp"
#include "relay/headers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace tokenmeter;
    using namespace tokenmeter::relay;
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    for (int head = 0; head < 16 && !rest.empty(); ++head) {
        bhttp::response_parser<bhttp::buffer_body> parser;
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        parser.header_limit(8 * 1024);
        if (size % 7 == 0) {
            parser.skip(true);  // a HEAD request's response
        }
        error_code ec;
        const std::size_t used = parser.put(asio::const_buffer(rest.data(), rest.size()), ec);
        if (used > rest.size()) {
            std::abort();
        }
        if (ec || !parser.is_header_done()) {
            return 0;
        }
        const auto& response = parser.get();
        const unsigned status = response.result_int();
        bhttp::response<bhttp::empty_body> client;
        client.result(status);
        client.reason(response.reason());
        copy_end_to_end_fields(response.base(), client.base());
        // The client's head as the proxy writes it: one complete head Beast reads back.
        std::string text;
        append_status_line(11, status, response.reason(), text);
        append_end_to_end_fields(response.base(), text);
        text += "\r\n";
        bhttp::response_parser<bhttp::empty_body> back;
        back.header_limit(64 * 1024);
        back.skip(true);
        error_code back_ec;
        back.put(asio::const_buffer(text.data(), text.size()), back_ec);
        if (back_ec || !back.is_header_done()) {
            std::abort();
        }
        (void)parser.content_length();
        (void)parser.keep_alive();
        (void)parser.chunked();
        if (status >= 100 && status < 200) {
            if (!parser.is_done()) {
                std::abort();  // an interim head has no body: the next head follows directly
            }
            rest.remove_prefix(used);
            continue;
        }
        return 0;
    }
    return 0;
}
