#include "daemon/rate_limiter.h"

#include <gtest/gtest.h>

namespace chamber::daemon {
namespace {

using std::chrono::milliseconds;
using Clock = RateLimiter::Clock;

// Times are multiples of 1/8 s, so every token count is exact in binary.
TEST(RateLimiterTest, ABurstThenTheSustainedRate) {
  RateLimiter limiter(RateLimit{.rate = 4, .burst = 4});
  const Clock::time_point t0{};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.Take("a", t0).allowed) << i;
  RateLimiter::Decision d = limiter.Take("a", t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, milliseconds(250));  // one request refills in 1/rate s
  // Another client has a bucket of its own.
  EXPECT_TRUE(limiter.Take("b", t0).allowed);
  // A quarter second later one more; then none until the next quarter.
  EXPECT_TRUE(limiter.Take("a", t0 + milliseconds(250)).allowed);
  d = limiter.Take("a", t0 + milliseconds(375));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, milliseconds(125));
  // Refused requests take nothing: asking every 1/8 s for 10 s gets the rate's 40, and the one
  // there at the start.
  int allowed = 0;
  for (int ms = 500; ms <= 10500; ms += 125)
    allowed += limiter.Take("a", t0 + milliseconds(ms)).allowed;
  EXPECT_EQ(allowed, 41);
}

TEST(RateLimiterTest, IdleClientsAreForgotten) {
  RateLimiter limiter(RateLimit{.rate = 10, .burst = 10});
  const Clock::time_point t0{};
  for (int i = 0; i < 100; ++i) limiter.Take("client-" + std::to_string(i), t0);
  EXPECT_EQ(limiter.clients(), 100u);
  // After burst/rate = 1 s every bucket is full again: the next request sweeps them all.
  limiter.Take("late", t0 + milliseconds(1000));
  EXPECT_EQ(limiter.clients(), 1u);
}

TEST(RateLimiterTest, MemoryIsBoundedUnderManyClients) {
  RateLimiter limiter(RateLimit{.rate = 1, .burst = 100, .max_clients = 50});
  const Clock::time_point t0{};
  for (int i = 0; i < 1000; ++i)
    EXPECT_TRUE(limiter.Take("addr-" + std::to_string(i), t0 + milliseconds(i)).allowed);
  EXPECT_EQ(limiter.clients(), 50u);
  // The least recently seen went first; the newest still has its bucket (99 left, not 100).
  for (int i = 0; i < 99; ++i)
    EXPECT_TRUE(limiter.Take("addr-999", t0 + milliseconds(999)).allowed);
  EXPECT_FALSE(limiter.Take("addr-999", t0 + milliseconds(999)).allowed);
}

TEST(RateLimiterTest, ZeroRateIsNoLimit) {
  RateLimiter limiter(RateLimit{.rate = 0, .burst = 1});
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(limiter.Take("a", Clock::time_point{}).allowed);
  EXPECT_EQ(limiter.clients(), 0u);
}

}  // namespace
}  // namespace chamber::daemon
