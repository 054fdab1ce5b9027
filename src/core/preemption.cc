#include "core/preemption.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <numeric>
#include <tuple>

namespace chamber::core {
namespace {

CapacityOverlay OverlayWith(const ClusterState& state, const Snapshot& snapshot,
                            const CapacityOverlay& releasing,
                            const std::vector<VictimCandidate>& victims) {
  CapacityOverlay o = releasing;
  for (const VictimCandidate& v : victims) {
    const Workload& w = snapshot.workloads[v.workload.index()];
    for (size_t i = 0; i < w.placements.size(); ++i)
      o.Add(state, w.placements[i], w.PlacementRequest(i));
  }
  return o;
}

}  // namespace

std::optional<VictimSet> MinimalVictimSelector::Select(
    const ClusterState& state, FeasibilityCache& feasibility, const PlacementPolicy& placement,
    const Snapshot& snapshot, const Workload& preemptor, int32_t pods,
    std::vector<VictimCandidate> candidates, const CapacityOverlay& releasing) const {
  if (candidates.empty()) return std::nullopt;
  // Preference order: the most overshared queue first, then low priority, little progress lost.
  // Candidates are never sorted as a whole: a busy cluster offers tens of thousands of them to
  // every preemptor, which needs only the best few on each node, or the best few overall.
  auto before = [](const VictimCandidate& a, const VictimCandidate& b) {
    return std::tuple(-a.queue_overshare, a.priority, a.gpu_hours_lost, a.workload) <
           std::tuple(-b.queue_overshare, b.priority, b.gpu_hours_lost, b.workload);
  };

  // One pod: score every node the candidates occupy.
  if (pods == 1 && !preemptor.pod_sets.empty()) {
    const PodSet& ps = preemptor.pod_sets.front();
    const std::vector<NodeFilter>& filter = feasibility.For(ps);
    // Candidates grouped by node (nodes ascending: deterministic tie-breaks), each node's in
    // preference order, by a counting pass over node ids.
    const size_t num_nodes = state.num_nodes();
    std::vector<std::pair<int32_t, uint32_t>> placed;  // (node, candidate)
    placed.reserve(candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c) {
      std::span<const PodPlacement> placements = candidates[c].placements;
      if (placements.empty())
        placements = snapshot.workloads[candidates[c].workload.index()].placements;
      for (const PodPlacement& p : placements)
        if (p.node.valid() && p.node.index() < num_nodes)
          placed.emplace_back(p.node.value, static_cast<uint32_t>(c));
    }
    std::vector<uint32_t> first(num_nodes + 1, 0);  // node n's candidates: [first[n], first[n+1])
    for (const auto& [node, c] : placed) ++first[static_cast<size_t>(node) + 1];
    std::partial_sum(first.begin(), first.end(), first.begin());
    std::vector<uint32_t> by_node(placed.size());
    {
      std::vector<uint32_t> next(first.begin(), first.end() - 1);
      for (const auto& [node, c] : placed) by_node[next[node]++] = c;
    }
    auto by_preference = [&](uint32_t a, uint32_t b) {
      return before(candidates[a], candidates[b]);
    };
    // A node's score: victims, their highest priority, GPU-hours lost, node (lowest wins). It is
    // never below that of the node's first candidate taken alone, which the candidates give
    // without reading any workload. Nodes are scored in order of that bound until no remaining
    // one can beat the best found: the choice scoring every node makes, usually after one node.
    using Score = std::tuple<size_t, int32_t, double, int32_t>;
    std::vector<Score> bounds;
    for (size_t n = 0; n < num_nodes; ++n) {
      if (first[n] == first[n + 1] || filter[n] != NodeFilter::kOk) continue;
      const VictimCandidate& c = candidates[*std::min_element(
          by_node.begin() + first[n], by_node.begin() + first[n + 1], by_preference)];
      bounds.emplace_back(1, c.priority, c.gpu_hours_lost, static_cast<int32_t>(n));
    }
    std::make_heap(bounds.begin(), bounds.end(), std::greater<>());
    std::optional<Score> best;
    std::vector<VictimCandidate> best_victims;
    for (auto heap_end = bounds.end(); heap_end != bounds.begin(); --heap_end) {
      if (best && !(bounds.front() < *best)) break;
      std::pop_heap(bounds.begin(), heap_end, std::greater<>());
      const int32_t node = std::get<3>(*(heap_end - 1));
      const auto n = static_cast<size_t>(node);
      const auto begin = by_node.begin() + first[n];
      std::sort(begin, by_node.begin() + first[n + 1], by_preference);
      // A candidate with several pods on the node appears once.
      const auto end = std::unique(begin, by_node.begin() + first[n + 1]);
      NodeCapacity cap = EffectiveCapacity(state, node, &releasing, nullptr);
      const uint64_t healthy = state.facts(NodeId{node}).healthy_mask;
      auto fits = [&] { return cap.Fits(ps.request); };
      std::vector<VictimCandidate> chosen;
      for (auto it = begin; it != end; ++it) {
        const uint32_t c = *it;
        if (fits()) break;
        const Workload& w = snapshot.workloads[candidates[c].workload.index()];
        for (size_t i = 0; i < w.placements.size(); ++i) {
          const PodPlacement& p = w.placements[i];
          if (p.node.value != node) continue;
          cap.Add(NodeCapacity::OfPod(p.gpu_mask & healthy, w.PlacementRequest(i)));
        }
        chosen.push_back(candidates[c]);
      }
      if (chosen.empty() || !fits()) continue;
      int32_t max_priority = chosen.front().priority;
      double lost = 0;
      for (const VictimCandidate& v : chosen) {
        max_priority = std::max(max_priority, v.priority);
        lost += v.gpu_hours_lost;
      }
      const Score score{chosen.size(), max_priority, lost, node};
      if (!best || score < *best) {
        best = score;
        best_victims = std::move(chosen);
      }
    }
    if (best) {
      CapacityOverlay o = OverlayWith(state, snapshot, releasing, best_victims);
      if (auto plan = placement.Place(state, feasibility, preemptor, pods, &o))
        return VictimSet{std::move(best_victims), std::move(*plan)};
    }
  }

  // A gang (or a pod the node scores could not settle): greedy, then prune.
  int64_t needed_gpu = 0;
  {
    int32_t left = pods;
    for (const PodSet& ps : preemptor.pod_sets) {
      const int32_t n = std::min(left, ps.count);
      needed_gpu += ps.request.gpu() * n;
      left -= n;
    }
  }
  std::vector<VictimCandidate> chosen;
  std::optional<PlacementPlan> plan;
  CapacityOverlay o = releasing;
  // Taken in preference order from a heap, as many as the gang turns out to need.
  auto after = [&](const VictimCandidate& a, const VictimCandidate& b) { return before(b, a); };
  std::make_heap(candidates.begin(), candidates.end(), after);
  for (auto end = candidates.end(); end != candidates.begin(); --end) {
    std::pop_heap(candidates.begin(), end, after);
    const VictimCandidate& c = *(end - 1);
    const Workload& w = snapshot.workloads[c.workload.index()];
    for (size_t i = 0; i < w.placements.size(); ++i)
      o.Add(state, w.placements[i], w.PlacementRequest(i));
    chosen.push_back(c);
    if (state.total_free().gpu() + o.gpus() < needed_gpu) continue;
    plan = placement.Place(state, feasibility, preemptor, pods, &o);
    if (plan) break;
  }
  if (!plan) return std::nullopt;
  for (size_t i = chosen.size(); i-- > 0;) {
    std::vector<VictimCandidate> trial = chosen;
    trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(i));
    if (trial.empty()) continue;
    CapacityOverlay t = OverlayWith(state, snapshot, releasing, trial);
    if (auto p = placement.Place(state, feasibility, preemptor, pods, &t)) {
      chosen = std::move(trial);
      plan = std::move(p);
    }
  }
  return VictimSet{std::move(chosen), std::move(*plan)};
}

}  // namespace chamber::core
