#include "app/log_format.hpp"

#include <spdlog/pattern_formatter.h>

#include <array>
#include <string_view>

namespace tokenmeter::app {
namespace {

void append(spdlog::memory_buf_t& dest, std::string_view text) {
    dest.append(text.data(), text.data() + text.size());
}

void append_hex_escape(spdlog::memory_buf_t& dest, const char* prefix, unsigned char c) {
    static constexpr std::string_view digits = "0123456789abcdef";
    append(dest, prefix);
    const std::array<char, 2> hex{digits[c >> 4U], digits[c & 0xFU]};
    dest.append(hex.data(), hex.data() + hex.size());
}

// %v, escaped: as the inside of a JSON string (quotes, backslashes and control characters), or
// for a text line (control characters and DEL as \xNN, a backslash doubled so an escape in the
// input stays readable as such).
class escaped_message final : public spdlog::custom_flag_formatter {
  public:
    explicit escaped_message(bool json) : json_(json) {}

    void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/,
                spdlog::memory_buf_t& dest) override {
        const std::string_view text(msg.payload.data(), msg.payload.size());
        for (const char ch : text) {
            const auto c = static_cast<unsigned char>(ch);
            if (json_) {
                if (c == '"' || c == '\\') {
                    dest.push_back('\\');
                    dest.push_back(ch);
                } else if (c < 0x20 || c == 0x7f) {
                    append_hex_escape(dest, "\\u00", c);
                } else {
                    dest.push_back(ch);
                }
            } else if (c < 0x20 || c == 0x7f) {
                append_hex_escape(dest, "\\x", c);
            } else if (c == '\\') {
                append(dest, "\\\\");
            } else {
                dest.push_back(ch);
            }
        }
    }

    [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
        return std::make_unique<escaped_message>(json_);
    }

  private:
    bool json_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter(config::log_format format) {
    const bool json = format == config::log_format::json;
    auto formatter = std::make_unique<spdlog::pattern_formatter>(
        json ? spdlog::pattern_time_type::utc : spdlog::pattern_time_type::local);
    formatter->add_flag<escaped_message>('*', json);
    if (json) {
        formatter->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%*"})");
    } else {
        formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %*");
    }
    return formatter;
}

}  // namespace tokenmeter::app
