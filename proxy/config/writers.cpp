// config/writers: the value writers the schema rows use to print a configuration (to_yaml). Each
// writes the text its reader (values.cpp) reads back as the same value.
#include <array>
#include <cstdio>

#include "config/walk.hpp"

namespace tokenmeter::config::schema {

namespace {

// A whole number of the unit that fits, so that "30s" prints as it was written.
std::string duration_text(milliseconds d) {
    const auto ms = d.count();
    if (ms != 0 && ms % 3'600'000 == 0) {
        return std::to_string(ms / 3'600'000) + "h";
    }
    if (ms != 0 && ms % 60'000 == 0) {
        return std::to_string(ms / 60'000) + "m";
    }
    if (ms != 0 && ms % 1'000 == 0) {
        return std::to_string(ms / 1'000) + "s";
    }
    return std::to_string(ms) + "ms";
}

template <typename T>
YAML::Node sequence(const std::vector<T>& items, std::string (*text)(const T&)) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const T& item : items) {
        out.push_back(text(item));
    }
    return out;
}

std::string same(const std::string& s) {
    return s;
}
std::string number_text(const double& v) {
    return detail::format_number(v);
}
std::string count_text(const std::uint64_t& v) {
    return std::to_string(v);
}

}  // namespace

YAML::Node to_node(value_reader<endpoint> /*read*/, const endpoint& v) {
    return YAML::Node(to_string(v));
}

YAML::Node to_node(value_reader<upstream_target> /*read*/, const upstream_target& v) {
    return YAML::Node(v.scheme + "://" + to_string(endpoint{v.host, v.port}) + v.base_path);
}

YAML::Node to_node(value_reader<milliseconds> /*read*/, const milliseconds& v) {
    return YAML::Node(duration_text(v));
}

YAML::Node to_node(value_reader<std::optional<milliseconds>> /*read*/,
                   const std::optional<milliseconds>& v) {
    return v ? YAML::Node(duration_text(*v)) : YAML::Node();
}

YAML::Node to_node(value_reader<std::uint64_t> /*read*/, const std::uint64_t& v) {
    return YAML::Node(std::to_string(v));
}

YAML::Node to_node(value_reader<std::uint32_t> /*read*/, const std::uint32_t& v) {
    return YAML::Node(std::to_string(v));
}

YAML::Node to_node(value_reader<bool> /*read*/, const bool& v) {
    return YAML::Node(v ? "true" : "false");
}

YAML::Node to_node(value_reader<std::optional<bool>> /*read*/, const std::optional<bool>& v) {
    return v ? YAML::Node(*v ? "true" : "false") : YAML::Node();
}

YAML::Node to_node(value_reader<std::string> /*read*/, const std::string& v) {
    return YAML::Node(v);
}

YAML::Node to_node(value_reader<double> read, const double& v) {
    if (read == read_objective) {
        // A percentage, as parse_objective reads it (10 significant digits: 99.9%, not
        // 99.90000000000001%).
        std::array<char, 32> text{};
        std::snprintf(text.data(), text.size(), "%.10g%%", v * 100);
        return YAML::Node(std::string(text.data()));
    }
    return YAML::Node(detail::format_number(v));
}

YAML::Node to_node(value_reader<std::optional<double>> /*read*/, const std::optional<double>& v) {
    return v ? to_node(read_objective, *v) : YAML::Node();
}

YAML::Node to_node(value_reader<std::optional<std::int64_t>> /*read*/,
                   const std::optional<std::int64_t>& v) {
    if (!v) {
        return {};
    }
    // Micro-units as the decimal they were written as: 2500000 is "2.5".
    std::string text = std::to_string(*v / 1'000'000);
    if (const auto fraction = *v % 1'000'000; fraction != 0) {
        std::string digits = std::to_string(fraction + 1'000'000).substr(1);
        digits.erase(digits.find_last_not_of('0') + 1);
        text += "." + digits;
    }
    return YAML::Node(text);
}

YAML::Node to_node(value_reader<std::vector<std::string>> /*read*/,
                   const std::vector<std::string>& v) {
    return sequence(v, same);
}

YAML::Node to_node(value_reader<std::optional<std::vector<double>>> /*read*/,
                   const std::optional<std::vector<double>>& v) {
    return v ? sequence(*v, number_text) : YAML::Node();
}

YAML::Node to_node(value_reader<std::vector<std::uint64_t>> /*read*/,
                   const std::vector<std::uint64_t>& v) {
    return sequence(v, count_text);
}

YAML::Node to_node(value_reader<std::map<std::string, std::string>> /*read*/,
                   const std::map<std::string, std::string>& v) {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& [key, value] : v) {
        out[key] = value;
    }
    return out;
}

}  // namespace tokenmeter::config::schema

namespace tokenmeter::config {

std::string to_yaml(const settings& s) {
    YAML::Emitter out;
    out << schema::write_section(schema::root(), s);
    return std::string(out.c_str()) + "\n";
}

}  // namespace tokenmeter::config
