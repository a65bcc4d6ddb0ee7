#include "app/start_up.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "app/allocator.hpp"
#include "app/log_format.hpp"
#include "app/module_options.hpp"
#include "app/tokenizers.hpp"
#include "core/secret_file.hpp"
#include "net/listener.hpp"
#include "relay/headers.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::app {
namespace {

// Descriptors kept back from client connections (two each: client and upstream) for the admin
// listener, the usage spool, tokenizer files and the readiness probe.
constexpr std::uint64_t reserved_descriptors = 64;

std::int64_t client_connection_budget(std::uint64_t open_files_limit) {
    if (open_files_limit <= 2 * reserved_descriptors) {
        return 8;
    }
    const std::uint64_t budget = (open_files_limit - reserved_descriptors) / 2;
    return static_cast<std::int64_t>(std::min<std::uint64_t>(budget, 1u << 30));
}

std::string describe(const tcp::endpoint& endpoint) {
    std::ostringstream out;
    out << endpoint;
    return out.str();
}

}  // namespace

start_up_error::start_up_error(const std::string& line) : std::runtime_error(line), lines_{line} {}

start_up_error::start_up_error(std::vector<std::string> lines)
    : std::runtime_error(lines.empty() ? std::string() : lines.front()), lines_(std::move(lines)) {}

int start_up_error::report() const noexcept {
    for (const auto& line : lines_) {
        spdlog::critical("{}", line);
        std::fprintf(stderr, "tokenmeter: %s\n", line.c_str());
    }
    return 1;
}

void configure_logging(const config::log_settings& log) {
    auto logger = spdlog::stderr_color_mt("tokenmeter");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(std::string(config::to_string(log.level))));
    spdlog::set_formatter(make_log_formatter(log.format));
}

std::int64_t open_files_budget() {
    const auto [before, after] = net::raise_open_files_limit();
    const std::int64_t budget = client_connection_budget(after);
    spdlog::info("open-files limit: {} (soft limit was {}); at most {} client connections at once",
                 after, before, budget);
    return budget;
}

tcp::endpoint resolve_listen(asio::io_context& ioc, const config::endpoint& endpoint,
                             const char* what) {
    tcp::resolver resolver(ioc);
    error_code ec;
    auto results =
        resolver.resolve(endpoint.host, std::to_string(endpoint.port), tcp::resolver::passive, ec);
    if (ec || results.empty()) {
        throw std::runtime_error(std::string("cannot resolve the ") + what + " address " +
                                 endpoint.host + ":" + std::to_string(endpoint.port) + ": " +
                                 (ec ? ec.message() : std::string("no address")));
    }
    return results.begin()->endpoint();
}

std::shared_ptr<const tokenizer::catalog> load_tokenizers_or_explain(
    const config::settings& settings) {
    auto loaded = load_tokenizers(settings);
    for (const auto& warning : loaded.warnings) {
        spdlog::warn("{}", warning);
    }
    if (!loaded.value) {
        std::vector<std::string> lines;
        for (const auto& e : loaded.errors) {
            lines.push_back(e.key + ": " + e.message);
        }
        throw start_up_error(std::move(lines));
    }
    for (const auto& line : describe_tokenizers(*loaded.value)) {
        spdlog::info("{}", line);
    }
    return std::move(loaded.value);
}

std::string configured_secret(const std::string& env_key, const std::string& env_name,
                              const std::string& file_key, const std::string& file_path) {
    if (!env_name.empty()) {
        // At start-up and on reload, on the main thread: nothing sets the environment.
        const char* value = std::getenv(env_name.c_str());  // NOLINT(concurrency-mt-unsafe)
        if (value == nullptr || *value == '\0') {
            throw start_up_error(env_key + ": environment variable " + env_name +
                                 " is not set or empty");
        }
        return value;
    }
    if (!file_path.empty()) {
        std::string why;
        auto secret = core::read_secret_file(file_path, why);
        if (!secret) {
            throw start_up_error(file_key + ": " + why);
        }
        return std::move(*secret);
    }
    return {};
}

std::string tenant_secret_or_throw(const usage::tenant_options& options) {
    std::string error;
    std::string secret = usage::load_tenant_secret(options, error);
    if (!error.empty()) {
        throw start_up_error(error);
    }
    return secret;
}

observe::metering_options metering_options_from(const config::settings& settings) {
    observe::metering_options options;
    options.exchange_limits.max_sse_event_bytes = settings.limits.max_sse_event_bytes;
    options.exchange_limits.max_buffered_response_bytes =
        settings.limits.max_buffered_response_bytes;
    options.exchange_limits.max_prompt_count_bytes = settings.limits.max_prompt_count_bytes;
    options.input_counting = input_counting(settings);
    options.upstream =
        relay::upstream_host_header({settings.upstream.scheme, settings.upstream.host,
                                     settings.upstream.port, settings.upstream.base_path});
    options.hold_until_durable = settings.usage.hold_until_durable;
    options.checkpoint_interval = settings.usage.checkpoint_interval;
    options.billing.bill_failed_input = settings.billing.bill_failed_input;
    options.default_output_reservation = settings.tenants.default_output_reservation;
    return options;
}

void announce(const config::settings& settings, const tcp::endpoint& proxy,
              const tcp::endpoint& admin, const thread_choice& threads) {
    const auto listen_text = describe(proxy);
    const auto admin_text = describe(admin);
    const std::string upstream_text =
        settings.upstream.scheme + "://" +
        relay::upstream_host_header({settings.upstream.scheme, settings.upstream.host,
                                     settings.upstream.port, settings.upstream.base_path}) +
        settings.upstream.base_path;
    std::printf("tokenmeter listening: proxy=%s admin=%s upstream=%s\n", listen_text.c_str(),
                admin_text.c_str(), upstream_text.c_str());
    std::fflush(stdout);
    spdlog::info(
        "proxy on {}, admin on {} (/metrics /healthz /readyz{}), upstream {}, {} worker "
        "thread(s) ({}), {}",
        listen_text, admin_text, settings.metrics.status_page ? ", status page / /status.json" : "",
        upstream_text, threads.threads, threads.reason, allocator_name());
}

}  // namespace tokenmeter::app
