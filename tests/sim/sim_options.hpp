#pragma once

// Settings of the simulator: the command line (server-wide defaults) and the
// per-request x-sim-* header overrides that let one process serve many test cases.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tokenmeter::sim {

enum class usage_mode {
    when_requested,  // "auto": only if stream_options.include_usage is true, as OpenAI does
    always,
    never,
};

struct server_options {
    std::string listen_host = "127.0.0.1";
    std::uint16_t listen_port = 0;
    std::chrono::milliseconds time_to_first_token{50};
    std::chrono::milliseconds inter_token_latency{10};
    std::uint32_t tokens_per_chunk = 1;
    std::uint32_t output_tokens = 32;
    usage_mode usage = usage_mode::when_requested;
    unsigned threads = 1;
    std::string port_file;
    std::uint64_t seed = 0;
};

struct command_line_result {
    std::optional<server_options> options;  // empty when error or help is set
    std::string error;
    bool help = false;
};

command_line_result parse_command_line(std::span<char* const> args);
std::string_view usage_text();

// Failure injection requested with x-sim-fail; several may be combined with commas.
struct failure_plan {
    std::optional<std::uint32_t> close_after_chunks;
    std::optional<unsigned> status;
    std::chrono::milliseconds slow_headers{0};
    bool garbage = false;
    bool no_sse = false;
    bool reset = false;
};

// Everything that shapes one response, after defaults and overrides are merged.
struct request_settings {
    std::chrono::milliseconds time_to_first_token{};
    std::chrono::milliseconds inter_token_latency{};
    std::uint32_t tokens_per_chunk = 1;
    std::uint32_t output_tokens = 0;
    usage_mode usage = usage_mode::when_requested;
    std::size_t pad_bytes = 0;
    std::uint64_t seed = 0;
    std::uint32_t reasoning_tokens = 0;
    bool tool_call = false;
    bool continuous_usage = false;
    bool stamp = false;
    failure_plan failure;
};

request_settings default_settings(const server_options& options);

// name must be lower case. Returns an error message for a bad value or an unknown
// x-sim-* header: a typo in a test should fail loudly, not silently use defaults.
std::optional<std::string> apply_request_header(request_settings& settings, std::string_view name,
                                                std::string_view value);

std::optional<std::string> parse_failure_plan(std::string_view value, failure_plan& out);

// Upper bounds that keep a mistyped header from allocating the machine away.
inline constexpr std::uint32_t max_output_tokens = 100'000'000;
inline constexpr std::size_t max_pad_bytes = 16 * 1024 * 1024;
inline constexpr std::int64_t max_delay_ms = 3'600'000;

}  // namespace tokenmeter::sim
