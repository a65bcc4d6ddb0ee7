// usage/report: totals per tenant and model for a time range, with the peak tokens per second,
// read from the spool and written as a text table or JSON; `tokenmeter usage` (app/usage_command)
// prints them. Lets an operator answer "what did tenant X use yesterday, and at what peak"
// without another system.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "usage/price.hpp"
#include "usage/record.hpp"

namespace tokenmeter::usage {

struct usage_totals {
    std::uint64_t requests = 0;
    std::map<std::string, std::uint64_t> outcomes;
    std::uint64_t input_tokens = 0;
    std::uint64_t output_tokens = 0;
    std::uint64_t reasoning_tokens = 0;
    std::uint64_t cached_tokens = 0;
    // Cost by currency, in pico-units (usage/price), and the records that have none (their
    // model has no price, or a count the price needs was unknown).
    std::map<std::string, amount_sum> cost_picos;
    std::uint64_t unpriced_requests = 0;
    double peak_tokens_per_second = 0;
    std::int64_t peak_second_unix_ms = 0;  // start of the peak second
};

struct usage_report {
    std::uint64_t records = 0;     // after de-duplication by id
    std::uint64_t duplicates = 0;  // records with an id seen before (ignored)
    std::uint64_t malformed = 0;   // lines that could not be read
    std::map<std::pair<std::string, std::string>, usage_totals> by_tenant_model;
    std::map<std::string, usage_totals> by_tenant;
};

struct report_filter {
    std::optional<std::int64_t> from_unix_ms;  // records that started at or after
    std::optional<std::int64_t> to_unix_ms;    // records that started before
    std::optional<std::string> tenant;
    std::optional<std::string> model;
};

// The records to count, one per id, in order of first appearance: a real outcome wins over
// crash_recovered (the same request recovered after a lost close). Adds the others to
// `duplicates`.
std::vector<const usage_record*> unique_records(const std::vector<usage_record>& records,
                                                std::uint64_t& duplicates);
bool passes(const usage_record& r, const report_filter& filter);

// Totals of the records in `records` that pass the filter. Records sharing an id count once:
// a real outcome wins over crash_recovered (the same request recovered after a lost close).
usage_report build_report(const std::vector<usage_record>& records, const report_filter& filter);

// The report as an aligned text table, a row per tenant and model and one per tenant, then a line
// of counts.
std::string format_table(const usage_report& report);
// The report as JSON (pretty-printed, ending in a newline).
std::string report_json(const usage_report& report, const report_filter& filter);

// Every close record in a spool directory's segments, and the lines that are not usage entries.
struct spool_contents {
    std::vector<usage_record> records;
    std::uint64_t malformed = 0;
    std::string first_malformed;  // "<segment> line N"
};
spool_contents read_spool(const std::filesystem::path& dir);

}  // namespace tokenmeter::usage
