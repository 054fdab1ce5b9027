#include "kube/rate_limit.h"

#include <algorithm>
#include <thread>

namespace chamber::kube {

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)) {}

Clock::duration TokenBucket::Reserve(Clock::time_point now) {
  if (qps_ <= 0) return Clock::duration::zero();
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) {
    started_ = true;
    last_ = now;
  }
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

void TokenBucket::Wait() {
  const Clock::duration d = Reserve(Clock::now());
  if (d > Clock::duration::zero()) std::this_thread::sleep_for(d);
}

std::chrono::milliseconds BackoffPolicy::Delay(int attempt, std::mt19937_64& rng) const {
  const int64_t base = initial.count();
  const int shift = std::min(attempt, 30);
  const int64_t full = std::min<int64_t>(max.count(), base << shift);
  const int64_t half = full / 2;
  std::uniform_int_distribution<int64_t> jitter(0, full - half);
  return std::chrono::milliseconds(half + jitter(rng));
}

std::chrono::milliseconds BackoffPolicy::DelayWithRetryAfter(int attempt, int retry_after_seconds,
                                                             std::mt19937_64& rng) const {
  if (retry_after_seconds > 0)
    return std::min<std::chrono::milliseconds>(max, std::chrono::seconds(retry_after_seconds));
  return Delay(attempt, rng);
}

}  // namespace chamber::kube
