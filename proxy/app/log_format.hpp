// app/log_format: how log lines are written. A message can carry client input (a model name, a
// tenant header), so every message is escaped for its format: in JSON lines as a JSON string, in
// text lines with control characters written as \xNN, so no input can end a line and forge
// another record. Access records (observe/access_log) are lines of their own: their fields are
// top-level members of the JSON object, or escaped key=value pairs in text.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "observe/access_log.hpp"

namespace tokenmeter::app {

// The logger access records go through: the default logger's sinks under this name, which the
// formatter knows holds fields already escaped by format_access_fields.
inline constexpr std::string_view access_logger_name = "access";

// The formatter of `format`: one JSON object per line ({"time","level","msg"}, UTC, and an
// access record's fields), or "time level message" text.
[[nodiscard]] std::unique_ptr<spdlog::formatter> make_log_formatter(config::log_format format);

// An access record's fields, escaped for `format`: JSON members after "msg" (without the
// braces: "method":"GET",...), or text pairs (method=GET path=/v1/... model="a b").
[[nodiscard]] std::string format_access_fields(const observe::access_entry& entry,
                                               config::log_format format);

// Registers the access logger beside the default one (configure_logging does this first) and
// returns the writer that renders each record in `format` and logs it at info.
[[nodiscard]] observe::access_writer make_access_writer(config::log_format format);

}  // namespace tokenmeter::app
