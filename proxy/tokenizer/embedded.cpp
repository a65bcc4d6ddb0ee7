// tokenizer/embedded: see embedded.hpp. The blobs are assembled into .rodata by
// embedded/embedded.S.in; their format is described in scripts/embed-tokenizers.mjs.
#include "tokenizer/embedded.hpp"

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>

#include "tokenizer/encoders.hpp"

extern "C" {
extern const unsigned char tokenmeter_embedded_o200k_base[];
extern const unsigned char tokenmeter_embedded_o200k_base_end[];
extern const unsigned char tokenmeter_embedded_cl100k_base[];
extern const unsigned char tokenmeter_embedded_cl100k_base_end[];
}

namespace tokenmeter::tokenizer::detail {

namespace {

std::string_view span_of(const unsigned char* begin, const unsigned char* end) noexcept {
    return {reinterpret_cast<const char*>(begin), static_cast<std::size_t>(end - begin)};
}

// Reads the table written by scripts/embed-tokenizers.mjs; every read is bounds-checked, so a
// damaged table is an error, never an overrun.
class table_reader {
  public:
    explicit table_reader(std::string_view data) : data_(data) {}

    bool varint(std::uint64_t& value) noexcept {
        value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos_ >= data_.size()) {
                return false;
            }
            const auto byte = static_cast<unsigned char>(data_[pos_++]);
            value |= static_cast<std::uint64_t>(byte & 0x7FU) << shift;
            if ((byte & 0x80U) == 0) {
                return true;
            }
        }
        return false;
    }

    bool bytes(std::uint64_t length, std::string_view& out) noexcept {
        if (length > data_.size() - pos_) {
            return false;
        }
        out = data_.substr(pos_, static_cast<std::size_t>(length));
        pos_ += static_cast<std::size_t>(length);
        return true;
    }

    bool text(std::string_view& out) noexcept {
        std::uint64_t length = 0;
        return varint(length) && bytes(length, out);
    }

    [[nodiscard]] bool at_end() const noexcept { return pos_ == data_.size(); }

  private:
    std::string_view data_;
    std::size_t pos_ = 0;
};

bool inflate_blob(std::string_view blob, std::string& out, std::string& error) {
    constexpr std::size_t header = 8;
    if (blob.size() < header || blob.substr(0, 4) != "TMZ1") {
        error = "not a TMZ1 blob";
        return false;
    }
    std::uint32_t length = 0;
    for (int i = 3; i >= 0; --i) {
        length = (length << 8) | static_cast<unsigned char>(blob[4 + static_cast<std::size_t>(i)]);
    }
    out.resize(length);
    uLongf produced = length;
    const int rc = ::uncompress(reinterpret_cast<Bytef*>(out.data()), &produced,
                                reinterpret_cast<const Bytef*>(blob.data() + header),
                                static_cast<uLong>(blob.size() - header));
    if (rc != Z_OK || produced != length) {
        error = "zlib: " + std::string(rc == Z_OK ? "short table" : ::zError(rc));
        return false;
    }
    return true;
}

// Gives the pages that lie wholly inside `blob` back to the kernel. The compressed table is read
// once, to build the encoder; afterwards its pages (1.1 MB for o200k_base, 0.5 MB for
// cl100k_base) would stay resident in the process for nothing. They are clean pages of the
// binary's read-only mapping: a later read (a second load, a test) faults them in again from the
// file. Best effort: a failure changes nothing but the resident size.
void release_blob_pages(std::string_view blob) noexcept {
    const long page = ::sysconf(_SC_PAGESIZE);
    if (page <= 0 || blob.empty()) {
        return;
    }
    const auto size = static_cast<std::uintptr_t>(page);
    const auto begin = reinterpret_cast<std::uintptr_t>(blob.data());
    const std::uintptr_t first = (begin + size - 1) / size * size;
    const std::uintptr_t last = (begin + blob.size()) / size * size;
    if (last > first) {
        // The pages' address as an offset from the blob's pointer, not an integer made a pointer.
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): madvise takes void*, writes none
        void* const pages = const_cast<char*>(blob.data() + (first - begin));
        ::madvise(pages, last - first, MADV_DONTNEED);
    }
}

}  // namespace

bool is_embedded(std::string_view name) noexcept {
    return !embedded_blob(name).empty();
}

std::string_view embedded_blob(std::string_view name) noexcept {
    if (name == "o200k_base") {
        return span_of(tokenmeter_embedded_o200k_base, tokenmeter_embedded_o200k_base_end);
    }
    if (name == "cl100k_base") {
        return span_of(tokenmeter_embedded_cl100k_base, tokenmeter_embedded_cl100k_base_end);
    }
    return {};
}

std::vector<std::pair<std::string, token_id>> builtin_special_tokens(std::string_view name) {
    // tiktoken@1.0.22 encoders/o200k_base.json and cl100k_base.json, "special_tokens"; the
    // parity tests compare against the package with these files (parity.match.*).
    if (name == "o200k_base") {
        return {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
    }
    if (name == "cl100k_base") {
        return {{"<|endoftext|>", 100257},
                {"<|fim_prefix|>", 100258},
                {"<|fim_middle|>", 100259},
                {"<|fim_suffix|>", 100260},
                {"<|endofprompt|>", 100276}};
    }
    return {};
}

std::shared_ptr<const encoder> load_embedded(std::string_view name, bool match_special_tokens,
                                             std::string& error) {
    const std::string_view blob = embedded_blob(name);
    if (blob.empty()) {
        error = "no built-in tokenizer named \"" + std::string(name) + "\"";
        return nullptr;
    }
    std::string table;
    const bool inflated = inflate_blob(blob, table, error);
    release_blob_pages(blob);
    if (!inflated) {
        error = "built-in " + std::string(name) + ": " + error;
        return nullptr;
    }
    table_reader in(table);
    std::string_view magic;
    std::string_view stored_name;
    std::string_view pattern;
    std::uint64_t count = 0;
    if (!in.bytes(6, magic) || magic != "TMTOK1" || !in.text(stored_name) || stored_name != name ||
        !in.text(pattern) || !in.varint(count) || count > table.size()) {
        error = "built-in " + std::string(name) + ": damaged table header";
        return nullptr;
    }
    bytes_map ranks;
    ranks.reserve(static_cast<std::size_t>(count));
    std::uint64_t rank = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        std::uint64_t gap = 0;
        std::uint64_t length = 0;
        std::string_view token;
        if (!in.varint(gap) || !in.varint(length) || !in.bytes(length, token)) {
            error = "built-in " + std::string(name) + ": damaged entry " + std::to_string(i);
            return nullptr;
        }
        rank += gap + (i == 0 ? 0 : 1);
        if (rank > 0xFFFFFFFFULL || !ranks.insert(token, static_cast<token_id>(rank))) {
            error = "built-in " + std::string(name) + ": bad entry " + std::to_string(i);
            return nullptr;
        }
    }
    if (!in.at_end()) {
        error = "built-in " + std::string(name) + ": trailing bytes";
        return nullptr;
    }
    auto enc = tiktoken_encoder::create(std::string(name), pattern, std::move(ranks), error);
    if (!enc) {
        error = "built-in " + std::string(name) + ": " + error;
        return nullptr;
    }
    if (match_special_tokens) {
        enc->match_special_tokens(builtin_special_tokens(name));
    }
    return enc;
}

}  // namespace tokenmeter::tokenizer::detail
