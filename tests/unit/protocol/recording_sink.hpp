// protocol tests: a chunk_sink that keeps everything an adapter reported, and a file reader for
// the recorded fixtures.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/types.hpp"

namespace tokenmeter::protocol::test_support {

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << path;
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

struct recorded_chunk {
    std::string content, reasoning, tool, finish;
    bool role_only = false;
    bool error = false;
    std::optional<token_usage> usage;
    bool ascii_text = false;
    std::string model;
};

class recording_sink final : public chunk_sink {
  public:
    void on_chunk(const response_chunk& chunk, core::time_point) override {
        chunks.push_back({std::string(chunk.content), std::string(chunk.reasoning),
                          std::string(chunk.tool_arguments), std::string(chunk.finish_reason),
                          chunk.role_only, chunk.error, chunk.usage, chunk.ascii_text,
                          std::string(chunk.model)});
    }
    void on_done_marker(core::time_point) override { ++done_markers; }
    void on_parse_error(parse_error reason) override { ++errors[static_cast<std::size_t>(reason)]; }

    [[nodiscard]] int parse_errors() const {
        int total = 0;
        for (int n : errors) {
            total += n;
        }
        return total;
    }

    std::vector<recorded_chunk> chunks;
    int done_markers = 0;
    std::array<int, parse_error_count> errors{};  // by reason
};

}  // namespace tokenmeter::protocol::test_support
