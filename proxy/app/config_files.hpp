// app/config_files: what --check-config adds to the config's own checks: every file and secret the
// config names, loaded as start-up loads it (certificates and keys into a TLS context, CA bundles,
// token and password files, environment variables), so that a config that passes also starts.
#pragma once

#include <vector>

#include "config/config.hpp"

namespace tokenmeter::app {

// Every failure, each naming its key; empty when everything loads. Reads no secret into a message.
std::vector<config::config_error> referenced_file_errors(const config::settings& s);

// `s` as --print-config shows it: the API-key hashes of tenants.api_key_names replaced (a name
// for each stays). The config holds no other secret: secrets are named by file or environment
// variable and never read into settings, and URLs with credentials are refused (config rules).
config::settings redacted(config::settings s);

}  // namespace tokenmeter::app
