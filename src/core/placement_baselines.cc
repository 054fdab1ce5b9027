#include "core/placement_baselines.h"

#include <bit>

namespace chamber::core {
namespace {

// Places pods one by one on the node `choose` picks, tracking what earlier pods consumed.
template <typename Choose>
std::optional<PlacementPlan> PlaceGreedy(const ClusterState& state,
                                         const FeasibilityCache& feasibility, const Workload& w,
                                         int32_t pods, const CapacityOverlay* overlay,
                                         Choose choose) {
  GangAttempt attempt(state, overlay);
  auto effective = [&](int32_t n) { return attempt.Effective(n); };
  int32_t placed = 0;
  for (size_t s = 0; s < w.pod_sets.size() && placed < pods; ++s) {
    const PodSet& ps = w.pod_sets[s];
    const std::vector<NodeFilter>& filter = feasibility.For(ps);
    auto fits = [&](int32_t n) { return filter[n] == NodeFilter::kOk && attempt.Fits(n, ps); };
    for (int32_t r = 0; r < ps.count && placed < pods; ++r, ++placed) {
      const int32_t n = choose(fits, effective, ps);
      if (n < 0) return std::nullopt;
      attempt.Take(n, static_cast<int32_t>(s), r, ps);
    }
  }
  return attempt.TakePlan();
}

}  // namespace

std::optional<PlacementPlan> FirstFitPlacement::Place(const ClusterState& state,
                                                      const FeasibilityCache& feasibility,
                                                      const Workload& w, int32_t pods,
                                                      const CapacityOverlay* overlay) const {
  const auto n_nodes = static_cast<int32_t>(state.num_nodes());
  // Pods of a set are placed one after another and capacity only shrinks as they are, so a node
  // before the one the set's last pod took had no room for that pod and has none for this one:
  // each set scans the nodes once, however many pods it has.
  const PodSet* set = nullptr;
  int32_t from = 0;
  return PlaceGreedy(state, feasibility, w, pods, overlay,
                     [&](auto& fits, auto& /*effective*/, const PodSet& ps) {
                       if (&ps != set) {
                         set = &ps;
                         from = 0;
                       }
                       for (; from < n_nodes; ++from)
                         if (fits(from)) return from;
                       return -1;
                     });
}

std::optional<PlacementPlan> LeastAllocatedPlacement::Place(const ClusterState& state,
                                                            const FeasibilityCache& feasibility,
                                                            const Workload& w, int32_t pods,
                                                            const CapacityOverlay* overlay) const {
  const auto n_nodes = static_cast<int32_t>(state.num_nodes());
  return PlaceGreedy(state, feasibility, w, pods, overlay,
                     [&](auto& fits, auto& effective, const PodSet& /*ps*/) {
                       int32_t best = -1;
                       int best_free = -1;
                       for (int32_t n = 0; n < n_nodes; ++n) {
                         if (!fits(n)) continue;
                         const int f = std::popcount(effective(n).gpu_mask);
                         if (f > best_free) {
                           best_free = f;
                           best = n;
                         }
                       }
                       return best;
                     });
}

}  // namespace chamber::core
