// Client-side pacing: a token bucket for QPS and burst, and exponential backoff with jitter for
// retries. Both take time as an argument so their arithmetic is testable without sleeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>

namespace chamber::kube {

using Clock = std::chrono::steady_clock;

// A bucket of `burst` tokens refilled at `qps` per second (client-go's default 5 and 10). Each
// request takes one token; Reserve says how long to wait for it. Thread-safe. qps <= 0 means
// unlimited.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst);
  // Takes a token at `now` (possibly one not yet refilled) and returns how long the caller
  // must wait before using it.
  Clock::duration Reserve(Clock::time_point now);
  void Wait();  // Reserve(now) and sleep that long

 private:
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
  bool started_ = false;
};

// Delay before retry `attempt` (0-based): min(max, initial * 2^attempt), with "equal jitter":
// half fixed, half uniformly random, so simultaneous clients spread out without ever retrying
// at once. A server's Retry-After, when given, replaces the computed delay (capped at max).
struct BackoffPolicy {
  int max_retries = 5;
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{30'000};

  std::chrono::milliseconds Delay(int attempt, std::mt19937_64& rng) const;
  std::chrono::milliseconds DelayWithRetryAfter(int attempt, int retry_after_seconds,
                                                std::mt19937_64& rng) const;
};

}  // namespace chamber::kube
