// config/reload: what a SIGHUP reload may change. Compares the running settings with a freshly
// loaded file, section by section: what can change in place (the log level, the API-key name
// table, the SLO targets) and what only takes effect after a restart (everything else).
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace tokenmeter::config {

struct reload_diff {
    std::vector<std::string> applied;        // dotted keys changed and applied in place
    std::vector<std::string> needs_restart;  // dotted keys changed, kept as they run
};

reload_diff diff_for_reload(const settings& running, const settings& next);

// `running` with the reloadable parts of `next` copied in: what the process runs after a reload.
settings apply_reloadable(const settings& running, const settings& next);

}  // namespace tokenmeter::config
