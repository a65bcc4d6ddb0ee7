// app/module_options: config translated into each module's own options, so that no module below
// app/ includes config/ (the pattern of tokenizer/catalog and app/tokenizers). Also the config
// errors only a module can find, reported with the config's dotted keys.
#pragma once

#include <optional>
#include <vector>

#include "config/config.hpp"
#include "meter/exchange.hpp"
#include "metrics/billing.hpp"
#include "metrics/registry.hpp"
#include "metrics/slo.hpp"
#include "metrics/status_board.hpp"
#include "observe/task_meter.hpp"
#include "usage/price.hpp"
#include "usage/tenant.hpp"
#include "usage/throughput.hpp"

namespace tokenmeter::app {

// metrics: and its default bucket lists for the lists left out.
metrics::registry_options registry_options(const config::settings& s);
// slo:, each entry's preset resolved, explicit targets winning over the preset's.
metrics::slo_options slo_options(const config::settings& s);
metrics::billing_options billing_options(const config::settings& s);
// The status page's options and its config summary: only settings that are safe to show (no
// API key, HMAC secret, sink token or Redis URL, which may hold a password).
metrics::status_options status_options(const config::settings& s);
usage::tenant_options tenant_options(const config::settings& s);
usage::throughput_options throughput_options(const config::settings& s);
meter::input_counting input_counting(const config::settings& s);
// prices:, the cached-input and reasoning prices defaulted to the input and output prices.
usage::price_table price_table(const config::settings& s);
// tasks:; nullopt when task time is off (no allowed task names).
std::optional<observe::task_options> task_options(const config::settings& s);

// SLO targets that are not boundaries of a bucket list set in the config. Run with
// module_config_errors wherever a config is accepted: start-up, --check-config and reload.
std::vector<config::config_error> metrics_config_errors(const config::settings& s);

// config::validate's errors would be incomplete without these: every check that needs a module
// (app/config_checks, then metrics_config_errors), in that order.
std::vector<config::config_error> module_errors(const config::settings& s);

}  // namespace tokenmeter::app
