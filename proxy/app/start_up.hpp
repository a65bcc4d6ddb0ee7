// app/start_up: the steps of start-up that are more than one constructor call: logging, the
// open-files limit, listen addresses, tokenizers, the tenant secret, the banner, and the error
// that ends start-up with a message for the operator.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/cpu_quota.hpp"
#include "config/config.hpp"
#include "net/beast.hpp"
#include "observe/metering_observer.hpp"
#include "tokenizer/catalog.hpp"
#include "usage/tenant.hpp"

namespace tokenmeter::app {

// Start-up cannot go on. report() logs every line, prints it to stderr and returns exit code 1.
class start_up_error : public std::runtime_error {
  public:
    explicit start_up_error(const std::string& line);
    explicit start_up_error(std::vector<std::string> lines);
    int report() const noexcept;

  private:
    std::vector<std::string> lines_;
};

void configure_logging(const config::log_settings& log);
// Raises the open-files limit and returns how many client connections it leaves room for.
std::int64_t open_files_budget();
// Throws std::runtime_error naming `what` and the address when it does not resolve.
tcp::endpoint resolve_listen(asio::io_context& ioc, const config::endpoint& endpoint,
                             const char* what);
// Loads every tokenizer the config names and logs what was loaded; throws start_up_error with
// each error by its key.
std::shared_ptr<const tokenizer::catalog> load_tokenizers_or_explain(
    const config::settings& settings);
// A secret the config names by an environment variable (env_key = its dotted key, env_name its
// value) or a file (file_key, file_path); "" when both are empty. Throws start_up_error naming
// the key, never holding the secret.
std::string configured_secret(const std::string& env_key, const std::string& env_name,
                              const std::string& file_key, const std::string& file_path);
// The HMAC secret for tenants.source api_key ("" for other sources); throws start_up_error.
std::string tenant_secret_or_throw(const usage::tenant_options& options);
observe::metering_options metering_options_from(const config::settings& settings);
// "tokenmeter listening: proxy=… admin=… upstream=…" on stdout (scripts wait for it), and the log.
void announce(const config::settings& settings, const tcp::endpoint& proxy,
              const tcp::endpoint& admin, const thread_choice& threads);

}  // namespace tokenmeter::app
