// app/log_format: how log lines are written. A message can carry client input (a model name, a
// tenant header), so every message is escaped for its format: in JSON lines as a JSON string, in
// text lines with control characters written as \xNN, so no input can end a line and forge
// another record.
#pragma once

#include <memory>

#include <spdlog/formatter.h>

#include "config/config.hpp"

namespace tokenmeter::app {

// The formatter of `format`: one JSON object per line ({"time","level","msg"}, UTC), or
// "time level message" text.
[[nodiscard]] std::unique_ptr<spdlog::formatter> make_log_formatter(config::log_format format);

}  // namespace tokenmeter::app
