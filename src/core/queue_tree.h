// QueueTree: the snapshot's queues as a validated tree (teams inside departments).
// A queue with a bad spec, an unknown parent or a place in a cycle is marked invalid with a
// message, and so is everything beneath it; the rest of the tree works as usual.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.h"

namespace chamber::core {

class QueueTree {
 public:
  explicit QueueTree(const std::vector<Queue>& queues);

  size_t size() const { return queues_->size(); }
  const Queue& queue(QueueId q) const { return (*queues_)[q.index()]; }
  QueueId Find(std::string_view name) const;  // invalid id when absent
  // Whether Find(name) is q, checked without hashing: q holds that name and is the queue the
  // name finds (the first of duplicates).
  bool Finds(QueueId q, std::string_view name) const {
    return q.index() < nodes_.size() && nodes_[q.index()].found_by_name && queue(q).name == name;
  }

  QueueId parent(QueueId q) const { return nodes_[q.index()].parent; }
  const std::vector<QueueId>& children(QueueId q) const { return nodes_[q.index()].children; }
  const std::vector<QueueId>& roots() const { return roots_; }
  bool leaf(QueueId q) const { return nodes_[q.index()].children.empty(); }
  bool valid(QueueId q) const { return nodes_[q.index()].error.empty(); }
  const std::string& error(QueueId q) const { return nodes_[q.index()].error; }

  // Whether any queue sets a quota or limit for the resource. Unmanaged resources do not count
  // towards quotas, limits or fair share. GPUs are always managed.
  bool managed(Resource r) const { return managed_[static_cast<int>(r)]; }

  // Valid queues with parents before children (roots first).
  const std::vector<QueueId>& top_down() const { return top_down_; }

  // A queue's quota of a resource, or for a parent whose quota of it is 0 (a grouping only), the
  // sum of its valid children's effective quotas (docs/fairness.md).
  const Resources& effective_quota(QueueId q) const { return nodes_[q.index()].effective_quota; }
  int32_t depth(QueueId q) const { return nodes_[q.index()].depth; }  // 0 for a root
  // Where two valid queues of one tree meet: the ancestors of each (or the queues themselves) just
  // below their lowest common ancestor. Two roots are their own sides; a queue and its ancestor
  // have no sides (both invalid).
  std::pair<QueueId, QueueId> Sides(QueueId a, QueueId b) const;

 private:
  struct NodeInfo {
    QueueId parent;
    std::vector<QueueId> children;
    std::string error;
    bool found_by_name = false;  // Find(its name) is this queue
    Resources effective_quota;
    int32_t depth = 0;
  };
  const std::vector<Queue>* queues_;
  std::vector<NodeInfo> nodes_;
  std::vector<QueueId> roots_;
  std::vector<QueueId> top_down_;
  // Names to ids: open addressing over a power-of-two table at most half full, since every
  // workload of every cycle looks its queue up (docs/benchmarks.md, "Flat tables").
  std::vector<std::pair<std::string_view, QueueId>> by_name_;
  // Inserts unless the name is there; returns the id the name has.
  QueueId Insert(std::string_view name, QueueId id);
  std::array<bool, kNumResources> managed_{true, false, false};
};

}  // namespace chamber::core
