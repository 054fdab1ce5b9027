#include "core/queue_tree.h"

#include <cstdint>
#include <string>

#include "core/gpu_model_queues.h"

namespace chamber::core {
namespace {

std::string CheckSpec(const Queue& q) {
  if (q.name.empty()) return "queue has an empty name";
  for (Resource r : kAllResources) {
    const QueueResource& qr = q.res(r);
    const std::string field = "resources." + std::string(ResourceName(r)) + ".";
    if (qr.quota < 0) return field + "quota must not be negative";
    if (qr.limit < kUnlimited) return field + "limit must be -1 (none) or at least 0";
    if (qr.limit != kUnlimited && qr.limit < qr.quota)
      return field + "limit " + FormatQuantity(r, qr.limit) + " is below quota " +
             FormatQuantity(r, qr.quota);
    if (!(qr.over_quota_weight >= 0)) return field + "overQuotaWeight must not be negative";
    if (qr.lending_limit < kUnlimited) return field + "lendingLimit must be -1 (all) or at least 0";
  }
  return CheckGpuModels(q);
}

// FNV-1a: queue names are short, and this is cheaper on them than a general string hash.
size_t HashName(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 32));
}

}  // namespace

QueueId QueueTree::Insert(std::string_view name, QueueId id) {
  const size_t mask = by_name_.size() - 1;
  for (size_t h = HashName(name) & mask;; h = (h + 1) & mask) {
    auto& [key, value] = by_name_[h];
    if (!value.valid()) {
      key = name;
      value = id;
      return id;
    }
    if (key == name) return value;
  }
}

QueueTree::QueueTree(const std::vector<Queue>& queues) : queues_(&queues) {
  const size_t n = queues.size();
  nodes_.resize(n);
  size_t table = 8;
  while (table < 2 * n) table *= 2;
  by_name_.assign(table, {std::string_view(), QueueId{}});
  for (size_t i = 0; i < n; ++i) {
    const Queue& q = queues[i];
    const QueueId id{static_cast<int32_t>(i)};
    nodes_[i].error = CheckSpec(q);
    nodes_[i].found_by_name = Insert(q.name, id) == id;
    if (!nodes_[i].found_by_name && nodes_[i].error.empty())
      nodes_[i].error = "duplicate queue name " + q.name + " (the first definition is used)";
    for (Resource r : kAllResources)
      if (q.res(r).quota > 0 || q.res(r).limit != kUnlimited) managed_[static_cast<int>(r)] = true;
  }
  // Parents.
  for (size_t i = 0; i < n; ++i) {
    const Queue& q = queues[i];
    if (q.parent.empty()) continue;
    QueueId p = Find(q.parent);
    if (!p.valid()) {
      if (nodes_[i].error.empty()) nodes_[i].error = "parent queue " + q.parent + " does not exist";
      continue;
    }
    if (p.index() == i) {
      if (nodes_[i].error.empty()) nodes_[i].error = "queue is its own parent";
      continue;
    }
    nodes_[i].parent = p;
  }
  // A valid list of GPU models is split into queues per model before the cycle
  // (SplitGpuModelQueues), except on a queue that is a parent.
  for (size_t i = 0; i < n; ++i) {
    if (queues[i].gpu_models.empty() || !nodes_[i].error.empty()) continue;
    std::string child;
    for (size_t c = 0; c < n && child.empty(); ++c)
      if (nodes_[c].parent.index() == i && nodes_[c].parent.valid()) child = queues[c].name;
    nodes_[i].error =
        child.empty()
            ? "resources.gpu.models: the queue was not split into one queue per GPU model"
            : "resources.gpu.models: a queue with GPU models holds its work itself, in one queue "
              "per model, and cannot be the parent of queue " +
                  child;
  }
  // Cycles: walk up from each queue; a walk longer than n steps is in a cycle.
  for (size_t i = 0; i < n; ++i) {
    QueueId cur{static_cast<int32_t>(i)};
    size_t steps = 0;
    while (cur.valid() && steps <= n) {
      cur = nodes_[cur.index()].parent;
      ++steps;
    }
    if (cur.valid() && nodes_[i].error.empty())
      nodes_[i].error = "the parent chain of this queue contains a cycle";
  }
  for (size_t i = 0; i < n; ++i) {
    if (!nodes_[i].error.empty() && nodes_[i].parent.valid()) {
      // Cut invalid queues out of the tree so no walk below runs in circles.
      nodes_[i].parent = QueueId{};
    }
  }
  // Errors flow down: a queue under an invalid queue is invalid too. The cut above made the
  // parent links acyclic, so these walks end.
  std::vector<std::string> own(n);
  for (size_t i = 0; i < n; ++i) own[i] = nodes_[i].error;
  for (size_t i = 0; i < n; ++i) {
    if (!own[i].empty()) continue;
    for (QueueId a = nodes_[i].parent; a.valid(); a = nodes_[a.index()].parent) {
      if (!own[a.index()].empty()) {
        nodes_[i].error = "parent queue " + queues[a.index()].name + " is invalid";
        break;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const QueueId id{static_cast<int32_t>(i)};
    if (!valid(id)) continue;
    if (nodes_[i].parent.valid()) {
      nodes_[nodes_[i].parent.index()].children.push_back(id);
    } else {
      roots_.push_back(id);
    }
  }
  for (QueueId r : roots_) top_down_.push_back(r);
  for (size_t head = 0; head < top_down_.size(); ++head) {
    const QueueId q = top_down_[head];
    for (QueueId c : nodes_[q.index()].children) {
      nodes_[c.index()].depth = nodes_[q.index()].depth + 1;
      top_down_.push_back(c);
    }
  }
  for (auto it = top_down_.rbegin(); it != top_down_.rend(); ++it) {
    NodeInfo& node = nodes_[it->index()];
    Resources children;
    for (QueueId c : node.children) children += nodes_[c.index()].effective_quota;
    for (Resource r : kAllResources) {
      const int64_t own = queues[it->index()].res(r).quota;
      node.effective_quota[r] = own == 0 && !node.children.empty() ? children[r] : own;
    }
  }
}

std::pair<QueueId, QueueId> QueueTree::Sides(QueueId a, QueueId b) const {
  while (depth(a) > depth(b)) {
    if (parent(a) == b) return {};
    a = parent(a);
  }
  while (depth(b) > depth(a)) {
    if (parent(b) == a) return {};
    b = parent(b);
  }
  if (a == b) return {};
  while (parent(a) != parent(b)) {
    a = parent(a);
    b = parent(b);
  }
  return {a, b};
}

QueueId QueueTree::Find(std::string_view name) const {
  const size_t mask = by_name_.size() - 1;
  for (size_t h = HashName(name) & mask;; h = (h + 1) & mask) {
    const auto& [key, value] = by_name_[h];
    if (!value.valid() || key == name) return value;
  }
}

}  // namespace chamber::core
