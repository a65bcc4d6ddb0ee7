// protocol/json_number: how walk_json reports a number to its visitor, by the type the number
// parsed to. One definition, shared with the nlohmann-based reference walker of the unit tests and
// the json_walk fuzzer, so that both walkers classify every number alike.
#pragma once

#include <cstdint>

#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol::detail {

// An integer without fraction or exponent that fits in uint64 (not negative).
void report_json_unsigned(json_visitor& visitor, const json_path& path, std::uint64_t value);
// A negative integer (or -0) without fraction or exponent that fits in int64.
void report_json_integer(json_visitor& visitor, const json_path& path, std::int64_t value);
// Any other finite number, as strtod reads its text.
void report_json_float(json_visitor& visitor, const json_path& path, double value);

}  // namespace tokenmeter::protocol::detail
