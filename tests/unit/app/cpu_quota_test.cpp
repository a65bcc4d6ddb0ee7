// Unit tests for app/cpu_quota: cgroup v1/v2 quota parsing and the default thread count.
#include "app/cpu_quota.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace tokenmeter::app {
namespace {

namespace fs = std::filesystem;

class fake_root {
  public:
    fake_root() {
        std::random_device rd;
        dir_ = fs::temp_directory_path() / ("tm_cgroup_" + std::to_string(rd()));
        fs::create_directories(dir_);
    }
    ~fake_root() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    fake_root(const fake_root&) = delete;
    fake_root& operator=(const fake_root&) = delete;

    void write(const std::string& relative, const std::string& text) const {
        const fs::path p = dir_ / relative;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
    }
    [[nodiscard]] std::string path() const { return dir_.string(); }

  private:
    fs::path dir_;
};

TEST(CpuQuota, ParsesCpuMax) {
    EXPECT_FALSE(parse_cpu_max("max 100000\n"));
    ASSERT_TRUE(parse_cpu_max("25000 100000\n"));
    EXPECT_DOUBLE_EQ(*parse_cpu_max("25000 100000\n"), 0.25);
    EXPECT_DOUBLE_EQ(*parse_cpu_max("200000 100000"), 2.0);
    EXPECT_FALSE(parse_cpu_max(""));
    EXPECT_FALSE(parse_cpu_max("garbage"));
    EXPECT_FALSE(parse_cpu_max("12x 100000"));
    EXPECT_FALSE(parse_cpu_max("100000 0"));
}

TEST(CpuQuota, ParsesCfsQuota) {
    EXPECT_FALSE(parse_cfs_quota("-1\n", "100000\n"));
    ASSERT_TRUE(parse_cfs_quota("150000\n", "100000\n"));
    EXPECT_DOUBLE_EQ(*parse_cfs_quota("150000\n", "100000\n"), 1.5);
    EXPECT_FALSE(parse_cfs_quota("abc", "100000"));
}

TEST(CpuQuota, DefaultThreadsRoundsUpAndCaps) {
    EXPECT_EQ(default_threads(0.25, 128).threads, 1u);
    EXPECT_EQ(default_threads(1.5, 128).threads, 2u);
    EXPECT_EQ(default_threads(2.0, 128).threads, 2u);
    EXPECT_EQ(default_threads(64.0, 8).threads, 8u);
    EXPECT_EQ(default_threads(std::nullopt, 8).threads, 8u);
    EXPECT_EQ(default_threads(std::nullopt, 224).threads, max_default_threads);
    EXPECT_EQ(default_threads(64.0, 224).threads, max_default_threads);
    EXPECT_EQ(default_threads(std::nullopt, 224, 4).threads, 4u);
    EXPECT_EQ(default_threads(6.0, 224, 4).threads, 4u);
    EXPECT_EQ(default_threads(2.0, 224, 4).threads, 2u);
    EXPECT_EQ(default_threads(std::nullopt, 8, 0).threads, 8u);
    EXPECT_NE(default_threads(std::nullopt, 224).reason.find("at most 8"), std::string::npos);
    EXPECT_NE(default_threads(std::nullopt, 224, 4).reason.find("affinity"), std::string::npos);
    EXPECT_EQ(default_threads(std::nullopt, 0).threads, 1u);
    EXPECT_NE(default_threads(0.25, 128).reason.find("quota"), std::string::npos);
}

TEST(CpuQuota, ReadsV2FromOwnCgroupAndTakesTheSmallestAncestor) {
    fake_root root;
    root.write("proc/self/cgroup", "0::/kubepods/pod1/c1\n");
    root.write("sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n");
    root.write("sys/fs/cgroup/kubepods/pod1/cpu.max", "50000 100000\n");
    root.write("sys/fs/cgroup/kubepods/cpu.max", "400000 100000\n");
    const auto quota = cgroup_cpu_quota(root.path());
    ASSERT_TRUE(quota);
    EXPECT_DOUBLE_EQ(*quota, 0.5);
}

TEST(CpuQuota, ReadsV2AtTheNamespaceRoot) {
    fake_root root;
    root.write("proc/self/cgroup", "0::/\n");
    root.write("sys/fs/cgroup/cpu.max", "250000 100000\n");
    const auto quota = cgroup_cpu_quota(root.path());
    ASSERT_TRUE(quota);
    EXPECT_DOUBLE_EQ(*quota, 2.5);
}

TEST(CpuQuota, ReadsV1CfsQuota) {
    fake_root root;
    root.write("proc/self/cgroup", "12:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n");
    root.write("sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us", "75000\n");
    root.write("sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us", "100000\n");
    const auto quota = cgroup_cpu_quota(root.path());
    ASSERT_TRUE(quota);
    EXPECT_DOUBLE_EQ(*quota, 0.75);
}

TEST(CpuQuota, NoQuotaAnywhere) {
    fake_root root;
    root.write("proc/self/cgroup", "0::/user.slice\n");
    root.write("sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
    EXPECT_FALSE(cgroup_cpu_quota(root.path()));
    fake_root empty;
    EXPECT_FALSE(cgroup_cpu_quota(empty.path()));
}

}  // namespace
}  // namespace tokenmeter::app
