#include "usage/record.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "usage/price.hpp"

namespace tokenmeter::usage {
namespace {

using json = nlohmann::ordered_json;

void put_count(json& j, const char* value_key, const char* source_key, const token_count& c) {
    if (c.value) {
        j[value_key] = *c.value;
    } else {
        j[value_key] = nullptr;
    }
    j[source_key] = to_string(c.source);
}

// A member that is a number, else nothing.
std::optional<double> number_of(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) {
        return std::nullopt;
    }
    return it->get<double>();
}

std::optional<double> ttft_of(const json& j) {
    return number_of(j, "ttft_s");
}

token_count get_count(const json& j, const char* value_key, const char* source_key) {
    token_count c;
    auto v = j.find(value_key);
    if (v != j.end() && v->is_number_unsigned()) {
        c.value = v->get<std::uint64_t>();
    } else if (v != j.end() && v->is_number_integer() && v->get<std::int64_t>() >= 0) {
        c.value = static_cast<std::uint64_t>(v->get<std::int64_t>());
    }
    auto s = j.find(source_key);
    if (s != j.end() && s->is_string()) {
        c.source = token_source_from(s->get_ref<const std::string&>());
    }
    if (!c.value) {
        c.source = token_source::none;
    }
    return c;
}

std::string get_string(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool get_bool(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::optional<std::int64_t> get_time(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
        return std::nullopt;
    }
    return parse_time(it->get_ref<const std::string&>());
}

// A trace or span id as the proxy writes it: exactly `digits` lowercase hex digits, else "" (a
// spool line is read from disk, and an old one has none).
std::string trace_hex(const json& j, const char* key, std::size_t digits) {
    std::string value = get_string(j, key);
    const bool well_formed =
        value.size() == digits && std::all_of(value.begin(), value.end(), [](char c) {
            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        });
    return well_formed ? value : std::string();
}

int get_int(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// Milliseconds are enough for invoices; more digits would only look precise.
double round_micros(double seconds) {
    return std::round(seconds * 1e6) / 1e6;
}

json record_json(const usage_record& r) {
    json j;
    j["id"] = r.id;
    j["tenant"] = r.tenant;
    j["model"] = r.model;
    if (r.model_cut) {
        j["model_cut"] = true;
    }
    j["api"] = r.api;
    j["route"] = r.route;
    j["request_id"] = r.request_id.empty() ? json(nullptr) : json(r.request_id);
    j["trace_id"] = r.trace_id.empty() ? json(nullptr) : json(r.trace_id);
    j["span_id"] = r.span_id.empty() ? json(nullptr) : json(r.span_id);
    j["start"] = format_time(r.start_unix_ms);
    j["end"] = format_time(r.end_unix_ms);
    j["ttft_s"] = r.ttft_seconds ? json(round_micros(*r.ttft_seconds)) : json(nullptr);
    j["duration_s"] = round_micros(r.duration_seconds);
    j["streamed"] = r.streamed;
    put_count(j, "input_tokens", "input_source", r.input);
    put_count(j, "output_tokens", "output_source", r.output);
    put_count(j, "reasoning_tokens", "reasoning_source", r.reasoning);
    put_count(j, "cached_tokens", "cached_source", r.cached_input);
    put_count(j, "cache_write_tokens", "cache_write_source", r.cache_write);
    put_count(j, "cache_write_1h_tokens", "cache_write_1h_source", r.cache_write_1h);
    // Only the APIs that report audio tokens (OpenAI Realtime) write these.
    if (r.input_audio.value) {
        put_count(j, "input_audio_tokens", "input_audio_source", r.input_audio);
    }
    if (r.output_audio.value) {
        put_count(j, "output_audio_tokens", "output_audio_source", r.output_audio);
    }
    if (r.audio_seconds) {
        j["audio_seconds"] = round_micros(*r.audio_seconds);
    }
    j["outcome"] = r.outcome;
    j["status"] = r.status;
    j["served"] = r.served;
    j["reason"] = r.reason.empty() ? json(nullptr) : json(r.reason);
    if (r.response_unread) {
        j["response_unread"] = true;
    }
    if (!r.currency.empty()) {
        // A double prints as the shortest decimal that reads back as itself: the exact amount,
        // for amounts of up to 15 significant digits.
        j["cost"] = r.cost_picos ? json(static_cast<double>(*r.cost_picos) / 1e12) : json(nullptr);
        j["currency"] = r.currency;
    }
    if (r.degraded) {
        j["degraded"] = true;
    }
    return j;
}

bool read_digits(std::string_view& text, std::size_t n, unsigned& out) {
    if (text.size() < n) {
        return false;
    }
    unsigned v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (text[i] < '0' || text[i] > '9') {
            return false;
        }
        v = v * 10 + static_cast<unsigned>(text[i] - '0');
    }
    out = v;
    text.remove_prefix(n);
    return true;
}

bool expect(std::string_view& text, char c) {
    if (text.empty() || text.front() != c) {
        return false;
    }
    text.remove_prefix(1);
    return true;
}

}  // namespace

std::string encode_open(const open_info& o) {
    json j;
    j["v"] = record_version;
    j["type"] = "open";
    j["id"] = o.id;
    j["tenant"] = o.tenant;
    j["model"] = o.model;
    if (o.model_cut) {
        j["model_cut"] = true;
    }
    j["api"] = o.api;
    j["route"] = o.route;
    j["request_id"] = o.request_id.empty() ? json(nullptr) : json(o.request_id);
    j["trace_id"] = o.trace_id.empty() ? json(nullptr) : json(o.trace_id);
    j["span_id"] = o.span_id.empty() ? json(nullptr) : json(o.span_id);
    j["start"] = format_time(o.start_unix_ms);
    j["streamed"] = o.streamed;
    // Replacing invalid UTF-8 (a model name is client input) keeps every line valid JSON.
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string encode_checkpoint(const checkpoint_info& c) {
    json j;
    j["v"] = record_version;
    j["type"] = "checkpoint";
    j["id"] = c.id;
    j["at"] = format_time(c.at_unix_ms);
    j["status"] = c.status;
    j["ttft_s"] = c.ttft_seconds ? json(round_micros(*c.ttft_seconds)) : json(nullptr);
    put_count(j, "input_tokens", "input_source", c.input);
    put_count(j, "output_tokens", "output_source", c.output);
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string encode_close(const usage_record& r) {
    json j;
    j["v"] = record_version;
    j["type"] = "close";
    json fields = record_json(r);
    for (auto it = fields.begin(); it != fields.end(); ++it) {
        j[it.key()] = std::move(it.value());
    }
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string encode_record_fields(const usage_record& r) {
    return record_json(r).dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {
std::optional<spool_entry> decode_entry(std::string_view line);
}  // namespace

std::optional<spool_entry> decode_line(std::string_view line) {
    // A spool line is read from disk: hostile like a socket. Every field is read by type, and
    // whatever else the JSON library could throw makes the line malformed, never the caller's.
    try {
        return decode_entry(line);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

namespace {
std::optional<spool_entry> decode_entry(std::string_view line) {
    json j = json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return std::nullopt;
    }
    auto v = j.find("v");
    if (v == j.end() || !v->is_number_integer() || v->get<int>() != record_version) {
        return std::nullopt;
    }
    const std::string type = get_string(j, "type");
    const std::string id = get_string(j, "id");
    if (id.empty()) {
        return std::nullopt;
    }
    spool_entry e;
    if (type == "open") {
        e.kind = entry_kind::open;
        auto start = get_time(j, "start");
        if (!start) {
            return std::nullopt;
        }
        e.open = open_info{id,
                           get_string(j, "tenant"),
                           get_string(j, "model"),
                           get_string(j, "api"),
                           get_string(j, "route"),
                           get_string(j, "request_id"),
                           *start,
                           get_bool(j, "streamed"),
                           get_bool(j, "model_cut"),
                           trace_hex(j, "trace_id", 32),
                           trace_hex(j, "span_id", 16)};
        return e;
    }
    if (type == "checkpoint") {
        e.kind = entry_kind::checkpoint;
        auto at = get_time(j, "at");
        if (!at) {
            return std::nullopt;
        }
        e.checkpoint.id = id;
        e.checkpoint.at_unix_ms = *at;
        e.checkpoint.status = get_int(j, "status");
        e.checkpoint.ttft_seconds = ttft_of(j);
        e.checkpoint.input = get_count(j, "input_tokens", "input_source");
        e.checkpoint.output = get_count(j, "output_tokens", "output_source");
        return e;
    }
    if (type == "close") {
        e.kind = entry_kind::close;
        auto start = get_time(j, "start");
        auto end = get_time(j, "end");
        auto outcome = get_string(j, "outcome");
        if (!start || !end || outcome.empty()) {
            return std::nullopt;
        }
        usage_record& r = e.record;
        r.id = id;
        r.tenant = get_string(j, "tenant");
        r.model = get_string(j, "model");
        r.model_cut = get_bool(j, "model_cut");
        r.api = get_string(j, "api");
        r.route = get_string(j, "route");
        r.request_id = get_string(j, "request_id");
        r.trace_id = trace_hex(j, "trace_id", 32);
        r.span_id = trace_hex(j, "span_id", 16);
        r.start_unix_ms = *start;
        r.end_unix_ms = *end;
        r.ttft_seconds = ttft_of(j);
        auto d = j.find("duration_s");
        r.duration_seconds = d != j.end() && d->is_number() ? d->get<double>() : 0.0;
        r.streamed = get_bool(j, "streamed");
        r.input = get_count(j, "input_tokens", "input_source");
        r.output = get_count(j, "output_tokens", "output_source");
        r.reasoning = get_count(j, "reasoning_tokens", "reasoning_source");
        r.cached_input = get_count(j, "cached_tokens", "cached_source");
        r.cache_write = get_count(j, "cache_write_tokens", "cache_write_source");
        r.cache_write_1h = get_count(j, "cache_write_1h_tokens", "cache_write_1h_source");
        r.input_audio = get_count(j, "input_audio_tokens", "input_audio_source");
        r.output_audio = get_count(j, "output_audio_tokens", "output_audio_source");
        if (auto seconds = number_of(j, "audio_seconds"); seconds && *seconds >= 0.0) {
            r.audio_seconds = seconds;
        }
        r.outcome = outcome;
        r.status = get_int(j, "status");
        // A record written before "served" existed: a rejected request was the only unserved one.
        auto served = j.find("served");
        r.served =
            served != j.end() && served->is_boolean() ? served->get<bool>() : outcome != "rejected";
        r.reason = get_string(j, "reason");
        r.response_unread = get_bool(j, "response_unread");
        r.currency = get_string(j, "currency");
        if (auto cost = j.find("cost");
            !r.currency.empty() && cost != j.end() && cost->is_number()) {
            r.cost_picos = amount_from_number(cost->get<double>());
        }
        r.degraded = get_bool(j, "degraded");
        return e;
    }
    return std::nullopt;
}
}  // namespace

usage_record make_record(const open_info& open, const meter::request_summary& s,
                         const meter::billed_counts& counts, std::int64_t end_unix_ms) {
    usage_record r;
    r.id = open.id;
    r.tenant = open.tenant;
    r.model = open.model;
    r.model_cut = open.model_cut;
    r.api = open.api;
    r.route = open.route;
    r.request_id = open.request_id;
    r.trace_id = open.trace_id;
    r.span_id = open.span_id;
    r.start_unix_ms = open.start_unix_ms;
    r.end_unix_ms = end_unix_ms;
    r.ttft_seconds = s.time_to_first_token;
    r.duration_seconds = s.duration_seconds;
    r.streamed = s.streamed;
    r.input = counts.input;
    r.output = counts.output;
    r.reasoning = counts.reasoning;
    r.cached_input = counts.cached_input;
    r.cache_write = counts.cache_write;
    r.cache_write_1h = counts.cache_write_1h;
    r.input_audio = counts.input_audio;
    r.output_audio = counts.output_audio;
    if (counts.served) {
        r.audio_seconds = s.reported.audio_seconds;  // a request never served bills nothing
    }
    r.outcome = std::string(meter::to_string(s.result));
    r.status = s.status;
    r.served = counts.served;
    r.reason = s.local_answer;
    r.response_unread = s.response_unread;
    return r;
}

checkpoint_info make_checkpoint(const std::string& id, const meter::request_summary& running,
                                std::int64_t at_unix_ms) {
    checkpoint_info c;
    c.id = id;
    c.at_unix_ms = at_unix_ms;
    c.status = running.status;
    if (running.first_token) {
        c.ttft_seconds = core::to_seconds(*running.first_token - running.request_received);
    }
    const meter::billed_counts counts = meter::running_counts(running);
    c.input = counts.input;
    c.output = counts.output;
    return c;
}

usage_record recover_record(const open_info& open, const std::optional<checkpoint_info>& last) {
    usage_record r;
    r.id = open.id;
    r.tenant = open.tenant;
    r.model = open.model;
    r.model_cut = open.model_cut;
    r.api = open.api;
    r.route = open.route;
    r.request_id = open.request_id;
    r.trace_id = open.trace_id;
    r.span_id = open.span_id;
    r.start_unix_ms = open.start_unix_ms;
    r.end_unix_ms = last ? std::max(last->at_unix_ms, open.start_unix_ms) : open.start_unix_ms;
    r.duration_seconds = static_cast<double>(r.end_unix_ms - r.start_unix_ms) / 1000.0;
    r.streamed = open.streamed;
    if (last) {
        r.ttft_seconds = last->ttft_seconds;
        r.input = last->input;
        r.output = last->output;
        r.status = last->status;
    } else {
        // Nothing was checkpointed: the stream was younger than one checkpoint interval.
        r.output = {0, token_source::counted};
    }
    r.outcome = "crash_recovered";
    return r;
}

bool cut_model_name(std::string& model) {
    if (model.size() <= max_model_bytes) {
        return false;
    }
    std::size_t end = max_model_bytes;
    // Back to the first byte of a character: never half of one (continuation bytes are 10xxxxxx).
    while (end > 0 && (static_cast<unsigned char>(model[end]) & 0xC0U) == 0x80U) {
        --end;
    }
    model.resize(end);
    model.shrink_to_fit();
    return true;
}

std::string format_time(std::int64_t unix_ms) {
    using namespace std::chrono;
    const sys_time<milliseconds> time{milliseconds{unix_ms}};
    const sys_days day_of = floor<days>(time);  // floor: a time before 1970 is in the day before
    const year_month_day date{day_of};
    const hh_mm_ss time_of_day{time - day_of};
    // No std::format in GCC 12's libstdc++, so the fields are printed by hand.
    std::array<char, 96> buf{};
    std::snprintf(buf.data(), buf.size(), "%04d-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
                  static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                  static_cast<unsigned>(date.day()),
                  static_cast<long long>(time_of_day.hours().count()),
                  static_cast<long long>(time_of_day.minutes().count()),
                  static_cast<long long>(time_of_day.seconds().count()),
                  static_cast<long long>(time_of_day.subseconds().count()));
    return buf.data();
}

std::optional<std::int64_t> parse_time(std::string_view text) {
    unsigned year = 0;
    unsigned month = 0;
    unsigned day = 0;
    unsigned hour = 0;
    unsigned minute = 0;
    unsigned second = 0;
    unsigned millis = 0;
    if (!read_digits(text, 4, year) || !expect(text, '-') || !read_digits(text, 2, month) ||
        !expect(text, '-') || !read_digits(text, 2, day)) {
        return std::nullopt;
    }
    if (month < 1 || month > 12 || day < 1 || day > 31) {
        return std::nullopt;
    }
    if (!text.empty() && (text.front() == 'T' || text.front() == ' ')) {
        text.remove_prefix(1);
        if (!read_digits(text, 2, hour) || !expect(text, ':') || !read_digits(text, 2, minute)) {
            return std::nullopt;
        }
        if (!text.empty() && text.front() == ':') {
            text.remove_prefix(1);
            if (!read_digits(text, 2, second)) {
                return std::nullopt;
            }
            if (!text.empty() && text.front() == '.') {
                text.remove_prefix(1);
                std::size_t digits = 0;
                unsigned scale = 100;
                while (!text.empty() && text.front() >= '0' && text.front() <= '9') {
                    if (digits < 3) {
                        millis += static_cast<unsigned>(text.front() - '0') * scale;
                        scale /= 10;
                    }
                    ++digits;
                    text.remove_prefix(1);
                }
                if (digits == 0) {
                    return std::nullopt;
                }
            }
        }
        if (hour > 23 || minute > 59 || second > 60) {
            return std::nullopt;
        }
    }
    if (!text.empty() && text.front() == 'Z') {
        text.remove_prefix(1);
    }
    if (!text.empty()) {
        return std::nullopt;
    }
    // A day past the month's end (2023-02-30) counts on into the next month, as sys_days
    // defines it for a valid year and month.
    using namespace std::chrono;
    const year_month_day date{std::chrono::year{static_cast<int>(year)}, std::chrono::month{month},
                              std::chrono::day{day}};
    const sys_time<milliseconds> time =
        sys_days{date} + hours{hour} + minutes{minute} + seconds{second} + milliseconds{millis};
    return time.time_since_epoch().count();
}

id_generator::id_generator() : prefix_(0), counter_(0) {
    std::random_device device;
    std::uint64_t a = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    std::uint64_t b = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    prefix_ = a;
    // The counter starts at a random point too, so two processes that drew the same prefix
    // (a broken random_device) still collide only if their counters overlap.
    counter_.store(b >> 16, std::memory_order_relaxed);
}

id_generator::id_generator(std::uint64_t prefix, std::uint64_t counter_start)
    : prefix_(prefix), counter_(counter_start) {}

std::string id_generator::next() {
    std::uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed);
    std::array<char, 33> buf{};
    std::snprintf(buf.data(), buf.size(), "%016llx%016llx",
                  static_cast<unsigned long long>(prefix_), static_cast<unsigned long long>(n));
    return buf.data();
}

}  // namespace tokenmeter::usage
