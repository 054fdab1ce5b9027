// A list of immutable items that other lists may share. Each cycle the daemon publishes a new
// fleet state while the last one is still read; with 100,000 workloads, most unchanged from one
// cycle to the next, the new state holds the old state's items instead of copies of them.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace chamber {

// Reads like a const std::vector<T>: size, indexing, iteration over const T&. Items are added,
// never changed in place: Add(T) stores a new one, Add(item(i)) of another list shares that one.
template <typename T>
class SharedItems {
 public:
  using Item = std::shared_ptr<const T>;

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    explicit const_iterator(typename std::vector<Item>::const_iterator it) : it_(it) {}
    const T& operator*() const { return **it_; }
    const T* operator->() const { return it_->get(); }
    const T& operator[](difference_type n) const { return *it_[n]; }
    const_iterator& operator++() { return ++it_, *this; }
    const_iterator operator++(int) { return const_iterator(it_++); }
    const_iterator& operator--() { return --it_, *this; }
    const_iterator operator--(int) { return const_iterator(it_--); }
    const_iterator& operator+=(difference_type n) { return it_ += n, *this; }
    const_iterator& operator-=(difference_type n) { return it_ -= n, *this; }
    friend const_iterator operator+(const_iterator a, difference_type n) { return a += n; }
    friend const_iterator operator+(difference_type n, const_iterator a) { return a += n; }
    friend const_iterator operator-(const_iterator a, difference_type n) { return a -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return a.it_ - b.it_;
    }
    friend bool operator==(const const_iterator&, const const_iterator&) = default;
    friend auto operator<=>(const const_iterator&, const const_iterator&) = default;

   private:
    typename std::vector<Item>::const_iterator it_;
  };

  SharedItems() = default;
  SharedItems(std::initializer_list<T> items) {
    items_.reserve(items.size());
    for (const T& v : items) Add(v);
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const T& operator[](size_t i) const { return *items_[i]; }
  const T& front() const { return *items_.front(); }
  const T& back() const { return *items_.back(); }
  const_iterator begin() const { return const_iterator(items_.begin()); }
  const_iterator end() const { return const_iterator(items_.end()); }

  // The shared item at `i`, to add to another list.
  const Item& item(size_t i) const { return items_[i]; }
  void Add(T value) { items_.push_back(std::make_shared<const T>(std::move(value))); }
  void Add(Item item) { items_.push_back(std::move(item)); }
  void reserve(size_t n) { items_.reserve(n); }
  void clear() { items_.clear(); }

 private:
  std::vector<Item> items_;
};

}  // namespace chamber
