// parity_check: compares tokenmeter's tokenizer engine with the reference tokenizers' ids that
// generate.mjs wrote (one JSON Lines file per tokenizer). For every case it checks
//   - one-shot: encoder::encode(text) gives exactly the expected ids, and count() their number;
//   - streaming: tokenizer::stream fed the text in several chunkings (whole, 1-byte chunks,
//     seeded random 1..64-byte chunks, cuts inside every multi-byte UTF-8 sequence) emits
//     exactly the expected ids, with non-decreasing time stamps that are times of fed deltas,
//     and for whole corpus files holds at most a line's worth of tokens back until finish().
// Every mismatch is reported (case name, chunking, first differing index, ids around it, the
// text near it); any mismatch makes the exit status 1.
//
// Usage: tokenmeter-tokenizer-parity --spec SPEC --dir TOKENIZER_DIR --expected FILE.jsonl
//                                    [--seed N] [--max-reports N] [--no-stream] [--special-tokens match|text]
//                                    [--expect-failing-cases N]
// --expect-failing-cases N turns the run into a negative control: it succeeds only if exactly N
// distinct cases fail, each in every check (generate.mjs --corrupt writes such a file).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.hpp"
#include "core/time.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

namespace tok = tokenmeter::tokenizer;
using tokenmeter::core::duration;
using tokenmeter::core::time_point;

struct options {
    std::string spec;
    std::string dir;
    std::string expected;
    std::uint64_t seed = 20241114;
    int max_reports = 20;
    bool stream = true;
    tok::special_tokens special = tok::special_tokens::file_default;  // --special-tokens
    // Negative control: succeed only if exactly this many distinct cases fail (-1: none may).
    int expect_failing_cases = -1;
};

struct parity_case {
    std::string name;
    std::string text;  // the bytes the engine is fed
    std::vector<tok::token_id> ids;
    bool from_hex = false;
};

bool parse_options(int argc, char** argv, options& opt) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--spec" && has_value) {
            opt.spec = argv[++i];
        } else if (arg == "--dir" && has_value) {
            opt.dir = argv[++i];
        } else if (arg == "--expected" && has_value) {
            opt.expected = argv[++i];
        } else if (arg == "--seed" && has_value) {
            opt.seed = std::stoull(argv[++i]);
        } else if (arg == "--max-reports" && has_value) {
            opt.max_reports = std::stoi(argv[++i]);
        } else if (arg == "--expect-failing-cases" && has_value) {
            opt.expect_failing_cases = std::stoi(argv[++i]);
        } else if (arg == "--special-tokens" && has_value) {
            const std::string_view mode = argv[++i];
            if (mode != "match" && mode != "text") {
                std::cerr << "parity: --special-tokens is match or text\n";
                return false;
            }
            opt.special = mode == "match" ? tok::special_tokens::match : tok::special_tokens::text;
        } else if (arg == "--no-stream") {
            opt.stream = false;
        } else {
            std::cerr << "parity: unknown or incomplete argument " << arg << "\n";
            return false;
        }
    }
    if (opt.spec.empty() || opt.expected.empty()) {
        std::cerr << "usage: tokenmeter-tokenizer-parity --spec SPEC --dir DIR --expected FILE "
                     "[--seed N] [--max-reports N] [--no-stream]\n";
        return false;
    }
    return true;
}

bool hex_decode(std::string_view hex, std::string& out) {
    if (hex.size() % 2 != 0) {
        return false;
    }
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int hi = tokenmeter::core::hex_digit_value(hex[i]);
        const int lo = tokenmeter::core::hex_digit_value(hex[i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out.push_back(static_cast<char>(hi * 16 + lo));
    }
    return true;
}

bool read_cases(const std::string& path, std::vector<parity_case>& cases) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::cerr << "parity: cannot open " << path
                  << " (it is written by tests/parity/generate.mjs: the parity.reference.* "
                     "tests)\n";
        return false;
    }
    std::string line;
    std::size_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty()) {
            continue;
        }
        try {
            const auto j = nlohmann::json::parse(line);
            parity_case c;
            c.name = j.at("name").get<std::string>();
            if (j.contains("hex")) {
                c.from_hex = true;
                if (!hex_decode(j.at("hex").get<std::string>(), c.text)) {
                    std::cerr << "parity: " << path << ":" << line_no << ": bad hex\n";
                    return false;
                }
            } else {
                c.text = j.at("text").get<std::string>();
            }
            c.ids = j.at("ids").get<std::vector<tok::token_id>>();
            cases.push_back(std::move(c));
        } catch (const nlohmann::json::exception& e) {
            std::cerr << "parity: " << path << ":" << line_no << ": " << e.what() << "\n";
            return false;
        }
    }
    if (cases.empty()) {
        std::cerr << "parity: " << path << " has no cases\n";
        return false;
    }
    return true;
}

// Printable form of a byte range: ASCII as is, common controls escaped, other bytes as \xNN
// (so invalid UTF-8 and cut sequences stay visible).
std::string escaped(std::string_view s) {
    std::string out;
    for (char ch : s) {
        const auto b = static_cast<unsigned char>(ch);
        if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\r') {
            out += "\\r";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch == '\\') {
            out += "\\\\";
        } else if (b >= 0x20 && b < 0x7f) {
            out.push_back(ch);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", b);
            out += buf;
        }
    }
    return out;
}

// The code points of s[from, to), widened to whole UTF-8 sequences, as "U+XXXX" (invalid bytes
// as \xNN): non-ASCII text is unreadable as escaped bytes.
std::string code_points(std::string_view s, std::size_t from, std::size_t to) {
    while (from > 0 && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) {
        --from;
    }
    to = std::min(to, s.size());
    std::string out;
    char buf[16];
    for (std::size_t i = from; i < to;) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
        bool valid = len > 0 && i + len <= s.size();
        std::uint32_t cp = len == 1   ? b
                           : len == 2 ? (b & 0x1FU)
                           : len == 3 ? (b & 0x0FU)
                                      : (b & 0x07U);
        for (std::size_t k = 1; valid && k < len; ++k) {
            const auto cb = static_cast<unsigned char>(s[i + k]);
            valid = (cb & 0xC0) == 0x80;
            cp = (cp << 6) | (cb & 0x3FU);
        }
        if (valid) {
            std::snprintf(buf, sizeof buf, "U+%04X ", static_cast<unsigned>(cp));
            i += len;
        } else {
            std::snprintf(buf, sizeof buf, "\\x%02x ", b);
            ++i;
        }
        out += buf;
    }
    return out;
}

std::string id_window(const std::vector<tok::token_id>& ids, std::size_t at) {
    std::ostringstream os;
    const std::size_t from = at >= 4 ? at - 4 : 0;
    const std::size_t to = std::min(ids.size(), at + 6);
    os << "[";
    if (from > 0) {
        os << "... ";
    }
    for (std::size_t i = from; i < to; ++i) {
        os << (i == at ? ">" : "") << ids[i] << (i == at ? "<" : "") << (i + 1 < to ? " " : "");
    }
    if (to < ids.size()) {
        os << " ...";
    }
    os << "] (" << ids.size() << " ids)";
    return os.str();
}

class reporter {
  public:
    reporter(const tok::encoder& enc, int max_reports) : enc_(&enc), max_reports_(max_reports) {}

    // Returns true when `actual` equals `expected`; otherwise reports the first difference.
    bool check(const parity_case& c, std::string_view how,
               const std::vector<tok::token_id>& actual) {
        const auto& expected = c.ids;
        if (actual == expected) {
            return true;
        }
        ++failures_;
        ++failed_checks_[c.name];
        if (failures_ > max_reports_) {
            return false;
        }
        std::size_t at = 0;
        while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) {
            ++at;
        }
        std::cout << "MISMATCH " << c.name << " [" << how << "] at id index " << at << "\n"
                  << "  expected " << id_window(expected, at) << "\n"
                  << "  actual   " << id_window(actual, at) << "\n";
        // Ids do not map to bytes without a decoder. Where the engine's first `at` ids agree
        // with the reference, the byte at which the engine's stream (fed 1 byte at a time)
        // emits its id number `at` is within a pre-token of the difference; show the text
        // around it (short texts whole).
        const std::string_view text = c.text;
        if (text.size() <= 240) {
            std::cout << "  text     \"" << escaped(text) << "\" (" << text.size() << " bytes)\n";
        } else {
            const std::size_t near = locate(text, at);
            const std::size_t from = near > 160 ? near - 160 : 0;
            std::cout << "  text     bytes " << from << ".." << std::min(text.size(), from + 240)
                      << " of " << text.size() << " (the difference is near byte " << near
                      << "): \"" << escaped(text.substr(from, 240)) << "\"\n"
                      << "  near     " << code_points(text, near > 24 ? near - 24 : 0, near + 16)
                      << "\n";
        }
        return false;
    }

    void note(const parity_case& c, std::string_view what) {
        ++failures_;
        ++failed_checks_[c.name];
        if (failures_ <= max_reports_) {
            std::cout << "FAIL " << c.name << ": " << what << "\n";
        }
    }

    [[nodiscard]] int failures() const { return failures_; }
    // case name -> number of failed checks
    [[nodiscard]] const std::map<std::string, int>& failed_checks() const { return failed_checks_; }

  private:
    // The offset after which the engine's stream has emitted more than `index` ids.
    std::size_t locate(std::string_view text, std::size_t index) const {
        tok::stream s(*enc_);
        std::size_t emitted = 0;
        auto count = [&emitted](tok::token_id, time_point) { ++emitted; };
        for (std::size_t i = 0; i < text.size(); ++i) {
            s.feed(text.substr(i, 1), time_point{}, count);
            if (emitted > index) {
                return i + 1;
            }
        }
        return text.size();
    }

    const tok::encoder* enc_;
    int max_reports_;
    int failures_ = 0;
    std::map<std::string, int> failed_checks_;
};

// Chunk lengths that cut `text` the named way; they add up to text.size().
std::vector<std::size_t> utf8_cutting_chunks(std::string_view text) {
    // A cut right after every lead byte of a multi-byte sequence.
    std::vector<std::size_t> sizes;
    std::size_t last = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b >= 0xC0 && i + 1 > last) {
            sizes.push_back(i + 1 - last);
            last = i + 1;
        }
    }
    if (last < text.size()) {
        sizes.push_back(text.size() - last);
    }
    return sizes;
}

std::vector<std::size_t> random_chunks(std::string_view text, std::mt19937_64& rng,
                                       std::size_t max_chunk) {
    std::vector<std::size_t> sizes;
    std::uniform_int_distribution<std::size_t> dist(1, max_chunk);
    for (std::size_t done = 0; done < text.size();) {
        const std::size_t n = std::min(dist(rng), text.size() - done);
        sizes.push_back(n);
        done += n;
    }
    return sizes;
}

constexpr std::size_t max_held_to_finish = 64;

bool is_multiline_document(const parity_case& c) {
    return c.name.starts_with("file/") || c.name.starts_with("corpus/");
}

// Feeds `text` in chunks of `sizes` (delta k stamped k+1 ns) and checks ids and time stamps.
bool check_stream(const tok::encoder& enc, const parity_case& c, std::string_view how,
                  const std::vector<std::size_t>& sizes, reporter& report) {
    tok::stream s(enc);
    std::vector<tok::token_id> got;
    got.reserve(c.ids.size());
    time_point last_stamp{};
    bool stamps_ok = true;
    std::int64_t fed_deltas = 0;
    std::int64_t newest_stamp = 0;  // the time of the delta being fed, or of finish()
    auto on_token = [&](tok::token_id id, time_point at) {
        got.push_back(id);
        // A token is stamped with the delta that completed it: a time already fed, never later
        // than the newest delta, never earlier than the previous token's.
        if (at < last_stamp || at.time_since_epoch().count() > newest_stamp ||
            at.time_since_epoch().count() < 1) {
            stamps_ok = false;
        }
        last_stamp = at;
    };
    std::size_t offset = 0;
    for (std::size_t n : sizes) {
        ++fed_deltas;
        newest_stamp = fed_deltas;
        s.feed(std::string_view(c.text).substr(offset, n), time_point{duration{fed_deltas}},
               on_token);
        offset += n;
    }
    const std::size_t held_to_finish = c.ids.size() - std::min(c.ids.size(), got.size());
    newest_stamp = fed_deltas + 1;
    s.finish(time_point{duration{newest_stamp}}, on_token);
    bool ok = report.check(c, how, got);
    // Exact ids are not enough: a stream that held everything back until finish() would match
    // too, and stamp every token with the end of the response. The corpus files are many lines
    // ending in a newline, so only the last line's tokens may still be pending at the end.
    if (is_multiline_document(c) && held_to_finish > max_held_to_finish) {
        report.note(c, std::string(how) + ": " + std::to_string(held_to_finish) +
                           " tokens held back until finish() (at most " +
                           std::to_string(max_held_to_finish) + " expected)");
        ok = false;
    }
    if (!stamps_ok) {
        report.note(c, std::string(how) + ": token time stamps out of order or not a fed time");
        ok = false;
    }
    if (s.tokens_emitted() != got.size()) {
        report.note(c, std::string(how) +
                           ": tokens_emitted() = " + std::to_string(s.tokens_emitted()) +
                           ", callbacks = " + std::to_string(got.size()));
        ok = false;
    }
    if (s.pending_bytes() != 0) {
        report.note(c, std::string(how) + ": pending_bytes() not 0 after finish");
        ok = false;
    }
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    options opt;
    if (!parse_options(argc, argv, opt)) {
        return 2;
    }
    std::vector<parity_case> cases;
    if (!read_cases(opt.expected, cases)) {
        return 1;
    }
    const auto load_start = std::chrono::steady_clock::now();
    const auto loaded = tok::load(opt.spec, tok::load_options{{opt.dir}, true, opt.special});
    const auto& enc = loaded.value;
    if (!enc) {
        std::cerr << "parity: cannot load tokenizer " << opt.spec << " (dir " << opt.dir
                  << "): " << loaded.error
                  << "\n(scripts/fetch-tokenizers.sh fetches the files)\n";
        return 1;
    }
    std::cout << "parity: " << opt.spec << " from " << loaded.source << ", special tokens "
              << loaded.special_mode << "\n";
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

    reporter report(*enc, opt.max_reports);
    std::mt19937_64 rng(opt.seed);
    std::size_t bytes = 0;
    std::size_t tokens = 0;
    std::size_t one_shot_ok = 0;
    std::size_t stream_runs = 0;
    std::size_t stream_ok = 0;
    const auto run_start = std::chrono::steady_clock::now();
    for (const auto& c : cases) {
        bytes += c.text.size();
        tokens += c.ids.size();
        std::vector<tok::token_id> got;
        enc->encode(c.text, got);
        bool ok = report.check(c, "encode", got);
        const std::size_t counted = enc->count(c.text);
        if (counted != c.ids.size()) {
            report.note(c, "count() = " + std::to_string(counted) + ", expected " +
                               std::to_string(c.ids.size()));
            ok = false;
        }
        one_shot_ok += ok ? 1 : 0;
        if (!opt.stream) {
            continue;
        }
        struct chunking {
            std::string how;
            std::vector<std::size_t> sizes;
        };
        std::vector<chunking> chunkings;
        if (c.name.starts_with("sweep/")) {
            // The code-space sweep tests character classes, not stream boundaries: one chunking.
            chunkings.push_back({"stream random 1..64", random_chunks(c.text, rng, 64)});
        } else {
            chunkings.push_back({"stream whole", {c.text.size()}});
            chunkings.push_back({"stream 1-byte", std::vector<std::size_t>(c.text.size(), 1)});
            for (int k = 0; k < 3; ++k) {
                chunkings.push_back(
                    {"stream random 1..64 #" + std::to_string(k), random_chunks(c.text, rng, 64)});
            }
            chunkings.push_back({"stream cut inside UTF-8", utf8_cutting_chunks(c.text)});
        }
        for (const auto& ch : chunkings) {
            ++stream_runs;
            stream_ok += check_stream(*enc, c, ch.how, ch.sizes, report) ? 1 : 0;
        }
    }
    const double run_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();

    std::cout << "parity " << enc->name() << ": " << cases.size() << " cases, " << bytes
              << " bytes, " << tokens << " expected ids; one-shot " << one_shot_ok << "/"
              << cases.size() << " match";
    if (opt.stream) {
        std::cout << ", streaming " << stream_ok << "/" << stream_runs << " chunkings match";
    }
    std::cout << " (load " << load_s << " s, checks " << run_s << " s)\n";
    if (opt.expect_failing_cases >= 0) {
        // Each altered case must fail the one-shot check and every streamed chunking.
        const int min_checks = opt.stream ? 7 : 1;
        bool ok = static_cast<int>(report.failed_checks().size()) == opt.expect_failing_cases;
        for (const auto& [name, n] : report.failed_checks()) {
            std::cout << "negative control: " << name << " failed " << n << " check(s)\n";
            ok = ok && n >= min_checks;
        }
        std::cout << "negative control: " << report.failed_checks().size()
                  << " case(s) failed, expected exactly " << opt.expect_failing_cases
                  << (ok ? " (the checker catches altered ids)" : " -- CHECKER BROKEN") << "\n";
        return ok ? 0 : 1;
    }
    if (report.failures() > 0) {
        std::cout << report.failures() << " failure(s)";
        if (report.failures() > opt.max_reports) {
            std::cout << " (first " << opt.max_reports << " shown; --max-reports N for more)";
        }
        std::cout << "\n";
        return 1;
    }
    return 0;
}
