// A record_sink for tests: keeps every line; nothing is durable until make_durable() says so.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "observe/observer.hpp"
#include "usage/record.hpp"

namespace tokenmeter::observe {

class fake_sink final : public record_sink {
  public:
    std::uint64_t append(std::string line, bool is_close) override {
        lines.push_back(std::move(line));
        closes += is_close ? 1 : 0;
        return lines.size();
    }
    [[nodiscard]] bool is_durable(std::uint64_t seq) const override { return seq <= durable; }
    void when_durable(std::uint64_t seq, std::function<void()> done) override {
        waiting.emplace(seq, std::move(done));
    }
    void make_durable() {
        durable = lines.size();
        auto ready = std::move(waiting);
        waiting.clear();
        for (auto& [seq, done] : ready) {
            done();
        }
    }
    std::vector<std::string> lines;
    std::uint64_t closes = 0;
    std::uint64_t durable = 0;
    std::multimap<std::uint64_t, std::function<void()>> waiting;
};

// The close entries (usage records) the sink holds, decoded.
inline std::vector<usage::usage_record> closes(const fake_sink& sink) {
    std::vector<usage::usage_record> out;
    for (const std::string& line : sink.lines) {
        auto entry = usage::decode_line(std::string_view(line).substr(0, line.size() - 1));
        if (entry && entry->kind == usage::entry_kind::close) {
            out.push_back(entry->record);
        }
    }
    return out;
}

}  // namespace tokenmeter::observe
