// text_table: fixed-width columns for terminal reports, with an optional group label over columns.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace tokenmeter::load {

struct text_column {
    std::string group;  // printed above the first column of a run of equal groups
    std::string name;
    bool left = false;
};

inline std::string format_number(double value, int decimals) {
    if (std::isnan(value) || std::isinf(value)) {
        return "-";
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    return text;
}

// Three significant-looking digits without scientific notation: 0.123, 1.23, 12.3, 123.
inline std::string format_short(double value) {
    if (std::isnan(value) || std::isinf(value)) {
        return "-";
    }
    double magnitude = std::fabs(value);
    int decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3;
    return format_number(value, decimals);
}

inline std::string render_table(const std::vector<text_column>& columns,
                                const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths(columns.size());
    for (std::size_t c = 0; c < columns.size(); ++c) {
        widths[c] = columns[c].name.size();
        for (const auto& row : rows) {
            if (c < row.size()) {
                widths[c] = std::max(widths[c], row[c].size());
            }
        }
    }
    // A group label may be wider than its columns; widen the last column of the group to fit.
    for (std::size_t c = 0; c < columns.size();) {
        std::size_t end = c + 1;
        while (end < columns.size() && columns[end].group == columns[c].group) {
            ++end;
        }
        std::size_t span = 0;
        for (std::size_t i = c; i < end; ++i) {
            span += widths[i] + (i + 1 < end ? 2 : 0);
        }
        if (columns[c].group.size() > span) {
            widths[end - 1] += columns[c].group.size() - span;
        }
        c = end;
    }
    auto pad = [](const std::string& text, std::size_t width, bool left) {
        std::string spaces(width > text.size() ? width - text.size() : 0, ' ');
        return left ? text + spaces : spaces + text;
    };
    std::string out;
    bool any_group = false;
    for (const auto& column : columns) {
        any_group = any_group || !column.group.empty();
    }
    if (any_group) {
        std::string line;
        for (std::size_t c = 0; c < columns.size();) {
            std::size_t end = c + 1;
            while (end < columns.size() && columns[end].group == columns[c].group) {
                ++end;
            }
            std::size_t span = 0;
            for (std::size_t i = c; i < end; ++i) {
                span += widths[i] + (i + 1 < end ? 2 : 0);
            }
            line += pad(columns[c].group, span, true);
            line += end < columns.size() ? "  " : "";
            c = end;
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out += line + "\n";
    }
    auto add_row = [&](auto cell_of) {
        std::string line;
        for (std::size_t c = 0; c < columns.size(); ++c) {
            line += pad(cell_of(c), widths[c], columns[c].left);
            line += c + 1 < columns.size() ? "  " : "";
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out += line + "\n";
    };
    add_row([&](std::size_t c) { return columns[c].name; });
    for (const auto& row : rows) {
        add_row([&](std::size_t c) { return c < row.size() ? row[c] : std::string(); });
    }
    return out;
}

}  // namespace tokenmeter::load
