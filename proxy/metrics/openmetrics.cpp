#include "metrics/openmetrics.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tokenmeter::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr std::string_view total_suffix = "_total";

// A number as OpenMetrics writes it: 16 significant digits (%.16g), which is also how the
// Prometheus text format of prometheus-cpp writes it, so a value and an le label read the same
// in either format; +Inf, -Inf or NaN.
void put_number(std::string& out, double value) {
    if (std::isnan(value)) {
        out += "NaN";
        return;
    }
    if (std::isinf(value)) {
        out += value > 0 ? "+Inf" : "-Inf";
        return;
    }
    std::array<char, 32> buffer{};
    const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                      std::chars_format::general, 16);
    out.append(buffer.data(), result.ptr);
}

void put_count(std::string& out, std::uint64_t value) {
    std::array<char, 24> buffer{};
    const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
    out.append(buffer.data(), result.ptr);
}

// HELP text and label values: a backslash, a double quote and a line feed escaped.
void put_escaped(std::string& out, std::string_view text) {
    for (const char c : text) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out.push_back(c);
        }
    }
}

// One sample line: name, the series' labels and one more (le, quantile) if given, value and
// the timestamp in seconds when the metric has one.
class sample_writer {
  public:
    sample_writer(std::string& out, const ClientMetric& metric) : out_(out), metric_(metric) {}

    void put(std::string_view name, std::string_view suffix, double value,
             std::string_view extra_label = {}, double extra_value = 0.0) {
        head(name, suffix, extra_label, extra_value);
        put_number(out_, value);
        tail();
    }
    void put_count_sample(std::string_view name, std::string_view suffix, std::uint64_t value,
                          std::string_view extra_label = {}, double extra_value = 0.0,
                          const exemplar* kept = nullptr) {
        head(name, suffix, extra_label, extra_value);
        put_count(out_, value);
        tail(kept);
    }

  private:
    void head(std::string_view name, std::string_view suffix, std::string_view extra_label,
              double extra_value) {
        out_ += name;
        out_ += suffix;
        if (!metric_.label.empty() || !extra_label.empty()) {
            out_.push_back('{');
            bool first = true;
            for (const auto& label : metric_.label) {
                if (!first) {
                    out_.push_back(',');
                }
                first = false;
                out_ += label.name;
                out_ += "=\"";
                put_escaped(out_, label.value);
                out_.push_back('"');
            }
            if (!extra_label.empty()) {
                if (!first) {
                    out_.push_back(',');
                }
                out_ += extra_label;
                out_ += "=\"";
                put_number(out_, extra_value);
                out_.push_back('"');
            }
            out_.push_back('}');
        }
        out_.push_back(' ');
    }
    void tail(const exemplar* kept = nullptr) {
        if (metric_.timestamp_ms != 0) {
            out_.push_back(' ');
            put_number(out_, static_cast<double>(metric_.timestamp_ms) / 1000.0);
        }
        if (kept != nullptr && !kept->empty()) {
            out_ += " # {trace_id=\"";
            core::append_hex(out_, kept->trace);
            out_ += "\",span_id=\"";
            core::append_hex(out_, kept->span);
            out_ += "\"} ";
            put_number(out_, kept->value);
            out_.push_back(' ');
            put_number(out_, static_cast<double>(kept->unix_ms) / 1000.0);
        }
        out_.push_back('\n');
    }

    std::string& out_;
    const ClientMetric& metric_;
};

// How a family is written: its OpenMetrics type and name, and the name its samples start with.
struct family_shape {
    std::string_view type;
    std::string_view name;    // for TYPE, UNIT and HELP
    std::string_view sample;  // the samples' name, before any suffix
};

family_shape shape_of(const MetricFamily& family) {
    const std::string_view name = family.name;
    switch (family.type) {
        case MetricType::Counter:
            if (name.size() > total_suffix.size() && name.ends_with(total_suffix)) {
                return {"counter", name.substr(0, name.size() - total_suffix.size()), name};
            }
            return {"unknown", name, name};
        case MetricType::Gauge:
            return {"gauge", name, name};
        case MetricType::Histogram:
            return {"histogram", name, name};
        case MetricType::Summary:
            return {"summary", name, name};
        case MetricType::Untyped:
            break;
    }
    return {"unknown", name, name};
}

// The exemplars kept for one histogram series, by bucket (empty when none).
std::vector<exemplar> exemplars_of(const exemplar_store* exemplars, const MetricFamily& family,
                                   const ClientMetric& metric) {
    if (exemplars == nullptr) {
        return {};
    }
    exemplar_store::label_pairs labels;
    labels.reserve(metric.label.size());
    for (const auto& label : metric.label) {
        labels.emplace_back(label.name, label.value);
    }
    const exemplar_buckets* kept = exemplars->find(family.name, std::move(labels));
    return kept == nullptr ? std::vector<exemplar>{} : kept->snapshot();
}

void put_family(std::string& out, const MetricFamily& family, const exemplar_store* exemplars) {
    const family_shape shape = shape_of(family);
    out += "# TYPE ";
    out += shape.name;
    out.push_back(' ');
    out += shape.type;
    out.push_back('\n');
    if (const std::string_view unit = openmetrics_unit(shape.name); !unit.empty()) {
        out += "# UNIT ";
        out += shape.name;
        out.push_back(' ');
        out += unit;
        out.push_back('\n');
    }
    if (!family.help.empty()) {
        out += "# HELP ";
        out += shape.name;
        out.push_back(' ');
        put_escaped(out, family.help);
        out.push_back('\n');
    }
    for (const ClientMetric& metric : family.metric) {
        sample_writer samples(out, metric);
        switch (family.type) {
            case MetricType::Counter:
                samples.put(shape.sample, "", metric.counter.value);
                break;
            case MetricType::Gauge:
                samples.put(shape.sample, "", metric.gauge.value);
                break;
            case MetricType::Histogram: {
                const std::vector<exemplar> kept = exemplars_of(exemplars, family, metric);
                const auto kept_at = [&kept](std::size_t i) {
                    return i < kept.size() ? &kept[i] : nullptr;
                };
                bool has_infinity = false;
                std::size_t index = 0;
                for (const auto& bucket : metric.histogram.bucket) {
                    samples.put_count_sample(shape.sample, "_bucket", bucket.cumulative_count, "le",
                                             bucket.upper_bound, kept_at(index++));
                    has_infinity = std::isinf(bucket.upper_bound) && bucket.upper_bound > 0;
                }
                if (!has_infinity) {
                    samples.put_count_sample(shape.sample, "_bucket", metric.histogram.sample_count,
                                             "le", std::numeric_limits<double>::infinity(),
                                             kept_at(index));
                }
                samples.put_count_sample(shape.sample, "_count", metric.histogram.sample_count);
                samples.put(shape.sample, "_sum", metric.histogram.sample_sum);
                break;
            }
            case MetricType::Summary:
                for (const auto& quantile : metric.summary.quantile) {
                    samples.put(shape.sample, "", quantile.value, "quantile", quantile.quantile);
                }
                samples.put_count_sample(shape.sample, "_count", metric.summary.sample_count);
                samples.put(shape.sample, "_sum", metric.summary.sample_sum);
                break;
            case MetricType::Untyped:
                samples.put(shape.sample, "", metric.untyped.value);
                break;
        }
    }
}

}  // namespace

std::string_view openmetrics_unit(std::string_view family_name) {
    static constexpr std::array<std::string_view, 9> units{
        "seconds", "bytes", "ratio", "joules", "grams", "meters", "volts", "amperes", "celsius"};
    for (const std::string_view unit : units) {
        if (family_name.size() > unit.size() + 1 && family_name.ends_with(unit) &&
            family_name[family_name.size() - unit.size() - 1] == '_') {
            return unit;
        }
    }
    return {};
}

std::string serialize_openmetrics(const std::vector<prometheus::MetricFamily>& families,
                                  const exemplar_store* exemplars) {
    std::string out;
    for (const MetricFamily& family : families) {
        if (!family.metric.empty()) {
            put_family(out, family, exemplars);
        }
    }
    out += "# EOF\n";
    return out;
}

}  // namespace tokenmeter::metrics
