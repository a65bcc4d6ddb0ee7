#include "protocol/json_limits.hpp"

#include <atomic>

namespace tokenmeter::protocol {
namespace {

// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): a start-up setting
std::atomic<std::size_t> depth_limit{default_max_json_depth};

}  // namespace

void set_max_json_depth(std::size_t depth) noexcept {
    depth_limit.store(depth == 0 ? default_max_json_depth : depth, std::memory_order_relaxed);
}

std::size_t max_json_depth() noexcept {
    return depth_limit.load(std::memory_order_relaxed);
}

bool json_depth_within(std::string_view text, std::size_t max_depth) noexcept {
    std::size_t depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        switch (c) {
            case '"':
                in_string = true;
                break;
            case '[':
            case '{':
                if (++depth > max_depth) {
                    return false;
                }
                break;
            case ']':
            case '}':
                if (depth > 0) {
                    --depth;
                }
                break;
            default:
                break;
        }
    }
    return true;
}

}  // namespace tokenmeter::protocol
