// An immutable value whose copies share one allocation: a std::shared_ptr<const T> that reads
// like a const T. A node's labels are copied from the build cache into every snapshot; with
// this a copy costs a reference count. Unlike Interned, equal values made apart are not merged
// (no table): for values that are mostly distinct, such as the labels of nodes that each carry
// their own hostname.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace chamber {

template <typename T>
class Shared {
 public:
  Shared() = default;
  // Implicit, so that `labels = list;` reads as it would for a T. An empty T allocates nothing.
  Shared(T value)  // NOLINT(google-explicit-constructor)
      : value_(value == T{} ? nullptr : std::make_shared<const T>(std::move(value))) {}

  const T& operator*() const { return value_ ? *value_ : Empty(); }
  const T* operator->() const { return &**this; }

  auto begin() const { return (**this).begin(); }
  auto end() const { return (**this).end(); }
  size_t size() const { return (**this).size(); }
  bool empty() const { return (**this).empty(); }
  decltype(auto) operator[](size_t i) const { return (**this)[i]; }
  decltype(auto) at(size_t i) const { return (**this).at(i); }
  // Whether the two share one allocation (a copy of the other), not only an equal value.
  bool SameAs(const Shared& o) const { return value_ == o.value_; }

  friend bool operator==(const Shared& a, const Shared& b) {
    return a.value_ == b.value_ || *a == *b;
  }

 private:
  static const T& Empty() {
    static const T kEmpty{};
    return kEmpty;
  }
  std::shared_ptr<const T> value_;
};

}  // namespace chamber
