// A keyed work queue in the manner of client-go's workqueue: a key is queued at most once, is
// handed to one worker at a time, and a key added while it is being processed is queued again
// when the worker is done. AddAfter delays a key (the earliest pending time wins).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace chamber::kubesim {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::duration delay);
  // Blocks until a key is ready; false once ShutDown was called.
  bool Get(std::string* key);
  void Done(const std::string& key);
  void ShutDown();

  size_t Len() const;      // keys ready now
  size_t Waiting() const;  // keys delayed

 private:
  void AddLocked(const std::string& key);
  void PromoteDueLocked(Clock::time_point now);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_, processing_;
  std::map<std::string, Clock::time_point> waiting_;      // key -> when it is due
  std::multimap<Clock::time_point, std::string> timers_;  // may hold stale entries
  bool shut_down_ = false;
};

}  // namespace chamber::kubesim
