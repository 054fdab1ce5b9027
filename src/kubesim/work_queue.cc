#include "kubesim/work_queue.h"

namespace chamber::kubesim {

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shut_down_ || !dirty_.insert(key).second) return;
  if (processing_.count(key) != 0) return;  // Done queues it again
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, Clock::duration delay) {
  if (delay <= Clock::duration::zero()) return Add(key);
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  const Clock::time_point at = Clock::now() + delay;
  auto [it, inserted] = waiting_.emplace(key, at);
  if (!inserted) {
    if (it->second <= at) return;
    it->second = at;
  }
  const bool earliest = timers_.empty() || at < timers_.begin()->first;
  timers_.emplace(at, key);
  if (earliest) cv_.notify_all();  // a sleeping worker may wait for a later timer
}

void WorkQueue::PromoteDueLocked(Clock::time_point now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto [at, key] = *timers_.begin();
    timers_.erase(timers_.begin());
    auto it = waiting_.find(key);
    if (it == waiting_.end() || it->second != at) continue;  // superseded by an earlier time
    waiting_.erase(it);
    AddLocked(key);
  }
}

bool WorkQueue::Get(std::string* key) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shut_down_) return false;
    PromoteDueLocked(Clock::now());
    if (!queue_.empty()) break;
    if (timers_.empty()) {
      cv_.wait(lock);
    } else {
      const Clock::time_point next = timers_.begin()->first;  // a copy: the map changes meanwhile
      cv_.wait_until(lock, next);
    }
  }
  *key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(*key);
  processing_.insert(*key);
  return true;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key) != 0 && !shut_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t WorkQueue::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

}  // namespace chamber::kubesim
