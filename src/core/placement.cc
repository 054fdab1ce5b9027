#include "core/placement.h"

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <span>

#include "core/share_scores.h"

namespace chamber::core {
namespace {

// Candidates tried before giving up on a level; keeps a failing gang from scanning every node.
constexpr int kMaxSingleNodeTries = 64;
constexpr int kMaxDomainTries = 4;

bool Tolerates(const std::vector<Toleration>& tolerations, const Taint& taint) {
  if (taint.effect == TaintEffect::kPreferNoSchedule) return true;
  for (const Toleration& t : tolerations) {
    if (t.effect && *t.effect != taint.effect) continue;
    if (t.op == Toleration::Operator::kExists) {
      if (t.key.empty() || t.key == taint.key) return true;
    } else if (t.key == taint.key && t.value == taint.value) {
      return true;
    }
  }
  return false;
}

bool SelectorMatches(const Node& node,
                     const std::vector<std::pair<std::string, std::string>>& selector) {
  if (selector.empty()) return true;
  const Labels& labels = *node.labels;  // one look through the shared pointer, not one per key
  for (const auto& [key, value] : selector) {
    bool found = false;
    for (const auto& [k, v] : labels) {
      if (k == key) {
        found = v == value;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

std::string Signature(const PodSet& ps) {
  std::string sig = ps.request.gpu_share() ? "s" : ps.request.gpu_milli() > 0 ? "g" : "c";
  if (ps.mig.any()) sig += "\x1fmig" + std::to_string(ps.mig.profile);
  for (const auto& [k, v] : ps.node_selector) sig += "\x1fs" + k + "=" + v;
  for (const Toleration& t : ps.tolerations) {
    sig += "\x1ft" + t.key + (t.op == Toleration::Operator::kExists ? "?" : "=") + t.value;
    sig += t.effect ? std::to_string(static_cast<int>(*t.effect)) : "*";
  }
  for (const std::string& m : ps.gpu_models) sig += "\x1fm" + m;
  return sig;
}

struct PodRef {
  int32_t set;
  int32_t replica;
  const PodSet* ps;
};

std::vector<PodRef> ExpandPods(const Workload& w, int32_t pods) {
  std::vector<PodRef> out;
  for (size_t s = 0; s < w.pod_sets.size() && static_cast<int32_t>(out.size()) < pods; ++s) {
    const PodSet& ps = w.pod_sets[s];
    for (int32_t r = 0; r < ps.count && static_cast<int32_t>(out.size()) < pods; ++r)
      out.push_back({static_cast<int32_t>(s), r, &ps});
  }
  return out;
}

// The node among those advertising the MIG profile `ps` asks for where a pod of it fits and
// leaves the fewest devices of the profile free (ties: the lowest index), or -1.
int32_t BestMigNode(const ClusterState& state, const GangAttempt& a,
                    const std::vector<NodeFilter>& filter, const PodSet& ps) {
  const auto profile = static_cast<size_t>(ps.mig.profile);
  int32_t best = -1;
  int best_free = 0;
  for (int32_t n : state.nodes_with_mig(ps.mig.profile)) {
    if (filter[n] != NodeFilter::kOk || !a.Fits(n, ps)) continue;
    const int free = a.Effective(n).mig[profile];
    if (best < 0 || free < best_free) {
      best = n;
      best_free = free;
    }
  }
  return best;
}

uint64_t LowestBits(uint64_t mask, int count) {
  uint64_t out = 0;
  for (int i = 0; i < count && mask != 0; ++i) {
    const uint64_t bit = mask & (~mask + 1);
    out |= bit;
    mask &= ~bit;
  }
  return out;
}

// How many shares of `ps` the node's GPUs have room for: beside the shares already on its healthy
// shared GPUs, and on its free GPUs.
int64_t ShareSlots(const ClusterState& state, NodeId n, const PodSet& ps) {
  const int64_t milli = ps.request.gpu_milli();
  const int64_t memory = ps.gpu_memory_mib;
  auto slots = [&](int g, int64_t used, int64_t used_memory) {
    const int64_t by_memory =
        memory > 0 ? (state.gpu_memory_mib(n, g) - used_memory) / memory : kMilliPerGpu;
    return std::max<int64_t>(0, std::min((kMilliPerGpu - used) / milli, by_memory));
  };
  int64_t out = 0;
  for (uint64_t m = state.share_open_mask(n); m != 0; m &= m - 1) {
    const int g = std::countr_zero(m);
    out += slots(g, state.share_milli(n, g), state.share_memory_mib(n, g));
  }
  for (uint64_t m = state.free(n).gpu_mask; m != 0; m &= m - 1)
    out += slots(std::countr_zero(m), 0, 0);
  return out;
}

}  // namespace

FeasibilityCache::FeasibilityCache(const ClusterState& state, const Snapshot* snapshot)
    : state_(&state), snapshot_(snapshot) {}

FeasibilityCache::~FeasibilityCache() = default;

void FeasibilityCache::ForgetShareScores() { scores_.reset(); }

ShareScores* FeasibilityCache::ScoresFor(const ClusterState& state) const {
  if (snapshot_ == nullptr || &state != state_) return nullptr;
  if (!scores_) scores_ = std::make_unique<ShareScores>(state, SnapshotShareMix(*snapshot_));
  return scores_.get();
}

const std::vector<NodeFilter>& FeasibilityCache::For(const PodSet& ps, int32_t* id) const {
  constexpr size_t kMaxKnown = 8;
  const bool gpu = ps.request.gpu_milli() > 0;
  const bool share = ps.request.gpu_share();
  const int8_t mig = ps.mig.any() ? ps.mig.profile : int8_t{-1};
  for (const Known& k : known_) {
    if (k.gpu == gpu && k.share == share && k.mig == mig && k.node_selector == ps.node_selector &&
        k.tolerations == ps.tolerations && k.gpu_models == ps.gpu_models) {
      if (id != nullptr) *id = k.id;
      return filters_[k.id];
    }
  }
  std::string sig = Signature(ps);
  auto [it, inserted] = ids_.try_emplace(std::move(sig), static_cast<int32_t>(filters_.size()));
  if (known_.size() < kMaxKnown)
    known_.push_back(
        {gpu, share, mig, ps.node_selector, ps.tolerations, ps.gpu_models, it->second});
  if (inserted) {
    int32_t model_count = 0;
    std::vector<uint8_t> allowed_model;
    for (const std::string& m : ps.gpu_models) {
      const int32_t mid = state_->model_id(m);
      if (mid < 0) continue;
      if (static_cast<size_t>(mid) >= allowed_model.size()) allowed_model.resize(mid + 1, 0);
      allowed_model[mid] = 1;
      ++model_count;
    }
    const bool check_model = !ps.gpu_models.empty() && (gpu || mig >= 0);
    std::vector<NodeFilter> f(state_->num_nodes(), NodeFilter::kOk);
    for (size_t i = 0; i < f.size(); ++i) {
      const NodeId n{static_cast<int32_t>(i)};
      const NodeFacts& facts = state_->facts(n);
      const Node& node = state_->node(n);
      if (!facts.schedulable) {
        f[i] = NodeFilter::kUnschedulable;
      } else if (!SelectorMatches(node, ps.node_selector)) {
        f[i] = NodeFilter::kNodeSelector;
      } else if (!std::all_of(node.taints.begin(), node.taints.end(),
                              [&](const Taint& t) { return Tolerates(*ps.tolerations, t); })) {
        f[i] = NodeFilter::kTaint;
      } else if (check_model && (model_count == 0 || facts.model_id < 0 ||
                                 static_cast<size_t>(facts.model_id) >= allowed_model.size() ||
                                 allowed_model[facts.model_id] == 0)) {
        f[i] = NodeFilter::kGpuModel;
      } else if (share && node.device_plugin_shares) {
        f[i] = NodeFilter::kDevicePluginShares;
      } else if (mig >= 0 && (facts.mig_mask >> mig & 1) == 0) {
        f[i] = NodeFilter::kNoMigDevices;
      }
    }
    filters_.push_back(std::move(f));
  }
  if (id != nullptr) *id = it->second;
  return filters_[it->second];
}

void CapacityOverlay::AddPod(const ClusterState& state, const Workload& w, size_t i) {
  const PodSet* ps = w.PlacementPodSet(i);
  if (ps == nullptr) {
    Add(state, w.placements[i], Resources{});
  } else {
    Add(state, w.placements[i], ps->request, ps->gpu_memory_mib, ps->mig);
  }
}

void CapacityOverlay::Add(const ClusterState& state, const PodPlacement& p,
                          const Resources& request, int64_t gpu_memory_mib, MigAsk mig) {
  NodeCapacity& extra = extra_[p.node.value];
  uint64_t usable = p.gpu_mask & state.facts(p.node).healthy_mask & ~extra.gpu_mask;
  // A share naming other than one GPU was never claimed (a snapshot issue): it frees no GPU.
  if (request.gpu_share() && std::popcount(p.gpu_mask) != 1) usable = 0;
  if (request.gpu_share() && usable != 0) {
    // A shared GPU comes back with its last share: once every share on it is in the overlay.
    const int g = std::countr_zero(p.gpu_mask);
    auto it = std::find_if(shares_.begin(), shares_.end(), [&](const ShareReleased& r) {
      return r.node == p.node.value && r.gpu == g;
    });
    if (it == shares_.end()) it = shares_.insert(shares_.end(), {p.node.value, g, 0, 0});
    it->milli += request.gpu_milli();
    it->memory_mib += gpu_memory_mib;
    // A GPU held for a preemptor (closed to shares) stays its own.
    if (it->milli < state.share_milli(p.node, g) ||
        (state.share_open_mask(p.node) & p.gpu_mask) == 0)
      usable = 0;
  }
  extra.Add(NodeCapacity::OfPod(usable, request, mig));
  gpus_ += std::popcount(usable);
}

void CapacityOverlay::Take(int32_t node, const NodeCapacity& taken) {
  if (extra_.Find(node) == nullptr) return;
  NodeCapacity& extra = extra_[node];
  gpus_ -= std::popcount(extra.gpu_mask & taken.gpu_mask);
  extra.gpu_mask &= ~taken.gpu_mask;
  extra.cpu_milli = std::max<int64_t>(0, extra.cpu_milli - taken.cpu_milli);
  extra.memory_bytes = std::max<int64_t>(0, extra.memory_bytes - taken.memory_bytes);
  extra.pods = std::max(0, extra.pods - taken.pods);
  extra.Remove(NodeCapacity{.mig = taken.mig});
}

bool NodeCapacity::Fits(const Resources& request, MigAsk mig_ask) const {
  return std::popcount(gpu_mask) >= request.whole_gpus() && cpu_milli >= request.cpu_milli() &&
         memory_bytes >= request.memory_bytes() && pods >= 1 && HasMig(mig_ask);
}

NodeCapacity EffectiveCapacity(const ClusterState& state, int32_t node,
                               const CapacityOverlay* overlay, const NodeCapacity* consumed) {
  NodeCapacity c = state.free(NodeId{node});
  if (overlay != nullptr) {
    if (const NodeCapacity* e = overlay->Find(node)) c.Add(*e);
  }
  if (consumed != nullptr) c.Remove(*consumed);
  return c;
}

int GangAttempt::ShareGpu(int32_t n, const PodSet& ps) const {
  const NodeId node{n};
  const int64_t milli = ps.request.gpu_milli();
  const int64_t memory = ps.gpu_memory_mib;
  const NodeCapacity* consumed = consumed_.Find(n);
  // GPUs holding shares: the cluster's healthy ones that this try has not taken whole (from the
  // overlay, when all their shares are leaving), and those this try's shares are on. The GPUs
  // the try uses, whole or for shares, are no longer free.
  const uint64_t taken = consumed != nullptr ? consumed->gpu_mask : 0;
  uint64_t opened = 0;
  for (const ShareTaken& t : shares_)
    if (t.node == n) opened |= uint64_t{1} << t.gpu;
  const bool released = overlay_ != nullptr && overlay_->ReleasesShares(n);
  const uint64_t reserved = state_.node(node).reserved_gpu_mask;
  int best = -1;
  int64_t best_left = kMilliPerGpu;
  for (uint64_t m = (state_.share_open_mask(node) & ~taken) | opened; m != 0; m &= m - 1) {
    const int g = std::countr_zero(m);
    int64_t used = state_.share_milli(node, g);
    int64_t used_memory = state_.share_memory_mib(node, g);
    if (released) {
      const CapacityOverlay::ShareRoom back = overlay_->SharesReleased(n, g);
      used -= back.milli;
      used_memory -= back.memory_mib;
    }
    for (const ShareTaken& t : shares_) {
      if (t.node == n && t.gpu == g) {
        used += t.milli;
        used_memory += t.memory_mib;
      }
    }
    if (used + milli > kMilliPerGpu) continue;
    if (memory > 0 && used_memory + memory > state_.gpu_memory_mib(node, g)) continue;
    const int64_t left = kMilliPerGpu - used - milli;
    // The fullest fit; on a tie, a GPU a reservation pod holds.
    if (best < 0 || left < best_left ||
        (left == best_left && (reserved >> g & 1) != 0 && (reserved >> best & 1) == 0)) {
      best = g;
      best_left = left;
    }
  }
  if (best >= 0) return best;
  uint64_t free = Effective(n).gpu_mask;
  if (memory > 0) {
    for (uint64_t m = free; m != 0; m &= m - 1) {
      const int g = std::countr_zero(m);
      if (state_.gpu_memory_mib(node, g) < memory) free &= ~(uint64_t{1} << g);
    }
  }
  if (free == 0) return -1;
  // A free GPU a reservation pod holds first: the share needs no new reservation there.
  if ((free & reserved) != 0) free &= reserved;
  return std::countr_zero(PickGpus(free, state_.islands(node), 1));
}

void GangAttempt::Take(int32_t n, int32_t set, int32_t replica, const PodSet& ps) {
  if (ps.request.gpu_share()) {
    TakeShare(n, ShareGpu(n, ps), set, replica, ps);
    return;
  }
  const uint64_t mask = PickGpus(Effective(n).gpu_mask, state_.islands(NodeId{n}),
                                 static_cast<int>(ps.request.whole_gpus()));
  consumed_[n].Add(NodeCapacity::OfPod(mask, ps.request, ps.mig));
  plan_.pods.push_back({set, replica, PodPlacement{NodeId{n}, mask}});
}

void GangAttempt::TakeShare(int32_t n, int g, int32_t set, int32_t replica, const PodSet& ps) {
  const uint64_t mask = uint64_t{1} << g;
  // No later pod of the try takes the GPU whole, from the free GPUs or the overlay.
  consumed_[n].Add(NodeCapacity::OfPod(mask, ps.request));
  shares_.push_back({n, g, ps.request.gpu_milli(), ps.gpu_memory_mib});
  plan_.pods.push_back({set, replica, PodPlacement{NodeId{n}, mask}});
}

PlacementPlan GangAttempt::TakePlan() {
  std::sort(plan_.pods.begin(), plan_.pods.end(), [](const auto& a, const auto& b) {
    return std::pair(a.pod_set, a.replica) < std::pair(b.pod_set, b.replica);
  });
  return std::move(plan_);
}

uint64_t PickGpus(uint64_t free_mask, std::span<const uint64_t> islands, int count) {
  if (count <= 0) return 0;
  if (std::popcount(free_mask) == count) return free_mask;
  uint64_t best = 0;
  int best_free = 65;
  for (uint64_t island : islands) {
    const int f = std::popcount(free_mask & island);
    if (f >= count && f < best_free) {
      best = island;
      best_free = f;
    }
  }
  return LowestBits(best != 0 ? free_mask & best : free_mask, count);
}

std::optional<PlacementPlan> TopologyBinPacking::Place(const ClusterState& state,
                                                       const FeasibilityCache& feasibility,
                                                       const Workload& w, int32_t pods,
                                                       const CapacityOverlay* overlay) const {
  std::vector<PodRef> refs = ExpandPods(w, pods);
  if (refs.empty()) return PlacementPlan{};
  std::stable_sort(refs.begin(), refs.end(), [](const PodRef& a, const PodRef& b) {
    return a.ps->request.whole_gpus() > b.ps->request.whole_gpus();
  });
  std::vector<const std::vector<NodeFilter>*> filters(w.pod_sets.size());
  for (size_t s = 0; s < w.pod_sets.size(); ++s) filters[s] = &feasibility.For(w.pod_sets[s]);
  auto ok = [&](int32_t n, const PodRef& p) { return (*filters[p.set])[n] == NodeFilter::kOk; };
  if (overlay != nullptr && overlay->empty()) overlay = nullptr;
  const int max_k = state.max_gpus_per_node();
  GangAttempt a(state, overlay);

  // Fast path: one pod, best fit straight from the free-GPU buckets; a share goes where it least
  // fragments the cluster under the cycle's mix (share_scores.h), or, without scores (a state
  // other than the cycle's), to the fullest shared GPU it fits beside, in node and GPU order on
  // ties.
  if (refs.size() == 1 && overlay == nullptr) {
    const PodRef& p = refs.front();
    if (p.ps->mig.any()) {
      const int32_t n = BestMigNode(state, a, *filters[p.set], *p.ps);
      if (n < 0) return std::nullopt;
      a.Take(n, p.set, p.replica, *p.ps);
      return a.TakePlan();
    }
    if (ShareScores* scores = p.ps->request.gpu_share() ? feasibility.ScoresFor(state) : nullptr) {
      int32_t filter_id = -1;  // the constraint set's id: one more look in the cache
      const std::vector<NodeFilter>& filter = feasibility.For(*p.ps, &filter_id);
      const std::optional<ShareScores::Spot> spot = scores->Choose(*p.ps, filter_id, filter);
      if (!spot) return std::nullopt;
      a.TakeShare(spot->node, spot->gpu, p.set, p.replica, *p.ps);
      return a.TakePlan();
    }
    if (p.ps->request.gpu_share()) {
      // Buckets of free compute from the share's own up: the first that holds a GPU the share
      // fits on holds the best fit, since every later bucket's GPUs have more room left.
      const int64_t milli = p.ps->request.gpu_milli();
      int32_t best = -1;
      int64_t best_left = kMilliPerGpu;
      for (int b = ClusterState::ShareBucket(milli); b < ClusterState::kShareBuckets && best < 0;
           ++b) {
        for (int32_t n = state.NextWithShareRoom(b, 0); n >= 0 && best_left > 0;
             n = state.NextWithShareRoom(b, n + 1)) {
          const NodeId node{n};
          if (!ok(n, p) || !state.free(node).Fits(p.ps->request, p.ps->mig)) continue;
          for (uint64_t m = state.share_open_mask(node); m != 0; m &= m - 1) {
            const int g = std::countr_zero(m);
            const int64_t free = kMilliPerGpu - state.share_milli(node, g);
            if (ClusterState::ShareBucket(free) != b || free < milli ||
                !state.ShareFits(node, g, milli, p.ps->gpu_memory_mib))
              continue;
            if (best < 0 || free - milli < best_left) {
              best = n;
              best_left = free - milli;
            }
          }
        }
      }
      if (best >= 0) {
        a.Take(best, p.set, p.replica, *p.ps);
        return a.TakePlan();
      }
    }
    // A share that found no GPU to sit beside takes a free one.
    const int first = p.ps->request.gpu_share() ? 1 : static_cast<int>(p.ps->request.whole_gpus());
    for (int k = first; k <= max_k; ++k) {
      for (int32_t n = state.NextWithFreeGpus(k, 0); n >= 0; n = state.NextWithFreeGpus(k, n + 1)) {
        if (ok(n, p) && a.Fits(n, *p.ps)) {
          a.Take(n, p.set, p.replica, *p.ps);
          return a.TakePlan();
        }
      }
    }
    return std::nullopt;
  }

  int64_t total_gpu = 0;
  bool all_shares = true;
  int64_t smallest_share = kMilliPerGpu;
  for (const PodRef& p : refs) {
    total_gpu += p.ps->request.whole_gpus();
    all_shares &= p.ps->request.gpu_share();
    if (p.ps->request.gpu_share())
      smallest_share = std::min(smallest_share, p.ps->request.gpu_milli());
  }

  // A gang of shares on free capacity: each pod where it least raises fragmentation, given the
  // pods placed before it (share_scores.h).
  if (all_shares && overlay == nullptr) {
    if (ShareScores* scores = feasibility.ScoresFor(state)) {
      for (const PodRef& p : refs) {
        int32_t filter_id = -1;
        const std::vector<NodeFilter>& filter = feasibility.For(*p.ps, &filter_id);
        const std::optional<ShareScores::Spot> spot =
            scores->ChooseInGang(*p.ps, filter_id, filter, a);
        if (!spot) return std::nullopt;
        a.TakeShare(spot->node, spot->gpu, p.set, p.replica, *p.ps);
      }
      return a.TakePlan();
    }
  }

  // Where the next pod of each pod set may go, kept through one try. Within a try capacity only
  // shrinks, and a node's capacity changes only once the gang uses it, so:
  //   - a node of the gang's that could not take a pod of a set cannot take a later one either:
  //     `used` is how far into a.used() the set's pods have found no room;
  //   - the fullest node a pod of a set fits on, among those the gang does not use yet, is the
  //     first unused one of `order`: the nodes that fitted such a pod when the set first looked,
  //     fullest first, ties in candidate order. A node the gang used is never chosen by the
  //     scan, since it was tried among the gang's nodes first and did not fit.
  // This chooses as scanning every candidate for every pod would, in time linear in the
  // candidates rather than in candidates times pods.
  struct SetCursor {
    size_t used = 0;
    bool ordered = false;
    size_t next = 0;
    std::vector<int32_t> order;
    int bucket = -1;        // with in_bucket, where the bucket scan of the set's next pod starts
    int32_t in_bucket = 0;  // a node index: buckets are read in index order
  };
  // Inline for the usual one or two pod sets: victim searches try placements by the thousand.
  std::array<SetCursor, 2> few_cursors;
  std::vector<SetCursor> more_cursors;
  std::span<SetCursor> cursors;
  auto reset_cursors = [&] {
    if (w.pod_sets.size() <= few_cursors.size()) {
      cursors = std::span<SetCursor>(few_cursors).first(w.pod_sets.size());
    } else {
      more_cursors.resize(w.pod_sets.size());
      cursors = more_cursors;
    }
    for (SetCursor& c : cursors) {
      c.used = 0;
      c.ordered = false;
      c.next = 0;
      c.order.clear();
      c.bucket = -1;
      c.in_bucket = 0;
    }
  };
  // The first node of the gang's, from the set's cursor on, that fits a pod of `p`'s set.
  auto first_used = [&](const PodRef& p) {
    SetCursor& c = cursors[p.set];
    const std::vector<int32_t>& used = a.used();
    for (; c.used < used.size(); ++c.used) {
      const int32_t n = used[c.used];
      if (ok(n, p) && a.Fits(n, *p.ps)) return n;
    }
    return -1;
  };

  // Places every pod, each on a node the gang already uses if one fits, else on the fullest
  // fitting node among `candidates`.
  auto try_in = [&](const std::vector<int32_t>& candidates) {
    a.Reset();
    reset_cursors();
    for (const PodRef& p : refs) {
      int32_t chosen = first_used(p);
      if (chosen < 0) {
        SetCursor& c = cursors[p.set];
        if (!c.ordered) {
          c.ordered = true;
          std::array<int32_t, 66> by_free{};  // counting sort over free GPUs, 0 to 64
          std::vector<std::pair<int32_t, int32_t>> fitting;  // (free GPUs, node)
          for (int32_t n : candidates) {
            if (!ok(n, p) || a.Uses(n)) continue;
            const NodeCapacity e = a.Effective(n);
            if (!e.Fits(p.ps->request, p.ps->mig) ||
                (p.ps->request.gpu_share() && !a.Fits(n, *p.ps)))
              continue;
            const int f = std::popcount(e.gpu_mask);
            fitting.emplace_back(f, n);
            ++by_free[f + 1];
          }
          for (size_t f = 1; f < by_free.size(); ++f) by_free[f] += by_free[f - 1];
          c.order.resize(fitting.size());
          for (const auto& [f, n] : fitting) c.order[by_free[f]++] = n;
        }
        while (c.next < c.order.size() && a.Uses(c.order[c.next])) ++c.next;
        if (c.next < c.order.size()) chosen = c.order[c.next];
      }
      if (chosen < 0) return false;
      a.Take(chosen, p.set, p.replica, *p.ps);
    }
    return true;
  };

  if (refs.size() > 1) {
    // One node for the whole gang.
    auto try_node = [&](int32_t n) {
      a.Reset();
      for (const PodRef& p : refs) {
        if (!ok(n, p) || !a.Fits(n, *p.ps)) return false;
        a.Take(n, p.set, p.replica, *p.ps);
      }
      return true;
    };
    if (overlay != nullptr) {
      for (int32_t n : overlay->nodes())
        if (try_node(n)) return a.TakePlan();
    }
    int tries = 0;
    // A gang of shares tries first the nodes whose shared GPUs have room for its smallest share.
    if (all_shares) {
      for (int b = ClusterState::ShareBucket(smallest_share);
           b < ClusterState::kShareBuckets && tries < kMaxSingleNodeTries; ++b) {
        for (int32_t n = state.NextWithShareRoom(b, 0); n >= 0 && tries < kMaxSingleNodeTries;
             n = state.NextWithShareRoom(b, n + 1)) {
          if (!ok(n, refs.front())) continue;
          if (try_node(n)) return a.TakePlan();
          ++tries;
        }
      }
    }
    for (int k = static_cast<int>(std::min<int64_t>(total_gpu, max_k + 1)); k <= max_k; ++k) {
      for (int32_t n = state.NextWithFreeGpus(k, 0); n >= 0; n = state.NextWithFreeGpus(k, n + 1)) {
        if (!ok(n, refs.front())) continue;
        if (try_node(n)) return a.TakePlan();
        if (++tries >= kMaxSingleNodeTries) break;
      }
      if (tries >= kMaxSingleNodeTries) break;
    }

    // The tightest topology domain that can hold the gang, finest level first. Domains count
    // free whole GPUs, which say little of room beside shares: a gang of shares goes anywhere.
    for (int level = 0; level < kNumDomainLevels && !all_shares; ++level) {
      const auto lvl = static_cast<DomainLevel>(level);
      const int count = state.num_domains(lvl);
      if (count == 0) continue;
      std::vector<int64_t> free(static_cast<size_t>(count));
      for (int d = 0; d < count; ++d) free[d] = state.domain_free_gpus(lvl, d);
      if (overlay != nullptr) {
        for (int32_t n : overlay->nodes()) {
          const int32_t d = state.facts(NodeId{n}).domain[level];
          if (d >= 0) free[d] += std::popcount(overlay->Find(n)->gpu_mask);
        }
      }
      std::vector<int32_t> order;
      for (int d = 0; d < count; ++d)
        if (free[d] >= total_gpu) order.push_back(d);
      std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
        return std::pair(free[x], x) < std::pair(free[y], y);
      });
      if (order.size() > static_cast<size_t>(kMaxDomainTries)) order.resize(kMaxDomainTries);
      for (int32_t d : order)
        if (try_in(state.domain_nodes(lvl, d))) return a.TakePlan();
    }
  }

  // Anywhere: per pod, the gang's nodes, then released capacity, then best fit by bucket.
  a.Reset();
  reset_cursors();
  for (const PodRef& p : refs) {
    int32_t chosen = first_used(p);
    if (chosen < 0 && overlay != nullptr) {
      int best_free = 1 << 30;
      for (int32_t n : overlay->nodes()) {
        if (!ok(n, p) || !a.Fits(n, *p.ps)) continue;
        const int f = std::popcount(a.Effective(n).gpu_mask);
        if (f < best_free) {
          best_free = f;
          chosen = n;
        }
      }
    }
    if (chosen < 0 && p.ps->mig.any()) {
      chosen = BestMigNode(state, a, *filters[p.set], *p.ps);
      if (chosen < 0) return std::nullopt;
    }
    // A share: beside other shares, in the buckets from its size up.
    const bool share = p.ps->request.gpu_share();
    for (int b = share ? ClusterState::ShareBucket(p.ps->request.gpu_milli())
                       : ClusterState::kShareBuckets;
         chosen < 0 && b < ClusterState::kShareBuckets; ++b) {
      for (int32_t n = state.NextWithShareRoom(b, 0); n >= 0;
           n = state.NextWithShareRoom(b, n + 1)) {
        if (ok(n, p) && a.Fits(n, *p.ps)) {
          chosen = n;
          break;
        }
      }
    }
    // The buckets from where the set's last pod found room: the nodes before it had none then,
    // and have none now. A share looks on nodes with a free GPU.
    SetCursor& c = cursors[p.set];
    if (c.bucket < 0) c.bucket = share ? 1 : static_cast<int>(p.ps->request.whole_gpus());
    for (; chosen < 0 && c.bucket <= max_k; ++c.bucket, c.in_bucket = 0) {
      for (int32_t n = state.NextWithFreeGpus(c.bucket, c.in_bucket); n >= 0;
           n = state.NextWithFreeGpus(c.bucket, n + 1)) {
        c.in_bucket = n;
        if (ok(n, p) && a.Fits(n, *p.ps)) {
          chosen = n;
          break;
        }
      }
      if (chosen >= 0) break;
    }
    if (chosen < 0) return std::nullopt;
    a.Take(chosen, p.set, p.replica, *p.ps);
  }
  return a.TakePlan();
}

std::string FormatPodAsk(const PodSet& ps, const std::vector<MigResource>& mig_profiles) {
  if (!ps.mig.any()) return FormatResources(ps.request);
  const auto p = static_cast<size_t>(ps.mig.profile);
  std::string out = (ps.mig.devices == 1 ? "" : std::to_string(ps.mig.devices) + " x ") + "MIG " +
                    (p < mig_profiles.size() ? mig_profiles[p].name : "#" + std::to_string(p));
  if (!ps.request.IsZero()) out += ", " + FormatResources(ps.request);
  return out;
}

PlacementExplanation ExplainNoFit(const ClusterState& state, const FeasibilityCache& feasibility,
                                  const Workload& w, int32_t pods) {
  enum Cause {
    kUnschedulable,
    kSelector,
    kTaint,
    kModel,
    kDevicePluginShares,
    kNoMigDevices,
    kTooFewGpus,
    kUnhealthy,
    kTooFewFree,
    kNoShareRoom,
    kTooFewFreeMig,
    kCpu,
    kMemory,
    kPods,
    kNumCauses
  };
  static constexpr std::array<const char*, kNumCauses> kCauseText = {
      "cordoned",
      "node selector mismatch",
      "untolerated taint",
      "wrong GPU model",
      "GPUs divided by the device plugin",
      "no MIG devices of the profile",
      "too few GPUs",
      "unhealthy GPUs",
      "too few free GPUs",
      "no GPU with room for the share",
      "too few free MIG devices of the profile",
      "insufficient cpu",
      "insufficient memory",
      "pod limit reached"};
  const std::vector<PodRef> refs = ExpandPods(w, pods);
  std::map<int32_t, int32_t> wanted;  // pod set -> pods of it in the gang
  for (const PodRef& p : refs) ++wanted[p.set];

  PlacementExplanation out;
  int64_t room_total = 0;
  for (const auto& [set, count] : wanted) {
    const PodSet& ps = w.pod_sets[set];
    const std::vector<NodeFilter>& f = feasibility.For(ps);
    std::array<int64_t, kNumCauses> causes{};
    int64_t room = 0;
    int64_t nodes_with_room = 0;
    for (size_t i = 0; i < state.num_nodes(); ++i) {
      const NodeId n{static_cast<int32_t>(i)};
      const NodeFacts& facts = state.facts(n);
      const NodeCapacity& c = state.free(n);
      const bool share = ps.request.gpu_share();
      const int64_t g = share ? 1 : ps.request.whole_gpus();
      switch (f[i]) {
        case NodeFilter::kUnschedulable:
          ++causes[kUnschedulable];
          continue;
        case NodeFilter::kNodeSelector:
          ++causes[kSelector];
          continue;
        case NodeFilter::kTaint:
          ++causes[kTaint];
          continue;
        case NodeFilter::kGpuModel:
          ++causes[kModel];
          continue;
        case NodeFilter::kDevicePluginShares:
          ++causes[kDevicePluginShares];
          continue;
        case NodeFilter::kNoMigDevices:
          ++causes[kNoMigDevices];
          continue;
        case NodeFilter::kOk:
          break;
      }
      if (facts.gpu_count < g) {
        ++causes[kTooFewGpus];
      } else if (std::popcount(facts.healthy_mask) < g) {
        ++causes[kUnhealthy];
      } else if (!share && std::popcount(c.gpu_mask) < g) {
        ++causes[kTooFewFree];
      } else if (share && ShareSlots(state, n, ps) == 0) {
        ++causes[kNoShareRoom];
      } else if (!c.HasMig(ps.mig)) {
        ++causes[kTooFewFreeMig];
      } else if (c.cpu_milli < ps.request.cpu_milli()) {
        ++causes[kCpu];
      } else if (c.memory_bytes < ps.request.memory_bytes()) {
        ++causes[kMemory];
      } else if (c.pods < 1) {
        ++causes[kPods];
      } else {
        int64_t fit = c.pods;
        if (share) {
          fit = std::min(fit, ShareSlots(state, n, ps));
        } else if (g > 0) {
          fit = std::min<int64_t>(fit, std::popcount(c.gpu_mask) / g);
        }
        if (ps.mig.any())
          fit = std::min<int64_t>(fit, c.mig[static_cast<size_t>(ps.mig.profile)] / ps.mig.devices);
        if (ps.request.cpu_milli() > 0) fit = std::min(fit, c.cpu_milli / ps.request.cpu_milli());
        if (ps.request.memory_bytes() > 0)
          fit = std::min(fit, c.memory_bytes / ps.request.memory_bytes());
        room += fit;
        ++nodes_with_room;
      }
    }
    room_total += std::min<int64_t>(room, count);
    if (room == 0) {
      std::vector<std::pair<int64_t, int>> ranked;
      for (int c = 0; c < kNumCauses; ++c)
        if (causes[c] > 0) ranked.emplace_back(-causes[c], c);
      std::sort(ranked.begin(), ranked.end());
      // A gang names the pod set whose pods fit nowhere, and itself: "a pod of 1 gpu" alone
      // would read as if the whole workload asked for one GPU.
      const std::string ask = FormatPodAsk(ps, state.mig_profiles());
      std::string msg = "no node fits a pod of " + ask;
      if (refs.size() > 1)
        msg = "no node fits a pod of pod set " + (ps.name.empty() ? std::to_string(set) : ps.name) +
              " (" + ask + "; " + std::to_string(count) + " of the gang's " +
              std::to_string(refs.size()) + " pods)";
      if (ranked.empty()) {
        msg += ": the cluster has no nodes";
      } else {
        msg += ":";
        for (size_t r = 0; r < ranked.size(); ++r) {
          const int64_t k = -ranked[r].first;
          msg += (r == 0 ? " " : ", ") + std::to_string(k) + (k == 1 ? " node " : " nodes ") +
                 kCauseText[ranked[r].second];
        }
      }
      out.message = std::move(msg);
      return out;
    }
    out.details.push_back("pod set " + (ps.name.empty() ? std::to_string(set) : ps.name) + ": " +
                          std::to_string(nodes_with_room) +
                          (nodes_with_room == 1 ? " node has room for " : " nodes have room for ") +
                          std::to_string(std::min<int64_t>(room, count)) + " of its " +
                          std::to_string(count) + " pods");
  }
  int64_t total_gpu = 0;
  for (const PodRef& p : refs) total_gpu += p.ps->Charge().gpu_milli();
  out.message = "gang of " + std::to_string(refs.size()) + " pods (" +
                FormatQuantity(Resource::kGpu, total_gpu) + ") does not fit at once: ";
  // Each pod set may find room for all its pods alone and the gang still not fit: the sets
  // compete for the same nodes, or a pod's GPUs must share an NVLink island.
  out.message += room_total >= static_cast<int64_t>(refs.size())
                     ? "each pod set has room for its pods alone, not all of them together"
                     : "room for " + std::to_string(room_total) + " of its pods";
  return out;
}

}  // namespace chamber::core
