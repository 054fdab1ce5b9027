// A token bucket per API client, so that one runaway client (a script polling in a loop, a
// misconfigured agent) cannot take the server's threads and CPU from everyone else.
//
// Each client's bucket holds up to `burst` requests and refills at `rate` per second; a request
// takes one. A client whose bucket is empty is refused with the time until it holds one again.
// A bucket left alone long enough to refill completely is the same as no bucket, so such buckets
// are forgotten: memory stays proportional to the clients active in the last burst/rate seconds,
// and never exceeds `max_clients` (past it, the least recently seen client is forgotten). Time is
// passed in, so tests need no clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace chamber::daemon {

struct RateLimit {
  double rate = 50;    // requests per second per client, sustained; <= 0: no limit
  double burst = 200;  // requests a client may send at once after being idle; at least 1
  size_t max_clients = 10000;
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  struct Decision {
    bool allowed = true;
    std::chrono::milliseconds retry_after{0};  // when refused: until the bucket holds a request
  };

  explicit RateLimiter(RateLimit limit);

  // Takes one request from `client`'s bucket at `now`. Thread-safe.
  Decision Take(std::string_view client, Clock::time_point now);

  // Clients with a bucket now.
  size_t clients() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last;
  };
  void Refill(Bucket& b, Clock::time_point now) const;
  void Forget(Clock::time_point now);  // drops full buckets; mu_ held

  const RateLimit limit_;
  mutable std::mutex mu_;
  std::map<std::string, Bucket, std::less<>> buckets_;
  Clock::time_point next_sweep_{};
};

}  // namespace chamber::daemon
