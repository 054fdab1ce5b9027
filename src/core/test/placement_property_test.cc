// TopologyBinPacking and FirstFitPlacement against references that place each pod by scanning
// every candidate node.
//
// The policy keeps, through one placement try, where the next pod of each pod set may go (the
// gang's nodes already found full, each set's candidates ordered once, the bucket scan's
// position), so that a gang of P pods over C candidate nodes costs about C rather than P x C
// capacity reads. ReferencePlace below is the plain form of the same rules: for every pod, the
// gang's nodes in order of first use, then the fullest fitting candidate (ties in candidate
// order), then the free-GPU buckets. On random clusters, holdings, overlays and gangs of up to
// three pod sets, both must choose the same nodes and GPUs for every pod, or both find none.
//
// RapidCheck runs 100 cases per property; RC_PARAMS="max_success=N" runs more.
#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/cluster_state.h"
#include "core/node_capacity_map.h"
#include "core/placement.h"
#include "core/placement_baselines.h"
#include "core/test/generators.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using testing::Chance;
using testing::GenNodes;
using testing::kGi;
using testing::OneOf;
using testing::Pick;
using testing::SnapshotBuilder;

// --- The reference: every pod scans every candidate. ---

struct RefPod {
  int32_t set;
  int32_t replica;
  const PodSet* ps;
};

class RefAttempt {
 public:
  RefAttempt(const ClusterState& state, const CapacityOverlay* overlay)
      : state_(state), overlay_(overlay) {}
  NodeCapacity Effective(int32_t n) const {
    return EffectiveCapacity(state_, n, overlay_, consumed_.Find(n));
  }
  bool Fits(int32_t n, const PodSet& ps) const { return Effective(n).Fits(ps.request); }
  void Take(int32_t n, const RefPod& p) {
    const uint64_t mask = PickGpus(Effective(n).gpu_mask, state_.islands(NodeId{n}),
                                   static_cast<int>(p.ps->request.whole_gpus()));
    consumed_[n].Add(NodeCapacity::OfPod(mask, p.ps->request));
    plan_.pods.push_back({p.set, p.replica, PodPlacement{NodeId{n}, mask}});
  }
  void Reset() {
    consumed_.clear();
    plan_.pods.clear();
  }
  const std::vector<int32_t>& used() const { return consumed_.nodes(); }
  PlacementPlan TakePlan() {
    std::sort(plan_.pods.begin(), plan_.pods.end(), [](const auto& a, const auto& b) {
      return std::pair(a.pod_set, a.replica) < std::pair(b.pod_set, b.replica);
    });
    return std::move(plan_);
  }

 private:
  const ClusterState& state_;
  const CapacityOverlay* overlay_;
  NodeCapacityMap consumed_;
  PlacementPlan plan_;
};

std::optional<PlacementPlan> ReferencePlace(const ClusterState& state, const FeasibilityCache& feas,
                                            const Workload& w, int32_t pods,
                                            const CapacityOverlay* overlay) {
  std::vector<RefPod> refs;
  for (size_t s = 0; s < w.pod_sets.size() && static_cast<int32_t>(refs.size()) < pods; ++s)
    for (int32_t r = 0; r < w.pod_sets[s].count && static_cast<int32_t>(refs.size()) < pods; ++r)
      refs.push_back({static_cast<int32_t>(s), r, &w.pod_sets[s]});
  if (refs.empty()) return PlacementPlan{};
  std::stable_sort(refs.begin(), refs.end(), [](const RefPod& a, const RefPod& b) {
    return a.ps->request.whole_gpus() > b.ps->request.whole_gpus();
  });
  auto ok = [&](int32_t n, const RefPod& p) {
    return feas.For(w.pod_sets[p.set])[n] == NodeFilter::kOk;
  };
  if (overlay != nullptr && overlay->empty()) overlay = nullptr;
  const int max_k = state.max_gpus_per_node();
  RefAttempt a(state, overlay);
  auto gang_node = [&](const RefPod& p) {
    for (int32_t n : a.used())
      if (ok(n, p) && a.Fits(n, *p.ps)) return n;
    return -1;
  };
  auto fullest = [&](const std::vector<int32_t>& nodes, const RefPod& p) {
    int32_t chosen = -1;
    int best_free = 1 << 30;
    for (int32_t n : nodes) {
      if (!ok(n, p) || !a.Fits(n, *p.ps)) continue;
      const int f = std::popcount(a.Effective(n).gpu_mask);
      if (f < best_free) {
        best_free = f;
        chosen = n;
      }
    }
    return chosen;
  };
  int64_t total_gpu = 0;
  for (const RefPod& p : refs) total_gpu += p.ps->request.whole_gpus();

  if (refs.size() > 1) {
    auto try_node = [&](int32_t n) {
      a.Reset();
      for (const RefPod& p : refs) {
        if (!ok(n, p) || !a.Fits(n, *p.ps)) return false;
        a.Take(n, p);
      }
      return true;
    };
    if (overlay != nullptr) {
      for (int32_t n : overlay->nodes())
        if (try_node(n)) return a.TakePlan();
    }
    int tries = 0;
    for (int k = static_cast<int>(std::min<int64_t>(total_gpu, max_k + 1)); k <= max_k; ++k) {
      for (int32_t n : state.nodes_with_free_gpus(k)) {
        if (!ok(n, refs.front())) continue;
        if (try_node(n)) return a.TakePlan();
        if (++tries >= 64) break;
      }
      if (tries >= 64) break;
    }
    for (int level = 0; level < kNumDomainLevels; ++level) {
      const auto lvl = static_cast<DomainLevel>(level);
      const int count = state.num_domains(lvl);
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
      if (order.size() > 4) order.resize(4);
      for (int32_t d : order) {
        a.Reset();
        bool placed = true;
        for (const RefPod& p : refs) {
          int32_t chosen = gang_node(p);
          if (chosen < 0) chosen = fullest(state.domain_nodes(lvl, d), p);
          if (chosen < 0) {
            placed = false;
            break;
          }
          a.Take(chosen, p);
        }
        if (placed) return a.TakePlan();
      }
    }
  }

  a.Reset();
  for (const RefPod& p : refs) {
    int32_t chosen = gang_node(p);
    if (chosen < 0 && overlay != nullptr) chosen = fullest(overlay->nodes(), p);
    for (int k = static_cast<int>(p.ps->request.whole_gpus()); chosen < 0 && k <= max_k; ++k) {
      for (int32_t n : state.nodes_with_free_gpus(k)) {
        if (ok(n, p) && a.Fits(n, *p.ps)) {
          chosen = n;
          break;
        }
      }
    }
    if (chosen < 0) return std::nullopt;
    a.Take(chosen, p);
  }
  return a.TakePlan();
}

// --- Generators. ---

// A gang of one to three pod sets; pods of one set alike.
void GenGang(SnapshotBuilder& b) {
  auto w = b.Workload("gang", "q");
  const int sets = Pick(1, 3);
  for (int s = 0; s < sets; ++s) {
    w.Pods(Pick(1, 24), OneOf<int64_t>({0, 1, 1, 2, 4, 8}));
    w.Cpu(Pick(0, 16) * 1000).Memory(Pick(0, 64) * kGi);
    if (Chance(15)) w.Selector("pool", Chance(50) ? "a" : "b");
    if (Chance(15)) w.Tolerate("dedicated");
    if (Chance(15)) w.Models({"A100"});
  }
}

// Random pods already running: some GPUs, CPU and memory of each node are held.
void HoldSome(const Snapshot& s, ClusterState& state,
              std::vector<std::pair<PodPlacement, Resources>>* held) {
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeId n{static_cast<int32_t>(i)};
    const int gpus = static_cast<int>(s.nodes[i].gpus.size());
    for (int pod = Pick(0, 3); pod > 0; --pod) {
      const uint64_t free = state.free(n).gpu_mask;
      const uint64_t mask = free & static_cast<uint64_t>(Pick(0, (1 << gpus) - 1));
      const Resources req =
          Resources::Of(std::popcount(mask), Pick(0, 32) * 1000, Pick(0, 256) * kGi);
      const NodeCapacity& f = state.free(n);
      if (f.pods < 1 || f.cpu_milli < req.cpu_milli() || f.memory_bytes < req.memory_bytes())
        continue;
      const PodPlacement p{n, mask};
      if (!state.ClaimExisting(p, req).ok()) continue;
      held->push_back({p, req});
    }
  }
}

std::string Describe(const std::optional<PlacementPlan>& plan) {
  if (!plan) return "none";
  std::string out;
  for (const PodAssignment& p : plan->pods)
    out += std::to_string(p.pod_set) + "/" + std::to_string(p.replica) + "@" +
           std::to_string(p.placement.node.value) + ":" + std::to_string(p.placement.gpu_mask) +
           " ";
  return out;
}

// A random cluster with some of it held, a gang, and maybe an overlay of capacity that some of
// the holders are releasing.
struct PlacementCase {
  SnapshotBuilder b;
  std::optional<ClusterState> state;
  CapacityOverlay overlay;
  bool with_overlay = false;
  int32_t pods = 0;

  PlacementCase() {
    GenNodes(b, 1, 40);
    GenGang(b);
    state.emplace(b.snapshot());
    std::vector<std::pair<PodPlacement, Resources>> held;
    HoldSome(b.snapshot(), *state, &held);
    with_overlay = Chance(40);
    if (with_overlay)
      for (const auto& [p, req] : held)
        if (Chance(40)) overlay.Add(*state, p, req);
    const Workload& w = gang();
    pods = Chance(70) ? w.TotalPods() : Pick(1, w.TotalPods());
  }
  const Workload& gang() const { return b.snapshot().workloads.front(); }
  const CapacityOverlay* overlay_or_null() const { return with_overlay ? &overlay : nullptr; }

  using Placer = std::optional<PlacementPlan> (*)(const ClusterState&, const FeasibilityCache&,
                                                  const Workload&, int32_t, const CapacityOverlay*);
  // The policy's plan and the reference's, each with a cache of its own.
  void Compare(const PlacementPolicy& policy, Placer reference) const {
    FeasibilityCache f1(*state), f2(*state);
    const auto got = policy.Place(*state, f1, gang(), pods, overlay_or_null());
    const auto want = reference(*state, f2, gang(), pods, overlay_or_null());
    RC_TAG(got ? (got->pods.size() > 1 ? "gang placed" : "one pod placed") : "none");
    RC_ASSERT(Describe(got) == Describe(want));
  }
};

RC_GTEST_PROP(PlacementProperty, KeptCursorsChooseAsScanningEveryCandidatePerPod, ()) {
  PlacementCase().Compare(TopologyBinPacking(), ReferencePlace);
}

// First fit: each pod on the first node, in node order, with room for it.
std::optional<PlacementPlan> ReferenceFirstFit(const ClusterState& state,
                                               const FeasibilityCache& feas, const Workload& w,
                                               int32_t pods, const CapacityOverlay* overlay) {
  NodeCapacityMap consumed;
  PlacementPlan plan;
  int32_t placed = 0;
  for (size_t s = 0; s < w.pod_sets.size() && placed < pods; ++s) {
    const PodSet& ps = w.pod_sets[s];
    for (int32_t r = 0; r < ps.count && placed < pods; ++r, ++placed) {
      int32_t chosen = -1;
      for (int32_t n = 0; n < static_cast<int32_t>(state.num_nodes()) && chosen < 0; ++n) {
        if (feas.For(ps)[n] == NodeFilter::kOk &&
            EffectiveCapacity(state, n, overlay, consumed.Find(n)).Fits(ps.request))
          chosen = n;
      }
      if (chosen < 0) return std::nullopt;
      const uint64_t mask =
          PickGpus(EffectiveCapacity(state, chosen, overlay, consumed.Find(chosen)).gpu_mask,
                   state.islands(NodeId{chosen}), static_cast<int>(ps.request.whole_gpus()));
      consumed[chosen].Add(NodeCapacity::OfPod(mask, ps.request));
      plan.pods.push_back({static_cast<int32_t>(s), r, PodPlacement{NodeId{chosen}, mask}});
    }
  }
  return plan;
}

RC_GTEST_PROP(PlacementProperty, FirstFitScansEachPodSetsNodesOnce, ()) {
  PlacementCase().Compare(FirstFitPlacement(), ReferenceFirstFit);
}

// --- Shares: the bucketed best fit chooses as scanning every GPU. ---
//
// One pod asking for a share of a GPU, on a random cluster holding random shares and whole-GPU
// pods: TopologyBinPacking reads the share buckets from the share's size up and stops in the
// first with a GPU it fits on. The reference scans every node and GPU for the least compute left
// after the share (ties in node, then GPU order), and only when none has room takes a free GPU
// with the memory on the fullest node that fits, as a one-GPU pod would.

std::optional<PodPlacement> ReferenceShare(const ClusterState& state,
                                           const std::vector<NodeFilter>& filter,
                                           const PodSet& ps) {
  const int64_t milli = ps.request.gpu_milli();
  std::optional<PodPlacement> best;
  int64_t best_left = 0;
  for (size_t i = 0; i < state.num_nodes(); ++i) {
    const NodeId n{static_cast<int32_t>(i)};
    if (filter[i] != NodeFilter::kOk || !state.free(n).Fits(ps.request)) continue;
    for (int g = 0; g < state.facts(n).gpu_count; ++g) {
      if ((state.share_open_mask(n) >> g & 1) == 0) continue;
      if (!state.ShareFits(n, g, milli, ps.gpu_memory_mib)) continue;
      const int64_t left = kMilliPerGpu - state.share_milli(n, g) - milli;
      if (!best || left < best_left) {
        best = PodPlacement{n, uint64_t{1} << g};
        best_left = left;
      }
    }
  }
  if (best) return best;
  for (int k = 1; k <= state.max_gpus_per_node(); ++k) {
    for (int32_t i : state.nodes_with_free_gpus(k)) {
      const NodeId n{i};
      if (filter[static_cast<size_t>(i)] != NodeFilter::kOk || !state.free(n).Fits(ps.request))
        continue;
      uint64_t free = state.free(n).gpu_mask;
      for (int g = 0; g < state.facts(n).gpu_count; ++g)
        if (ps.gpu_memory_mib > state.gpu_memory_mib(n, g)) free &= ~(uint64_t{1} << g);
      if (free != 0) return PodPlacement{n, PickGpus(free, state.islands(n), 1)};
    }
  }
  return std::nullopt;
}

RC_GTEST_PROP(PlacementProperty, ABucketedShareChoosesAsScanningEveryGpu, ()) {
  SnapshotBuilder b;
  GenNodes(b, 1, 40);
  for (Node& node : b.snapshot().nodes)
    for (Gpu& g : node.gpus) g.memory_mib = OneOf<int64_t>({0, 24576, 81920});
  auto w = b.Workload("share", "q").Shares(1, Pick(1, 999), OneOf<int64_t>({0, 0, 1024, 30000}));
  w.Cpu(Pick(0, 8) * 1000);
  if (Chance(15)) w.Selector("pool", Chance(50) ? "a" : "b");
  if (Chance(15)) w.Models({"A100"});
  ClusterState state(b.snapshot());
  std::vector<std::pair<PodPlacement, Resources>> held;
  HoldSome(b.snapshot(), state, &held);
  for (size_t i = 0; i < state.num_nodes(); ++i) {  // shares beside shares, on any GPU left
    const NodeId n{static_cast<int32_t>(i)};
    for (int k = Pick(0, 12); k > 0 && state.facts(n).gpu_count > 0; --k) {
      const int g = Pick(0, state.facts(n).gpu_count - 1);
      const Resources req = Resources::OfMilli(Pick(1, 999), 0, 0);
      const bool open =
          (state.share_open_mask(n) >> g & 1) != 0 && state.ShareFits(n, g, req.gpu_milli(), 0);
      if ((open || (state.free(n).gpu_mask >> g & 1) != 0) && state.free(n).pods >= 1)
        state.Claim({n, uint64_t{1} << g}, req);
    }
  }
  RC_ASSERT(state.CheckInvariants().ok());
  const Workload& share = b.snapshot().workloads.front();
  FeasibilityCache f1(state), f2(state);
  const auto got = TopologyBinPacking().Place(state, f1, share, 1, nullptr);
  const auto want = ReferenceShare(state, f2.For(share.pod_sets.front()), share.pod_sets.front());
  RC_TAG(!want                                                   ? "none"
         : (state.shared_mask(want->node) & want->gpu_mask) != 0 ? "beside shares"
                                                                 : "a free GPU");
  RC_ASSERT(got.has_value() == want.has_value());
  if (got) RC_ASSERT(got->pods.front().placement == *want);
}

}  // namespace
}  // namespace chamber::core
