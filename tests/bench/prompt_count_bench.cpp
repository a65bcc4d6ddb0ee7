// tokenmeter-prompt-count-bench: the CPU one prompt's count costs, by the prompt's shape
// (runs of spaces, newlines, punctuation, digits, one letter, CJK without spaces, ordinary words,
// a mix), with the embedded o200k_base and cl100k_base, as the meter counts it
// (encoder::count_bounded with limits.max_prompt_count_bytes) and, with --exact, uncapped.
// Usage: tokenmeter-prompt-count-bench [--mib N] [--budget-kib N] [--exact]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace {

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string repeat(const std::string& unit, std::size_t bytes) {
    std::string out;
    out.reserve(bytes + unit.size());
    while (out.size() < bytes) {
        out += unit;
    }
    return out;
}

std::string cjk(std::size_t bytes) {
    std::string out;
    out.reserve(bytes + 3);
    for (std::uint32_t i = 0; out.size() < bytes; ++i) {
        const std::uint32_t c = 0x4e00 + (i * 7919) % 3000;
        out += static_cast<char>(0xe0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (c & 0x3f));
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t mib = 8;
    std::size_t budget_kib = 1024;
    bool exact = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
            mib = std::strtoull(argv[++i], nullptr, 10);
        } else if (std::strcmp(argv[i], "--budget-kib") == 0 && i + 1 < argc) {
            budget_kib = std::strtoull(argv[++i], nullptr, 10);
        } else if (std::strcmp(argv[i], "--exact") == 0) {
            exact = true;
        } else {
            std::fprintf(stderr, "usage: %s [--mib N] [--budget-kib N] [--exact]\n", argv[0]);
            return 2;
        }
    }
    const std::size_t bytes = mib << 20;
    const std::vector<std::pair<const char*, std::string>> shapes{
        {"spaces", repeat(" ", bytes)},
        {"newlines", repeat("\n", bytes)},
        {"punctuation", repeat("!", bytes)},
        {"digits", repeat("7", bytes)},
        {"one letter", repeat("a", bytes)},
        {"cjk, no spaces", cjk(bytes)},
        {"words", repeat("hello world the quick brown fox ", bytes)},
        {"mixed", repeat("  \n\n!!??..,,1234567890abcXYZ\xe4\xb8\xad\xe6\x96\x87  \t", bytes)},
    };
    std::printf("%-16s %-12s %10s %12s %-9s %9s\n", "shape", "tokenizer", "MiB", "tokens", "count",
                "cpu_s");
    for (const char* spec : {"o200k_base", "cl100k_base"}) {
        auto loaded = tokenmeter::tokenizer::load(spec, tokenmeter::tokenizer::load_options{});
        if (!loaded.value) {
            std::fprintf(stderr, "%s: %s\n", spec, loaded.error.c_str());
            return 1;
        }
        const auto& enc = *loaded.value;
        for (const auto& [shape, text] : shapes) {
            double start = thread_cpu_seconds();
            const auto n = enc.count_bounded(text, budget_kib << 10);
            double cpu = thread_cpu_seconds() - start;
            std::printf("%-16s %-12s %10zu %12llu %-9s %9.3f\n", shape, spec, mib,
                        static_cast<unsigned long long>(n.tokens), n.exact ? "exact" : "estimated",
                        cpu);
            if (exact) {
                start = thread_cpu_seconds();
                const std::size_t full = enc.count(text);
                cpu = thread_cpu_seconds() - start;
                std::printf("%-16s %-12s %10zu %12zu %-9s %9.3f\n", shape, spec, mib, full,
                            "uncapped", cpu);
            }
            std::fflush(stdout);
        }
    }
    return 0;
}
