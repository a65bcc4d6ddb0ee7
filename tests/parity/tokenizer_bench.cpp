// tokenizer_bench: single-thread throughput of tokenmeter's tokenizer engine on the parity
// corpus, for comparison with the reference tokenizers (bench.mjs; scripts/bench-tokenizer.sh
// runs both and prints the table). One round encodes every corpus file, `repeat` times, one
// encode() call per file; the result is the median round. A second measurement feeds the same
// text through tokenizer::stream in small deltas, as the meter does with model output; a third
// ("cold") encodes the corpus once with a freshly loaded encoder per round.
//
// Usage: tokenmeter-tokenizer-bench --dir TOKENIZER_DIR --corpus CORPUS_DIR
//          [--tokenizers o200k_base,llama3,...] [--rounds N] [--repeat K] [--delta BYTES]
// Prints one JSON object per tokenizer per line.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

namespace tok = tokenmeter::tokenizer;
using clock_type = std::chrono::steady_clock;

struct options {
    std::string dir;
    std::string corpus;
    std::vector<std::string> tokenizers{"o200k_base", "cl100k_base", "llama3",
                                        "qwen3",      "gemma3",      "llama2"};
    int rounds = 7;
    int repeat = 4;
    std::size_t delta = 24;
};

std::vector<std::string> split_commas(std::string_view s) {
    std::vector<std::string> out;
    while (!s.empty()) {
        const auto comma = s.find(',');
        const auto part = s.substr(0, comma);
        if (!part.empty()) {
            out.emplace_back(part);
        }
        if (comma == std::string_view::npos) {
            break;
        }
        s.remove_prefix(comma + 1);
    }
    return out;
}

bool parse_options(int argc, char** argv, options& opt) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (i + 1 >= argc) {
            std::cerr << "tokenizer-bench: " << arg << " needs a value\n";
            return false;
        }
        const std::string value = argv[++i];
        if (arg == "--dir") {
            opt.dir = value;
        } else if (arg == "--corpus") {
            opt.corpus = value;
        } else if (arg == "--tokenizers") {
            opt.tokenizers = split_commas(value);
        } else if (arg == "--rounds") {
            opt.rounds = std::max(1, std::stoi(value));
        } else if (arg == "--repeat") {
            opt.repeat = std::max(1, std::stoi(value));
        } else if (arg == "--delta") {
            opt.delta = std::max<std::size_t>(1, std::stoul(value));
        } else {
            std::cerr << "tokenizer-bench: unknown argument " << arg << "\n";
            return false;
        }
    }
    if (opt.dir.empty() || opt.corpus.empty()) {
        std::cerr << "usage: tokenmeter-tokenizer-bench --dir TOKENIZER_DIR --corpus CORPUS_DIR "
                     "[--tokenizers a,b] [--rounds N] [--repeat K] [--delta BYTES]\n";
        return false;
    }
    return true;
}

// The corpus files (*.txt), sorted by name: the same documents bench.mjs reads.
std::vector<std::string> read_corpus(const std::string& dir) {
    std::vector<std::filesystem::path> paths;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.is_regular_file() && entry.path().extension() == ".txt") {
            paths.push_back(entry.path());
        }
    }
    std::sort(paths.begin(), paths.end());
    std::vector<std::string> docs;
    for (const auto& p : paths) {
        std::ifstream in(p, std::ios::binary);
        docs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return docs;
}

// CPU time of this process: on a shared machine it is far less disturbed by other processes
// than wall time, and the bench is single-threaded, so it is the time the work took.
double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct timing {
    std::vector<double> wall;
    std::vector<double> cpu;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string spec_for(const std::string& name, const std::string& dir) {
    if (name.size() > 5 && name.ends_with("_base")) {
        return name;
    }
    return dir + "/" + name + "/tokenizer.json";
}

}  // namespace

int main(int argc, char** argv) {
    options opt;
    if (!parse_options(argc, argv, opt)) {
        return 2;
    }
    const auto docs = read_corpus(opt.corpus);
    if (docs.empty()) {
        std::cerr << "tokenizer-bench: no *.txt files in " << opt.corpus << "\n";
        return 1;
    }
    std::size_t corpus_bytes = 0;
    for (const auto& d : docs) {
        corpus_bytes += d.size();
    }
    const std::size_t round_bytes = corpus_bytes * static_cast<std::size_t>(opt.repeat);

    int status = 0;
    for (const auto& name : opt.tokenizers) {
        std::string error;
        const auto load_start = clock_type::now();
        const auto enc = tok::load(spec_for(name, opt.dir), opt.dir, error);
        const double load_s = std::chrono::duration<double>(clock_type::now() - load_start).count();
        if (!enc) {
            std::cerr << "tokenizer-bench: " << name << ": " << error << "\n";
            status = 1;
            continue;
        }
        std::vector<tok::token_id> ids;
        std::size_t round_tokens = 0;
        // One warm-up round (page faults, caches), then the measured ones.
        timing encode_t;
        for (int round = 0; round <= opt.rounds; ++round) {
            round_tokens = 0;
            const auto start = clock_type::now();
            const double cpu_start = cpu_seconds();
            for (int k = 0; k < opt.repeat; ++k) {
                for (const auto& d : docs) {
                    ids.clear();
                    enc->encode(d, ids);
                    round_tokens += ids.size();
                }
            }
            const double s = std::chrono::duration<double>(clock_type::now() - start).count();
            if (round > 0) {
                encode_t.wall.push_back(s);
                encode_t.cpu.push_back(cpu_seconds() - cpu_start);
            }
        }
        timing stream_t;
        std::size_t stream_tokens = 0;
        for (int round = 0; round <= opt.rounds; ++round) {
            stream_tokens = 0;
            const auto start = clock_type::now();
            const double cpu_start = cpu_seconds();
            for (int k = 0; k < opt.repeat; ++k) {
                for (const auto& d : docs) {
                    tok::stream s(*enc);
                    auto count = [&stream_tokens](tok::token_id, tokenmeter::core::time_point) {
                        ++stream_tokens;
                    };
                    const std::string_view text = d;
                    for (std::size_t off = 0; off < text.size(); off += opt.delta) {
                        s.feed(text.substr(off, opt.delta), tokenmeter::core::time_point{}, count);
                    }
                    s.finish(tokenmeter::core::time_point{}, count);
                }
            }
            const double s = std::chrono::duration<double>(clock_type::now() - start).count();
            if (round > 0) {
                stream_t.wall.push_back(s);
                stream_t.cpu.push_back(cpu_seconds() - cpu_start);
            }
        }
        // Cold: a freshly loaded encoder per round (load not timed) and one pass over the
        // corpus, so no memo of earlier calls helps (the engine keeps a per-thread piece cache
        // across calls, keyed by encoder; tiktoken has none). What a worker sees on text it has
        // never seen, the worst case for the comparison.
        timing cold_t;
        for (int round = 0; round < opt.rounds; ++round) {
            std::string cold_error;
            const auto fresh = tok::load(spec_for(name, opt.dir), opt.dir, cold_error);
            if (!fresh) {
                std::cerr << "tokenizer-bench: " << name << ": " << cold_error << "\n";
                return 1;
            }
            const auto start = clock_type::now();
            const double cpu_start = cpu_seconds();
            for (const auto& d : docs) {
                ids.clear();
                fresh->encode(d, ids);
            }
            cold_t.wall.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
            cold_t.cpu.push_back(cpu_seconds() - cpu_start);
        }
        const double enc_med = median(encode_t.wall);
        const double enc_cpu = median(encode_t.cpu);
        const double str_med = median(stream_t.wall);
        const double str_cpu = median(stream_t.cpu);
        const auto mb_s = [round_bytes](double sec) {
            return static_cast<double>(round_bytes) / sec / 1e6;
        };
        std::printf(
            "{\"impl\":\"tokenmeter\",\"tokenizer\":\"%s\",\"bytes\":%zu,\"tokens\":%zu,"
            "\"rounds\":%d,\"median_s\":%.6f,\"mb_s\":%.3f,\"tokens_s\":%.0f,"
            "\"cpu_median_s\":%.6f,\"cpu_mb_s\":%.3f,\"cpu_tokens_s\":%.0f,"
            "\"stream_delta\":%zu,\"stream_median_s\":%.6f,\"stream_mb_s\":%.3f,"
            "\"stream_cpu_mb_s\":%.3f,\"stream_tokens\":%zu,\"cold_cpu_mb_s\":%.3f,"
            "\"load_s\":%.3f}\n",
            name.c_str(), round_bytes, round_tokens, opt.rounds, enc_med, mb_s(enc_med),
            static_cast<double>(round_tokens) / enc_med, enc_cpu, mb_s(enc_cpu),
            static_cast<double>(round_tokens) / enc_cpu, opt.delta, str_med, mb_s(str_med),
            mb_s(str_cpu), stream_tokens,
            static_cast<double>(corpus_bytes) / median(cold_t.cpu) / 1e6, load_s);
        std::fflush(stdout);
    }
    return status;
}
