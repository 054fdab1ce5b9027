// Values shared by every object that holds an equal one. Most pods of a cluster carry the same
// tolerations (the API server's two defaults) and the same containers as the other replicas of
// their Job or Deployment: a cache of 100,000 pods keeps each distinct list once.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace chamber {

// An immutable value, shared with every other Interned<T> made from an equal one (T must be
// ordered, for the table of shared values). Reads like a const T; for a vector: size, indexing,
// iteration. An empty one (made from T{}, or default-constructed) allocates nothing.
template <typename T>
class Interned {
 public:
  Interned() = default;
  explicit Interned(T value);  // thread-safe

  const T& operator*() const { return value_ ? *value_ : Empty(); }
  const T* operator->() const { return &**this; }
  // The shared value, null when empty: equal values made while one is held give one address.
  const T* get() const { return value_.get(); }

  auto begin() const { return (**this).begin(); }
  auto end() const { return (**this).end(); }
  size_t size() const { return (**this).size(); }
  bool empty() const { return (**this).empty(); }
  decltype(auto) operator[](size_t i) const { return (**this)[i]; }

  friend bool operator==(const Interned& a, const Interned& b) {
    return a.value_ == b.value_ || *a == *b;
  }

 private:
  static const T& Empty() {
    static const T kEmpty{};
    return kEmpty;
  }
  // The values made so far, each held weakly: a value lives as long as an Interned holds it.
  // Entries of values no longer held are dropped whenever the table has doubled.
  struct Table {
    std::mutex mu;
    std::map<T, std::weak_ptr<const T>> values;
    size_t prune_at = 64;
  };
  static Table& table() {
    static Table t;
    return t;
  }

  std::shared_ptr<const T> value_;
};

template <typename T>
Interned<T>::Interned(T value) {
  if (value == T{}) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.values.find(value);
  if (it != t.values.end()) {
    value_ = it->second.lock();
    if (value_) return;
    value_ = std::make_shared<const T>(std::move(value));
    it->second = value_;
    return;
  }
  if (t.values.size() >= t.prune_at) {
    std::erase_if(t.values, [](const auto& kv) { return kv.second.expired(); });
    t.prune_at = 2 * t.values.size() + 64;
  }
  value_ = std::make_shared<const T>(value);
  t.values.emplace(std::move(value), value_);
}

}  // namespace chamber
