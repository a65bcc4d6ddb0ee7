#include "prom_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace tokenmeter::load {
namespace {

bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

void skip_blanks(std::string_view& s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
}

std::string_view take_name(std::string_view& s) {
    std::size_t n = 0;
    if (!s.empty() && is_name_start(s.front())) {
        n = 1;
        while (n < s.size() && is_name_char(s[n])) {
            ++n;
        }
    }
    std::string_view name = s.substr(0, n);
    s.remove_prefix(n);
    return name;
}

std::optional<double> parse_value(std::string_view text) {
    if (text == "+Inf" || text == "Inf") {
        return std::numeric_limits<double>::infinity();
    }
    if (text == "-Inf") {
        return -std::numeric_limits<double>::infinity();
    }
    if (text == "NaN") {
        return std::numeric_limits<double>::quiet_NaN();
    }
    if (text.starts_with('+')) {
        text.remove_prefix(1);
    }
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

// Returns an error message, empty on success.
std::string parse_labels(std::string_view& s, label_set& labels) {
    s.remove_prefix(1);  // '{'
    while (true) {
        skip_blanks(s);
        if (s.starts_with('}')) {
            s.remove_prefix(1);
            break;
        }
        std::string_view name = take_name(s);
        if (name.empty()) {
            return "bad label name";
        }
        skip_blanks(s);
        if (!s.starts_with('=')) {
            return "expected '=' after label name";
        }
        s.remove_prefix(1);
        skip_blanks(s);
        if (!s.starts_with('"')) {
            return "expected '\"' to open a label value";
        }
        s.remove_prefix(1);
        std::string value;
        bool closed = false;
        while (!s.empty()) {
            char c = s.front();
            s.remove_prefix(1);
            if (c == '"') {
                closed = true;
                break;
            }
            if (c == '\\' && !s.empty()) {
                char escaped = s.front();
                s.remove_prefix(1);
                value.push_back(escaped == 'n' ? '\n' : escaped);
                continue;
            }
            value.push_back(c);
        }
        if (!closed) {
            return "unterminated label value";
        }
        labels.emplace_back(std::string(name), std::move(value));
        skip_blanks(s);
        if (s.starts_with(',')) {
            s.remove_prefix(1);
        } else if (!s.starts_with('}')) {
            return "expected ',' or '}' after a label";
        }
    }
    std::sort(labels.begin(), labels.end());
    return {};
}

std::string parse_sample_line(std::string_view s, prom_sample& sample) {
    std::string_view name = take_name(s);
    if (name.empty()) {
        return "bad metric name";
    }
    sample.name = std::string(name);
    if (s.starts_with('{')) {
        if (std::string error = parse_labels(s, sample.labels); !error.empty()) {
            return error;
        }
    }
    skip_blanks(s);
    std::size_t end = s.find_first_of(" \t");
    std::optional<double> value = parse_value(s.substr(0, end));
    if (!value) {
        return "bad sample value";
    }
    sample.value = *value;
    // A trailing timestamp is allowed and ignored: the summary is about one scrape.
    return {};
}

}  // namespace

exposition_result parse_exposition(std::string_view text) {
    exposition result;
    std::size_t line_number = 0;
    while (!text.empty()) {
        ++line_number;
        std::size_t newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        if (line.ends_with('\r')) {
            line.remove_suffix(1);
        }
        skip_blanks(line);
        if (line.empty()) {
            continue;
        }
        if (line.starts_with('#')) {
            line.remove_prefix(1);
            skip_blanks(line);
            if (line.starts_with("TYPE")) {
                line.remove_prefix(4);
                skip_blanks(line);
                std::string_view family = take_name(line);
                skip_blanks(line);
                if (!family.empty()) {
                    result.types[std::string(family)] = std::string(line);
                }
            }
            continue;
        }
        prom_sample sample;
        if (std::string error = parse_sample_line(line, sample); !error.empty()) {
            return exposition_result{std::nullopt,
                                     "line " + std::to_string(line_number) + ": " + error};
        }
        result.samples.push_back(std::move(sample));
    }
    return exposition_result{std::move(result), {}};
}

std::vector<histogram_series> histogram_family(const exposition& metrics, std::string_view family) {
    std::string bucket_name = std::string(family) + "_bucket";
    std::string sum_name = std::string(family) + "_sum";
    std::string count_name = std::string(family) + "_count";
    std::map<label_set, histogram_series> by_labels;
    for (const prom_sample& sample : metrics.samples) {
        if (sample.name == bucket_name) {
            label_set labels;
            std::optional<double> upper_bound;
            for (const auto& label : sample.labels) {
                if (label.first == "le") {
                    upper_bound = parse_value(label.second);
                } else {
                    labels.push_back(label);
                }
            }
            if (!upper_bound) {
                continue;
            }
            histogram_series& series = by_labels[labels];
            series.labels = labels;
            series.buckets.push_back({*upper_bound, sample.value});
        } else if (sample.name == sum_name) {
            histogram_series& series = by_labels[sample.labels];
            series.labels = sample.labels;
            series.sum = sample.value;
        } else if (sample.name == count_name) {
            histogram_series& series = by_labels[sample.labels];
            series.labels = sample.labels;
            series.count = sample.value;
        }
    }
    std::vector<histogram_series> result;
    for (auto& [labels, series] : by_labels) {
        std::sort(series.buckets.begin(), series.buckets.end(),
                  [](const histogram_bucket& a, const histogram_bucket& b) {
                      return a.upper_bound < b.upper_bound;
                  });
        result.push_back(std::move(series));
    }
    return result;
}

void merge_into(histogram_series& a, const histogram_series& b) {
    for (const histogram_bucket& bucket : b.buckets) {
        auto it = std::find_if(a.buckets.begin(), a.buckets.end(), [&](const histogram_bucket& x) {
            return x.upper_bound == bucket.upper_bound;
        });
        if (it != a.buckets.end()) {
            it->cumulative_count += bucket.cumulative_count;
        } else {
            a.buckets.push_back(bucket);
        }
    }
    std::sort(a.buckets.begin(), a.buckets.end(),
              [](const histogram_bucket& x, const histogram_bucket& y) {
                  return x.upper_bound < y.upper_bound;
              });
    a.sum += b.sum;
    a.count += b.count;
}

double histogram_quantile(double q, std::vector<histogram_bucket> buckets) {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    if (std::isnan(q)) {
        return nan;
    }
    if (q < 0) {
        return -std::numeric_limits<double>::infinity();
    }
    if (q > 1) {
        return std::numeric_limits<double>::infinity();
    }
    std::sort(buckets.begin(), buckets.end(),
              [](const histogram_bucket& a, const histogram_bucket& b) {
                  return a.upper_bound < b.upper_bound;
              });
    if (buckets.empty() || !std::isinf(buckets.back().upper_bound) ||
        buckets.back().upper_bound < 0) {
        return nan;
    }
    // Same bound twice (two scrapes merged badly) counts once, as Prometheus's coalesceBuckets
    // does.
    std::vector<histogram_bucket> coalesced;
    for (const histogram_bucket& bucket : buckets) {
        if (!coalesced.empty() && coalesced.back().upper_bound == bucket.upper_bound) {
            coalesced.back().cumulative_count += bucket.cumulative_count;
        } else {
            coalesced.push_back(bucket);
        }
    }
    buckets = std::move(coalesced);
    // Counts scraped while observations arrive can be briefly non-monotonic; Prometheus flattens
    // them.
    for (std::size_t i = 1; i < buckets.size(); ++i) {
        buckets[i].cumulative_count =
            std::max(buckets[i].cumulative_count, buckets[i - 1].cumulative_count);
    }
    if (buckets.size() < 2) {
        return nan;
    }
    double observations = buckets.back().cumulative_count;
    if (observations == 0) {
        return nan;
    }
    double rank = q * observations;
    std::size_t b = 0;
    while (b < buckets.size() - 1 && buckets[b].cumulative_count < rank) {
        ++b;
    }
    if (b == buckets.size() - 1) {
        return buckets[buckets.size() - 2].upper_bound;
    }
    if (b == 0 && buckets[0].upper_bound <= 0) {
        return buckets[0].upper_bound;
    }
    double bucket_start = 0;
    double bucket_end = buckets[b].upper_bound;
    double count = buckets[b].cumulative_count;
    if (b > 0) {
        bucket_start = buckets[b - 1].upper_bound;
        count -= buckets[b - 1].cumulative_count;
        rank -= buckets[b - 1].cumulative_count;
    }
    return bucket_start + (bucket_end - bucket_start) * (rank / count);
}

std::string_view label_value(const label_set& labels, std::string_view name) {
    for (const auto& [key, value] : labels) {
        if (key == name) {
            return value;
        }
    }
    return {};
}

}  // namespace tokenmeter::load
