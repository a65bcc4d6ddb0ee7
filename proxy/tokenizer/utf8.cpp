// tokenizer/utf8: see utf8.hpp.
#include "tokenizer/utf8.hpp"

namespace tokenmeter::tokenizer::detail {

namespace {

bool is_cont(unsigned char b) noexcept {
    return (b & 0xC0U) == 0x80U;
}

}  // namespace

std::size_t utf8_sequence(std::string_view s, std::size_t i, bool& incomplete, std::size_t& len) {
    incomplete = false;
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        len = 1;
        return 1;
    }
    std::size_t need = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) {
            lo = 0xA0;
        } else if (b0 == 0xED) {
            hi = 0x9F;
        }
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) {
            lo = 0x90;
        } else if (b0 == 0xF4) {
            hi = 0x8F;
        }
    } else {
        len = 1;  // C0, C1, F5..FF or a stray continuation byte
        return 0;
    }
    std::size_t k = 1;
    for (; k <= need; ++k) {
        if (i + k >= s.size()) {
            incomplete = true;
            len = k;
            return 0;
        }
        const auto b = static_cast<unsigned char>(s[i + k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : is_cont(b);
        if (!ok) {
            len = k;  // maximal subpart: the bytes before the offending one
            return 0;
        }
    }
    len = need + 1;
    return need + 1;
}

bool utf8_valid(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        bool incomplete = false;
        std::size_t len = 0;
        if (utf8_sequence(s, i, incomplete, len) == 0) {
            return false;
        }
        i += len;
    }
    return true;
}

void utf8_append(char32_t c, std::string& out) {
    if (c < 0x80) {
        out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
}

std::size_t utf8_repair(std::string_view in, bool final, std::string& out) {
    std::size_t i = 0;
    std::size_t run = 0;  // start of the current run of valid bytes, copied in one append
    while (i < in.size()) {
        if (static_cast<unsigned char>(in[i]) < 0x80) {
            ++i;
            continue;
        }
        bool incomplete = false;
        std::size_t len = 0;
        if (utf8_sequence(in, i, incomplete, len) != 0) {
            i += len;
            continue;
        }
        out.append(in.substr(run, i - run));
        if (incomplete && !final) {
            return i;  // wait for the rest of the sequence
        }
        out.append("\xEF\xBF\xBD");
        i += len;
        run = i;
    }
    out.append(in.substr(run, i - run));
    return i;
}

}  // namespace tokenmeter::tokenizer::detail
