// usage/record: the billing record of one metered request and the spool's line format (open,
// checkpoint, close entries, JSON Lines, versioned). Encoding and decoding only: no I/O, no clock.
// The format is documented field by field in docs/usage-records.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "meter/billing.hpp"
#include "meter/summary.hpp"

namespace tokenmeter::usage {

// Bump when a field changes meaning or is removed; adding an optional field keeps the version.
inline constexpr int record_version = 1;

// The longest model name a record, a label or a CloudEvent carries, in bytes: a request's model
// is client input, and one 16 MiB name would otherwise be copied into every entry of its record.
inline constexpr std::size_t max_model_bytes = 256;
// Cuts `model` to max_model_bytes at a UTF-8 character boundary; true when it was cut.
bool cut_model_name(std::string& model);

// The counts and their sources are meter/billing's: one rule for records and metrics alike.
using meter::to_string;
using meter::token_count;
using meter::token_source;
using meter::token_source_from;

struct usage_record {
    std::string id;          // idempotency id: unique across restarts, kept by crash recovery
    std::string tenant;      // "anonymous" when the config names no source
    std::string model;       // as the client asked for it, cut to max_model_bytes
    bool model_cut = false;  // the client's name was longer and is cut
    std::string api;         // protocol::to_string(api_kind)
    std::string route;       // request path without the query
    std::string request_id;  // the client's x-request-id, "" when absent
    // The W3C trace the request was forwarded in and the proxy's span (32 and 16 lowercase hex
    // digits); "" in records written before they were kept.
    std::string trace_id;
    std::string span_id;
    std::int64_t start_unix_ms = 0;
    std::int64_t end_unix_ms = 0;
    std::optional<double> ttft_seconds;
    double duration_seconds = 0.0;
    bool streamed = false;
    token_count input;
    token_count output;
    token_count reasoning;
    token_count cached_input;    // cache reads, a part of input
    token_count cache_write;     // cache writes, a part of input
    token_count cache_write_1h;  // the part of the cache writes kept for an hour
    token_count input_audio;     // audio tokens, a part of input (written only when known)
    token_count output_audio;    // audio tokens, a part of output (written only when known)
    // Seconds of audio the server reported billing (written only when known and served).
    std::optional<double> audio_seconds;
    std::string outcome;  // complete, client_cancel, upstream_error, upstream_truncated, rejected,
                          // crash_recovered
    int status = 0;       // status code the client got (0: none)
    bool served = true;   // the model server received the whole request (false: billed nothing)
    std::string reason;   // why the proxy answered itself (its JSON error code), "" otherwise
    bool response_unread = false;  // the body was too large to read whole (meter/exchange)
    // The price of the tokens (usage/price), set when the model has a price: currency non-empty,
    // cost in pico-units of it, nullopt when a count it needs is unknown.
    std::optional<std::int64_t> cost_picos;
    std::string currency;
    // Metering failed somewhere in this request (tokenmeter_metering_failures_total): the
    // response went on unchanged, but the counts may be short. Written only when true.
    bool degraded = false;
};

// The request's identity, known when it starts (the "open" entry).
struct open_info {
    std::string id;
    std::string tenant;
    std::string model;
    std::string api;
    std::string route;
    std::string request_id;
    std::int64_t start_unix_ms = 0;
    bool streamed = false;
    bool model_cut = false;
    std::string trace_id = {};  // as in usage_record
    std::string span_id = {};
};

// Running counts while a response streams (a "checkpoint" entry).
struct checkpoint_info {
    std::string id;
    std::int64_t at_unix_ms = 0;
    int status = 0;
    std::optional<double> ttft_seconds;
    token_count input;
    token_count output;
};

enum class entry_kind : std::uint8_t { open, checkpoint, close };

struct spool_entry {
    entry_kind kind = entry_kind::close;
    open_info open;              // kind == open
    checkpoint_info checkpoint;  // kind == checkpoint
    usage_record record;         // kind == close
};

// One line each, newline included.
std::string encode_open(const open_info& o);
std::string encode_checkpoint(const checkpoint_info& c);
std::string encode_close(const usage_record& r);
// The record's fields as one JSON object without "v"/"type" (CloudEvents data, CLI --json).
std::string encode_record_fields(const usage_record& r);

// Parses one line (without its newline). nullopt: not JSON, an unknown version or type, or a
// required field missing; readers count and skip such lines.
std::optional<spool_entry> decode_line(std::string_view line);

// The close record of a finished request, with the counts meter::billed chose for it.
usage_record make_record(const open_info& open, const meter::request_summary& s,
                         const meter::billed_counts& counts, std::int64_t end_unix_ms);
// The counts of a running request, for a checkpoint.
checkpoint_info make_checkpoint(const std::string& id, const meter::request_summary& running,
                                std::int64_t at_unix_ms);
// The record of a request whose process died before its close entry: the open entry and the
// last checkpoint (if any), outcome crash_recovered, same id.
usage_record recover_record(const open_info& open, const std::optional<checkpoint_info>& last);

// "2026-11-22T01:02:03.456Z".
std::string format_time(std::int64_t unix_ms);
// Accepts "YYYY-MM-DD", "YYYY-MM-DDTHH:MM[:SS[.fff]]" with an optional trailing "Z" (UTC).
std::optional<std::int64_t> parse_time(std::string_view text);

// 128-bit ids: a random per-process prefix and a counter, as 32 hex digits. Thread-safe.
class id_generator {
  public:
    id_generator();  // seeds from std::random_device once
    id_generator(std::uint64_t prefix, std::uint64_t counter_start);
    std::string next();

  private:
    std::uint64_t prefix_;
    std::atomic<std::uint64_t> counter_;
};

}  // namespace tokenmeter::usage
