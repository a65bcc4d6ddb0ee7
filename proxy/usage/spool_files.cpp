// usage/spool files: the segments as the readers see them (listing, scanning, recovery of
// unclosed records), the marks, the quarantine, the shipper's cursor and its batches.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "usage/spool.hpp"  // IWYU pragma: associated
#include "usage/spool_io.hpp"

namespace tokenmeter::usage {
namespace {

namespace fs = std::filesystem;
using spool_io::fsync_dir;
using spool_io::write_all;

constexpr std::string_view segment_prefix = "usage-";
constexpr std::string_view segment_suffix = ".jsonl";
constexpr const char* cursor_file = "shipper.cursor";
constexpr const char* recovery_mark_file = "recovered.mark";
constexpr const char* segment_mark_file = "segments.mark";

std::optional<std::uint64_t> segment_number(const std::string& name) {
    if (name.size() != segment_prefix.size() + 20 + segment_suffix.size() ||
        name.compare(0, segment_prefix.size(), segment_prefix) != 0 ||
        name.compare(name.size() - segment_suffix.size(), segment_suffix.size(), segment_suffix) !=
            0) {
        return std::nullopt;
    }
    std::uint64_t n = 0;
    for (std::size_t i = segment_prefix.size(); i < segment_prefix.size() + 20; ++i) {
        if (name[i] < '0' || name[i] > '9') {
            return std::nullopt;
        }
        n = n * 10 + static_cast<std::uint64_t>(name[i] - '0');
    }
    return n;
}

bool read_from(const fs::path& file, std::uint64_t offset, std::string& out) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        return false;
    }
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in) {
        out.clear();
        return true;
    }
    std::ostringstream text;
    text << in.rdbuf();
    out = std::move(text).str();
    return true;
}

}  // namespace

std::string segment_name(std::uint64_t number) {
    std::array<char, 48> buf{};
    std::snprintf(buf.data(), buf.size(), "usage-%020llu.jsonl",
                  static_cast<unsigned long long>(number));
    return buf.data();
}

std::vector<segment_file> list_segments(const fs::path& dir) {
    std::vector<segment_file> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (auto n = segment_number(it->path().filename().string())) {
            out.push_back({*n, it->path()});
        }
    }
    std::sort(out.begin(), out.end(),
              [](const segment_file& a, const segment_file& b) { return a.number < b.number; });
    return out;
}

namespace {

// Lines of `text` (which starts at file offset `base`). Returns false if fn stopped the scan.
bool scan_text(std::string_view text, std::uint64_t base, scan_counts& counts, const entry_fn& fn,
               std::uint64_t* consumed_end, const malformed_fn& malformed = nullptr) {
    std::size_t pos = 0;
    std::uint64_t line_number = 0;
    while (pos < text.size()) {
        std::size_t newline = text.find('\n', pos);
        if (newline == std::string_view::npos) {
            counts.partial_tail += 1;
            return true;
        }
        std::string_view line = text.substr(pos, newline - pos);
        const std::uint64_t start = base + pos;
        std::uint64_t end = base + newline + 1;
        pos = newline + 1;
        line_number += 1;
        if (line.empty()) {
            if (consumed_end != nullptr) {
                *consumed_end = end;
            }
            continue;
        }
        counts.lines += 1;
        auto entry = decode_line(line);
        if (consumed_end != nullptr) {
            *consumed_end = end;
        }
        if (!entry) {
            counts.malformed += 1;
            if (malformed) {
                malformed(line, line_number, start);
            }
            continue;
        }
        if (!fn(*entry, end)) {
            return false;
        }
    }
    return true;
}

}  // namespace

scan_counts scan_segment(const fs::path& file, std::uint64_t offset, const entry_fn& fn,
                         const malformed_fn& malformed) {
    scan_counts counts;
    std::string text;
    if (!read_from(file, offset, text)) {
        return counts;
    }
    scan_text(text, offset, counts, fn, nullptr, malformed);
    return counts;
}

recovery_result find_unclosed(const fs::path& dir, std::uint64_t from_segment,
                              const segment_malformed_fn& malformed) {
    recovery_result result;
    std::unordered_map<std::string, open_info> opens;
    std::vector<std::string> order;  // recovered records come out in the order they started
    std::unordered_map<std::string, checkpoint_info> checkpoints;
    for (const auto& segment : list_segments(dir)) {
        if (segment.number < from_segment) {
            continue;
        }
        result.segments += 1;
        const std::string file = segment.path.filename().string();
        malformed_fn on_malformed;
        if (malformed) {
            on_malformed = [&](std::string_view line, std::uint64_t number, std::uint64_t offset) {
                malformed(file, line, number, offset);
            };
        }
        auto counts = scan_segment(
            segment.path, 0,
            [&](const spool_entry& e, std::uint64_t) {
                switch (e.kind) {
                    case entry_kind::open:
                        if (opens.emplace(e.open.id, e.open).second) {
                            order.push_back(e.open.id);
                        }
                        break;
                    case entry_kind::checkpoint:
                        if (opens.contains(e.checkpoint.id)) {
                            checkpoints[e.checkpoint.id] = e.checkpoint;
                        }
                        break;
                    case entry_kind::close:
                        result.records += 1;
                        opens.erase(e.record.id);
                        checkpoints.erase(e.record.id);
                        break;
                }
                return true;
            },
            on_malformed);
        result.counts.lines += counts.lines;
        result.counts.malformed += counts.malformed;
        result.counts.partial_tail += counts.partial_tail;
    }
    for (const auto& id : order) {
        auto it = opens.find(id);
        if (it == opens.end()) {
            continue;
        }
        std::optional<checkpoint_info> last;
        if (auto c = checkpoints.find(id); c != checkpoints.end()) {
            last = c->second;
        }
        result.recovered.push_back(recover_record(it->second, last));
    }
    return result;
}

namespace {

std::optional<nlohmann::json> read_json_file(const fs::path& file) {
    std::ifstream in(file);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return std::nullopt;
    }
    return j;
}

// Write, fsync, rename over, fsync the directory: the file is the old one or the new one.
bool replace_file(const fs::path& dir, const char* name, const std::string& text) {
    const fs::path tmp = dir / (std::string(name) + ".tmp");
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return false;
    }
    bool ok = write_all(fd, text) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), (dir / name).c_str()) != 0) {
        return false;
    }
    return fsync_dir(dir);
}

}  // namespace

std::optional<std::uint64_t> read_recovery_mark(const fs::path& dir) {
    auto j = read_json_file(dir / recovery_mark_file);
    if (!j || !j->contains("closed_below_segment") ||
        !(*j)["closed_below_segment"].is_number_unsigned()) {
        return std::nullopt;
    }
    return (*j)["closed_below_segment"].get<std::uint64_t>();
}

bool write_recovery_mark(const fs::path& dir, std::uint64_t first_unscanned) {
    nlohmann::json j = {{"closed_below_segment", first_unscanned}};
    return replace_file(dir, recovery_mark_file, j.dump() + "\n");
}

std::optional<std::uint64_t> read_segment_mark(const fs::path& dir) {
    auto j = read_json_file(dir / segment_mark_file);
    if (!j || !j->contains("highest_segment") || !(*j)["highest_segment"].is_number_unsigned()) {
        return std::nullopt;
    }
    return (*j)["highest_segment"].get<std::uint64_t>();
}

bool write_segment_mark(const fs::path& dir, std::uint64_t highest) {
    nlohmann::json j = {{"highest_segment", highest}};
    return replace_file(dir, segment_mark_file, j.dump() + "\n");
}

std::uint64_t highest_segment_in_use(const fs::path& dir) {
    std::uint64_t highest = read_segment_mark(dir).value_or(0);
    if (auto c = read_cursor(dir)) {
        highest = std::max(highest, c->segment);
    }
    for (const auto& segment : list_segments(dir)) {
        highest = std::max(highest, segment.number);
    }
    return highest;
}

quarantine_file::~quarantine_file() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

bool quarantine_file::add(const std::string& file, std::uint64_t line_number, std::uint64_t offset,
                          std::string_view text) {
    lines_ += 1;
    nlohmann::json j = {{"file", file},
                        {"line", line_number},
                        {"offset", offset},
                        {"bytes", text.size()},
                        {"text", std::string(text.substr(0, max_text_bytes))}};
    pending_ += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    pending_ += '\n';
    return pending_.size() < (1u << 20) ? !failed_ : write_pending();
}

bool quarantine_file::write_pending() {
    if (failed_) {
        pending_.clear();
        return false;
    }
    if (pending_.empty()) {
        return true;
    }
    if (fd_ < 0) {
        const fs::path path = dir_ / file_name;
        std::error_code ec;
        created_ = !fs::exists(path, ec);
        fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    failed_ = fd_ < 0 || !write_all(fd_, pending_);
    pending_.clear();
    return !failed_;
}

bool quarantine_file::finish() {
    if (!write_pending() || fd_ < 0) {
        return !failed_;
    }
    failed_ = ::fsync(fd_) != 0 || (created_ && !fsync_dir(dir_));
    return !failed_;
}

std::optional<cursor> read_cursor(const fs::path& dir) {
    std::ifstream in(dir / cursor_file);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("segment") || !j.contains("offset") ||
        !j["segment"].is_number_unsigned() || !j["offset"].is_number_unsigned()) {
        return std::nullopt;
    }
    return cursor{j["segment"].get<std::uint64_t>(), j["offset"].get<std::uint64_t>()};
}

bool write_cursor(const fs::path& dir, const cursor& c) {
    nlohmann::json j = {{"segment", c.segment}, {"offset", c.offset}};
    return replace_file(dir, cursor_file, j.dump() + "\n");
}

record_batch read_batch(const fs::path& dir, const cursor& from, std::size_t max_records) {
    record_batch batch;
    batch.next = from;
    auto segments = list_segments(dir);
    for (std::size_t i = 0; i < segments.size(); ++i) {
        const auto& segment = segments[i];
        if (segment.number < from.segment) {
            continue;
        }
        const bool newest = i + 1 == segments.size();
        std::uint64_t offset = segment.number == from.segment ? from.offset : 0;
        std::string text;
        if (!read_from(segment.path, offset, text)) {
            continue;
        }
        scan_counts counts;
        std::uint64_t consumed = offset;
        bool full = false;
        scan_text(
            text, offset, counts,
            [&](const spool_entry& e, std::uint64_t end) {
                if (e.kind == entry_kind::close) {
                    batch.records.push_back(e.record);
                    if (batch.records.size() >= max_records) {
                        batch.next = {segment.number, end};
                        full = true;
                        return false;
                    }
                }
                return true;
            },
            &consumed);
        if (full) {
            return batch;
        }
        if (newest) {
            batch.next = {segment.number, consumed};
            return batch;
        }
        // An older segment is finished (a new process or a rotation started the next one); a
        // cut tail in it can never be completed.
        batch.next = {segments[i + 1].number, 0};
    }
    return batch;
}

std::uint64_t count_records_after(const fs::path& dir, const cursor& from) {
    std::uint64_t n = 0;
    for (const auto& segment : list_segments(dir)) {
        if (segment.number < from.segment) {
            continue;
        }
        std::uint64_t offset = segment.number == from.segment ? from.offset : 0;
        scan_segment(segment.path, offset, [&](const spool_entry& e, std::uint64_t) {
            n += e.kind == entry_kind::close ? 1 : 0;
            return true;
        });
    }
    return n;
}

}  // namespace tokenmeter::usage
