// config/modes: the settings that pick one of a fixed set of behaviours, as enums, with their
// YAML spellings in one place. The loader reads a spelling, validate() names the set in errors,
// and code that acts on a mode compares enums, never strings.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::config {

enum class log_level { trace, debug, info, warn, error, off };
enum class log_format { text, json };
// Who a request belongs to: nobody, a header a trusted layer sets, or a hash of the API key.
enum class tenant_source { none, header, api_key };
// When the prompt's texts are tokenized.
enum class count_input_tokens_mode { when_unreported, always, never };
// Added/special tokens in text: the reference library's default for the file type (written as
// leaving the key out), one token each, or ordinary text.
enum class special_tokens_mode { file_default, match, text };
// MLPerf Inference's LLM scenarios (metrics/slo knows their targets); none when not named.
enum class slo_preset { none, server, interactive };
// Client certificates on a TLS listener: not asked for, checked when sent, or required.
enum class tls_client_auth { none, optional, require };
// The oldest TLS version a listener accepts.
enum class tls_min_version { v1_2, v1_3 };
// The client's X-Forwarded-For on the way upstream.
enum class forwarded_for_mode { keep, append, drop };
// A metered request whose JSON body the proxy cannot read: refused (400) or forwarded.
enum class unparsable_body_mode { refuse, forward };
// The body encoding of OTLP/HTTP export.
enum class otlp_encoding { protobuf, json };

template <typename Mode>
struct spelling {
    Mode value;
    std::string_view word;
};

// One specialisation per mode: its spellings, in the order error messages list them.
template <typename Mode>
struct mode_words;

template <>
struct mode_words<log_level> {
    static constexpr std::array<spelling<log_level>, 6> all{{{log_level::trace, "trace"},
                                                             {log_level::debug, "debug"},
                                                             {log_level::info, "info"},
                                                             {log_level::warn, "warn"},
                                                             {log_level::error, "error"},
                                                             {log_level::off, "off"}}};
};

template <>
struct mode_words<log_format> {
    static constexpr std::array<spelling<log_format>, 2> all{
        {{log_format::text, "text"}, {log_format::json, "json"}}};
};

template <>
struct mode_words<tenant_source> {
    static constexpr std::array<spelling<tenant_source>, 3> all{
        {{tenant_source::none, "none"},
         {tenant_source::header, "header"},
         {tenant_source::api_key, "api_key"}}};
};

template <>
struct mode_words<count_input_tokens_mode> {
    static constexpr std::array<spelling<count_input_tokens_mode>, 3> all{
        {{count_input_tokens_mode::when_unreported, "when_unreported"},
         {count_input_tokens_mode::always, "always"},
         {count_input_tokens_mode::never, "never"}}};
};

template <>
struct mode_words<special_tokens_mode> {
    static constexpr std::array<spelling<special_tokens_mode>, 3> all{
        {{special_tokens_mode::file_default, ""},
         {special_tokens_mode::match, "match"},
         {special_tokens_mode::text, "text"}}};
};

template <>
struct mode_words<slo_preset> {
    static constexpr std::array<spelling<slo_preset>, 3> all{
        {{slo_preset::none, ""},
         {slo_preset::server, "server"},
         {slo_preset::interactive, "interactive"}}};
};

template <>
struct mode_words<tls_client_auth> {
    static constexpr std::array<spelling<tls_client_auth>, 3> all{
        {{tls_client_auth::none, "none"},
         {tls_client_auth::optional, "optional"},
         {tls_client_auth::require, "require"}}};
};

template <>
struct mode_words<tls_min_version> {
    static constexpr std::array<spelling<tls_min_version>, 2> all{
        {{tls_min_version::v1_2, "1.2"}, {tls_min_version::v1_3, "1.3"}}};
};

template <>
struct mode_words<forwarded_for_mode> {
    static constexpr std::array<spelling<forwarded_for_mode>, 3> all{
        {{forwarded_for_mode::keep, "keep"},
         {forwarded_for_mode::append, "append"},
         {forwarded_for_mode::drop, "drop"}}};
};

template <>
struct mode_words<unparsable_body_mode> {
    static constexpr std::array<spelling<unparsable_body_mode>, 2> all{
        {{unparsable_body_mode::refuse, "refuse"}, {unparsable_body_mode::forward, "forward"}}};
};

template <>
struct mode_words<otlp_encoding> {
    static constexpr std::array<spelling<otlp_encoding>, 2> all{
        {{otlp_encoding::protobuf, "protobuf"}, {otlp_encoding::json, "json"}}};
};

template <typename T>
concept mode = requires {
    mode_words<T>::all;
};

// The mode a spelling names, exactly as written (the loader lowercases first); nullopt if none.
template <mode Mode>
std::optional<Mode> mode_from_word(std::string_view word) {
    for (const auto& s : mode_words<Mode>::all) {
        if (s.word == word) {
            return s.value;
        }
    }
    return std::nullopt;
}

template <mode Mode>
std::string_view to_string(Mode m) {
    for (const auto& s : mode_words<Mode>::all) {
        if (s.value == m) {
            return s.word;
        }
    }
    return {};
}

// "a, b, c": the non-empty spellings, for "must be one of ..." messages.
template <mode Mode>
std::string word_list() {
    std::string list;
    for (const auto& s : mode_words<Mode>::all) {
        if (!s.word.empty()) {
            list += (list.empty() ? "" : ", ") + std::string(s.word);
        }
    }
    return list;
}

}  // namespace tokenmeter::config
