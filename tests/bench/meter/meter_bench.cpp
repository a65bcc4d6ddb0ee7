// tokenmeter-meter-bench: the CPU the meter spends per forwarded chunk, with and without
// re-tokenization, measured side by side in one run. Feeds a realistic stream (chat chunks of
// one word each, cut from the parity corpus) through meter::exchange exactly as the relay does
// (one read per chunk), with: no tokenizer; the reference tokenizer (o200k_base); a native
// tokenizer (Llama 3) plus the reference. Thread CPU time, median over interleaved rounds.
//
//   tokenmeter-meter-bench --tokenizer-dir .cache/tokenizers --corpus tests/parity/corpus
//       [--rounds 7] [--repeat 4]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "meter/exchange.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using namespace tokenmeter;

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Cuts text into word-sized chunks (a chunk starts at each space), the way servers stream it,
// and wraps each in an OpenAI chat chunk event.
std::vector<std::string> make_events(const std::string& text) {
    std::vector<std::string> events;
    std::size_t start = 0;
    for (std::size_t i = 1; i <= text.size(); ++i) {
        if (i == text.size() || (text[i] == ' ' && text[i - 1] != ' ')) {
            nlohmann::json chunk = {
                {"id", "chatcmpl-bench"},
                {"object", "chat.completion.chunk"},
                {"created", 1700000000},
                {"model", "bench-model"},
                {"choices",
                 {{{"index", 0},
                   {"delta", {{"content", text.substr(start, i - start)}}},
                   {"finish_reason", nullptr}}}}};
            events.push_back("data: " + chunk.dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace) +
                             "\n\n");
            start = i;
        }
    }
    events.push_back("data: [DONE]\n\n");
    return events;
}

struct variant {
    std::string name;
    meter::encoders encoders;
};

double run_once(const variant& v, const std::vector<std::string>& events, int repeat,
                const std::vector<double>& bounds, std::uint64_t& tokens) {
    protocol::request_info request;
    request.model = "bench-model";
    request.stream = true;
    request.body_parsed = true;
    const double start = thread_cpu_seconds();
    core::time_point t{};
    for (int r = 0; r < repeat; ++r) {
        meter::exchange ex(protocol::api_kind::openai_chat_completions, request, t, &bounds, {});
        if (v.encoders.any()) {
            ex.use_encoders(v.encoders, meter::input_counting::never, {});
        }
        ex.on_response_head(200, "text/event-stream", t);
        for (const std::string& event : events) {
            t += std::chrono::microseconds(10);
            ex.on_body(event, t);
        }
        auto summary = ex.finish(meter::end_reason::upstream_complete, t);
        tokens += summary.normalized_output_tokens.value_or(summary.counted_output_tokens);
    }
    return thread_cpu_seconds() - start;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = ".cache/tokenizers";
    std::string corpus = "tests/parity/corpus";
    int rounds = 7;
    int repeat = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (flag == "--tokenizer-dir") {
            dir = argv[i + 1];
        } else if (flag == "--corpus") {
            corpus = argv[i + 1];
        } else if (flag == "--rounds") {
            rounds = std::max(1, std::atoi(argv[i + 1]));
        } else if (flag == "--repeat") {
            repeat = std::max(1, std::atoi(argv[i + 1]));
        } else {
            std::cerr << "usage: tokenmeter-meter-bench [--tokenizer-dir DIR] [--corpus DIR] "
                         "[--rounds N] [--repeat N]\n";
            return 2;
        }
    }
    std::string text;
    for (const char* name : {"prose_en.txt", "chat_answers.txt", "code_python.txt",
                             "tech_doc.txt", "scripts_world.txt"}) {
        std::string part = read_file(std::filesystem::path(corpus) / name);
        if (part.empty()) {
            std::cerr << "tokenmeter-meter-bench: cannot read " << corpus << "/" << name << "\n";
            return 2;
        }
        text += part;
    }
    std::string error;
    auto o200k = tokenizer::load("o200k_base", dir, error);
    auto llama3 = o200k ? tokenizer::load(dir + "/llama3/tokenizer.json", dir, error) : nullptr;
    if (!o200k || !llama3) {
        std::cerr << "tokenmeter-meter-bench: " << error
                  << " (run scripts/fetch-tokenizers.sh)\n";
        return 2;
    }
    const std::vector<std::string> events = make_events(text);
    const std::vector<double> bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1};
    const std::vector<variant> variants = {
        {"meter, no tokenizer", {}},
        {"+ reference (o200k_base)", {nullptr, o200k.get()}},
        {"+ native (Llama 3) + reference", {llama3.get(), o200k.get()}},
    };
    std::vector<std::vector<double>> ns_per_chunk(variants.size());
    const double chunks = static_cast<double>(events.size()) * repeat;
    for (int r = 0; r < rounds; ++r) {
        for (std::size_t v = 0; v < variants.size(); ++v) {
            std::uint64_t tokens = 0;
            double seconds = run_once(variants[v], events, repeat, bounds, tokens);
            ns_per_chunk[v].push_back(seconds * 1e9 / chunks);
        }
    }
    std::printf("%zu chunks per stream (%zu bytes of text), %d streams per round, %d rounds\n",
                events.size(), text.size(), repeat, rounds);
    std::printf("%-34s %14s %14s\n", "variant", "ns/chunk p50", "added ns/chunk");
    double base = 0;
    for (std::size_t v = 0; v < variants.size(); ++v) {
        auto& samples = ns_per_chunk[v];
        std::sort(samples.begin(), samples.end());
        double median = samples[samples.size() / 2];
        if (v == 0) {
            base = median;
        }
        std::printf("%-34s %14.0f %14.0f\n", variants[v].name.c_str(), median, median - base);
    }
    return 0;
}
