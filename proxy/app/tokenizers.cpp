#include "app/tokenizers.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "app/allocator.hpp"

namespace tokenmeter::app {

namespace {

constexpr const char* system_tokenizer_dir = "/usr/local/share/tokenmeter/tokenizers";

}  // namespace

std::int64_t settled_resident_bytes() {
    release_free_memory();
    std::ifstream statm("/proc/self/statm");
    std::int64_t size_pages = 0;
    std::int64_t resident_pages = 0;
    if (!(statm >> size_pages >> resident_pages)) {
        return 0;
    }
    return resident_pages * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

std::int64_t peak_resident_bytes() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0) {
            return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024;  // "VmHWM:   1234 kB"
        }
    }
    return 0;
}

double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::vector<std::string> tokenizer_search_dirs(const std::string& configured_dir) {
    std::vector<std::string> dirs;
    auto add = [&dirs](std::string dir) {
        if (dir.empty()) {
            return;
        }
        for (const auto& d : dirs) {
            if (d == dir) {
                return;
            }
        }
        dirs.push_back(std::move(dir));
    };
    add(configured_dir);
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read while loading; nothing sets the environment
    if (const char* env = std::getenv("TOKENMETER_TOKENIZER_DIR"); env != nullptr) {
        add(env);
    }
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec && exe.has_parent_path()) {
        add((exe.parent_path().parent_path() / "share/tokenmeter/tokenizers").lexically_normal());
    }
    add(system_tokenizer_dir);
    return dirs;
}

tokenizer::special_tokens special_tokens_mode(config::special_tokens_mode setting) {
    switch (setting) {
        case config::special_tokens_mode::match:
            return tokenizer::special_tokens::match;
        case config::special_tokens_mode::text:
            return tokenizer::special_tokens::text;
        case config::special_tokens_mode::file_default:
            break;
    }
    return tokenizer::special_tokens::file_default;
}

tokenizer::catalog::load_result load_tokenizers(const config::settings& settings) {
    const config::settings& t = settings;
    tokenizer::catalog_options options;
    options.reference = t.reference_tokenizer;
    options.reference_required = t.reference_explicit;
    options.reference_special = special_tokens_mode(t.reference_special_tokens);
    options.search_dirs = tokenizer_search_dirs(t.tokenizer_dir);
    for (const auto& [model, m] : t.models) {
        options.models.push_back({model, m.tokenizer, special_tokens_mode(m.special_tokens)});
    }
    options.seconds_now = seconds_now;
    options.resident_bytes = settled_resident_bytes;
    return tokenizer::catalog::load(options);
}

std::vector<std::string> describe_tokenizers(const tokenizer::catalog& catalog) {
    std::vector<std::string> lines;
    for (const auto& e : catalog.entries()) {
        std::string line = "tokenizer " + e.role;
        if (!e.model.empty()) {
            line += " for model " + e.model;
        }
        line += ": " + e.name + " (" + e.source + "; special tokens: " + e.special_mode + ")";
        if (e.shared) {
            line += ", shared with an earlier entry (loaded once)";
        } else {
            std::array<char, 96> numbers{};
            std::snprintf(numbers.data(), numbers.size(), ", loaded in %.0f ms, resident +%.1f MiB",
                          e.load_seconds * 1e3,
                          static_cast<double>(e.resident_growth_bytes) / (1024.0 * 1024.0));
            line += numbers.data();
        }
        lines.push_back(std::move(line));
    }
    return lines;
}

}  // namespace tokenmeter::app
