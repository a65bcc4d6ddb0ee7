// tokenizer/nfc: Unicode NFC for tokenizers whose normalizer asks for it (Qwen), through ICU.
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <algorithm>

#include "tokenizer/encoders.hpp"

namespace tokenmeter::tokenizer::detail {

namespace {

const icu::Normalizer2* nfc() {
    static const icu::Normalizer2* instance = [] {
        UErrorCode status = U_ZERO_ERROR;
        const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
        return U_SUCCESS(status) ? n : nullptr;
    }();
    return instance;
}

}  // namespace

bool nfc_is_trivially_normalized(std::string_view text) noexcept {
    // Lead bytes below 0xCC encode code points below U+0300: no combining marks, no characters
    // that NFC changes, so the text is its own NFC form.
    return std::none_of(text.begin(), text.end(),
                        [](char c) { return static_cast<unsigned char>(c) >= 0xCC; });
}

bool nfc_is_normalized(std::string_view text) {
    const icu::Normalizer2* n = nfc();
    if (n == nullptr) {
        return true;
    }
    UErrorCode status = U_ZERO_ERROR;
    const UBool ok = n->isNormalizedUTF8(
        icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())), status);
    return U_SUCCESS(status) && ok != 0;
}

void nfc_normalize(std::string_view text, std::string& out) {
    const icu::Normalizer2* n = nfc();
    if (n == nullptr) {
        out.append(text);
        return;
    }
    UErrorCode status = U_ZERO_ERROR;
    icu::StringByteSink<std::string> sink(&out);
    n->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())), sink,
                     nullptr, status);
}

bool nfc_boundary_before(char32_t c) {
    const icu::Normalizer2* n = nfc();
    return n == nullptr || n->hasBoundaryBefore(static_cast<UChar32>(c)) != 0;
}

}  // namespace tokenmeter::tokenizer::detail
