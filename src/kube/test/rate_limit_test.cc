#include "kube/rate_limit.h"

#include <gtest/gtest.h>

#include "kube/errors.h"

namespace chamber::kube {
namespace {

using std::chrono::milliseconds;

TEST(TokenBucketTest, BurstThenQps) {
  TokenBucket b(5, 10);
  const auto t0 = Clock::now();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b.Reserve(t0), Clock::duration::zero()) << i;
  // The 11th waits one refill interval (1/5 s), the 12th two.
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(b.Reserve(t0)).count(), 200);
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(b.Reserve(t0)).count(), 400);
  // Two seconds later ten tokens have been refilled, two of them owed already.
  const auto t1 = t0 + std::chrono::seconds(2);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.Reserve(t1), Clock::duration::zero()) << i;
  EXPECT_GT(b.Reserve(t1), Clock::duration::zero());
}

TEST(TokenBucketTest, RefillIsCappedAtBurst) {
  TokenBucket b(100, 3);
  const auto t0 = Clock::now();
  b.Reserve(t0);
  const auto later = t0 + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.Reserve(later), Clock::duration::zero());
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(b.Reserve(later)).count(), 10);
  TokenBucket unlimited(0, 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(unlimited.Reserve(t0), Clock::duration::zero());
}

TEST(BackoffTest, ExponentialWithEqualJitterAndCap) {
  BackoffPolicy p;
  p.initial = milliseconds(100);
  p.max = milliseconds(1000);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      const int64_t full = std::min<int64_t>(1000, int64_t{100} << attempt);
      const int64_t d = p.Delay(attempt, rng).count();
      EXPECT_GE(d, full / 2) << attempt;
      EXPECT_LE(d, full) << attempt;
    }
  }
  EXPECT_EQ(p.DelayWithRetryAfter(0, 3, rng), milliseconds(1000));  // capped at max
  p.max = milliseconds(10'000);
  EXPECT_EQ(p.DelayWithRetryAfter(5, 3, rng), milliseconds(3000));
  EXPECT_LE(p.DelayWithRetryAfter(0, 0, rng), milliseconds(100));
}

TEST(ApiErrorTest, MapsKubernetesStatusObjects) {
  const Status nf = ApiErrorStatus(
      "GET /api/v1/namespaces/a/pods/x", 404,
      R"({"kind":"Status","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404})");
  EXPECT_EQ(nf.code(), StatusCode::kNotFound);
  EXPECT_TRUE(IsNotFound(nf));
  EXPECT_EQ(HttpCode(nf), 404);
  EXPECT_EQ(Reason(nf), "NotFound");
  EXPECT_EQ(nf.message(),
            "GET /api/v1/namespaces/a/pods/x: HTTP 404 NotFound: pods \"x\" not found");
  const Status wrapped = nf.WithContext("scheduler");
  EXPECT_TRUE(IsNotFound(wrapped));

  const Status exists =
      ApiErrorStatus("POST /x", 409, R"({"kind":"Status","reason":"AlreadyExists"})");
  EXPECT_TRUE(IsAlreadyExists(exists));
  EXPECT_FALSE(IsConflict(exists));
  EXPECT_EQ(exists.code(), StatusCode::kAlreadyExists);
  const Status conflict = ApiErrorStatus("PUT /x", 409, R"({"kind":"Status","reason":"Conflict"})");
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_TRUE(IsGone(ApiErrorStatus("GET /x", 410, "")));
  EXPECT_TRUE(IsTooManyRequests(ApiErrorStatus("GET /x", 429, "")));
  EXPECT_TRUE(IsForbidden(ApiErrorStatus("GET /x", 403, "")));
  EXPECT_TRUE(IsUnauthorized(ApiErrorStatus("GET /x", 401, "")));
  EXPECT_EQ(ApiErrorStatus("GET /x", 503, "").code(), StatusCode::kUnavailable);
  const Status html = ApiErrorStatus("GET /x", 502, "<html>bad gateway</html>");
  EXPECT_NE(html.message().find("<html>bad gateway</html>"), std::string::npos);
  EXPECT_EQ(HttpCode(Status::Internal("HTTP 40 x")), 0);
  EXPECT_EQ(HttpCode(Status::Ok()), 0);
}

}  // namespace
}  // namespace chamber::kube
