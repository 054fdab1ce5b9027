#include "core/preemption.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>

namespace chamber::core {
namespace {

CapacityOverlay OverlayWith(const ClusterState& state, const Snapshot& snapshot,
                            const CapacityOverlay& releasing,
                            const std::vector<VictimCandidate>& victims) {
  CapacityOverlay o = releasing;
  for (const VictimCandidate& v : victims) {
    const Workload& w = snapshot.workloads[v.workload.index()];
    for (size_t i = 0; i < w.placements.size(); ++i) o.AddPod(state, w, i);
  }
  return o;
}

// An upper bound on the pods of a gang that free capacity plus an overlay can hold, by GPUs
// alone: a pod of `g` GPUs needs them free on one node its constraints allow, so a node holds at
// most floor(its free GPUs / g) of them. A placement can succeed only once the bound reaches the
// gang's pods; below that, trying one is known to fail. Kept up to date as the overlay grows, at
// the cost of the placements added, after one pass over the nodes to build it. Only for gangs whose
// pods all come from one pod set with GPUs; for others the bound is always reached.
class PodFitBound {
 public:
  PodFitBound(const ClusterState& state, const FeasibilityCache& feasibility, const Workload& w,
              int32_t pods, const CapacityOverlay& overlay)
      : state_(state), pods_(pods) {
    if (w.pod_sets.empty() || pods > w.pod_sets.front().count) return;
    gpus_ = w.pod_sets.front().request.whole_gpus();
    if (gpus_ <= 0) return;
    filter_ = &feasibility.For(w.pod_sets.front());
    for (size_t n = 0; n < state.num_nodes(); ++n) {
      const NodeCapacity* extra = overlay.Find(static_cast<int32_t>(n));
      fit_ += Term(static_cast<int32_t>(n), extra != nullptr ? extra->gpu_mask : 0);
    }
  }

  // The overlay's GPUs on `node` went from `before` to `after`.
  void Grow(int32_t node, uint64_t before, uint64_t after) {
    if (filter_ != nullptr) fit_ += Term(node, after) - Term(node, before);
  }

  bool Reached() const { return filter_ == nullptr || fit_ >= pods_; }

 private:
  int64_t Term(int32_t node, uint64_t extra) const {
    if ((*filter_)[static_cast<size_t>(node)] != NodeFilter::kOk) return 0;
    return std::popcount(state_.free(NodeId{node}).gpu_mask | extra) / gpus_;
  }

  const ClusterState& state_;
  int64_t pods_;
  int64_t gpus_ = 0;
  const std::vector<NodeFilter>* filter_ = nullptr;  // null: no bound
  int64_t fit_ = 0;
};

// Preference order: the most overshared queue first, then low priority, little progress lost.
// A lambda rather than a function, so that the sorts and heaps that take it inline it.
constexpr auto Before = [](const VictimCandidate& a, const VictimCandidate& b) {
  return std::tuple(-a.queue_overshare, a.priority, a.gpu_hours_lost, a.workload) <
         std::tuple(-b.queue_overshare, b.priority, b.gpu_hours_lost, b.workload);
};

// A node's score for one pod: victims, minus the overshare of the least overshared queue among
// them, their highest priority, GPU-hours lost, node (lowest wins). It is never below that of
// the node's first candidate (in preference order) taken alone.
using NodeScore = std::tuple<size_t, double, int32_t, double, int32_t>;

NodeScore BoundOf(const VictimCandidate& first, int32_t node) {
  return {1, -first.queue_overshare, first.priority, first.gpu_hours_lost, node};
}

NodeScore ScoreOf(std::span<const VictimCandidate> victims, int32_t node) {
  double least_over = victims.front().queue_overshare;
  int32_t max_priority = victims.front().priority;
  double lost = 0;
  for (const VictimCandidate& v : victims) {
    least_over = std::min(least_over, v.queue_overshare);
    max_priority = std::max(max_priority, v.priority);
    lost += v.gpu_hours_lost;
  }
  return {victims.size(), -least_over, max_priority, lost, node};
}

bool RulesAllow(const VictimRules* rules, std::span<const VictimCandidate> victims) {
  return rules == nullptr || rules->Allows(victims);
}
bool RulesFindEnough(const VictimRules* rules, std::span<const VictimCandidate> victims) {
  return rules == nullptr || rules->Enough(victims);
}

// What one victim releases on a node: GPUs it holds whole (the healthy ones), CPU, memory, pod
// slots, and the compute and memory of the shares it holds there.
struct Freed {
  NodeCapacity whole;
  struct Share {
    int gpu;
    int64_t milli;
    int64_t memory_mib;
  };
  std::vector<Share> shares;
};

Freed FreedBy(const ClusterState& state, const Snapshot& snapshot, int32_t node,
              const VictimCandidate& c) {
  Freed f;
  const uint64_t healthy = state.facts(NodeId{node}).healthy_mask;
  const Workload& w = snapshot.workloads[c.workload.index()];
  for (size_t i = 0; i < w.placements.size(); ++i) {
    const PodPlacement& p = w.placements[i];
    if (p.node.value != node) continue;
    const PodSet* ps = w.PlacementPodSet(i);
    const Resources request = ps != nullptr ? ps->request : Resources{};
    const MigAsk mig = ps != nullptr ? ps->mig : MigAsk{};
    if (request.gpu_share()) {
      f.whole.Add(NodeCapacity::OfPod(0, request));
      // A share naming other than one GPU was never claimed (a snapshot issue): it frees none.
      if (std::popcount(p.gpu_mask) == 1)
        f.shares.push_back({std::countr_zero(p.gpu_mask), request.gpu_milli(), ps->gpu_memory_mib});
    } else {
      f.whole.Add(NodeCapacity::OfPod(p.gpu_mask & healthy, request, mig));
    }
  }
  return f;
}

// A node's room as victims leave it: what is free, what `releasing` returns, and what the
// victims added release. The node's open shared GPUs keep the compute and memory their staying
// shares hold; one whose shares all leave is free whole. Placement reads the same room through
// the overlay of `releasing` and the victims (GangAttempt), so a set found to fit here places.
class NodeRoom {
 public:
  NodeRoom(const ClusterState& state, const CapacityOverlay& releasing, int32_t node)
      : state_(&state), node_(node), cap_(EffectiveCapacity(state, node, &releasing, nullptr)) {
    const bool released = releasing.ReleasesShares(node);
    for (uint64_t m = state.share_open_mask(NodeId{node}); m != 0; m &= m - 1) {
      const int g = std::countr_zero(m);
      Shared sh{g, state.share_milli(NodeId{node}, g), state.share_memory_mib(NodeId{node}, g)};
      if (released) {
        const CapacityOverlay::ShareRoom back = releasing.SharesReleased(node, g);
        sh.milli -= back.milli;
        sh.memory_mib -= back.memory_mib;
      }
      shared_.push_back(sh);
    }
  }

  void Add(const Freed& f) {
    cap_.Add(f.whole);
    for (const Freed::Share& x : f.shares) {
      for (Shared& sh : shared_) {
        if (sh.gpu != x.gpu) continue;
        sh.milli -= x.milli;
        sh.memory_mib -= x.memory_mib;
      }
    }
  }

  // Whether one more pod of `ps` fits.
  bool Fits(const PodSet& ps) const {
    const Resources& request = ps.request;
    if (!request.gpu_share()) {
      if (shared_.empty()) return cap_.Fits(request, ps.mig);
      NodeCapacity c = cap_;
      for (const Shared& sh : shared_)
        if (sh.milli <= 0) c.gpu_mask |= uint64_t{1} << sh.gpu;
      return c.Fits(request, ps.mig);
    }
    if (!cap_.Fits(request)) return false;
    const int64_t memory = ps.gpu_memory_mib;
    auto memory_fits = [&](int g, int64_t used) {
      return memory == 0 || used + memory <= state_->gpu_memory_mib(NodeId{node_}, g);
    };
    for (uint64_t m = cap_.gpu_mask; m != 0; m &= m - 1)
      if (memory_fits(std::countr_zero(m), 0)) return true;
    for (const Shared& sh : shared_)
      if (sh.milli + request.gpu_milli() <= kMilliPerGpu && memory_fits(sh.gpu, sh.memory_mib))
        return true;
    return false;
  }

 private:
  struct Shared {
    int gpu;
    int64_t milli;  // compute its staying shares hold
    int64_t memory_mib;
  };
  const ClusterState* state_;
  int32_t node_;
  NodeCapacity cap_;
  std::vector<Shared> shared_;  // the node's open shared GPUs
};

// Candidates taken in order (passing over those the rules refuse) until one pod of `ps` fits
// and the rules find the set enough; then every victim whose release proves unnecessary is
// spared, the least preferred first. The victims go to `chosen`; false when no set is found.
bool TakeThenSpare(const NodeRoom& base, const PodSet& ps,
                   std::span<const VictimCandidate* const> ordered, std::span<const Freed> frees,
                   const VictimRules* rules, std::vector<VictimCandidate>* chosen) {
  chosen->clear();
  NodeRoom room = base;
  std::vector<const Freed*> freed;  // per chosen victim, what it frees on the node
  for (size_t k = 0; k < ordered.size(); ++k) {
    if (room.Fits(ps) && RulesFindEnough(rules, *chosen)) break;
    chosen->push_back(*ordered[k]);
    if (!RulesAllow(rules, *chosen)) {
      chosen->pop_back();
      continue;
    }
    room.Add(frees[k]);
    freed.push_back(&frees[k]);
  }
  if (chosen->empty() || !room.Fits(ps) || !RulesFindEnough(rules, *chosen)) return false;
  std::vector<VictimCandidate> trial;
  for (size_t i = chosen->size(); i-- > 0 && chosen->size() > 1;) {
    NodeRoom without = base;
    for (size_t j = 0; j < freed.size(); ++j)
      if (j != i) without.Add(*freed[j]);
    if (!without.Fits(ps)) continue;
    trial = *chosen;
    trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(i));
    if (!RulesAllow(rules, trial) || !RulesFindEnough(rules, trial)) continue;
    chosen->swap(trial);
    freed.erase(freed.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return true;
}

// The node's candidates `ordered` come in preference order, each once. The first that makes
// room alone, with the rules' consent, is the best set the node offers. Otherwise TakeThenSpare
// over them; for a pod asking for a share, also over each GPU's own candidates (those holding a
// share of it, or it whole), and the set of fewest victims wins, then the better score: a share's
// victims come from the one GPU it goes on wherever that suffices. Returns the score, with the
// victims in `chosen`, or nothing when no such set is found.
std::optional<NodeScore> ScoreNode(const ClusterState& state, const Snapshot& snapshot,
                                   const CapacityOverlay& releasing, const PodSet& ps, int32_t node,
                                   std::span<const VictimCandidate* const> ordered,
                                   const VictimRules* rules, std::vector<VictimCandidate>* chosen) {
  chosen->clear();
  const NodeRoom base(state, releasing, node);
  // Room the node has without victims is not preempted for.
  if (base.Fits(ps) && RulesFindEnough(rules, {})) return std::nullopt;
  std::vector<Freed> frees;
  frees.reserve(ordered.size());
  for (size_t k = 0; k < ordered.size(); ++k) {
    frees.push_back(FreedBy(state, snapshot, node, *ordered[k]));
    NodeRoom room = base;
    room.Add(frees[k]);
    if (!room.Fits(ps)) continue;
    const std::span<const VictimCandidate> one(ordered[k], 1);
    if (RulesAllow(rules, one) && RulesFindEnough(rules, one)) {
      chosen->push_back(*ordered[k]);
      return ScoreOf(*chosen, node);
    }
  }
  std::optional<NodeScore> best;
  if (TakeThenSpare(base, ps, ordered, frees, rules, chosen)) best = ScoreOf(*chosen, node);
  if (!ps.request.gpu_share()) return best;
  uint64_t gpus = 0;
  for (const Freed& f : frees) {
    gpus |= f.whole.gpu_mask;
    for (const Freed::Share& x : f.shares) gpus |= uint64_t{1} << x.gpu;
  }
  std::vector<const VictimCandidate*> on_gpu;
  std::vector<Freed> on_gpu_frees;
  std::vector<VictimCandidate> trial;
  for (; gpus != 0; gpus &= gpus - 1) {
    const int g = std::countr_zero(gpus);
    on_gpu.clear();
    on_gpu_frees.clear();
    for (size_t k = 0; k < ordered.size(); ++k) {
      bool touches = ((frees[k].whole.gpu_mask >> g) & 1) != 0;
      for (const Freed::Share& x : frees[k].shares) touches |= x.gpu == g;
      if (!touches) continue;
      on_gpu.push_back(ordered[k]);
      on_gpu_frees.push_back(frees[k]);
    }
    if (on_gpu.size() == ordered.size()) continue;  // the set above
    if (!TakeThenSpare(base, ps, on_gpu, on_gpu_frees, rules, &trial)) continue;
    const NodeScore score = ScoreOf(trial, node);
    if (!best || score < *best) {
      best = score;
      chosen->swap(trial);
    }
  }
  return best;
}

// Whether one victim leaving could make room for a pod of `ps` on `node` by itself, as far as the
// node's GPUs tell: May is false only when it surely cannot. It can tell only for a pod of one
// GPU or a share of one, on a node without GPU room for it now (else a victim freeing a pod slot,
// CPU or memory may be all it needs): a victim holding one share of an open GPU there frees room
// enough for a share if that GPU then has the compute, and for a whole GPU if it was the last
// share on it. A node none of whose candidates may suffice alone needs two victims at least.
class AloneCheck {
 public:
  AloneCheck(const ClusterState& state, const CapacityOverlay& releasing, const PodSet& ps,
             int32_t node)
      : state_(state), releasing_(releasing), ps_(ps), node_(node) {
    const Resources& r = ps.request;
    if (!r.gpu_share() && r.whole_gpus() != 1) return;
    if (EffectiveCapacity(state, node, &releasing, nullptr).gpu_mask != 0) return;
    if (r.gpu_share())
      for (uint64_t m = state.share_open_mask(NodeId{node}); m != 0; m &= m - 1)
        if (Used(std::countr_zero(m)) + r.gpu_milli() <= kMilliPerGpu) return;
    unsure_ = false;
  }

  bool May(const Snapshot& snapshot, const VictimCandidate& c) const {
    if (unsure_) return true;
    const Workload& w = snapshot.workloads[c.workload.index()];
    const std::span<const PodPlacement> placements =
        c.placements.empty() ? std::span<const PodPlacement>(w.placements) : c.placements;
    size_t at = placements.size();
    for (size_t i = 0; i < placements.size(); ++i) {
      if (placements[i].node.value != node_) continue;
      if (at != placements.size()) return true;  // several pods here
      at = i;
    }
    if (at == placements.size()) return true;
    const PodSet* vps = w.PlacementPodSet(at);
    if (vps == nullptr || !vps->request.gpu_share()) return true;
    if (std::popcount(placements[at].gpu_mask) != 1) return false;  // frees no GPU room
    const int g = std::countr_zero(placements[at].gpu_mask);
    if (((state_.share_open_mask(NodeId{node_}) >> g) & 1) == 0) return false;
    const int64_t left = Used(g) - vps->request.gpu_milli();
    return ps_.request.gpu_share() ? left + ps_.request.gpu_milli() <= kMilliPerGpu : left <= 0;
  }

 private:
  // Compute the shares on GPU g hold that are not leaving.
  int64_t Used(int g) const {
    return state_.share_milli(NodeId{node_}, g) - releasing_.SharesReleased(node_, g).milli;
  }

  const ClusterState& state_;
  const CapacityOverlay& releasing_;
  const PodSet& ps_;
  int32_t node_;
  bool unsure_ = true;
};

}  // namespace

VictimIndex::VictimIndex(size_t num_nodes, size_t num_groups, size_t num_workloads,
                         std::vector<Entry> entries)
    : entries_(std::move(entries)),
      removed_(entries_.size(), 0),
      entry_of_(num_workloads, -1),
      node_begin_(num_nodes + 1, 0),
      best_(num_groups),
      node_best_(num_nodes),
      alive_(num_groups, 0),
      group_nodes_(num_groups),
      first_(num_nodes, -1),
      first_group_(num_nodes, -1),
      first_valid_(num_nodes, 0),
      last_groups_(num_groups),
      scored_(num_nodes, 0) {
  // (node, entry), an entry with several pods on a node once.
  std::vector<std::pair<uint32_t, uint32_t>> placed;
  for (size_t e = 0; e < entries_.size(); ++e) {
    const Entry& entry = entries_[e];
    ++alive_[static_cast<size_t>(entry.group)];
    if (entry.candidate.workload.index() < num_workloads)
      entry_of_[entry.candidate.workload.index()] = static_cast<int32_t>(e);
    for (const PodPlacement& p : entry.candidate.placements)
      if (p.node.valid() && p.node.index() < num_nodes)
        placed.emplace_back(static_cast<uint32_t>(p.node.value), static_cast<uint32_t>(e));
  }
  std::sort(placed.begin(), placed.end());
  placed.erase(std::unique(placed.begin(), placed.end()), placed.end());
  node_entries_.reserve(placed.size());
  for (const auto& [node, e] : placed) {
    ++node_begin_[node + 1];
    node_entries_.push_back(e);
  }
  std::partial_sum(node_begin_.begin(), node_begin_.end(), node_begin_.begin());
  for (size_t n = 0; n < num_nodes; ++n) {
    for (uint32_t i = node_begin_[n]; i < node_begin_[n + 1]; ++i) {
      const int32_t group = entries_[node_entries_[i]].group;
      const auto& known = node_best_[n];
      if (std::any_of(known.begin(), known.end(), [&](const auto& k) { return k.first == group; }))
        continue;
      UpdateBest(group, static_cast<int32_t>(n));
      group_nodes_[static_cast<size_t>(group)].push_back(static_cast<int32_t>(n));
    }
  }
}

void VictimIndex::UpdateBest(int32_t group, int32_t node) {
  const auto n = static_cast<size_t>(node);
  std::optional<Key> best;
  for (uint32_t i = node_begin_[n]; i < node_begin_[n + 1]; ++i) {
    const uint32_t e = node_entries_[i];
    const Entry& entry = entries_[e];
    if (removed_[e] || entry.group != group) continue;
    const Key key{entry.candidate.priority, entry.candidate.gpu_hours_lost, node,
                  entry.candidate.workload.value};
    if (!best || key < *best) best = key;
  }
  std::vector<std::pair<int32_t, Key>>& known = node_best_[n];
  auto it =
      std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == group; });
  std::set<Key>& set = best_[static_cast<size_t>(group)];
  if (it != known.end()) {
    set.erase(it->second);
    if (best) {
      it->second = *best;
    } else {
      known.erase(it);
    }
  } else if (best) {
    known.emplace_back(group, *best);
  }
  if (best) set.insert(*best);
}

void VictimIndex::Remove(WorkloadId w) {
  if (!w.valid() || w.index() >= entry_of_.size() || entry_of_[w.index()] < 0) return;
  const auto e = static_cast<uint32_t>(entry_of_[w.index()]);
  if (removed_[e]) return;
  removed_[e] = 1;
  const Entry& entry = entries_[e];
  --alive_[static_cast<size_t>(entry.group)];
  const size_t num_nodes = node_best_.size();
  for (size_t i = 0; i < entry.candidate.placements.size(); ++i) {
    const PodPlacement& p = entry.candidate.placements[i];
    if (!p.node.valid() || p.node.index() >= num_nodes) continue;
    bool repeat = false;  // another pod on the same node: updated already
    for (size_t j = 0; j < i; ++j) repeat |= entry.candidate.placements[j].node == p.node;
    if (repeat) continue;
    UpdateBest(entry.group, p.node.value);
    first_valid_[p.node.index()] = 0;
  }
}

// A group ranked lower than before (or no longer a candidate) moves only the nodes whose first
// candidate it held; a group ranked higher (or newly a candidate) may move any node it is on.
void VictimIndex::Retarget(std::span<const VictimGroup> groups) const {
  for (size_t g = 0; g < groups.size(); ++g) {
    const VictimGroup& was = last_groups_[g];
    const VictimGroup& now = groups[g];
    const bool lower = was.candidates && (!now.candidates || now.overshare < was.overshare);
    const bool higher = now.candidates && (!was.candidates || now.overshare > was.overshare);
    if (!lower && !higher) continue;
    for (int32_t n : group_nodes_[g]) {
      const auto i = static_cast<size_t>(n);
      if (higher || first_group_[i] == static_cast<int32_t>(g)) first_valid_[i] = 0;
    }
    last_groups_[g] = now;
  }
}

std::optional<VictimSet> MinimalVictimSelector::Select(VictimSearch s) const {
  if (s.index)
    return SelectOnePod(s.state, s.feasibility, s.placement, s.snapshot, s.preemptor, *s.index,
                        s.groups, s.candidates, s.releasing, s.rules);
  return SelectAmong(s.state, s.feasibility, s.placement, s.snapshot, s.preemptor, s.pods,
                     std::move(s.candidates), s.releasing, s.rules);
}

std::optional<VictimSet> MinimalVictimSelector::SelectAmong(
    const ClusterState& state, const FeasibilityCache& feasibility,
    const PlacementPolicy& placement, const Snapshot& snapshot, const Workload& preemptor,
    int32_t pods, std::vector<VictimCandidate> candidates, const CapacityOverlay& releasing,
    const VictimRules* rules) const {
  if (candidates.empty()) return std::nullopt;
  // Candidates are never sorted as a whole: a busy cluster offers tens of thousands of them to
  // every preemptor, which needs only the best few on each node, or the best few overall.
  const auto before = Before;

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
    // Nodes are scored in order of a bound, the score of their first candidate alone, which the
    // candidates give without reading any workload, until no remaining one can beat the best
    // found: the choice scoring every node makes, usually after one node.
    using Score = NodeScore;
    std::vector<Score> bounds;
    for (size_t n = 0; n < num_nodes; ++n) {
      if (first[n] == first[n + 1] || filter[n] != NodeFilter::kOk) continue;
      const VictimCandidate& c = candidates[*std::min_element(
          by_node.begin() + first[n], by_node.begin() + first[n + 1], by_preference)];
      bounds.push_back(BoundOf(c, static_cast<int32_t>(n)));
    }
    std::make_heap(bounds.begin(), bounds.end(), std::greater<>());
    std::optional<Score> best;
    std::vector<VictimCandidate> best_victims, chosen;
    std::vector<const VictimCandidate*> ordered;
    for (auto heap_end = bounds.end(); heap_end != bounds.begin(); --heap_end) {
      if (best && !(bounds.front() < *best)) break;
      std::pop_heap(bounds.begin(), heap_end, std::greater<>());
      const int32_t node = std::get<4>(*(heap_end - 1));
      const auto n = static_cast<size_t>(node);
      const auto begin = by_node.begin() + first[n];
      std::sort(begin, by_node.begin() + first[n + 1], by_preference);
      // A candidate with several pods on the node appears once.
      const auto end = std::unique(begin, by_node.begin() + first[n + 1]);
      ordered.clear();
      for (auto it = begin; it != end; ++it) ordered.push_back(&candidates[*it]);
      const std::optional<Score> score =
          ScoreNode(state, snapshot, releasing, ps, node, ordered, rules, &chosen);
      if (score && (!best || *score < *best)) {
        best = score;
        std::swap(best_victims, chosen);
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
      needed_gpu += ps.request.whole_gpus() * n;
      left -= n;
    }
  }
  std::vector<VictimCandidate> chosen;
  std::optional<PlacementPlan> plan;
  CapacityOverlay o = releasing;
  std::optional<PodFitBound> bound;
  // Taken in preference order from a heap, as many as the gang turns out to need.
  auto after = [&](const VictimCandidate& a, const VictimCandidate& b) { return before(b, a); };
  std::make_heap(candidates.begin(), candidates.end(), after);
  for (auto end = candidates.end(); end != candidates.begin(); --end) {
    std::pop_heap(candidates.begin(), end, after);
    const VictimCandidate& c = *(end - 1);
    chosen.push_back(c);
    if (!RulesAllow(rules, chosen)) {
      chosen.pop_back();
      continue;
    }
    const Workload& w = snapshot.workloads[c.workload.index()];
    for (size_t i = 0; i < w.placements.size(); ++i) {
      const int32_t node = w.placements[i].node.value;
      const NodeCapacity* extra = bound ? o.Find(node) : nullptr;
      const uint64_t before_mask = extra != nullptr ? extra->gpu_mask : 0;
      o.AddPod(state, w, i);
      if (bound) bound->Grow(node, before_mask, o.Find(node)->gpu_mask);
    }
    if (state.total_free().whole_gpus() + o.gpus() < needed_gpu) continue;
    if (bound && !bound->Reached()) continue;
    if (!RulesFindEnough(rules, chosen)) continue;
    plan = placement.Place(state, feasibility, preemptor, pods, &o);
    if (plan) break;
    // Built after the first try fails: a search whose first try succeeds, the common case,
    // does not pay for reading every node.
    if (!bound) bound.emplace(state, feasibility, preemptor, pods, o);
  }
  if (!plan) return std::nullopt;
  for (size_t i = chosen.size(); i-- > 0;) {
    std::vector<VictimCandidate> trial = chosen;
    trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(i));
    if (trial.empty() || !RulesAllow(rules, trial) || !RulesFindEnough(rules, trial)) continue;
    CapacityOverlay t = OverlayWith(state, snapshot, releasing, trial);
    if (auto p = placement.Place(state, feasibility, preemptor, pods, &t)) {
      chosen = std::move(trial);
      plan = std::move(p);
    }
  }
  return VictimSet{std::move(chosen), std::move(*plan)};
}

// The single-pod path of Select, with the index's entries of the marked groups and `extra` as the
// candidates. Every node's bound is the key of its first candidate, and that candidate is the best
// entry of its own group on the node (or the best extra there), so merging the groups' ordered
// sets and the extras' keys meets every node's bound in ascending order. A key whose node has
// another first candidate is passed over: that node is met at its own first candidate's key.
std::optional<VictimSet> MinimalVictimSelector::SelectOnePod(
    const ClusterState& state, const FeasibilityCache& feasibility,
    const PlacementPolicy& placement, const Snapshot& snapshot, const Workload& preemptor,
    const VictimIndex& index, std::span<const VictimGroup> groups,
    std::span<const VictimCandidate> extra, const CapacityOverlay& releasing,
    const VictimRules* rules) const {
  if (preemptor.pod_sets.empty() || groups.size() != index.num_groups()) return std::nullopt;
  const PodSet& ps = preemptor.pod_sets.front();
  const std::vector<NodeFilter>& filter = feasibility.For(ps);
  const size_t num_nodes = state.num_nodes();
  using Key = VictimIndex::Key;
  const uint32_t search = ++index.search_;

  // Extras by node, each node's in preference order, and each node's first as a key.
  std::vector<std::pair<int32_t, uint32_t>> extra_at;  // (node, extra)
  for (size_t c = 0; c < extra.size(); ++c) {
    std::span<const PodPlacement> placements = extra[c].placements;
    if (placements.empty()) placements = snapshot.workloads[extra[c].workload.index()].placements;
    for (const PodPlacement& p : placements)
      if (p.node.valid() && p.node.index() < num_nodes)
        extra_at.emplace_back(p.node.value, static_cast<uint32_t>(c));
  }
  std::sort(extra_at.begin(), extra_at.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return Before(extra[a.second], extra[b.second]);
  });
  extra_at.erase(std::unique(extra_at.begin(), extra_at.end()), extra_at.end());
  // (minus overshare, key): the order of bounds.
  std::vector<std::pair<double, Key>> extra_keys;
  for (size_t i = 0; i < extra_at.size(); ++i) {
    if (i > 0 && extra_at[i - 1].first == extra_at[i].first) continue;
    const VictimCandidate& c = extra[extra_at[i].second];
    extra_keys.push_back(
        {-c.queue_overshare, {c.priority, c.gpu_hours_lost, extra_at[i].first, c.workload.value}});
  }
  std::sort(extra_keys.begin(), extra_keys.end());
  auto extras_on = [&](int32_t node) {
    auto lo = std::lower_bound(extra_at.begin(), extra_at.end(), node,
                               [](const auto& a, int32_t n) { return a.first < n; });
    auto hi = lo;
    while (hi != extra_at.end() && hi->first == node) ++hi;
    return std::pair(lo, hi);
  };

  // Calls `f` with each of the index's entries on the node that this search offers, and the
  // overshare the search gives it.
  auto each_entry = [&](int32_t node, auto&& f) {
    const auto n = static_cast<size_t>(node);
    for (uint32_t i = index.node_begin_[n]; i < index.node_begin_[n + 1]; ++i) {
      const uint32_t e = index.node_entries_[i];
      const VictimIndex::Entry& entry = index.entries_[e];
      const VictimGroup& g = groups[static_cast<size_t>(entry.group)];
      if (!index.removed_[e] && g.candidates) f(entry, g.overshare);
    }
  };
  // A node's candidates, extras included, in preference order.
  std::vector<VictimCandidate> on_node;
  auto gather = [&](int32_t node) {
    on_node.clear();
    each_entry(node, [&](const VictimIndex::Entry& entry, double overshare) {
      on_node.push_back(entry.candidate);
      on_node.back().queue_overshare = overshare;
    });
    auto [lo, hi] = extras_on(node);
    for (auto it = lo; it != hi; ++it) on_node.push_back(extra[it->second]);
    std::sort(on_node.begin(), on_node.end(), Before);
  };
  // The workload of the node's first candidate. Among the index's entries it is kept from search
  // to search; the extras, this search's own, are compared on top.
  index.Retarget(groups);
  auto first_of = [&](int32_t node) {
    const auto n = static_cast<size_t>(node);
    if (!index.first_valid_[n]) {
      index.first_valid_[n] = 1;
      index.first_[n] = -1;
      index.first_group_[n] = -1;
      // Before's order, without copying the candidates.
      std::optional<std::tuple<double, int32_t, double, WorkloadId>> best;
      each_entry(node, [&](const VictimIndex::Entry& entry, double overshare) {
        const VictimCandidate& c = entry.candidate;
        const auto key = std::tuple(-overshare, c.priority, c.gpu_hours_lost, c.workload);
        if (best && !(key < *best)) return;
        best = key;
        index.first_[n] = c.workload.value;
        index.first_group_[n] = entry.group;
      });
    }
    if (extra_at.empty()) return index.first_[n];
    auto [lo, hi] = extras_on(node);
    if (lo == hi) return index.first_[n];
    const VictimCandidate& x = extra[lo->second];
    if (index.first_[n] < 0) return x.workload.value;
    const VictimIndex::Entry& entry =
        index.entries_[static_cast<size_t>(index.entry_of_[static_cast<size_t>(index.first_[n])])];
    VictimCandidate c = entry.candidate;
    c.queue_overshare = groups[static_cast<size_t>(entry.group)].overshare;
    return Before(x, c) ? x.workload.value : c.workload.value;
  };

  // The merge: one stream per marked group's set, and one for the extras.
  // A group's entries share their overshare, so each stream is in the order of bounds, and the
  // merge, by minus overshare and then key, meets every node's bound in ascending order.
  struct Stream {
    double neg_over;
    Key key;
    int32_t group;  // -1: the extras
    std::set<Key>::const_iterator it;
    size_t pos;
  };
  auto later = [](const Stream& a, const Stream& b) {
    return std::tie(b.neg_over, b.key) < std::tie(a.neg_over, a.key);
  };
  std::vector<Stream> heap;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].candidates || index.best_[g].empty()) continue;
    const std::set<Key>& set = index.best_[g];
    heap.push_back({-groups[g].overshare, *set.begin(), static_cast<int32_t>(g), set.begin(), 0});
  }
  if (!extra_keys.empty())
    heap.push_back({extra_keys.front().first, extra_keys.front().second, -1, {}, 0});
  std::make_heap(heap.begin(), heap.end(), later);

  std::optional<NodeScore> best;
  std::vector<VictimCandidate> best_victims, chosen;
  std::vector<const VictimCandidate*> ordered;
  // Scores the node whose candidates gather() has just read.
  auto score = [&](int32_t node) {
    index.scored_[static_cast<size_t>(node)] = search;
    ordered.clear();
    for (const VictimCandidate& c : on_node) ordered.push_back(&c);
    const std::optional<NodeScore> got =
        ScoreNode(state, snapshot, releasing, ps, node, ordered, rules, &chosen);
    if (got && (!best || *got < *best)) {
      best = got;
      std::swap(best_victims, chosen);
    }
  };
  // Nodes whose first candidate cannot make room alone (AloneCheck), with the tighter bound of
  // the candidates that may, or of two victims: scored when the merge reaches that bound.
  std::vector<NodeScore> deferred;
  auto stream_bound = [](const Stream& s) {
    return NodeScore{1, s.neg_over, s.key.priority, s.key.gpu_hours_lost, s.key.node};
  };
  while (!heap.empty() || !deferred.empty()) {
    if (!deferred.empty() && (heap.empty() || deferred.front() < stream_bound(heap.front()))) {
      std::pop_heap(deferred.begin(), deferred.end(), std::greater<>());
      const NodeScore bound = deferred.back();
      deferred.pop_back();
      if (best && !(bound < *best)) break;
      gather(std::get<4>(bound));
      score(std::get<4>(bound));
      continue;
    }
    std::pop_heap(heap.begin(), heap.end(), later);
    Stream& s = heap.back();
    const Key key = s.key;
    const NodeScore bound = stream_bound(s);
    if (best && !(bound < *best)) break;
    // Advance the stream before scoring.
    bool more = false;
    if (s.group >= 0) {
      more = ++s.it != index.best_[static_cast<size_t>(s.group)].end();
      if (more) s.key = *s.it;
    } else {
      more = ++s.pos < extra_keys.size();
      if (more) std::tie(s.neg_over, s.key) = extra_keys[s.pos];
    }
    if (more) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }

    const auto n = static_cast<size_t>(key.node);
    if (filter[n] != NodeFilter::kOk || index.scored_[n] == search) continue;
    if (first_of(key.node) != key.workload) continue;
    const AloneCheck alone(state, releasing, ps, key.node);
    gather(key.node);
    if (on_node.empty() || alone.May(snapshot, on_node.front())) {
      score(key.node);
      continue;
    }
    // Its bound: the best candidate that may make room alone, else two victims.
    index.scored_[n] = search;  // met once; scored from `deferred`
    NodeScore tight{2, -on_node.front().queue_overshare, on_node.front().priority,
                    on_node.front().gpu_hours_lost, key.node};
    for (const VictimCandidate& c : on_node) {
      if (!alone.May(snapshot, c)) continue;
      tight = {1, -c.queue_overshare, c.priority, c.gpu_hours_lost, key.node};
      break;
    }
    deferred.push_back(tight);
    std::push_heap(deferred.begin(), deferred.end(), std::greater<>());
  }
  if (!best) return std::nullopt;
  CapacityOverlay o = OverlayWith(state, snapshot, releasing, best_victims);
  if (auto plan = placement.Place(state, feasibility, preemptor, 1, &o))
    return VictimSet{std::move(best_victims), std::move(*plan)};
  return std::nullopt;
}

}  // namespace chamber::core
