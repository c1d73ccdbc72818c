#include "support/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tilefuse {
namespace {

TEST(ParallelForTest, RunsEveryIndexExactlyOnce) {
  for (int threads : {0, 1, 3, 64}) {
    std::vector<std::atomic<int>> runs(100);
    ParallelFor(100, threads, [&](int64_t i) { runs[i].fetch_add(1); });
    for (int i = 0; i < 100; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i << " with " << threads << " threads";
  }
}

TEST(ParallelForTest, NothingToDo) {
  bool ran = false;
  ParallelFor(0, 4, [&](int64_t) { ran = true; });
  EXPECT_FALSE(ran);
}

TEST(ParallelForTest, UsesSeveralThreadsAndOnlyTheCallerWhenSerial) {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  auto record = [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // so one thread cannot take them all
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
  };
  ParallelFor(8, 1, record);
  EXPECT_EQ(seen, std::set<std::thread::id>{std::this_thread::get_id()});
  seen.clear();
  ParallelFor(8, 4, record);
  EXPECT_GT(seen.size(), 1u);
  EXPECT_LE(seen.size(), 4u);
}

}  // namespace
}  // namespace tilefuse
