// tokenizer/regex: the PCRE2 wrapper behind pretokenize.hpp.
#define PCRE2_CODE_UNIT_WIDTH 8  // NOLINT(cppcoreguidelines-macro-usage): pcre2.h requires it
#include <pcre2.h>

#include <array>
#include <cstdio>

#include "tokenizer/pretokenize.hpp"
#include "tokenizer/regex_ascii.hpp"
#include "tokenizer/unicode_additions.hpp"

namespace tokenmeter::tokenizer::detail {

namespace {

// Unicode White_Space, the meaning of \s in the Rust regex crate and in Oniguruma.
constexpr std::string_view white_space_ranges =
    R"(\t-\r\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

// What Unicode 16 assigned to the general category `name` ("L", "Nd", ...) beyond PCRE2 10.42's
// Unicode 14 tables, as class ranges; empty when nothing was added.
std::string added_ranges(std::string_view name) {
    std::string ranges;
    for (const unicode_addition& a : unicode_additions) {
        if (a.category == name) {
            for (const unicode_range& r : a.ranges) {
                std::array<char, 48> buf{};
                std::snprintf(buf.data(), buf.size(), "\\x{%X}-\\x{%X}", r.first, r.last);
                ranges += buf.data();
            }
        }
    }
    return ranges;
}

// \p{X}, \pX or their \P negations, `i` at the p or P: rewritten so that X includes what Unicode
// 16 added to it. Leaves `i` at the escape's last character.
bool rewrite_property(std::string_view in, std::size_t& i, bool in_class, std::string& out,
                      std::string& error) {
    const char n = in[i];
    std::string name;
    std::size_t j = i + 1;
    if (j < in.size() && in[j] == '{') {
        const std::size_t close = in.find('}', j);
        if (close == std::string_view::npos) {
            error = "unterminated \\p{";
            return false;
        }
        name = std::string(in.substr(j + 1, close - j - 1));
        j = close;
    } else if (j < in.size()) {
        name = std::string(1, in[j]);
    }
    const std::string ranges = added_ranges(name);
    const std::string original = "\\" + std::string(1, n) + "{" + name + "}";
    i = j;
    if (ranges.empty() || (n == 'P' && in_class)) {
        out.append(original);
    } else if (in_class) {
        out.append(original).append(ranges);
    } else if (n == 'p') {
        out.append("[").append(original).append(ranges).append("]");
    } else {
        out.append("[^\\p{" + name + "}").append(ranges).append("]");
    }
    return true;
}

// One escape, `i` at the character after the backslash: \s and \S as Unicode White_Space,
// \p and \P with Unicode 16's additions, anchors refused (a streamed match cannot see them),
// anything else as it is. Leaves `i` at the escape's last character.
bool rewrite_escape(std::string_view in, std::size_t& i, bool in_class, std::string& out,
                    std::string& error) {
    const char n = in[i];
    if (n == 's') {
        if (in_class) {
            out.append(white_space_ranges);
        } else {
            out.append("[").append(white_space_ranges).append("]");
        }
        return true;
    }
    if (n == 'S') {
        if (in_class) {
            error = "\\S inside a character class is not supported";
            return false;
        }
        out.append("[^").append(white_space_ranges).append("]");
        return true;
    }
    if (n == 'p' || n == 'P') {
        return rewrite_property(in, i, in_class, out, error);
    }
    if (!in_class &&
        (n == 'b' || n == 'B' || n == 'G' || n == 'A' || n == 'z' || n == 'Z' || n == 'K')) {
        error = std::string("the anchor \\") + n + " is not supported (streaming)";
        return false;
    }
    out.push_back('\\');
    out.push_back(n);
    return true;
}

bool rewrite_pattern(std::string_view in, std::string& out, std::string& error) {
    bool in_class = false;
    bool class_start = false;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const char c = in[i];
        if (c == '\\' && i + 1 < in.size()) {
            ++i;
            class_start = false;
            if (!rewrite_escape(in, i, in_class, out, error)) {
                return false;
            }
            continue;
        }
        if (in_class) {
            if (c == ']' && !class_start) {
                in_class = false;
            }
            class_start = class_start && c == '^';
            out.push_back(c);
            continue;
        }
        if (c == '[') {
            in_class = true;
            class_start = true;
            out.push_back(c);
            continue;
        }
        if (c == '^' || c == '$') {
            error = std::string("the anchor ") + c + " is not supported (streaming)";
            return false;
        }
        out.push_back(c);
    }
    return true;
}

// Per-thread match state: match data and a JIT stack big enough for long runs. Never shared.
struct thread_state {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack =
        pcre2_jit_stack_create(std::size_t{64} * 1024, std::size_t{8} * 1024 * 1024, nullptr);
    thread_state() {
        if (context != nullptr && stack != nullptr) {
            pcre2_jit_stack_assign(context, nullptr, stack);
        }
    }
    ~thread_state() {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(context);
        pcre2_match_data_free(data);
    }
    thread_state(const thread_state&) = delete;
    thread_state& operator=(const thread_state&) = delete;
};

thread_state& state() {
    thread_local thread_state s;
    return s;
}

}  // namespace

std::unique_ptr<regex> regex::compile(std::string_view pattern, std::string& error, engine use) {
    std::string rewritten;
    if (!rewrite_pattern(pattern, rewritten, error)) {
        return nullptr;
    }
    int code = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* re =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &code, &offset, nullptr);
    if (re == nullptr) {
        std::array<PCRE2_UCHAR, 256> message{};
        pcre2_get_error_message(code, message.data(), message.size());
        error = "regex does not compile at offset " + std::to_string(offset) + ": " +
                reinterpret_cast<const char*>(message.data());
        return nullptr;
    }
    std::unique_ptr<regex> result(new regex());
    result->code_ = re;
    if (use == engine::fastest) {
        result->ascii_ = ascii_regex::recognize(pattern);
    }
    std::uint32_t lookbehind = 0;
    pcre2_pattern_info(re, PCRE2_INFO_MAXLOOKBEHIND, &lookbehind);
    if (lookbehind > 0) {
        error = "regex looks behind, which streaming cannot support";
        return nullptr;
    }
    // JIT is an optimisation; without it (e.g. an unsupported CPU) matching still works.
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    std::size_t s = 0;
    std::size_t e = 0;
    if (result->find("", 0, false, s, e) == result::match) {
        error = "regex matches the empty string";
        return nullptr;
    }
    return result;
}

regex::~regex() {
    pcre2_code_free(static_cast<pcre2_code*>(code_));
}

// The hand-written matcher may read all of the text from `from` on, so all of it must be ASCII.
std::size_t regex::ascii_tail(std::string_view subject) const noexcept {
    if (ascii_ == ascii_regex::shape::none) {
        return subject.size() + 1;
    }
    if (ascii_regex::all_ascii(subject)) {
        return 0;
    }
    std::size_t i = subject.size();
    while (i > 0 && static_cast<unsigned char>(subject[i - 1]) < 0x80) {
        --i;
    }
    return i;
}

regex::result regex::pcre2_find(std::string_view subject, std::size_t from, bool partial,
                                std::size_t& start, std::size_t& end) const noexcept {
    thread_state& st = state();
    const std::uint32_t options = PCRE2_NO_UTF_CHECK | (partial ? PCRE2_PARTIAL_HARD : 0U);
    const int rc =
        pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(subject.data()),
                    subject.size(), from, options, st.data, st.context);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    if (rc >= 0) {
        start = ov[0];
        end = ov[1];
        return result::match;
    }
    if (rc == PCRE2_ERROR_PARTIAL) {
        start = ov[0];
        end = subject.size();
        return result::partial;
    }
    // PCRE2_ERROR_NOMATCH, or a resource limit on pathological input: no further match. In
    // streaming mode treat it as "not final yet" so nothing is emitted early.
    if (rc != PCRE2_ERROR_NOMATCH && partial) {
        start = from;
        end = subject.size();
        return result::partial;
    }
    return result::none;
}

}  // namespace tokenmeter::tokenizer::detail
