#include "registry/worker_admission.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace worker_admission_test_file {

using namespace troupe::registry;
using namespace std::chrono_literals;
using clock_type = worker_admission::clock;

namespace {

const auto t0 = clock_type::time_point{} + 1000h;
constexpr std::uint64_t MB = 1u << 20;
constexpr std::uint64_t machine = 10000 * MB;  // an injected machine: tests need no small one

worker_admission_settings with_cpu(double close = 80, double reopen = 40, double offload = 0) {
  worker_admission_settings s;
  cpu_admission_settings c;
  c.close_percent = close;
  c.reopen_percent = reopen;
  if (offload > 0)
    c.offload_percent = offload;
  s.cpu = c;
  return s;
}

// Feeds `percent` every 100 ms for `span` after `from` (no memory reading); returns the time reached.
clock_type::time_point feed(worker_admission& a, double percent, std::chrono::milliseconds span,
                            clock_type::time_point from) {
  for (auto done = 0ms; done < span; done += 100ms)
    a.sample(percent, std::nullopt, from += 100ms);
  return from;
}

}  // namespace

TEST(WorkerAdmission, CpuClosesReportsOnceAndReopensWithHysteresis) {
  worker_admission a(with_cpu(), machine);
  EXPECT_FALSE(a.sample(0, std::nullopt, t0));
  EXPECT_TRUE(a.admits());
  int changes = 0;
  auto t = t0;
  for (int i = 0; i < 30; ++i)
    changes += a.sample(100, std::nullopt, t += 100ms);
  EXPECT_EQ(changes, 1) << "one report for the close, none while it stays closed";
  EXPECT_FALSE(a.admits());
  EXPECT_EQ(a.reason(), admission_block::cpu);
  EXPECT_FALSE(a.sample(0, std::nullopt, t += 100ms)) << "one idle sample does not reopen it";
  EXPECT_FALSE(a.admits());
  t = feed(a, 0, 2000ms, t);
  EXPECT_FALSE(a.admits()) << "2 s of cooling (constant 5 s) is not enough from ~95 % to 40 %";
  bool reopened = false;
  for (int i = 0; i < 100 && !reopened; ++i)
    reopened = a.sample(0, std::nullopt, t += 100ms);
  EXPECT_TRUE(reopened);
  EXPECT_TRUE(a.admits());
  EXPECT_EQ(a.retry_after(std::nullopt), 0u);
}

TEST(WorkerAdmission, CpuRetryAfterIsTheCoolingTimeToTheReopenThreshold) {
  worker_admission a(with_cpu(80, 40), machine);
  a.sample(0, std::nullopt, t0);
  auto t = feed(a, 100, 5000ms, t0);
  ASSERT_FALSE(a.admits());
  const double temp = a.cpu_temperature();
  const auto expected = static_cast<std::uint32_t>(std::ceil(5 * std::log(temp / 40)));
  EXPECT_EQ(a.cpu_retry_after(), expected) << "temperature " << temp;
  EXPECT_EQ(a.retry_after(std::nullopt), expected);
  EXPECT_GE(expected, 4u);  // ~99 % → 40 % at 5 s: ≈ 4.5 s
  // And it comes true: idle that long reopens it, one second less does not.
  auto almost = feed(a, 0, std::chrono::milliseconds(static_cast<int>((expected - 1) * 1000)), t);
  EXPECT_FALSE(a.admits());
  feed(a, 0, 1000ms, almost);
  EXPECT_TRUE(a.admits());
  // Barely closed: at least one second.
  worker_admission b(with_cpu(80, 79.9), machine);
  b.sample(0, std::nullopt, t0);
  feed(b, 100, 2000ms, t0);
  ASSERT_FALSE(b.admits());
  EXPECT_GE(b.cpu_retry_after(), 1u);
}

TEST(WorkerAdmission, CpuOffIsNeverClosedByCpu) {
  worker_admission a(worker_admission_settings{}, machine);
  feed(a, 1000, 5000ms, t0);
  EXPECT_TRUE(a.admits());
  EXPECT_FALSE(a.cpu_on());
  EXPECT_FALSE(a.wants_offload());
  EXPECT_EQ(a.cpu_temperature(), 0);
}

TEST(WorkerAdmission, OffloadOnlyWhileClosedAndPastTheOffloadThreshold) {
  worker_admission a(with_cpu(80, 40, 150), machine);
  a.sample(0, std::nullopt, t0);
  auto t = feed(a, 120, 5000ms, t0);
  EXPECT_FALSE(a.admits());
  EXPECT_FALSE(a.wants_offload()) << "closed at ~120 %, below 150 %";
  t = feed(a, 200, 5000ms, t);
  EXPECT_TRUE(a.wants_offload());
  feed(a, 0, 20000ms, t);
  EXPECT_TRUE(a.admits());
  EXPECT_FALSE(a.wants_offload());
}

TEST(WorkerAdmission, ThreadIsolationJudgesTheNodeAgainstTheGroupBudget) {
  worker_admission_settings s;
  s.memory_max_percent = 10;  // 1000 MB of the injected 10000 MB
  worker_admission a(s, machine);
  EXPECT_EQ(a.memory_close_bytes(), 1000 * MB);
  EXPECT_EQ(a.memory_reopen_bytes(), 900 * MB);
  EXPECT_FALSE(a.sample(std::nullopt, 999 * MB, t0));
  EXPECT_TRUE(a.admits());
  EXPECT_TRUE(a.sample(std::nullopt, 1001 * MB, t0 + 1s));
  EXPECT_EQ(a.reason(), admission_block::memory);
  EXPECT_FALSE(a.sample(std::nullopt, 950 * MB, t0 + 2s)) << "within the 10 % margin: still closed";
  EXPECT_FALSE(a.sample(std::nullopt, std::nullopt, t0 + 3s)) << "no reading: nothing changes";
  EXPECT_FALSE(a.admits());
  EXPECT_TRUE(a.sample(std::nullopt, 899 * MB, t0 + 4s));
  EXPECT_TRUE(a.admits());
  EXPECT_FALSE(a.wants_replacement()) << "thread isolation: the node is never replaced";
  EXPECT_EQ(a.rss_bytes(), 899 * MB);
}

TEST(WorkerAdmission, ProcessIsolationJudgesTheWorkerAgainstItsShare) {
  worker_admission_settings s;
  s.own_process = true;
  s.memory_max_percent = 40;  // 4000 MB for the group
  s.max_workers = 4;          // 1000 MB a worker
  s.worker_memory_admission_percent = 80;
  s.restart_occupancy_max_percent = 95;
  worker_admission a(s, machine);
  EXPECT_EQ(a.memory_close_bytes(), 800 * MB);
  EXPECT_EQ(a.memory_reopen_bytes(), 700 * MB) << "10 % of the share below";
  EXPECT_EQ(a.replacement_bytes(), 950 * MB);
  EXPECT_TRUE(a.sample(std::nullopt, 850 * MB, t0));
  EXPECT_EQ(a.reason(), admission_block::memory);
  EXPECT_FALSE(a.wants_replacement());
  a.sample(std::nullopt, 951 * MB, t0 + 1s);
  EXPECT_TRUE(a.wants_replacement());
  EXPECT_TRUE(a.sample(std::nullopt, 600 * MB, t0 + 2s));
  EXPECT_TRUE(a.admits());
  EXPECT_FALSE(a.wants_replacement());

  s.restart_occupancy_max_percent = 0;
  worker_admission off(s, machine);
  off.sample(std::nullopt, 5000 * MB, t0);
  EXPECT_FALSE(off.wants_replacement()) << "0: replacement off";
  worker_admission unknown(s, 0);
  unknown.sample(std::nullopt, 5000 * MB, t0);
  EXPECT_TRUE(unknown.admits()) << "no machine size: memory admission off";
}

TEST(WorkerAdmission, MemoryRetryAfterIsTheNextIdleFreeze) {
  using secs = worker_admission::seconds;
  EXPECT_EQ(worker_admission::memory_retry_after(secs(90.2)), 91u);
  EXPECT_EQ(worker_admission::memory_retry_after(secs(0.01)), 1u) << "at least 1";
  EXPECT_EQ(worker_admission::memory_retry_after(secs(-5)), 1u) << "overdue";
  EXPECT_EQ(worker_admission::memory_retry_after(std::nullopt), 1u) << "nobody hosted: the next reading";
  worker_admission_settings s = with_cpu();
  s.memory_max_percent = 10;
  worker_admission a(s, machine);
  a.sample(0, 2000 * MB, t0);
  ASSERT_EQ(a.reason(), admission_block::memory);
  EXPECT_EQ(a.retry_after(secs(120)), 120u);
  feed(a, 100, 5000ms, t0);
  EXPECT_EQ(a.reason(), admission_block::memory) << "memory wins the reason";
  EXPECT_EQ(a.retry_after(secs(1)), a.cpu_retry_after()) << "the longest block in force";
}

TEST(WorkerAdmission, WorkerMaxUsersClosesAtTheCapAndReopensWhenOneLeaves) {
  worker_admission_settings s;
  s.max_users = 3;
  worker_admission a(s, machine);
  EXPECT_FALSE(a.count_users(2));
  EXPECT_TRUE(a.admits());
  EXPECT_TRUE(a.room_for_one_more());
  EXPECT_TRUE(a.count_users(3)) << "the third user fills it: a change to report";
  EXPECT_EQ(a.reason(), admission_block::users);
  EXPECT_FALSE(a.room_for_one_more());
  EXPECT_GE(a.retry_after(std::chrono::duration<double>(42)), 42u) << "a freeze frees a place";
  EXPECT_TRUE(a.count_users(2));
  EXPECT_TRUE(a.admits());
  // A hot apply raises the cap, then removes it.
  a.count_users(3);
  EXPECT_TRUE(a.set_max_users(10));
  EXPECT_TRUE(a.admits());
  EXPECT_FALSE(a.set_max_users(0));
  a.count_users(100000);
  EXPECT_TRUE(a.admits()) << "0: no cap";
}

TEST(WorkerAdmission, TheMachineMemoryAlarmClosesEveryWorkerWithHysteresisAndBeforeTheUserCap) {
  worker_admission_settings s;
  s.machine_memory_alarm_percent = 80;
  s.max_users = 1;
  worker_admission a(s, machine);
  EXPECT_FALSE(a.sample_machine(79));
  EXPECT_TRUE(a.sample_machine(81));
  EXPECT_EQ(a.reason(), admission_block::machine_memory);
  a.count_users(1);
  EXPECT_EQ(a.reason(), admission_block::machine_memory) << "the machine is judged before the cap";
  EXPECT_FALSE(a.sample_machine(75)) << "still closed: it reopens 10 points below the alarm";
  EXPECT_TRUE(a.sample_machine(69));
  EXPECT_EQ(a.reason(), admission_block::users);
  // Off (0): never closed by the machine.
  worker_admission off(worker_admission_settings{}, machine);
  EXPECT_FALSE(off.sample_machine(99.9));
  EXPECT_TRUE(off.admits());
}

TEST(WorkerAdmission, RejectsBadSettings) {
  worker_admission_settings s;
  s.max_workers = 0;
  EXPECT_THROW(worker_admission(s, machine), std::invalid_argument);
  EXPECT_THROW(worker_admission(with_cpu(50, 60), machine), std::invalid_argument);
}

TEST(OffloadLedger, PicksTheLeastBusyOfTheUsersActiveSinceTheLastOffload) {
  offload_ledger l;
  EXPECT_FALSE(l.beat({{"a", 100}, {"b", 500}, {"c", 0}})) << "the first beat opens the window";
  EXPECT_FALSE(l.beat({{"a", 400}, {"b", 500}, {"c", 0}})) << "only a was active: never the only busy one";
  // Since the window opened: a +350, b +50, c idle: b is the least busy active one.
  EXPECT_EQ(l.beat({{"a", 450}, {"b", 550}, {"c", 0}}), "b");
  // A new window: b is gone (frozen); d was born since (all his time is in it).
  EXPECT_FALSE(l.beat({{"a", 450}, {"c", 0}, {"d", 7}})) << "only d active";
  EXPECT_EQ(l.beat({{"a", 460}, {"c", 0}, {"d", 9}}), "d") << "d +9 against a +10";
  EXPECT_FALSE(l.beat({{"a", 900}})) << "never the last user";
  EXPECT_FALSE(l.beat({{"a", 900}, {"c", 0}})) << "nobody but a active";
  l.clear();
  EXPECT_FALSE(l.beat({{"a", 1000}, {"c", 5}})) << "cleared: a new window opens";
  EXPECT_EQ(l.beat({{"a", 1002}, {"c", 6}}), "c");
}

}  // namespace worker_admission_test_file
