#include "core/loaded_work.h"

#include <algorithm>
#include <limits>
#include <string>

#include "common/time.h"
#include "core/engine.h"

namespace chamber::core {

LoadedWork::LoadedWork(const Snapshot& s, const EngineConfig& cfg, const QueueTree& tree,
                       ClusterState& state, const FeasibilityCache& feasibility,
                       QueueAccounting& queues)
    : s_(s), cfg_(cfg), tree_(tree), state_(state), feas_(feasibility), queues_(queues) {
  const size_t nq = s.queues.size();
  waiting_.assign(nq, {});
  order_keys_.assign(nq, {});
  waiting_demand_.assign(nq, {});
  running_min_priority_.assign(nq, std::numeric_limits<int32_t>::max());
  running_at_min_.assign(nq, 0);
  min_stale_.assign(nq, 0);
  running_in_.assign(nq, 0);
}

bool LoadedWork::Before(const OrderKey& a, const OrderKey& b) const {
  if (a.neg_priority != b.neg_priority) return a.neg_priority < b.neg_priority;
  if (a.submit != b.submit) return a.submit < b.submit;
  return std::tuple(std::string_view(workload(a.id).name), a.id) <
         std::tuple(std::string_view(workload(b.id).name), b.id);
}

std::ptrdiff_t LoadedWork::OrderPosition(QueueId q, const OrderKey& key) const {
  const std::vector<OrderKey>& keys = order_keys_[q.index()];
  return std::lower_bound(keys.begin(), keys.end(), key,
                          [&](const OrderKey& x, const OrderKey& y) { return Before(x, y); }) -
         keys.begin();
}

void LoadedWork::LoadAll() {
  const size_t n = s_.workloads.size();
  queue_of_.assign(n, QueueId{});
  ask_.clear();
  ask_.reserve(n);  // reserved, not filled: only waiting work writes its part
  ask_of_.assign(n, -1);
  held_.assign(n, {});
  QueueLookup lookup;
  for (size_t i = 0; i < n; ++i) {
    // A workload's pod sets and placements live apart from it; start loading those of one a few
    // ahead.
    if (i + kPrefetchAhead < n) {
      const Workload& ahead = s_.workloads[i + kPrefetchAhead];
      __builtin_prefetch(ahead.pod_sets.data());
      __builtin_prefetch(ahead.placements.data());
    }
    Load(WorkloadId{static_cast<int32_t>(i)}, lookup);
  }
}

void LoadedWork::AddSlot() {
  queue_of_.emplace_back();
  ask_of_.push_back(-1);
  held_.emplace_back();
}

void LoadedWork::PopSlot() {
  queue_of_.pop_back();
  ask_of_.pop_back();
  held_.pop_back();
}

void LoadedWork::Issue(WorkloadId w, std::string message) {
  issues_of_[w.value].push_back({"workload " + workload(w).name, std::move(message)});
}

namespace {

// Into an index-ordered list; LoadAll's loads come in order and append.
void InsertInOrder(std::vector<WorkloadId>& ids, WorkloadId w) {
  if (ids.empty() || ids.back() < w) {
    ids.push_back(w);
  } else {
    ids.insert(std::lower_bound(ids.begin(), ids.end(), w), w);
  }
}

bool EraseInOrder(std::vector<WorkloadId>& ids, WorkloadId w) {
  const auto it = std::lower_bound(ids.begin(), ids.end(), w);
  if (it == ids.end() || *it != w) return false;
  ids.erase(it);
  return true;
}

// Why a gang in bind backoff waits: the same words for every cycle of its backoff, so that its
// pods' condition is written once. The time is UTC, to the second. Without a rollback, the
// caller held the bind back and `bind_failure` says why.
std::string BindBackoffMessage(const Workload& w) {
  const std::string at = FormatRfc3339Ms(w.bind_retry_at.count(), TimeFraction::kNone);
  if (w.bind_rollbacks == 0 && !w.bind_failure.empty())
    return w.bind_failure + "; it is tried again from " + at;
  std::string m = "its gang's bind failed and was rolled back";
  if (w.bind_rollbacks > 1) m += " " + std::to_string(w.bind_rollbacks) + " times in a row";
  if (!w.bind_failure.empty()) m += " (" + w.bind_failure + ")";
  return m + "; it is tried again from " + at;
}

}  // namespace

bool LoadedWork::Load(WorkloadId id, QueueLookup& lookup) {
  const size_t i = id.index();
  const Workload& w = s_.workloads[i];
  const bool holds = w.state == WorkloadState::kRunning || w.state == WorkloadState::kPreempting;
  // Its queue when it was last loaded, if it was, is checked before the name is looked up.
  QueueId q = queue_of_[i];
  if (!q.valid() || !tree_.Finds(q, w.queue)) {
    if (!lookup.valid || w.queue != lookup.name) {
      lookup.queue = tree_.Find(w.queue);
      lookup.name = w.queue;
      lookup.valid = true;
    }
    q = lookup.queue;
  }
  queue_of_[i] = q;

  if (holds) {
    // Running work holds what it holds, whatever is wrong with its spec or queue.
    bool on_failed_gpu = false;
    bool clean = true;
    int32_t claimed = 0;
    for (size_t p = 0; p < w.placements.size(); ++p) {
      const PodPlacement& pl = w.placements[p];
      const PodSet* ps = w.PlacementPodSet(p);
      const Resources req = ps != nullptr ? ps->request : Resources{};
      const MigAsk mig = ps != nullptr ? ps->mig : MigAsk{};
      Status st = state_.ClaimExisting(pl, req, ps != nullptr ? ps->gpu_memory_mib : 0, mig);
      if (!st.ok()) {
        Issue(id, st.message());
        clean = false;
        continue;
      }
      ++claimed;
      // A GPU held externally as well (a share's pod in its grace period, which the caller can
      // only report as holding the GPU) is closed to new work, not failed.
      if ((pl.gpu_mask & state_.facts(pl.node).failed_mask) != 0) on_failed_gpu = true;
      if (w.state == WorkloadState::kPreempting) state_.MarkReleasing(pl, req, mig);
    }
    if (w.placements.size() > static_cast<size_t>(w.TotalPods())) {
      Issue(id, "holds more placements than it has pods");
      clean = false;
    }
    if (w.state == WorkloadState::kPreempting) {
      InsertInOrder(releasing_ids_, id);
      return clean;
    }
    if (q.valid()) {
      held_[i] = w.RequestOfFirst(static_cast<int32_t>(w.placements.size()));
      queues_.AddRunning(q,
                         static_cast<size_t>(claimed) == w.placements.size()
                             ? held_[i]
                             : w.RequestOfFirst(claimed),
                         w.reserved());
    }
    // Even work whose queue is gone must leave a failed GPU: each cycle preempts it (BeginRun).
    if (on_failed_gpu && cfg_.preempt_on_unhealthy_gpu) {
      InsertInOrder(faulted_, id);
      return clean;
    }
    if (!q.valid()) {
      InsertInOrder(unqueued_ids_, id);
      return clean;
    }
    InsertInOrder(running_ids_, id);
    ++running_in_[q.index()];
    int32_t& least = running_min_priority_[q.index()];
    if (w.priority < least) {
      least = w.priority;
      running_at_min_[q.index()] = 1;
    } else if (w.priority == least) {
      ++running_at_min_[q.index()];
    }
    return clean;
  }

  auto invalid = [&](PendingReason reason, std::string message) {
    invalid_[id.value] = {reason, std::make_shared<const PendingExplanation>(
                                      PendingExplanation{std::move(message), {}})};
  };
  if (std::string spec_error = ValidateWorkload(w, &s_.mig_profiles); !spec_error.empty()) {
    invalid(PendingReason::kInvalidWorkload, std::move(spec_error));
  } else if (!q.valid()) {
    invalid(PendingReason::kQueueNotFound, "queue " + w.queue + " does not exist");
  } else if (!tree_.valid(q)) {
    invalid(PendingReason::kQueueInvalid, "queue " + w.queue + ": " + tree_.error(q));
  } else if (!tree_.leaf(q)) {
    invalid(PendingReason::kNotLeafQueue,
            "queue " + w.queue + " has child queues; submit to one of them");
  } else if (w.awaited_pods > 0) {
    const int32_t have = w.TotalPods();
    invalid(PendingReason::kWaitingForPods,
            "the gang needs " + std::to_string(have + w.awaited_pods) + " pods and " +
                std::to_string(have) + (have == 1 ? " exists" : " exist") +
                "; it is placed once the rest are created");
  } else if (w.bind_retry_at > s_.now) {
    invalid(PendingReason::kBindBackoff, BindBackoffMessage(w));
  } else {
    const OrderKey key{-w.priority, id, w.submit_time};
    std::vector<OrderKey>& keys = order_keys_[q.index()];
    if (sorted_) {
      const std::ptrdiff_t at = OrderPosition(q, key);
      waiting_[q.index()].insert(waiting_[q.index()].begin() + at, id);
      keys.insert(keys.begin() + at, key);
    } else {
      keys.push_back(key);
    }
    int32_t slot = static_cast<int32_t>(ask_.size());
    if (free_asks_.empty()) {
      ask_.emplace_back();
    } else {
      slot = free_asks_.back();
      free_asks_.pop_back();
    }
    ask_of_[i] = slot;
    Ask& a = ask_[slot];
    a.total = w.TotalPods();
    a.minimum = w.min_member > 0 ? w.min_member : a.total;
    a.all = w.RequestOfFirst(a.total);
    a.least = w.RequestOfFirst(a.minimum);
    a.shape_all = InternShape(w, a.total);
    a.shape_least = a.minimum == a.total ? a.shape_all : InternShape(w, a.minimum);
    a.priority = w.priority;
    waiting_demand_[q.index()] += a.all;
  }
  return true;
}

void LoadedWork::Unload(WorkloadId id) {
  const size_t i = id.index();
  const Workload& w = s_.workloads[i];
  const QueueId q = queue_of_[i];
  if (w.state == WorkloadState::kRunning || w.state == WorkloadState::kPreempting) {
    const bool releasing = w.state == WorkloadState::kPreempting;
    for (size_t p = 0; p < w.placements.size(); ++p) {
      const PodSet* ps = w.PlacementPodSet(p);
      const Resources req = ps != nullptr ? ps->request : Resources{};
      const MigAsk mig = ps != nullptr ? ps->mig : MigAsk{};
      if (releasing) state_.UnmarkReleasing(w.placements[p], req, mig);
      state_.Release(w.placements[p], req, ps != nullptr ? ps->gpu_memory_mib : 0, mig);
    }
    if (releasing) {
      EraseInOrder(releasing_ids_, id);
      return;
    }
    if (q.valid()) {
      queues_.RemoveRunning(q, w.RequestOfFirst(static_cast<int32_t>(w.placements.size())),
                            w.reserved());
    }
    if (EraseInOrder(faulted_, id)) return;
    if (!q.valid()) {
      EraseInOrder(unqueued_ids_, id);
      return;
    }
    EraseInOrder(running_ids_, id);
    --running_in_[q.index()];
    if (w.priority == running_min_priority_[q.index()] && --running_at_min_[q.index()] == 0)
      min_stale_[q.index()] = 1;
    return;
  }
  if (invalid_.erase(id.value) > 0) return;
  std::vector<OrderKey>& keys = order_keys_[q.index()];
  const OrderKey key{-w.priority, id, w.submit_time};
  if (sorted_) {
    const std::ptrdiff_t at = OrderPosition(q, key);
    waiting_[q.index()].erase(waiting_[q.index()].begin() + at);
    keys.erase(keys.begin() + at);
  } else {
    keys.erase(
        std::find_if(keys.begin(), keys.end(), [&](const OrderKey& k) { return k.id == id; }));
  }
  waiting_demand_[q.index()] -= ask_[ask_of_[i]].all;
  free_asks_.push_back(ask_of_[i]);
  ask_of_[i] = -1;
}

// Raw fixed-width fields rather than formatted numbers: the key is only compared and hashed.
void LoadedWork::ShapeKey(const Workload& w, int32_t pods) {
  std::string& key = shape_key_;
  key.clear();
  for (const PodSet& ps : w.pod_sets) {
    if (pods <= 0) break;
    const int32_t n = std::min(pods, ps.count);
    pods -= n;
    int32_t id = 0;
    feas_.For(ps, &id);
    const std::array<int64_t, kShapeFields> fields = {id,
                                                      n,
                                                      ps.request.gpu_milli(),
                                                      ps.request.cpu_milli(),
                                                      ps.request.memory_bytes(),
                                                      ps.gpu_memory_mib,
                                                      ps.mig.devices};
    key.append(reinterpret_cast<const char*>(fields.data()), sizeof fields);
  }
}

int32_t LoadedWork::InternOneSet(const std::array<int64_t, kShapeFields>& fields) {
  auto slot_of = [](const std::array<int64_t, kShapeFields>& f, size_t mask) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int64_t x : f) {
      h ^= static_cast<uint64_t>(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0xff51afd7ed558ccdull;
    }
    return static_cast<size_t>(h ^ (h >> 29)) & mask;
  };
  size_t mask = one_set_shapes_.size() - 1;
  size_t i = slot_of(fields, mask);
  for (; one_set_shapes_[i].id >= 0; i = (i + 1) & mask)
    if (one_set_shapes_[i].fields == fields) return one_set_shapes_[i].id;
  if (2 * (one_set_count_ + 1) > one_set_shapes_.size()) {
    std::vector<OneSetShape> old(one_set_shapes_.size() * 2);
    old.swap(one_set_shapes_);
    mask = one_set_shapes_.size() - 1;
    for (const OneSetShape& e : old) {
      if (e.id < 0) continue;
      size_t j = slot_of(e.fields, mask);
      while (one_set_shapes_[j].id >= 0) j = (j + 1) & mask;
      one_set_shapes_[j] = e;
    }
    i = slot_of(fields, mask);
    while (one_set_shapes_[i].id >= 0) i = (i + 1) & mask;
  }
  ++one_set_count_;
  one_set_shapes_[i] = {fields, static_cast<int32_t>(num_shapes_++)};
  return one_set_shapes_[i].id;
}

int32_t LoadedWork::InternShape(const Workload& w, int32_t pods) {
  const PodSet& first = w.pod_sets.front();  // validated: there is one
  if (pods <= first.count) {
    int32_t constraints = 0;
    feas_.For(first, &constraints);
    return InternOneSet({constraints, pods, first.request.gpu_milli(), first.request.cpu_milli(),
                         first.request.memory_bytes(), first.gpu_memory_mib, first.mig.devices});
  }
  ShapeKey(w, pods);
  if (auto it = shape_ids_.find(std::string_view(shape_key_)); it != shape_ids_.end())
    return it->second;
  const int32_t id = static_cast<int32_t>(num_shapes_++);
  shape_ids_.emplace(shape_key_, id);
  return id;
}

void LoadedWork::SortWaiting(bool keep) {
  if (sorted_) return;
  for (size_t q = 0; q < order_keys_.size(); ++q) {
    std::vector<OrderKey>& keys = order_keys_[q];
    std::sort(keys.begin(), keys.end(),
              [&](const OrderKey& a, const OrderKey& b) { return Before(a, b); });
    waiting_[q].clear();
    waiting_[q].reserve(keys.size());
    for (const OrderKey& k : keys) waiting_[q].push_back(k.id);
  }
  sorted_ = keep;  // a kept cycle's loads insert in order from now on
}

void LoadedWork::RecountLowestPriority() {
  bool any_stale = false;
  for (size_t q = 0; q < min_stale_.size(); ++q) {
    if (!min_stale_[q]) continue;
    any_stale = true;
    running_min_priority_[q] = std::numeric_limits<int32_t>::max();
    running_at_min_[q] = 0;
  }
  if (any_stale) {
    for (WorkloadId id : running_ids_) {
      const size_t q = queue_of_[id.index()].index();
      if (!min_stale_[q]) continue;
      const int32_t p = workload(id).priority;
      if (p < running_min_priority_[q]) {
        running_min_priority_[q] = p;
        running_at_min_[q] = 1;
      } else if (p == running_min_priority_[q]) {
        ++running_at_min_[q];
      }
    }
    std::fill(min_stale_.begin(), min_stale_.end(), 0);
  }
}

}  // namespace chamber::core
