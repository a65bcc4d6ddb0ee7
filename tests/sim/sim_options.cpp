#include "sim_options.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <thread>

namespace tokenmeter::sim {
namespace {

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
        text.remove_suffix(1);
    }
    return text;
}

template <typename Unsigned>
std::optional<Unsigned> parse_unsigned(std::string_view text, Unsigned max_value) {
    text = trim(text);
    std::uint64_t value = 0;
    const auto* first = text.data();
    const auto* last = text.data() + text.size();
    auto [end, ec] = std::from_chars(first, last, value);
    if (text.empty() || ec != std::errc{} || end != last || value > max_value) {
        return std::nullopt;
    }
    return static_cast<Unsigned>(value);
}

std::optional<std::chrono::milliseconds> parse_delay(std::string_view text) {
    auto value = parse_unsigned<std::uint64_t>(text, static_cast<std::uint64_t>(max_delay_ms));
    if (!value) {
        return std::nullopt;
    }
    return std::chrono::milliseconds{static_cast<std::int64_t>(*value)};
}

std::optional<usage_mode> parse_usage_mode(std::string_view text) {
    text = trim(text);
    if (text == "auto") {
        return usage_mode::when_requested;
    }
    if (text == "always") {
        return usage_mode::always;
    }
    if (text == "never") {
        return usage_mode::never;
    }
    return std::nullopt;
}

std::optional<bool> parse_flag(std::string_view text) {
    text = trim(text);
    if (text == "1" || text == "true" || text == "yes" || text == "on") {
        return true;
    }
    if (text == "0" || text == "false" || text == "no" || text == "off" || text.empty()) {
        return false;
    }
    return std::nullopt;
}

std::string bad_value(std::string_view name, std::string_view value) {
    return std::string{name} + ": invalid value '" + std::string{value} + "'";
}

bool split_host_port(std::string_view text, std::string& host, std::uint16_t& port) {
    std::string_view host_part;
    std::string_view port_part;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            return false;
        }
        host_part = text.substr(1, close - 1);
        port_part = text.substr(close + 2);
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos) {
            return false;
        }
        host_part = text.substr(0, colon);
        port_part = text.substr(colon + 1);
    }
    auto parsed = parse_unsigned<std::uint16_t>(port_part, 65535);
    if (host_part.empty() || !parsed) {
        return false;
    }
    host = host_part == "localhost" ? std::string{"127.0.0.1"} : std::string{host_part};
    port = *parsed;
    return true;
}

}  // namespace

std::string_view usage_text() {
    return "usage: tokenmeter-sim --listen HOST:PORT [--ttft-ms N] [--itl-ms N]\n"
           "                      [--tokens-per-chunk N] [--output-tokens N]\n"
           "                      [--usage auto|always|never] [--threads N]\n"
           "                      [--port-file PATH] [--seed N]\n"
           "A deterministic OpenAI-compatible model server for tests; see tests/sim/README.md.\n";
}

command_line_result parse_command_line(std::span<char* const> args) {
    command_line_result result;
    server_options options;
    for (std::size_t i = 1; i < args.size(); ++i) {
        std::string_view arg = args[i];
        std::string_view value;
        bool has_inline_value = false;
        if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline_value = true;
        }
        if (arg == "--help" || arg == "-h") {
            result.help = true;
            return result;
        }
        if (!has_inline_value) {
            if (i + 1 >= args.size()) {
                result.error = std::string{arg} + " needs a value (or unknown option)";
                return result;
            }
            value = args[++i];
        }
        bool ok = true;
        if (arg == "--listen") {
            ok = split_host_port(value, options.listen_host, options.listen_port);
        } else if (arg == "--ttft-ms") {
            auto parsed = parse_delay(value);
            ok = parsed.has_value();
            options.time_to_first_token = parsed.value_or(options.time_to_first_token);
        } else if (arg == "--itl-ms") {
            auto parsed = parse_delay(value);
            ok = parsed.has_value();
            options.inter_token_latency = parsed.value_or(options.inter_token_latency);
        } else if (arg == "--tokens-per-chunk") {
            auto parsed = parse_unsigned<std::uint32_t>(value, max_output_tokens);
            ok = parsed.has_value() && *parsed > 0;
            options.tokens_per_chunk = ok ? *parsed : options.tokens_per_chunk;
        } else if (arg == "--output-tokens") {
            auto parsed = parse_unsigned<std::uint32_t>(value, max_output_tokens);
            ok = parsed.has_value();
            options.output_tokens = parsed.value_or(options.output_tokens);
        } else if (arg == "--usage") {
            auto parsed = parse_usage_mode(value);
            ok = parsed.has_value();
            options.usage = parsed.value_or(options.usage);
        } else if (arg == "--threads") {
            auto parsed = parse_unsigned<unsigned>(value, 1024);
            ok = parsed.has_value();
            if (ok) {
                // 0 means one per core, a convenience for benchmark scripts.
                options.threads =
                    *parsed == 0 ? std::max(1U, std::thread::hardware_concurrency()) : *parsed;
            }
        } else if (arg == "--port-file") {
            options.port_file = std::string{value};
            ok = !value.empty();
        } else if (arg == "--seed") {
            auto parsed =
                parse_unsigned<std::uint64_t>(value, std::numeric_limits<std::uint64_t>::max());
            ok = parsed.has_value();
            options.seed = parsed.value_or(options.seed);
        } else {
            result.error = "unknown option " + std::string{arg};
            return result;
        }
        if (!ok) {
            result.error = bad_value(arg, value);
            return result;
        }
    }
    result.options = std::move(options);
    return result;
}

request_settings default_settings(const server_options& options) {
    request_settings settings;
    settings.time_to_first_token = options.time_to_first_token;
    settings.inter_token_latency = options.inter_token_latency;
    settings.tokens_per_chunk = options.tokens_per_chunk;
    settings.output_tokens = options.output_tokens;
    settings.usage = options.usage;
    settings.seed = options.seed;
    return settings;
}

std::optional<std::string> parse_failure_plan(std::string_view value, failure_plan& out) {
    while (!value.empty()) {
        auto comma = value.find(',');
        std::string_view item = trim(value.substr(0, comma));
        value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
        if (item.empty()) {
            continue;
        }
        auto colon = item.find(':');
        std::string_view kind = trim(item.substr(0, colon));
        std::string_view argument =
            colon == std::string_view::npos ? std::string_view{} : trim(item.substr(colon + 1));
        bool ok = true;
        if (kind == "close-after") {
            auto parsed = parse_unsigned<std::uint32_t>(argument, max_output_tokens);
            ok = parsed.has_value();
            out.close_after_chunks = parsed;
        } else if (kind == "status") {
            auto parsed = parse_unsigned<unsigned>(argument, 599);
            ok = parsed.has_value() && *parsed >= 200;
            out.status = parsed;
        } else if (kind == "slow-headers") {
            auto parsed = parse_delay(argument);
            ok = parsed.has_value();
            out.slow_headers = parsed.value_or(std::chrono::milliseconds{0});
        } else if (kind == "garbage" && argument.empty()) {
            out.garbage = true;
        } else if (kind == "no-sse" && argument.empty()) {
            out.no_sse = true;
        } else if (kind == "reset" && argument.empty()) {
            out.reset = true;
        } else {
            ok = false;
        }
        if (!ok) {
            return bad_value("x-sim-fail", item);
        }
    }
    return std::nullopt;
}

std::optional<std::string> apply_request_header(request_settings& settings, std::string_view name,
                                                std::string_view value) {
    bool ok = true;
    if (name == "x-sim-ttft-ms") {
        auto parsed = parse_delay(value);
        ok = parsed.has_value();
        settings.time_to_first_token = parsed.value_or(settings.time_to_first_token);
    } else if (name == "x-sim-itl-ms") {
        auto parsed = parse_delay(value);
        ok = parsed.has_value();
        settings.inter_token_latency = parsed.value_or(settings.inter_token_latency);
    } else if (name == "x-sim-tokens-per-chunk") {
        auto parsed = parse_unsigned<std::uint32_t>(value, max_output_tokens);
        ok = parsed.has_value() && *parsed > 0;
        settings.tokens_per_chunk = ok ? *parsed : settings.tokens_per_chunk;
    } else if (name == "x-sim-output-tokens") {
        auto parsed = parse_unsigned<std::uint32_t>(value, max_output_tokens);
        ok = parsed.has_value();
        settings.output_tokens = parsed.value_or(settings.output_tokens);
    } else if (name == "x-sim-usage") {
        auto parsed = parse_usage_mode(value);
        ok = parsed.has_value();
        settings.usage = parsed.value_or(settings.usage);
    } else if (name == "x-sim-pad-bytes") {
        auto parsed = parse_unsigned<std::size_t>(value, max_pad_bytes);
        ok = parsed.has_value();
        settings.pad_bytes = parsed.value_or(settings.pad_bytes);
    } else if (name == "x-sim-seed") {
        auto parsed =
            parse_unsigned<std::uint64_t>(value, std::numeric_limits<std::uint64_t>::max());
        ok = parsed.has_value();
        settings.seed = parsed.value_or(settings.seed);
    } else if (name == "x-sim-reasoning-tokens") {
        auto parsed = parse_unsigned<std::uint32_t>(value, max_output_tokens);
        ok = parsed.has_value();
        settings.reasoning_tokens = parsed.value_or(settings.reasoning_tokens);
    } else if (name == "x-sim-tool-call") {
        auto parsed = parse_flag(value);
        ok = parsed.has_value();
        settings.tool_call = parsed.value_or(settings.tool_call);
    } else if (name == "x-sim-continuous-usage") {
        auto parsed = parse_flag(value);
        ok = parsed.has_value();
        settings.continuous_usage = parsed.value_or(settings.continuous_usage);
    } else if (name == "x-sim-stamp") {
        auto parsed = parse_flag(value);
        ok = parsed.has_value();
        settings.stamp = parsed.value_or(settings.stamp);
    } else if (name == "x-sim-fail") {
        return parse_failure_plan(value, settings.failure);
    } else {
        return "unknown simulator header " + std::string{name};
    }
    if (!ok) {
        return bad_value(name, value);
    }
    return std::nullopt;
}

}  // namespace tokenmeter::sim
