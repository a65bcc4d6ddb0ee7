// app/tokenize_command: see tokenize_command.hpp.
#include "app/tokenize_command.hpp"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "app/allocator.hpp"
#include "app/flags.hpp"
#include "app/tokenizers.hpp"
#include "tokenizer/tokenizer.hpp"

namespace tokenmeter::app {

namespace {

// "" (the file type's default), "match" or "text", already checked.
config::special_tokens_mode mode_of(const std::string& special) {
    return config::mode_from_word<config::special_tokens_mode>(special).value_or(
        config::special_tokens_mode::file_default);
}

constexpr const char* tokenize_usage =
    R"(usage: tokenmeter tokenize --tokenizer SPEC [--ids] [--tokenizer-dir DIR] [--verbose]
                          [--special-tokens match|text]

Reads text from stdin and prints its token count (with --ids, first a line of the ids, space
separated). SPEC is o200k_base, cl100k_base, a name found in the tokenizer search path
(<dir>/<name>.json, <dir>/<name>.tiktoken, <dir>/<name>/tokenizer.json) or a path to a
Hugging Face tokenizer.json. The search path: DIR, $TOKENMETER_TOKENIZER_DIR,
<exe>/../share/tokenmeter/tokenizers, /usr/local/share/tokenmeter/tokenizers. o200k_base and
cl100k_base are built in and need no file; a file of that name in the search path takes
precedence. --verbose prints to stderr which file (or "embedded") was used, the load time and
the resident memory the tokenizer takes.
Added and special tokens in the text (<|endoftext|>, <|im_start|>, <start_of_turn>): by default
as the file type's reference library does (tokenizer.json: matched as one token each, as Hugging
Face tokenizers does; tiktoken encodings: ordinary text, as encode_ordinary). --special-tokens
text counts a tokenizer.json's added tokens as text; --special-tokens match matches a tiktoken
encoding's special tokens, as tiktoken's encode(text, allowed_special="all") does.
)";

int fail(const std::string& message) {
    std::fprintf(stderr, "tokenmeter tokenize: %s\n", message.c_str());
    return 2;
}

}  // namespace

int tokenize_command(const std::vector<std::string>& args) {
    const parsed_flags flags = parse_flags(args, {{"tokenizer", true},
                                                  {"tokenizer-dir", true},
                                                  {"special-tokens", true},
                                                  {"ids"},
                                                  {"verbose"}});
    if (!flags.ok()) {
        std::fputs(tokenize_usage, stderr);
        return fail(flags.error);
    }
    if (flags.has("help")) {
        std::fputs(tokenize_usage, stdout);
        return 0;
    }
    const std::string spec = flags.value("tokenizer").value_or("");
    const std::string dir = flags.value("tokenizer-dir").value_or("");
    const std::string special = flags.value("special-tokens").value_or("");
    const bool print_ids = flags.has("ids");
    const bool verbose = flags.has("verbose");
    if (flags.has("special-tokens") && special != "match" && special != "text") {
        return fail("--special-tokens is match or text");
    }
    if (spec.empty()) {
        std::fputs(tokenize_usage, stderr);
        return fail("--tokenizer is required");
    }
    std::int64_t resident_before = 0;
    double load_seconds = 0;
    // Loaded as the proxy loads its tokenizers (app.cpp): with the allocator releasing what
    // parsing frees at once, so the resident figure is what the proxy would hold.
    const tokenizer::load_result loaded = [&] {
        const prompt_release release;
        resident_before = settled_resident_bytes();
        const double load_start = seconds_now();
        auto result =
            tokenizer::load(spec, tokenizer::load_options{tokenizer_search_dirs(dir), true,
                                                          special_tokens_mode(mode_of(special))});
        load_seconds = seconds_now() - load_start;
        return result;
    }();
    if (!loaded.value) {
        return fail(loaded.error);
    }
    for (const auto& warning : loaded.warnings) {
        std::fprintf(stderr, "tokenmeter tokenize: warning: %s\n", warning.c_str());
    }
    if (verbose) {
        // What the proxy's start-up log reports per tokenizer, measured the same way.
        const double mib = 1024.0 * 1024.0;
        std::fprintf(stderr,
                     "tokenmeter tokenize: %s from %s, special tokens %s, loaded in %.1f ms, "
                     "resident +%.1f MiB (process %.1f MiB, peak %.1f MiB)\n",
                     loaded.value->name().c_str(), loaded.source.c_str(),
                     loaded.special_mode.c_str(), load_seconds * 1e3,
                     static_cast<double>(settled_resident_bytes() - resident_before) / mib,
                     static_cast<double>(settled_resident_bytes()) / mib,
                     static_cast<double>(peak_resident_bytes()) / mib);
    }
    const auto& enc = loaded.value;
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::vector<tokenizer::token_id> ids;
    enc->encode(text, ids);
    if (print_ids) {
        std::string line;
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (i > 0) {
                line.push_back(' ');
            }
            line += std::to_string(ids[i]);
        }
        std::printf("%s\n", line.c_str());
    }
    std::printf("%zu\n", ids.size());
    return 0;
}

}  // namespace tokenmeter::app
