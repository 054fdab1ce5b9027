#include "daemon/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace chamber::daemon {

RateLimiter::RateLimiter(RateLimit limit) : limit_(limit) {}

void RateLimiter::Refill(Bucket& b, Clock::time_point now) const {
  if (now <= b.last) return;
  const double elapsed = std::chrono::duration<double>(now - b.last).count();
  b.tokens = std::min(std::max(limit_.burst, 1.0), b.tokens + elapsed * limit_.rate);
  b.last = now;
}

void RateLimiter::Forget(Clock::time_point now) {
  const double burst = std::max(limit_.burst, 1.0);
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    Bucket b = it->second;
    Refill(b, now);
    it = b.tokens >= burst ? buckets_.erase(it) : std::next(it);
  }
}

RateLimiter::Decision RateLimiter::Take(std::string_view client, Clock::time_point now) {
  if (limit_.rate <= 0) return {};
  const double burst = std::max(limit_.burst, 1.0);
  std::lock_guard<std::mutex> lock(mu_);
  // A sweep each time a bucket could have refilled from empty: O(clients) per refill period.
  if (now >= next_sweep_) {
    Forget(now);
    next_sweep_ = now + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(burst / limit_.rate));
  }
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (buckets_.size() >= std::max<size_t>(limit_.max_clients, 1)) {
      Forget(now);
      while (buckets_.size() >= std::max<size_t>(limit_.max_clients, 1)) {
        buckets_.erase(std::min_element(
            buckets_.begin(), buckets_.end(),
            [](const auto& a, const auto& b) { return a.second.last < b.second.last; }));
      }
    }
    it = buckets_.emplace(std::string(client), Bucket{burst, now}).first;
  }
  Bucket& b = it->second;
  Refill(b, now);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return {};
  }
  const double wait_s = (1 - b.tokens) / limit_.rate;
  return {false, std::chrono::milliseconds(static_cast<int64_t>(std::ceil(wait_s * 1000)))};
}

size_t RateLimiter::clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

}  // namespace chamber::daemon
