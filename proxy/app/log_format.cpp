#include "app/log_format.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "core/trace_context.hpp"

namespace tokenmeter::app {
namespace {

template <class Out>
void append(Out& dest, std::string_view text) {
    dest.append(text.data(), text.data() + text.size());
}

template <class Out>
void append_hex(Out& dest, std::string_view prefix, unsigned value, int digits) {
    static constexpr std::string_view hex = "0123456789abcdef";
    append(dest, prefix);
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
        dest.push_back(hex[(value >> static_cast<unsigned>(shift)) & 0xFU]);
    }
}

// The length of the well-formed UTF-8 sequence starting text[at] (2 to 4) and its code point;
// length 0 when the bytes there are not one (a stray continuation byte, an overlong form, a
// surrogate, past U+10FFFF, or cut short).
struct utf8_sequence {
    std::size_t length = 0;
    char32_t code = 0;
};

utf8_sequence decode_utf8(std::string_view text, std::size_t at) {
    const auto lead = static_cast<unsigned char>(text[at]);
    std::size_t length = 0;
    char32_t code = 0;
    char32_t least = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        code = lead & 0x1FU;
        least = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        code = lead & 0x0FU;
        least = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        code = lead & 0x07U;
        least = 0x10000;
    } else {
        return {};
    }
    if (text.size() - at < length) {
        return {};
    }
    for (std::size_t i = 1; i < length; ++i) {
        const auto next = static_cast<unsigned char>(text[at + i]);
        if ((next & 0xC0U) != 0x80U) {
            return {};
        }
        code = (code << 6U) | (next & 0x3FU);
    }
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
        return {};
    }
    return {length, code};
}

// Code points a terminal or a log viewer may take for a control or a line end: C1 controls
// (NEL among them), LINE SEPARATOR and PARAGRAPH SEPARATOR.
bool is_line_breaking(char32_t code) {
    return (code >= 0x80 && code <= 0x9F) || code == 0x2028 || code == 0x2029;
}

// Walks `text` for an escaper: `ascii` gets each ASCII byte, `ill_formed` each byte that is not
// part of well-formed UTF-8; a line-breaking code point is written as \uNNNN, any other UTF-8
// sequence as it is.
template <class Out, class Ascii, class IllFormed>
void escape_utf8(Out& dest, std::string_view text, Ascii ascii, IllFormed ill_formed) {
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            ascii(text[i]);
            ++i;
            continue;
        }
        const utf8_sequence seq = decode_utf8(text, i);
        if (seq.length == 0) {
            ill_formed(c);
            ++i;
            continue;
        }
        if (is_line_breaking(seq.code)) {
            append_hex(dest, "\\u", static_cast<unsigned>(seq.code), 4);
        } else {
            append(dest, text.substr(i, seq.length));
        }
        i += seq.length;
    }
}

// `text` as the inside of a JSON string: quotes, backslashes and control characters escaped,
// each byte of ill-formed UTF-8 as U+FFFD, so the line is always valid JSON.
template <class Out>
void escape_json(Out& dest, std::string_view text) {
    escape_utf8(
        dest, text,
        [&](char ch) {
            const auto c = static_cast<unsigned char>(ch);
            if (c == '"' || c == '\\') {
                dest.push_back('\\');
                dest.push_back(ch);
            } else if (c < 0x20 || c == 0x7f) {
                append_hex(dest, "\\u", c, 4);
            } else {
                dest.push_back(ch);
            }
        },
        [&](unsigned char /*byte*/) { append(dest, "\\ufffd"); });
}

// `text` for a text line: control characters, DEL and each byte of ill-formed UTF-8 as \xNN, a
// backslash doubled so an escape in the input stays readable as such; with `quotes`, a double
// quote as \" (inside a quoted value).
template <class Out>
void escape_text(Out& dest, std::string_view text, bool quotes) {
    escape_utf8(
        dest, text,
        [&](char ch) {
            const auto c = static_cast<unsigned char>(ch);
            if (c < 0x20 || c == 0x7f) {
                append_hex(dest, "\\x", c, 2);
            } else if (c == '\\') {
                append(dest, "\\\\");
            } else if (c == '"' && quotes) {
                append(dest, "\\\"");
            } else {
                dest.push_back(ch);
            }
        },
        [&](unsigned char byte) { append_hex(dest, "\\x", byte, 2); });
}

// A text value needs quotes when it is empty, reads as the null mark "-", or holds anything but
// visible ASCII other than a quote, a backslash or '='.
bool needs_quotes(std::string_view value) {
    if (value.empty() || value == "-") {
        return true;
    }
    return std::ranges::any_of(value, [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '=';
    });
}

// One record's fields in one format; nulls as null (JSON) or - (text).
class field_writer {
  public:
    explicit field_writer(bool json) : json_(json) {}

    void text(std::string_view key, std::string_view value) {
        if (value.empty()) {
            null(key);
            return;
        }
        start(key);
        if (json_) {
            out_.push_back('"');
            escape_json(out_, value);
            out_.push_back('"');
        } else if (needs_quotes(value)) {
            out_.push_back('"');
            escape_text(out_, value, true);
            out_.push_back('"');
        } else {
            out_ += value;
        }
    }
    void number(std::string_view key, std::optional<std::uint64_t> value) {
        if (!value) {
            null(key);
            return;
        }
        start(key);
        out_ += std::to_string(*value);
    }
    void seconds(std::string_view key, std::optional<double> value) {
        if (!value) {
            null(key);
            return;
        }
        start(key);
        std::array<char, 48> buffer{};
        const int n = std::snprintf(buffer.data(), buffer.size(), "%.6f", *value);
        if (n > 0) {
            out_.append(buffer.data(),
                        std::min<std::size_t>(static_cast<std::size_t>(n), buffer.size() - 1));
        }
    }
    [[nodiscard]] std::string take() { return std::move(out_); }

  private:
    void start(std::string_view key) {
        if (!out_.empty()) {
            out_.push_back(json_ ? ',' : ' ');
        }
        if (json_) {
            out_.push_back('"');
            out_ += key;
            out_ += "\":";
        } else {
            out_ += key;
            out_.push_back('=');
        }
    }
    void null(std::string_view key) {
        start(key);
        out_ += json_ ? "null" : "-";
    }

    bool json_;
    std::string out_;
};

// %*: the record after its level. A message escaped for the format ("msg":"..." in JSON); an
// access record's fields as format_access_fields wrote them, after the message "access".
class record_body final : public spdlog::custom_flag_formatter {
  public:
    explicit record_body(bool json) : json_(json) {}

    void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/,
                spdlog::memory_buf_t& dest) override {
        const std::string_view text(msg.payload.data(), msg.payload.size());
        const bool access =
            std::string_view(msg.logger_name.data(), msg.logger_name.size()) == access_logger_name;
        if (json_) {
            append(dest, R"("msg":")");
            if (access) {
                append(dest, R"(access",)");
                append(dest, text);
            } else {
                escape_json(dest, text);
                dest.push_back('"');
            }
        } else if (access) {
            append(dest, "access ");
            append(dest, text);
        } else {
            escape_text(dest, text, false);
        }
    }

    [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override {
        return std::make_unique<record_body>(json_);
    }

  private:
    bool json_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter(config::log_format format) {
    const bool json = format == config::log_format::json;
    auto formatter = std::make_unique<spdlog::pattern_formatter>(
        json ? spdlog::pattern_time_type::utc : spdlog::pattern_time_type::local);
    formatter->add_flag<record_body>('*', json);
    if (json) {
        formatter->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%*})");
    } else {
        formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %*");
    }
    return formatter;
}

std::string format_access_fields(const observe::access_entry& entry, config::log_format format) {
    field_writer out(format == config::log_format::json);
    out.text("method", entry.method);
    out.text("path", entry.path);
    out.number("status",
               entry.status > 0 ? std::optional<std::uint64_t>(entry.status) : std::nullopt);
    out.text("outcome", entry.outcome);
    out.text("api", entry.api);
    out.text("model", entry.model);
    out.text("tenant", entry.tenant);
    out.text("request_id", entry.request_id);
    out.text("trace_id", entry.trace_id ? core::to_hex(*entry.trace_id) : std::string());
    out.text("span_id", entry.span_id ? core::to_hex(*entry.span_id) : std::string());
    out.text("client", entry.client);
    out.text("upstream", entry.upstream);
    out.seconds("ttft_s", entry.time_to_first_token);
    out.seconds("duration_s", entry.duration_seconds);
    out.number("input_tokens", entry.input_tokens);
    out.number("output_tokens", entry.output_tokens);
    out.number("bytes_in", entry.bytes_in);
    out.number("bytes_out", entry.bytes_out);
    return out.take();
}

observe::access_writer make_access_writer(config::log_format format) {
    const std::string name(access_logger_name);
    std::shared_ptr<spdlog::logger> logger = spdlog::get(name);
    if (!logger) {
        const auto& sinks = spdlog::default_logger()->sinks();
        logger = std::make_shared<spdlog::logger>(name, sinks.begin(), sinks.end());
        // The registry's level and formatter, and a place in it, so a reload's level reaches it.
        spdlog::initialize_logger(logger);
    }
    return [logger, format](const observe::access_entry& entry) {
        if (!logger->should_log(spdlog::level::info)) {
            return;
        }
        const std::string fields = format_access_fields(entry, format);
        logger->log(spdlog::level::info, spdlog::string_view_t(fields.data(), fields.size()));
    };
}

}  // namespace tokenmeter::app
