// Differential fuzz target for protocol::walk_json: the hand-written scanner must report exactly
// what the nlohmann-based walker it replaced reported (tests/unit/protocol/json_walk_reference),
// call by call with paths and values, and return the same result, for any bytes; once with the
// default depth limit and once with a limit of 4, so that the limit is reached often.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "json_walk_reference.hpp"
#include "json_walk_trace.hpp"
#include "protocol/json_limits.hpp"

namespace {

using namespace tokenmeter::protocol;

json_path scanner_path;    // reused across inputs, as the adapters reuse the thread's
json_path reference_path;

void compare(std::string_view text) {
    json_trace expected;
    json_trace actual;
    const walk_result expected_result = reference::walk_json(text, expected, reference_path);
    const walk_result actual_result = walk_json(text, actual, scanner_path);
    if (expected_result != actual_result || expected.events != actual.events) {
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    set_max_json_depth(default_max_json_depth);
    compare(text);
    set_max_json_depth(4);
    compare(text);
    set_max_json_depth(default_max_json_depth);
    return 0;
}
