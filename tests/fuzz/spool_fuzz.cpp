// Fuzz target for the spool reader (usage/spool, usage/record): arbitrary bytes as a segment
// file. scan_segment reads it without throwing or ending the process; every complete non-empty
// line is an entry or malformed, never both and never neither; the malformed callback names each
// malformed line with the offset where its text is; decode_line agrees with the scan; and an
// entry written again by the encoders reads back to the same text (encode after decode is
// stable), so a record the reader accepts is one the writer can write.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "usage/record.hpp"
#include "usage/spool.hpp"

namespace {

using namespace tokenmeter::usage;

std::string encode(const spool_entry& e) {
    switch (e.kind) {
        case entry_kind::open:
            return encode_open(e.open);
        case entry_kind::checkpoint:
            return encode_checkpoint(e.checkpoint);
        case entry_kind::close:
            return encode_close(e.record);
    }
    return {};
}

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "spool_fuzz: %s\n", what);
        std::abort();
    }
}

// One file for every input, rewritten each time.
const std::string& segment_path() {
    static const std::string path = [] {
        std::string pattern = "/tmp/tokenmeter-spool-fuzz-XXXXXX";
        const int fd = ::mkstemp(pattern.data());
        check(fd >= 0, "mkstemp");
        ::close(fd);
        return pattern;
    }();
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    {
        std::FILE* f = std::fopen(segment_path().c_str(), "wb");
        check(f != nullptr, "open the segment file");
        check(std::fwrite(text.data(), 1, text.size(), f) == text.size(), "write");
        std::fclose(f);
    }
    std::uint64_t entries = 0;
    std::uint64_t reported = 0;
    std::uint64_t last_end = 0;
    const scan_counts counts = scan_segment(
        segment_path(), 0,
        [&](const spool_entry& e, std::uint64_t end_offset) {
            entries += 1;
            check(end_offset > last_end && end_offset <= size && text[end_offset - 1] == '\n',
                  "an entry's end offset is past its newline, in order");
            last_end = end_offset;
            const std::string once = encode(e);
            check(!once.empty() && once.back() == '\n', "an encoded entry is one line");
            const auto again = decode_line(std::string_view(once).substr(0, once.size() - 1));
            check(again.has_value(), "an encoded entry reads back");
            check(again->kind == e.kind, "the kind survives");
            check(encode(*again) == once, "encode after decode is stable");
            return true;
        },
        [&](std::string_view line, std::uint64_t line_number, std::uint64_t offset) {
            reported += 1;
            check(line_number > 0, "line numbers count from 1");
            check(offset + line.size() < size && text.substr(offset, line.size()) == line &&
                      text[offset + line.size()] == '\n',
                  "a malformed line is named where it is");
            check(!decode_line(line).has_value(), "decode_line agrees that it is malformed");
        });
    check(reported == counts.malformed, "every malformed line is reported");
    check(entries + counts.malformed == counts.lines, "each line is an entry or malformed");
    check(counts.partial_tail == (size > 0 && text.back() != '\n' ? 1U : 0U),
          "only an unterminated tail is partial");
    return 0;
}
