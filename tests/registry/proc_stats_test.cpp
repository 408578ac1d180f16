#include "registry/proc_stats.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace proc_stats_test_file {

using namespace troupe::registry;

TEST(ProcStats, ParsesKilobyteFields) {
  const std::string status = "Name:\ttroupe\nVmPeak:\t  200 kB\nVmRSS:\t    1234 kB\nThreads:\t4\n";
  EXPECT_EQ(proc_kb_field(status, "VmRSS"), 1234u * 1024);
  EXPECT_EQ(proc_kb_field(status, "VmPeak"), 200u * 1024);
  EXPECT_FALSE(proc_kb_field(status, "VmSwap")) << "absent";
  EXPECT_FALSE(proc_kb_field(status, "Threads")) << "not in kB";
  EXPECT_FALSE(proc_kb_field(status, "Vm")) << "a prefix of a name is not the name";
  EXPECT_FALSE(proc_kb_field("VmRSS:\t x kB\n", "VmRSS"));
  EXPECT_EQ(proc_kb_field("MemTotal:       16314264 kB", "MemTotal"), 16314264ull * 1024) << "no final newline";
}

TEST(ProcStats, MachineMemoryInUseIsTotalLessAvailable) {
  EXPECT_DOUBLE_EQ(*machine_memory_used_percent("MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 250 kB\n"), 75.0);
  EXPECT_FALSE(machine_memory_used_percent("MemTotal: 1000 kB\n")) << "no MemAvailable (a kernel before 3.14)";
  EXPECT_FALSE(machine_memory_used_percent("MemTotal: 10 kB\nMemAvailable: 20 kB\n"));
  EXPECT_FALSE(machine_memory_used_percent("MemTotal: 0 kB\nMemAvailable: 0 kB\n"));
  auto now = machine_memory_used_percent();
  ASSERT_TRUE(now) << "this machine's /proc/meminfo";
  EXPECT_GT(*now, 0);
  EXPECT_LT(*now, 100);
}

TEST(ProcStats, ReadsThisProcessAndThisMachine) {
  auto total = mem_total_bytes();
  ASSERT_TRUE(total);
  auto before = rss_bytes();
  ASSERT_TRUE(before);
  EXPECT_GT(*before, 0u);
  EXPECT_LT(*before, *total);
  // 64 MB touched page by page are resident: the reading follows them.
  std::vector<char> ballast(64u << 20);
  for (std::size_t i = 0; i < ballast.size(); i += 4096)
    ballast[i] = static_cast<char>(i);
  auto after = rss_bytes();
  ASSERT_TRUE(after);
  EXPECT_GE(*after, *before + (48u << 20)) << "before " << *before << " after " << *after;
  EXPECT_NE(ballast[4096], 1);  // keeps the ballast alive past the reading
}

}  // namespace proc_stats_test_file
