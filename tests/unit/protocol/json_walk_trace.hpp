// A json_visitor that writes down every call with its path and value, so that two walkers can be
// compared event by event (json_walk_test, the json_walk fuzzer).
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <string_view>

#include "protocol/json_walk.hpp"

namespace tokenmeter::protocol {

class json_trace final : public json_visitor {
  public:
    std::string events;

    void on_string(const json_path& path, std::string_view value) override {
        record('s', path, value);
    }
    void on_count(const json_path& path, std::uint64_t value) override {
        record('c', path, std::to_string(value));
    }
    void on_bool(const json_path& path, bool value) override {
        record('b', path, value ? "true" : "false");
    }
    void on_other(const json_path& path) override { record('o', path, {}); }
    void on_null(const json_path& path) override { record('n', path, {}); }
    void on_fraction(const json_path& path, double value) override {
        std::array<char, 40> exact{};  // hex float: every bit of the value
        std::snprintf(exact.data(), exact.size(), "%a", value);
        record('f', path, exact.data());
    }
    void on_open(const json_path& path, bool object) override {
        record('{', path, object ? "object" : "array");
    }
    void on_close(const json_path& path, bool object) override {
        record('}', path, object ? "object" : "array");
    }

  private:
    void record(char kind, const json_path& path, std::string_view value) {
        events += kind;
        for (std::size_t i = 0; i < path.size(); ++i) {
            events += '/';
            events += path[i];
        }
        events += '=';
        events += value;
        events += '\n';
    }
};

}  // namespace tokenmeter::protocol
