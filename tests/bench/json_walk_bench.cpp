// tokenmeter-json-walk-bench: protocol::walk_json per chunk, the hand-written scanner against the
// nlohmann-based reference walker, side by side in one run. Walks every JSON data
// line of the recorded fixtures and a typical OpenAI chat chunk; thread CPU time, median of
// interleaved rounds.
//
//   tokenmeter-json-walk-bench --fixtures tests/fixtures [--rounds 9] [--repeat 2000]
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "json_walk_reference.hpp"
#include "protocol/json_walk.hpp"

namespace {

using namespace tokenmeter::protocol;

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Looks at what an adapter looks at: a few paths, every string's length.
class adapter_like final : public json_visitor {
  public:
    std::uint64_t checksum = 0;
    void on_string(const json_path& path, std::string_view value) override {
        checksum += value.size() + (path.is_from(1, {"[]", "delta", "content"}) ? 1 : 0);
    }
    void on_count(const json_path& path, std::uint64_t value) override {
        checksum += path.size() == 2 && path.back() == "completion_tokens" ? value : 1;
    }
};

std::vector<std::string> chunks_from(const std::filesystem::path& fixtures) {
    std::vector<std::string> chunks;
    for (const char* dir : {"dialects", "openai", "sse"}) {
        for (const auto& entry : std::filesystem::directory_iterator(fixtures / dir)) {
            std::ifstream in(entry.path(), std::ios::binary);
            std::string line;
            while (std::getline(in, line)) {
                if (line.rfind("data: {", 0) == 0 || line.rfind("{", 0) == 0) {
                    chunks.push_back(line.substr(line[0] == 'd' ? 6 : 0));
                }
            }
        }
    }
    return chunks;
}

template <typename Walk>
double ns_per_chunk(Walk walk, const std::vector<std::string>& chunks, int repeat,
                    std::uint64_t& checksum) {
    adapter_like visitor;
    json_path path;
    std::size_t invalid = 0;
    const double start = thread_cpu_seconds();
    for (int r = 0; r < repeat; ++r) {
        for (const std::string& chunk : chunks) {
            invalid += walk(chunk, visitor, path) == walk_result::ok ? 0 : 1;
        }
    }
    const double seconds = thread_cpu_seconds() - start;
    checksum += visitor.checksum + invalid;
    return seconds * 1e9 / (static_cast<double>(repeat) * static_cast<double>(chunks.size()));
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::filesystem::path fixtures = "tests/fixtures";
    int rounds = 9;
    int repeat = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--fixtures") {
            fixtures = argv[i + 1];
        } else if (flag == "--rounds") {
            rounds = std::max(1, std::atoi(argv[i + 1]));
        } else if (flag == "--repeat") {
            repeat = std::max(1, std::atoi(argv[i + 1]));
        } else {
            std::cerr << "usage: tokenmeter-json-walk-bench [--fixtures DIR] [--rounds N] "
                         "[--repeat N]\n";
            return 2;
        }
    }
    const std::vector<std::string> fixture_chunks = chunks_from(fixtures);
    if (fixture_chunks.empty()) {
        std::cerr << "tokenmeter-json-walk-bench: no chunks under " << fixtures << "\n";
        return 2;
    }
    const std::vector<std::string> openai_chunk = {
        R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}]})"};
    struct corpus {
        const char* name;
        const std::vector<std::string>* chunks;
        int repeat;
    };
    std::size_t fixture_bytes = 0;
    for (const std::string& chunk : fixture_chunks) {
        fixture_bytes += chunk.size();
    }
    const corpus corpora[] = {
        {"openai chat chunk (191 B)", &openai_chunk, repeat * 100},
        {"fixture chunks", &fixture_chunks, repeat},
    };
    std::printf("fixture chunks: %zu, mean %zu bytes; %d interleaved rounds\n",
                fixture_chunks.size(), fixture_bytes / fixture_chunks.size(), rounds);
    std::printf("%-28s %14s %14s %8s\n", "corpus", "nlohmann ns", "scanner ns", "speedup");
    std::uint64_t checksum = 0;
    for (const corpus& c : corpora) {
        std::vector<double> before;
        std::vector<double> after;
        for (int r = 0; r < rounds; ++r) {
            before.push_back(ns_per_chunk(reference::walk_json, *c.chunks, c.repeat, checksum));
            after.push_back(ns_per_chunk(walk_json, *c.chunks, c.repeat, checksum));
        }
        const double b = median(before);
        const double a = median(after);
        std::printf("%-28s %14.1f %14.1f %7.2fx\n", c.name, b, a, b / a);
    }
    std::printf("(checksum %llu)\n", static_cast<unsigned long long>(checksum));
    return 0;
}
