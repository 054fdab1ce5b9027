// NodeCapacityMap: capacity per node, for the nodes that one placement try consumes on or one
// overlay adds to. Such maps hold a handful of nodes and are looked up once per node a
// placement scans, so they are flat: the nodes in order of first insertion, their capacities
// beside them, found by scanning while there are few and through an open-addressing index
// once there are more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/cluster_state.h"

namespace chamber::core {

class NodeCapacityMap {
 public:
  bool empty() const { return nodes_.empty(); }
  size_t size() const { return nodes_.size(); }
  // Every node with an entry, in order of first insertion.
  const std::vector<int32_t>& nodes() const { return nodes_; }

  const NodeCapacity* Find(int32_t node) const {
    const int32_t at = Position(node);
    return at < 0 ? nullptr : &values_[at];
  }

  // The node's entry, added (all zero) when it had none. The reference is valid until the next
  // insertion.
  NodeCapacity& operator[](int32_t node) {
    const int32_t at = Position(node);
    if (at >= 0) return values_[at];
    nodes_.push_back(node);
    values_.emplace_back();
    if (nodes_.size() > kScanUpTo) {
      if (2 * nodes_.size() > index_.size()) {
        Rebuild();
      } else {
        Insert(static_cast<int32_t>(nodes_.size() - 1));
      }
    }
    return values_.back();
  }

  void clear() {
    nodes_.clear();
    values_.clear();
    index_.clear();
  }

 private:
  static constexpr size_t kScanUpTo = 16;

  // The high bits of a multiplicative hash: node ids that differ only above the table's size
  // still spread.
  size_t Slot(int32_t node) const { return (static_cast<uint32_t>(node) * 0x9E3779B1u) >> shift_; }

  int32_t Position(int32_t node) const {
    if (index_.empty()) {
      for (size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i] == node) return static_cast<int32_t>(i);
      return -1;
    }
    for (size_t s = Slot(node);; s = (s + 1) & (index_.size() - 1)) {
      const int32_t at = index_[s];
      if (at < 0 || nodes_[at] == node) return at;
    }
  }

  void Insert(int32_t at) {
    size_t s = Slot(nodes_[at]);
    while (index_[s] >= 0) s = (s + 1) & (index_.size() - 1);
    index_[s] = at;
  }

  void Rebuild() {
    size_t n = 64;
    shift_ = 26;
    while (n < 2 * nodes_.size()) {
      n *= 2;
      --shift_;
    }
    index_.assign(n, -1);
    for (size_t i = 0; i < nodes_.size(); ++i) Insert(static_cast<int32_t>(i));
  }

  std::vector<int32_t> nodes_;
  std::vector<NodeCapacity> values_;
  std::vector<int32_t> index_;  // position in nodes_ per slot, -1 when empty; empty while scanning
  int shift_ = 26;              // 32 - log2(index_.size())
};

}  // namespace chamber::core
