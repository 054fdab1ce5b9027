#include "kubesim/work_queue.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace chamber::kubesim {
namespace {

using namespace std::chrono_literals;

TEST(KubesimWorkQueue, DeduplicatesAndRequeuesKeysAddedWhileProcessing) {
  WorkQueue q;
  q.Add("a");
  q.Add("a");
  q.Add("b");
  EXPECT_EQ(q.Len(), 2u);
  std::string key;
  ASSERT_TRUE(q.Get(&key));
  EXPECT_EQ(key, "a");
  q.Add("a");  // while "a" is processed: not handed out twice at once
  EXPECT_EQ(q.Len(), 1u);
  ASSERT_TRUE(q.Get(&key));
  EXPECT_EQ(key, "b");
  EXPECT_EQ(q.Len(), 0u);
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  ASSERT_TRUE(q.Get(&key));
  EXPECT_EQ(key, "a");
}

TEST(KubesimWorkQueue, AddAfterKeepsTheEarliestTime) {
  WorkQueue q;
  const auto start = std::chrono::steady_clock::now();
  q.AddAfter("late", 10s);
  q.AddAfter("late", 50ms);  // earlier wins
  q.AddAfter("late", 20s);   // later is ignored
  EXPECT_EQ(q.Waiting(), 1u);
  std::string key;
  ASSERT_TRUE(q.Get(&key));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(key, "late");
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(q.Waiting(), 0u);
}

TEST(KubesimWorkQueue, SeveralWorkersWaitOnTimers) {
  WorkQueue q;
  q.AddAfter("a", 30ms);
  std::vector<std::string> got(4);
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) workers.emplace_back([&q, &got, i] { ASSERT_TRUE(q.Get(&got[i])); });
  // Each new earliest timer wakes the sleepers, whose timer entries others then remove.
  for (const char* key : {"b", "c", "d"}) {
    std::this_thread::sleep_for(5ms);
    q.AddAfter(key, 20ms);
  }
  for (auto& w : workers) w.join();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(q.Waiting(), 0u);
}

TEST(KubesimWorkQueue, ShutDownWakesWaiters) {
  WorkQueue q;
  bool got = true;
  std::thread t([&] {
    std::string key;
    got = q.Get(&key);
  });
  std::this_thread::sleep_for(20ms);
  q.ShutDown();
  t.join();
  EXPECT_FALSE(got);
}

}  // namespace
}  // namespace chamber::kubesim
