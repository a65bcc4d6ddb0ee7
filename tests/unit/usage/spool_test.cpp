#include "usage/spool.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <future>
#include <limits>
#include <sstream>
#include <thread>

#include "usage/recovery.hpp"

namespace tokenmeter::usage {
namespace {

namespace fs = std::filesystem;

class SpoolTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "tokenmeter-spool-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    spool_options options(std::uint64_t segment_bytes = 1 << 20) {
        return spool_options{dir_, std::chrono::milliseconds(5), segment_bytes, 1 << 20};
    }
    static usage_record record(const std::string& id) {
        usage_record r;
        r.id = id;
        r.tenant = "t";
        r.model = "m";
        r.outcome = "complete";
        r.start_unix_ms = 1000;
        r.end_unix_ms = 2000;
        r.output = {5, token_source::reported};
        return r;
    }
    static open_info open(const std::string& id) {
        return open_info{id, "t", "m", "openai_chat", "/v1/chat/completions", "", 1000, true};
    }
    std::vector<usage_record> all_records() {
        std::vector<usage_record> out;
        for (const auto& s : list_segments(dir_)) {
            scan_segment(s.path, 0, [&](const spool_entry& e, std::uint64_t) {
                if (e.kind == entry_kind::close) {
                    out.push_back(e.record);
                }
                return true;
            });
        }
        return out;
    }
    fs::path dir_;
};

TEST_F(SpoolTest, AppendsBecomeDurableInGroups) {
    spool_writer writer(options(), nullptr);
    constexpr int n = 2000;
    std::atomic<int> durable{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < n / 4; ++i) {
                auto seq = writer.append(
                    encode_close(record(std::to_string(t) + "-" + std::to_string(i))), true);
                writer.when_durable(seq, [&](bool ok) { durable += ok ? 1 : 0; });
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    ASSERT_TRUE(writer.flush());
    EXPECT_EQ(durable.load(), n);
    auto stats = writer.stats();
    EXPECT_EQ(stats.appended, static_cast<std::uint64_t>(n));
    EXPECT_EQ(stats.durable, static_cast<std::uint64_t>(n));
    EXPECT_EQ(stats.closes_durable, static_cast<std::uint64_t>(n));
    // Group commit: far fewer fsyncs than entries.
    EXPECT_LT(stats.commits, static_cast<std::uint64_t>(n) / 4);
    EXPECT_EQ(all_records().size(), static_cast<std::size_t>(n));
}

TEST_F(SpoolTest, WhenDurableRunsAtOnceForDurableEntries) {
    spool_writer writer(options(), nullptr);
    auto seq = writer.append(encode_open(open("a")));
    ASSERT_TRUE(writer.flush());
    EXPECT_TRUE(writer.is_durable(seq));
    bool called = false;
    writer.when_durable(seq, [&](bool ok) { called = ok; });
    EXPECT_TRUE(called);
}

TEST_F(SpoolTest, RotatesBySizeAndEachProcessStartsANewSegment) {
    {
        spool_writer writer(options(4096), nullptr);
        for (int i = 0; i < 100; ++i) {
            writer.append(encode_close(record("r" + std::to_string(i))), true);
            writer.flush();
        }
    }
    auto segments = list_segments(dir_);
    ASSERT_GT(segments.size(), 3u);
    for (const auto& s : segments) {
        EXPECT_LE(fs::file_size(s.path), 4096u + 1024u) << s.path;
    }
    auto highest = segments.back().number;
    {
        spool_writer writer(options(4096), nullptr);
        writer.append(encode_close(record("next")), true);
        writer.flush();
    }
    EXPECT_EQ(list_segments(dir_).back().number, highest + 1);
    EXPECT_EQ(all_records().size(), 101u);
}

TEST_F(SpoolTest, OneWriterPerDirectory) {
    spool_writer first(options(), nullptr);
    EXPECT_THROW(spool_writer second(options(), nullptr), std::runtime_error);
}

TEST_F(SpoolTest, RecoveryTurnsUnclosedOpensIntoCrashRecoveredRecords) {
    {
        spool_writer writer(options(), nullptr);
        writer.append(encode_open(open("closed")));
        writer.append(encode_open(open("cut")));
        writer.append(encode_open(open("bare")));
        writer.append(encode_checkpoint({"cut", 1500, 200, 0.1, {}, {7, token_source::counted}}));
        writer.append(encode_checkpoint({"cut", 1900, 200, 0.1, {}, {12, token_source::counted}}));
        writer.append(encode_close(record("closed")), true);
        writer.flush();
    }
    // A write cut by SIGKILL: half a line at the end of the segment.
    auto segment = list_segments(dir_).back().path;
    {
        std::ofstream out(segment, std::ios::app);
        std::string half = encode_close(record("cut"));
        out << half.substr(0, half.size() / 2);
    }
    auto result = find_unclosed(dir_);
    EXPECT_EQ(result.records, 1u);
    EXPECT_EQ(result.counts.partial_tail, 1u);
    ASSERT_EQ(result.recovered.size(), 2u);
    EXPECT_EQ(result.recovered[0].id, "cut");
    EXPECT_EQ(result.recovered[0].outcome, "crash_recovered");
    EXPECT_EQ(result.recovered[0].output, (token_count{12, token_source::counted}));
    EXPECT_EQ(result.recovered[0].end_unix_ms, 1900);
    EXPECT_EQ(result.recovered[1].id, "bare");
    // Once their records are written, a second recovery finds nothing.
    {
        spool_writer writer(options(), nullptr);
        for (const auto& r : result.recovered) {
            writer.append(encode_close(r), true);
        }
        writer.flush();
    }
    EXPECT_TRUE(find_unclosed(dir_).recovered.empty());
}

TEST_F(SpoolTest, BatchesFollowTheCursorAcrossSegmentsAndSkipCutTails) {
    {
        spool_writer writer(options(), nullptr);
        for (int i = 0; i < 5; ++i) {
            writer.append(encode_open(open("r" + std::to_string(i))));
            writer.append(encode_close(record("r" + std::to_string(i))), true);
        }
        writer.flush();
    }
    {
        std::ofstream out(list_segments(dir_).back().path, std::ios::app);
        out << "{\"v\":1,\"type\":\"clo";  // cut by a crash
    }
    {
        spool_writer writer(options(), nullptr);
        for (int i = 5; i < 8; ++i) {
            writer.append(encode_close(record("r" + std::to_string(i))), true);
        }
        writer.flush();
    }
    EXPECT_FALSE(read_cursor(dir_));
    cursor c{};
    std::vector<std::string> shipped;
    for (int round = 0; round < 10; ++round) {
        auto batch = read_batch(dir_, c, 3);
        for (const auto& r : batch.records) {
            shipped.push_back(r.id);
        }
        c = batch.next;
        ASSERT_TRUE(write_cursor(dir_, c));
        EXPECT_EQ(read_cursor(dir_), c);
        if (batch.records.empty()) {
            break;
        }
    }
    EXPECT_EQ(shipped, (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}));
    EXPECT_EQ(count_records_after(dir_, c), 0u);
    EXPECT_EQ(count_records_after(dir_, cursor{}), 8u);
}

TEST_F(SpoolTest, NewestSegmentTailIsNotConsumedWhileItMayStillGrow) {
    spool_writer writer(options(), nullptr);
    writer.append(encode_close(record("a")), true);
    writer.flush();
    {
        std::ofstream out(list_segments(dir_).back().path, std::ios::app);
        out << "{\"v\":1";
    }
    auto batch = read_batch(dir_, cursor{}, 10);
    ASSERT_EQ(batch.records.size(), 1u);
    auto size = fs::file_size(list_segments(dir_).back().path);
    EXPECT_EQ(batch.next.offset, size - 6);
}

// A disk that refuses writes (here: RLIMIT_FSIZE, which binds root too) is loud, keeps every
// entry in memory, releases waiters, and writes everything once the disk works again.
TEST_F(SpoolTest, FailingDiskKeepsEntriesAndRetries) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    std::vector<std::string> logged;
    std::mutex log_mutex;
    {
        spool_writer writer(options(), [&](const std::string& m) {
            std::lock_guard lock(log_mutex);
            logged.push_back(m);
        });
        rlimit small = old;
        small.rlim_cur = 2048;
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
        std::uint64_t last = 0;
        for (int i = 0; i < 40; ++i) {
            last = writer.append(encode_close(record("f" + std::to_string(i))), true);
        }
        EXPECT_FALSE(writer.flush());
        bool released = false;
        bool result = true;
        writer.when_durable(last, [&](bool ok) {
            released = true;
            result = ok;
        });
        EXPECT_TRUE(released);
        EXPECT_FALSE(result);
        auto stats = writer.stats();
        EXPECT_TRUE(stats.failing);
        EXPECT_GE(stats.errors, 1u);
        EXPECT_GT(stats.pending_bytes, 0u);
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
        writer.append(encode_close(record("after")), true);
        EXPECT_TRUE(writer.flush());
        EXPECT_FALSE(writer.stats().failing);
        EXPECT_EQ(writer.stats().dropped, 0u);
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    {
        std::lock_guard lock(log_mutex);
        ASSERT_FALSE(logged.empty());
        EXPECT_NE(logged.front().find("usage spool write failed"), std::string::npos);
    }
    // Every entry is there exactly once (the failed attempt left only cut or complete lines in
    // the older segment; ids may repeat only if a whole batch got in before the error).
    std::set<std::string> ids;
    for (const auto& r : all_records()) {
        ids.insert(r.id);
    }
    EXPECT_EQ(ids.size(), 41u);
}

TEST_F(SpoolTest, RecoveryMarkLimitsTheScanToLaterSegments) {
    EXPECT_FALSE(read_recovery_mark(dir_));
    std::uint64_t second = 0;
    {
        spool_writer writer(options(), nullptr);
        writer.append(encode_open(open("old")));  // before the mark: must already be closed
        writer.flush();
    }
    {
        spool_writer writer(options(), nullptr);
        second = writer.first_segment();
        writer.append(encode_open(open("new")));
        writer.flush();
    }
    EXPECT_EQ(find_unclosed(dir_).recovered.size(), 2u);
    ASSERT_TRUE(write_recovery_mark(dir_, second));
    EXPECT_EQ(read_recovery_mark(dir_), second);
    auto limited = find_unclosed(dir_, *read_recovery_mark(dir_));
    ASSERT_EQ(limited.recovered.size(), 1u);
    EXPECT_EQ(limited.recovered[0].id, "new");
    EXPECT_EQ(limited.segments, 1u);
}

// A line of the wrong shape (JSON whose required start time is a number, and a line that is
// not JSON at all) is set aside with its file and line; its neighbours are read as ever.
TEST_F(SpoolTest, LinesThatAreNotEntriesAreQuarantinedOnceAndCostNothingElse) {
    const std::string typed = R"({"v":1,"type":"open","id":"typed","start":1000,"streamed":"yes"})"
                              "\n";
    std::string segment;
    {
        spool_writer writer(options(), nullptr);
        writer.append(encode_open(open("before")));
        writer.append(typed);
        writer.append("not json at all\n");
        writer.append(encode_open(open("after")));
        writer.flush();
        segment = list_segments(dir_).back().path.filename().string();
    }
    std::vector<std::string> logged;
    {
        spool_writer writer(options(), nullptr);
        const auto report = recover_unclosed(writer, dir_);
        EXPECT_EQ(report.recovered, 2u);
        EXPECT_EQ(report.malformed, 2u);
        EXPECT_TRUE(report.quarantine_written);
        EXPECT_TRUE(report.mark_written);
        ASSERT_EQ(report.first_quarantined.size(), 2u);
        EXPECT_EQ(report.first_quarantined[0].file, segment);
        EXPECT_EQ(report.first_quarantined[0].line, 2u);
        EXPECT_EQ(report.first_quarantined[1].line, 3u);
        EXPECT_EQ(report.first_quarantined[1].offset,
                  encode_open(open("before")).size() + typed.size());
    }
    auto quarantined = [&] {
        std::ifstream in(dir_ / quarantine_file::file_name);
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) {
            lines.push_back(line);
        }
        return lines;
    };
    auto lines = quarantined();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].find("\"file\":\"" + segment + "\""), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("\"line\":2"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find(R"(\"streamed\":\"yes\")"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("\"text\":\"not json at all\""), std::string::npos) << lines[1];
    // The next start reads only its predecessor's segment: nothing is quarantined twice.
    {
        spool_writer writer(options(), nullptr);
        const auto report = recover_unclosed(writer, dir_);
        EXPECT_EQ(report.malformed, 0u);
    }
    EXPECT_EQ(quarantined().size(), 2u);
}

// An operator prunes every segment the cursor says is shipped: the next segment still comes
// after the cursor's, so the shipper reads it.
TEST_F(SpoolTest, SegmentNumbersContinueAfterPruning) {
    {
        spool_writer writer(options(64), nullptr);  // rotates at every commit
        writer.append(encode_close(record("a")), true);
        writer.flush();
        writer.append(encode_close(record("b")), true);
        writer.flush();
        EXPECT_EQ(writer.stats().segment, 2u);
    }
    EXPECT_EQ(read_segment_mark(dir_), 2u);
    const auto batch = read_batch(dir_, {}, 10);
    ASSERT_EQ(batch.records.size(), 2u);
    ASSERT_TRUE(write_cursor(dir_, batch.next));
    EXPECT_EQ(batch.next.segment, 2u);
    for (const auto& s : list_segments(dir_)) {
        fs::remove(s.path);
    }
    {
        spool_writer writer(options(), nullptr);
        EXPECT_EQ(writer.first_segment(), 3u);
        writer.append(encode_close(record("c")), true);
        writer.flush();
    }
    const auto next = read_batch(dir_, *read_cursor(dir_), 10);
    ASSERT_EQ(next.records.size(), 1u);
    EXPECT_EQ(next.records[0].id, "c");

    // Without a cursor (no sink), the high-water mark alone keeps the numbers going up.
    fs::remove(dir_ / "shipper.cursor");
    for (const auto& s : list_segments(dir_)) {
        fs::remove(s.path);
    }
    spool_writer writer(options(), nullptr);
    EXPECT_EQ(writer.first_segment(), 4u);
}

TEST_F(SpoolTest, ACursorAloneKeepsNumbersAboveIt) {
    ASSERT_TRUE(write_cursor(dir_, {41, 0}));
    spool_writer writer(options(), nullptr);
    EXPECT_EQ(writer.first_segment(), 42u);
}

// 2^64-1 has no successor a reader would order after it: refuse to start, saying why.
TEST_F(SpoolTest, ExhaustedSegmentNumbersRefuseToStart) {
    const auto last = std::numeric_limits<std::uint64_t>::max();
    std::ofstream(dir_ / segment_name(last)) << "";
    try {
        spool_writer writer(options(), nullptr);
        ADD_FAILURE() << "started at segment " << writer.first_segment();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("exhausted"), std::string::npos) << e.what();
    }
    // The number below the last one is still usable, and is never rotated past.
    fs::remove(dir_ / segment_name(last));
    ASSERT_TRUE(write_segment_mark(dir_, last - 1));
    spool_writer writer(options(64), nullptr);
    EXPECT_EQ(writer.first_segment(), last);
    writer.append(encode_close(record("a")), true);
    EXPECT_TRUE(writer.flush());
    writer.append(encode_close(record("b")), true);
    EXPECT_TRUE(writer.flush());
    EXPECT_EQ(writer.stats().segment, last);
    EXPECT_EQ(list_segments(dir_).size(), 1u);
}

}  // namespace
}  // namespace tokenmeter::usage
