// protocol/python_json: request bodies as the model server reads them. vLLM and SGLang read a
// body with Python's json module, which accepts what strict JSON (RFC 8259) and the proxy's
// readers refuse: NaN, Infinity and -Infinity, numbers past a double's range (1e400 reads as
// inf), lone UTF-16 surrogate escapes ("\ud800") and UTF-8-encoded surrogates. A body that uses
// any of them is rewritten into strict JSON for reading only (the client's bytes are forwarded
// as they came), so the meter reads the same model, stream flag and prompt the server does.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tokenmeter::protocol {

// `body` with every Python-only construct replaced by a strict equivalent: NaN, Infinity,
// -Infinity and non-finite numbers by null, a lone surrogate (escaped or encoded) by U+FFFD.
// nullopt when there was nothing to replace (the body is strict JSON, or not JSON at all). Only
// bytes outside strings are read as tokens, so a string's text is never changed but for lone
// surrogates.
std::optional<std::string> python_json_as_strict(std::string_view body);

}  // namespace tokenmeter::protocol
