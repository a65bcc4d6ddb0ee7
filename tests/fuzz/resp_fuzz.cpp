// Differential fuzz target for outbound::resp::parser, the reader of every byte a Redis server
// sends: the same bytes fed whole and split at fuzzer-chosen points must give the same replies,
// the same error and (without an error) the same bytes used; no reply may exceed the bounds (wire
// bytes, members, depth); and every reply written back as RESP must read back the same.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "outbound/resp.hpp"

namespace {

using namespace tokenmeter::outbound::resp;

struct digest {
    std::vector<value> replies;
    parse_error error = parse_error::none;
    std::size_t used = 0;
    bool idle = false;
    bool operator==(const digest&) const = default;
};

void check_bounds(const value& v, const limits& bounds, std::size_t depth, std::size_t& members) {
    if (v.type != kind::array) {
        return;
    }
    if (depth + 1 > bounds.max_depth) {
        std::abort();
    }
    members += v.members.size();
    if (members > bounds.max_elements) {
        std::abort();
    }
    for (const value& m : v.members) {
        check_bounds(m, bounds, depth + 1, members);
    }
}

void write(std::string& out, const value& v) {
    switch (v.type) {
        case kind::simple:
            out += "+" + v.text + "\r\n";
            break;
        case kind::error:
            out += "-" + v.text + "\r\n";
            break;
        case kind::integer:
            out += ":" + std::to_string(v.integer) + "\r\n";
            break;
        case kind::bulk:
            out += "$" + std::to_string(v.text.size()) + "\r\n" + v.text + "\r\n";
            break;
        case kind::null:
            out += "$-1\r\n";
            break;
        case kind::array:
            out += "*" + std::to_string(v.members.size()) + "\r\n";
            for (const value& m : v.members) {
                write(out, m);
            }
            break;
    }
}

digest run(std::string_view bytes, const std::vector<std::size_t>& cuts, const limits& bounds) {
    digest d;
    parser p(bounds);
    std::size_t from = 0;
    auto feed = [&](std::string_view chunk) {
        while (!chunk.empty()) {
            const std::size_t used = p.feed(chunk);
            if (used > chunk.size()) {
                std::abort();
            }
            chunk.remove_prefix(used);
            d.used += used;
            if (p.has_reply()) {
                d.replies.push_back(p.take_reply());
            } else if (p.error() != parse_error::none) {
                return false;
            } else if (used == 0) {
                std::abort();  // neither progress, nor a reply, nor an error
            }
        }
        return true;
    };
    bool going = true;
    for (std::size_t cut : cuts) {
        going = going && feed(bytes.substr(from, cut - from));
        from = cut;
    }
    if (going) {
        feed(bytes.substr(from));
    }
    d.error = p.error();
    d.idle = p.idle();
    if (d.error != parse_error::none) {
        d.used = 0;  // after an error the bytes are not read on: how many were is not compared
    }
    return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) {
        return 0;
    }
    limits bounds;
    bounds.max_reply_bytes = 8 + static_cast<std::size_t>(data[0]) * 4;
    bounds.max_elements = 1 + data[1] % 32;
    bounds.max_depth = 1 + data[2] % 6;
    const std::size_t cut_count = (data[2] >> 3) % 8;
    data += 3;
    size -= 3;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::vector<std::size_t> cuts;
    for (std::size_t i = 0; i < cut_count && size > 0; ++i) {
        cuts.push_back((static_cast<std::size_t>(data[i % size]) * 131 + i * 17) % (size + 1));
    }
    std::sort(cuts.begin(), cuts.end());
    const digest whole = run(bytes, {}, bounds);
    if (!(whole == run(bytes, cuts, bounds))) {
        std::abort();
    }
    for (const value& reply : whole.replies) {
        std::size_t members = 0;
        check_bounds(reply, bounds, 0, members);
        std::string again;
        write(again, reply);
        const digest back = run(again, {}, bounds);
        if (back.replies.size() != 1 || !(back.replies[0] == reply) ||
            back.error != parse_error::none) {
            std::abort();
        }
    }
    return 0;
}
