#include "app/reload_signal.hpp"

#include <spdlog/spdlog.h>

#include <csignal>
#include <string>

#include "app/module_options.hpp"
#include "config/reload.hpp"
#include "metrics/process.hpp"
#include "metrics/registry.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::app {
namespace {

std::string joined(const std::vector<std::string>& keys) {
    std::string out;
    for (const auto& key : keys) {
        out += out.empty() ? "" : ", ";
        out += key;
    }
    return out;
}

}  // namespace

reload_signal::reload_signal(asio::io_context& ioc, config::settings running, reloader reload,
                             targets to_update)
    : signals_(ioc, SIGHUP),
      running_(std::move(running)),
      reload_(std::move(reload)),
      targets_(std::move(to_update)) {}

void reload_signal::start() {
    wait();
}

void reload_signal::stop() {
    error_code ignored;
    signals_.cancel(ignored);
}

void reload_signal::wait() {
    signals_.async_wait([this](error_code ec, int) {
        if (ec) {
            return;
        }
        try {
            on_signal();
        } catch (const std::exception& e) {
            spdlog::error("SIGHUP: reload failed, the running configuration stays: {}", e.what());
        }
        wait();
    });
}

void reload_signal::on_signal() {
    if (targets_.on_hangup) {
        targets_.on_hangup();
    }
    if (!reload_) {
        spdlog::info("SIGHUP: started without --config, nothing to reload");
        return;
    }
    config::load_result loaded = reload_();
    if (!loaded.ok()) {
        for (const auto& error : loaded.errors) {
            spdlog::error("SIGHUP: {}", config::to_string(error));
        }
        spdlog::error("SIGHUP: the new configuration has {} error(s); the running one stays",
                      loaded.errors.size());
        if (targets_.counters != nullptr) {
            targets_.counters->config_reload(false);
        }
        return;
    }
    const config::reload_diff diff = config::diff_for_reload(running_, loaded.value);
    running_ = config::apply_reloadable(running_, loaded.value);
    const std::string level(config::to_string(running_.log.level));
    if (level != spdlog::level::to_string_view(spdlog::get_level())) {
        spdlog::set_level(spdlog::level::from_str(level));
    }
    if (targets_.tenants != nullptr) {
        targets_.tenants->set_names(running_.tenants.api_key_names);
    }
    if (targets_.registry != nullptr) {
        targets_.registry->set_slo(slo_options(running_));
    }
    if (targets_.counters != nullptr) {
        targets_.counters->config_reload(true);
        targets_.counters->set_config_loaded(
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count());
    }
    if (diff.applied.empty() && diff.needs_restart.empty()) {
        spdlog::info("SIGHUP: configuration reloaded, nothing changed");
        return;
    }
    if (!diff.applied.empty()) {
        spdlog::info("SIGHUP: configuration reloaded; applied: {}", joined(diff.applied));
    }
    if (!diff.needs_restart.empty()) {
        spdlog::warn("SIGHUP: changed but kept as running until a restart: {}",
                     joined(diff.needs_restart));
    }
}

}  // namespace tokenmeter::app
