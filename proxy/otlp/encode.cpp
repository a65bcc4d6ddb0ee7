#include "otlp/encode.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/protobuf_wire.hpp"

namespace tokenmeter::otlp {

namespace {

using core::protobuf::put_bytes;
using core::protobuf::put_double;
using core::protobuf::put_fixed64;
using core::protobuf::put_tag;
using core::protobuf::put_uint;
using core::protobuf::put_varint;

// Field numbers of opentelemetry-proto (common, resource, trace, metrics and the two collector
// service requests).
namespace any_value_field {
constexpr int string_value = 1, bool_value = 2, int_value = 3, double_value = 4;
}
namespace key_value_field {
constexpr int key = 1, value = 2;
}
namespace scope_field {
constexpr int name = 1, version = 2;
}
namespace resource_field {
constexpr int attributes = 1;
}
namespace span_field {
constexpr int trace_id = 1, span_id = 2, parent_span_id = 4, name = 5, kind = 6, start = 7, end = 8,
              attributes = 9, events = 11, status = 15;
}
namespace event_field {
constexpr int time = 1, name = 2, attributes = 3;
}
namespace status_field {
constexpr int message = 2, code = 3;
}
namespace metric_field {
constexpr int name = 1, description = 2, unit = 3, histogram = 9;
}
namespace histogram_field {
constexpr int data_points = 1, temporality = 2;
}
namespace point_field {
constexpr int start = 2, time = 3, count = 4, sum = 5, bucket_counts = 6, explicit_bounds = 7,
              attributes = 9, min = 11, max = 12;
}
// ResourceSpans / ResourceMetrics: resource 1, scope_spans / scope_metrics 2; ScopeSpans /
// ScopeMetrics: scope 1, spans / metrics 2; the export requests: resource_* 1.
constexpr int resource_of = 1, scoped_of = 2, scope_of = 1, items_of = 2, request_resources = 1;
constexpr std::uint64_t cumulative = 2;  // AggregationTemporality

// A string field must be UTF-8: a collector refuses a whole batch with one bad byte. Bytes that
// are not part of a well-formed sequence become '?'.
std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const auto lead = static_cast<unsigned char>(text[i]);
        std::size_t length = 0;
        std::uint32_t low = 0;
        if (lead < 0x80) {
            length = 1;
        } else if (lead >= 0xc2 && lead <= 0xdf) {
            length = 2;
            low = 0x80;
        } else if (lead >= 0xe0 && lead <= 0xef) {
            length = 3;
            low = 0x800;
        } else if (lead >= 0xf0 && lead <= 0xf4) {
            length = 4;
            low = 0x10000;
        }
        bool ok = length > 0 && i + length <= text.size();
        std::uint32_t code = 0;
        if (ok) {
            code = length == 1 ? lead : lead & (0x3fU >> (length - 1));
        }
        for (std::size_t k = 1; ok && k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            ok = (next & 0xc0) == 0x80;
            code = (code << 6) | (next & 0x3fU);
        }
        ok = ok && (length == 1 ||
                    (code >= low && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)));
        if (ok) {
            out.append(text.substr(i, length));
            i += length;
        } else {
            out.push_back('?');
            ++i;
        }
    }
    return out;
}

// `text` itself when every byte is ASCII (the common case, checked without a copy), else its
// valid_utf8 copy, kept in `repaired`.
std::string_view utf8_of(std::string_view text, std::string& repaired) {
    if (std::ranges::none_of(text,
                             [](char c) { return (static_cast<unsigned char>(c) & 0x80) != 0; })) {
        return text;
    }
    repaired = valid_utf8(text);
    return repaired;
}

// The bytes put_varint writes for `v`.
std::size_t varint_size(std::uint64_t v) {
    std::size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

// The bytes of a field's tag.
std::size_t tag_size(int field) {
    return varint_size(static_cast<std::uint64_t>(field) << 3);
}

// The bytes of a length-delimited field of `length` bytes, its tag and length included.
std::size_t delimited_size(int field, std::size_t length) {
    return tag_size(field) + varint_size(length) + length;
}

std::string_view bytes_of(std::span<const std::uint8_t> id) {
    return {reinterpret_cast<const char*>(id.data()), id.size()};
}

bool all_zero(std::span<const std::uint8_t> id) {
    return std::ranges::all_of(id, [](std::uint8_t b) { return b == 0; });
}

// --- protobuf ---

// A KeyValue, written straight into `out`: the nested messages' sizes are worked out first, so
// no part of it is built apart and copied in.
void put_attribute(std::string& out, int field, const attribute& a) {
    std::string repaired_key;
    std::string repaired_value;
    const std::string_view key = utf8_of(a.key, repaired_key);
    std::string_view text;
    std::size_t value_size = 0;
    if (const auto* s = std::get_if<std::string>(&a.value)) {
        text = utf8_of(*s, repaired_value);
        value_size = delimited_size(any_value_field::string_value, text.size());
    } else if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
        value_size =
            tag_size(any_value_field::int_value) + varint_size(static_cast<std::uint64_t>(*i));
    } else if (std::holds_alternative<double>(a.value)) {
        value_size = tag_size(any_value_field::double_value) + 8;
    } else {
        value_size = tag_size(any_value_field::bool_value) + 1;
    }
    const std::size_t pair_size = delimited_size(key_value_field::key, key.size()) +
                                  delimited_size(key_value_field::value, value_size);
    put_tag(out, field, core::protobuf::length_delimited);
    put_varint(out, pair_size);
    put_bytes(out, key_value_field::key, key);
    put_tag(out, key_value_field::value, core::protobuf::length_delimited);
    put_varint(out, value_size);
    if (std::holds_alternative<std::string>(a.value)) {
        put_bytes(out, any_value_field::string_value, text);
    } else if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
        put_uint(out, any_value_field::int_value, static_cast<std::uint64_t>(*i));
    } else if (const auto* d = std::get_if<double>(&a.value)) {
        put_double(out, any_value_field::double_value, *d);
    } else {
        put_uint(out, any_value_field::bool_value, std::get<bool>(a.value) ? 1 : 0);
    }
}

void put_attributes(std::string& out, int field, const attributes& attrs) {
    for (const attribute& a : attrs) {
        put_attribute(out, field, a);
    }
}

// The ResourceX message around one ScopeX message holding `items` (already encoded fields).
std::string wrap_resource(const origin& from, const std::string& items) {
    std::string resource;
    put_attributes(resource, resource_field::attributes, from.resource);
    std::string scope;
    put_bytes(scope, scope_field::name, from.scope_name);
    if (!from.scope_version.empty()) {
        put_bytes(scope, scope_field::version, from.scope_version);
    }
    std::string scoped;
    put_bytes(scoped, scope_of, scope);
    scoped.append(items);
    std::string resource_x;
    put_bytes(resource_x, resource_of, resource);
    put_bytes(resource_x, scoped_of, scoped);
    std::string request;
    put_bytes(request, request_resources, resource_x);
    return request;
}

std::string span_protobuf(const span& s) {
    std::string out;
    put_bytes(out, span_field::trace_id, bytes_of(s.trace));
    put_bytes(out, span_field::span_id, bytes_of(s.id));
    if (!all_zero(s.parent)) {
        put_bytes(out, span_field::parent_span_id, bytes_of(s.parent));
    }
    std::string repaired;
    put_bytes(out, span_field::name, utf8_of(s.name, repaired));
    put_uint(out, span_field::kind, static_cast<std::uint64_t>(s.kind));
    put_fixed64(out, span_field::start, static_cast<std::uint64_t>(s.start_unix_ns));
    put_fixed64(out, span_field::end, static_cast<std::uint64_t>(s.end_unix_ns));
    put_attributes(out, span_field::attributes, s.attrs);
    for (const span_event& e : s.events) {
        std::string event;
        put_fixed64(event, event_field::time, static_cast<std::uint64_t>(e.time_unix_ns));
        put_bytes(event, event_field::name, utf8_of(e.name, repaired));
        put_attributes(event, event_field::attributes, e.attrs);
        put_bytes(out, span_field::events, event);
    }
    if (s.status != status_code::unset) {
        std::string status;
        if (!s.status_message.empty()) {
            put_bytes(status, status_field::message, utf8_of(s.status_message, repaired));
        }
        put_uint(status, status_field::code, static_cast<std::uint64_t>(s.status));
        put_bytes(out, span_field::status, status);
    }
    return out;
}

std::string histogram_protobuf(const histogram& h, std::int64_t start, std::int64_t time) {
    std::string data;
    for (const histogram_point& p : h.points) {
        std::string point;
        put_attributes(point, point_field::attributes, p.attrs);
        put_fixed64(point, point_field::start, static_cast<std::uint64_t>(start));
        put_fixed64(point, point_field::time, static_cast<std::uint64_t>(time));
        put_fixed64(point, point_field::count, p.count);
        put_double(point, point_field::sum, p.sum);
        std::string packed;
        for (std::uint64_t c : p.bucket_counts) {
            core::protobuf::put_fixed64_bits(packed, c);
        }
        put_bytes(point, point_field::bucket_counts, packed);
        packed.clear();
        for (double b : h.bounds) {
            std::uint64_t bits = 0;
            std::memcpy(&bits, &b, sizeof bits);
            core::protobuf::put_fixed64_bits(packed, bits);
        }
        put_bytes(point, point_field::explicit_bounds, packed);
        if (p.count > 0) {
            put_double(point, point_field::min, p.min);
            put_double(point, point_field::max, p.max);
        }
        put_bytes(data, histogram_field::data_points, point);
    }
    put_uint(data, histogram_field::temporality, cumulative);
    std::string metric;
    put_bytes(metric, metric_field::name, h.name);
    put_bytes(metric, metric_field::description, h.description);
    put_bytes(metric, metric_field::unit, h.unit);
    put_bytes(metric, metric_field::histogram, data);
    return metric;
}

// --- JSON ---

using json = nlohmann::ordered_json;

json attributes_json(const attributes& attrs) {
    json out = json::array();
    for (const attribute& a : attrs) {
        json value;
        if (const auto* s = std::get_if<std::string>(&a.value)) {
            value["stringValue"] = valid_utf8(*s);
        } else if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
            value["intValue"] = std::to_string(*i);
        } else if (const auto* d = std::get_if<double>(&a.value)) {
            value["doubleValue"] = *d;
        } else {
            value["boolValue"] = std::get<bool>(a.value);
        }
        out.push_back(json{{"key", valid_utf8(a.key)}, {"value", std::move(value)}});
    }
    return out;
}

json resource_json(const origin& from, const char* scoped_key, const char* items_key, json items) {
    json scope{{"name", from.scope_name}};
    if (!from.scope_version.empty()) {
        scope["version"] = from.scope_version;
    }
    json scoped{{"scope", std::move(scope)}, {items_key, std::move(items)}};
    return json{{"resource", {{"attributes", attributes_json(from.resource)}}},
                {scoped_key, json::array({std::move(scoped)})}};
}

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json span_json(const span& s) {
    json out{{"traceId", core::to_hex(s.trace)}, {"spanId", core::to_hex(s.id)}};
    if (!all_zero(s.parent)) {
        out["parentSpanId"] = core::to_hex(s.parent);
    }
    out["name"] = valid_utf8(s.name);
    out["kind"] = static_cast<int>(s.kind);
    out["startTimeUnixNano"] = std::to_string(s.start_unix_ns);
    out["endTimeUnixNano"] = std::to_string(s.end_unix_ns);
    out["attributes"] = attributes_json(s.attrs);
    json events = json::array();
    for (const span_event& e : s.events) {
        events.push_back(json{{"timeUnixNano", std::to_string(e.time_unix_ns)},
                              {"name", valid_utf8(e.name)},
                              {"attributes", attributes_json(e.attrs)}});
    }
    out["events"] = std::move(events);
    if (s.status != status_code::unset) {
        json status{{"code", static_cast<int>(s.status)}};
        if (!s.status_message.empty()) {
            status["message"] = valid_utf8(s.status_message);
        }
        out["status"] = std::move(status);
    }
    return out;
}

json histogram_json(const histogram& h, std::int64_t start, std::int64_t time) {
    json points = json::array();
    for (const histogram_point& p : h.points) {
        json counts = json::array();
        for (std::uint64_t c : p.bucket_counts) {
            counts.push_back(std::to_string(c));
        }
        json point{{"attributes", attributes_json(p.attrs)},
                   {"startTimeUnixNano", std::to_string(start)},
                   {"timeUnixNano", std::to_string(time)},
                   {"count", std::to_string(p.count)},
                   {"sum", p.sum},
                   {"bucketCounts", std::move(counts)},
                   {"explicitBounds", h.bounds}};
        if (p.count > 0) {
            point["min"] = p.min;
            point["max"] = p.max;
        }
        points.push_back(std::move(point));
    }
    return json{
        {"name", h.name},
        {"description", h.description},
        {"unit", h.unit},
        {"histogram", {{"dataPoints", std::move(points)}, {"aggregationTemporality", cumulative}}}};
}

}  // namespace

std::string_view content_type(encoding e) noexcept {
    return e == encoding::json ? "application/json" : "application/x-protobuf";
}

std::string encode_traces(const origin& from, std::span<const span> spans, encoding e) {
    if (e == encoding::json) {
        json items = json::array();
        for (const span& s : spans) {
            items.push_back(span_json(s));
        }
        return dump(json{{"resourceSpans", json::array({resource_json(from, "scopeSpans", "spans",
                                                                      std::move(items))})}});
    }
    std::string items;
    for (const span& s : spans) {
        put_bytes(items, items_of, span_protobuf(s));
    }
    return wrap_resource(from, items);
}

std::string encode_metrics(const origin& from, std::span<const histogram> metrics,
                           std::int64_t start_unix_ns, std::int64_t time_unix_ns, encoding e) {
    if (e == encoding::json) {
        json items = json::array();
        for (const histogram& h : metrics) {
            items.push_back(histogram_json(h, start_unix_ns, time_unix_ns));
        }
        return dump(json{
            {"resourceMetrics",
             json::array({resource_json(from, "scopeMetrics", "metrics", std::move(items))})}});
    }
    std::string items;
    for (const histogram& h : metrics) {
        put_bytes(items, items_of, histogram_protobuf(h, start_unix_ns, time_unix_ns));
    }
    return wrap_resource(from, items);
}

}  // namespace tokenmeter::otlp
