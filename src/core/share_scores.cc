#include "core/share_scores.h"

#include <algorithm>
#include <bit>
#include <unordered_map>
#include <utility>

namespace chamber::core {

namespace {

ShareRequest RequestOf(const PodSet& ps) {
  ShareRequest r;
  if (ps.request.gpu_share()) {
    r.gpu_milli = static_cast<int32_t>(ps.request.gpu_milli());
    r.gpu_memory_mib = ps.gpu_memory_mib;
  } else {
    r.gpus = static_cast<int32_t>(ps.request.whole_gpus());
  }
  r.cpu_milli = ps.request.cpu_milli();
  r.memory_bytes = ps.request.memory_bytes();
  return r;
}

}  // namespace

std::vector<MixClass> SnapshotShareMix(const Snapshot& snapshot, size_t max_classes) {
  // Classes by request, in order of first appearance; a hash index over them, since a cluster's
  // pods may ask for many different amounts of CPU and memory.
  struct Key {
    int64_t gpus, milli, gpu_memory, cpu, memory;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = 1469598103934665603u;
      for (const int64_t v : {k.gpus, k.milli, k.gpu_memory, k.cpu, k.memory})
        h = (h ^ static_cast<uint64_t>(v)) * 1099511628211u;
      return static_cast<size_t>(h);
    }
  };
  std::vector<MixClass> mix;
  std::unordered_map<Key, size_t, KeyHash> index;
  for (const Workload& w : snapshot.workloads) {
    for (const PodSet& ps : w.pod_sets) {
      if (ps.mig.any() || ps.request.gpu_milli() <= 0 || ps.count <= 0) continue;
      const ShareRequest r = RequestOf(ps);
      const int64_t weight = int64_t{ps.count} * r.DemandMilli();
      const auto [it, added] = index.try_emplace(
          Key{r.gpus, r.gpu_milli, r.gpu_memory_mib, r.cpu_milli, r.memory_bytes}, mix.size());
      if (added)
        mix.push_back({r, weight});
      else
        mix[it->second].weight += weight;
    }
  }
  std::stable_sort(mix.begin(), mix.end(),
                   [](const MixClass& a, const MixClass& b) { return a.weight > b.weight; });
  if (mix.size() > max_classes) mix.resize(max_classes);
  return mix;
}

void FillNodeFree(const ClusterState& state, int32_t node, StateNodeFree& out) {
  const NodeId id{node};
  const NodeCapacity& free = state.free(id);
  const uint64_t open = state.share_open_mask(id);
  const int count = state.facts(id).gpu_count;
  const uint64_t reserved = state.node(id).reserved_gpu_mask;
  out.gpus.assign(static_cast<size_t>(count), GpuFree{});
  for (int g = 0; g < count; ++g) {
    GpuFree& gpu = out.gpus[static_cast<size_t>(g)];
    const uint64_t bit = uint64_t{1} << g;
    gpu.reserved = (reserved & bit) != 0;
    const int64_t memory = state.gpu_memory_mib(id, g);
    gpu.total_memory_mib = memory;
    if ((free.gpu_mask & bit) != 0) {
      gpu.memory_mib = memory;
    } else if ((open & bit) != 0) {
      gpu.milli = kMilliPerGpu - state.share_milli(id, g);
      gpu.memory_mib = std::max<int64_t>(0, memory - state.share_memory_mib(id, g));
    } else {
      gpu.milli = 0;
      gpu.healthy = false;
    }
  }
  out.node.gpus = out.gpus;
  // No pod slot left: the node fits no class (every class asks for at least nothing).
  out.node.cpu_milli = free.pods > 0 ? free.cpu_milli : -1;
  out.node.memory_bytes = free.pods > 0 ? free.memory_bytes : -1;
  out.node.model = -1;
}

ShareScores::ShareScores(const ClusterState& state, std::vector<MixClass> mix)
    : state_(&state), mix_(std::move(mix)), nodes_(state.num_nodes()) {
  leaves_ = std::bit_ceil(std::max<size_t>(1, state.num_nodes()));
  state.TrackChanges();
  state.TakeChanged([](int32_t) {});  // the shapes read the state as it stands when built
}

const ShareScores::Scored& ShareScores::ScoredNode(int32_t node) {
  Scored& s = nodes_[static_cast<size_t>(node)];
  if (!s.valid) {
    FillNodeFree(*state_, node, s.free);
    s.scorer.emplace(s.free.node, mix_);
    s.valid = true;
  }
  return s;
}

ShareScores::Best ShareScores::Score(const Scored& scored, const Shape& shape, int32_t node) const {
  Best b;
  if (shape.filter[static_cast<size_t>(node)] != NodeFilter::kOk) return b;
  const NodeScorer::Choice c = scored.scorer->Best(shape.request);
  if (c.delta == NodeScorer::kNoPlacement) return b;
  b.delta = c.delta;
  b.gpu = c.gpu;
  const GpuFree& gpu = scored.free.gpus[static_cast<size_t>(c.gpu)];
  b.left = gpu.milli - shape.request.gpu_milli;
  b.reserved = gpu.reserved;
  return b;
}

// Least increase, then the least compute left on the GPU, then a GPU a reservation pod holds,
// then the lowest node.
bool ShareScores::Better(const Best& a, int32_t an, const Best& b, int32_t bn) {
  if (a.delta != b.delta) return a.delta < b.delta;
  if (a.delta == NodeScorer::kNoPlacement) return an < bn;
  if (a.left != b.left) return a.left < b.left;
  if (a.reserved != b.reserved) return a.reserved;
  return an < bn;
}

int32_t ShareScores::Winner(const Shape& shape, int32_t a, int32_t b) const {
  if (a < 0) return b;
  if (b < 0) return a;
  return Better(shape.best[static_cast<size_t>(b)], b, shape.best[static_cast<size_t>(a)], a) ? b
                                                                                              : a;
}

void ShareScores::Update(Shape& shape, int32_t node) {
  for (size_t i = (leaves_ + static_cast<size_t>(node)) / 2; i >= 1; i /= 2)
    shape.tree[i] = Winner(shape, shape.tree[2 * i], shape.tree[2 * i + 1]);
}

void ShareScores::NoteChanges() {
  state_->TakeChanged([&](int32_t n) {
    nodes_[static_cast<size_t>(n)].valid = false;
    for (Shape& s : shapes_) {
      // A node the shape's constraints rule out is never its choice, whatever changes there.
      if (s.pending_flag[static_cast<size_t>(n)] != 0 ||
          s.filter[static_cast<size_t>(n)] != NodeFilter::kOk)
        continue;
      s.pending_flag[static_cast<size_t>(n)] = 1;
      s.pending.push_back(n);
    }
  });
}

void ShareScores::Refresh(Shape& shape) {
  for (const int32_t n : shape.pending) {
    shape.pending_flag[static_cast<size_t>(n)] = 0;
    shape.best[static_cast<size_t>(n)] = Score(ScoredNode(n), shape, n);
    Update(shape, n);
  }
  shape.pending.clear();
}

ShareScores::Shape& ShareScores::ShapeFor(const PodSet& ps, int32_t filter_id,
                                          std::span<const NodeFilter> filter) {
  const ShareRequest r = RequestOf(ps);
  auto it = std::find_if(shapes_.begin(), shapes_.end(), [&](const Shape& s) {
    return s.filter_id == filter_id && s.request.gpu_milli == r.gpu_milli &&
           s.request.gpu_memory_mib == r.gpu_memory_mib && s.request.cpu_milli == r.cpu_milli &&
           s.request.memory_bytes == r.memory_bytes;
  });
  NoteChanges();
  if (it != shapes_.end()) {
    Refresh(*it);
    return *it;
  }
  // A new shape reads the state as it is now.
  Shape shape{r, filter_id, filter, {}, {}, {}, {}};
  const size_t n = state_->num_nodes();
  shape.pending_flag.assign(n, 0);
  shape.best.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto node = static_cast<int32_t>(i);
    if (filter[i] != NodeFilter::kOk) continue;
    shape.best[i] = Score(ScoredNode(node), shape, node);
  }
  shape.tree.assign(2 * leaves_, -1);
  for (size_t i = 0; i < n; ++i) shape.tree[leaves_ + i] = static_cast<int32_t>(i);
  for (size_t i = leaves_ - 1; i >= 1; --i)
    shape.tree[i] = Winner(shape, shape.tree[2 * i], shape.tree[2 * i + 1]);
  shapes_.push_back(std::move(shape));
  return shapes_.back();
}

std::optional<ShareScores::Spot> ShareScores::Choose(const PodSet& ps, int32_t filter_id,
                                                     std::span<const NodeFilter> filter) {
  const Shape& shape = ShapeFor(ps, filter_id, filter);
  const int32_t n = shape.tree[1];
  if (n < 0) return std::nullopt;
  const Best& b = shape.best[static_cast<size_t>(n)];
  if (b.delta == NodeScorer::kNoPlacement) return std::nullopt;
  return Spot{n, b.gpu};
}

std::optional<ShareScores::Spot> ShareScores::ChooseInGang(const PodSet& ps, int32_t filter_id,
                                                           std::span<const NodeFilter> filter,
                                                           const GangAttempt& a) {
  Shape& shape = ShapeFor(ps, filter_id, filter);
  // The best node the try does not use: its nodes leave the tree while the root is read.
  std::vector<std::pair<int32_t, Best>> used;
  for (const int32_t n : a.used()) {
    if (filter[static_cast<size_t>(n)] != NodeFilter::kOk) continue;
    used.emplace_back(n, shape.best[static_cast<size_t>(n)]);
    shape.best[static_cast<size_t>(n)] = Best{};
    Update(shape, n);
  }
  int32_t chosen = shape.tree[1];
  Best best = chosen >= 0 ? shape.best[static_cast<size_t>(chosen)] : Best{};
  for (const auto& [n, b] : used) {
    shape.best[static_cast<size_t>(n)] = b;
    Update(shape, n);
  }
  // The try's nodes, scored with what it took there.
  bool chosen_used = false;
  StateNodeFree free;
  for (const auto& [n, unused] : used) {
    FillNodeFree(*state_, n, free);
    const NodeId id{n};
    const NodeCapacity& cap = state_->free(id);
    const NodeCapacity& taken = *a.Consumed(n);
    for (const GangAttempt::ShareTaken& t : a.shares()) {
      if (t.node != n) continue;
      GpuFree& gpu = free.gpus[static_cast<size_t>(t.gpu)];
      gpu.milli -= static_cast<int32_t>(t.milli);
      gpu.memory_mib = std::max<int64_t>(0, gpu.memory_mib - t.memory_mib);
    }
    // GPUs the try holds whole are no one else's.
    for (uint64_t m = taken.gpu_mask; m != 0; m &= m - 1) {
      GpuFree& gpu = free.gpus[static_cast<size_t>(std::countr_zero(m))];
      if (gpu.EntirelyFree()) {
        gpu.milli = 0;
        gpu.healthy = false;
      }
    }
    free.node.gpus = free.gpus;
    const bool slot = cap.pods - taken.pods > 0;
    free.node.cpu_milli = slot ? cap.cpu_milli - taken.cpu_milli : -1;
    free.node.memory_bytes = slot ? cap.memory_bytes - taken.memory_bytes : -1;
    const NodeScorer scorer(free.node, mix_);
    const NodeScorer::Choice c = scorer.Best(shape.request);
    if (c.delta == NodeScorer::kNoPlacement) continue;
    const GpuFree& gpu = free.gpus[static_cast<size_t>(c.gpu)];
    const Best b{c.delta, gpu.milli - shape.request.gpu_milli, c.gpu, gpu.reserved};
    // An equal increase: the gang's own node first.
    const bool better = chosen_used ? Better(b, n, best, chosen) : b.delta <= best.delta;
    if (better) {
      chosen = n;
      best = b;
      chosen_used = true;
    }
  }
  if (chosen < 0 || best.delta == NodeScorer::kNoPlacement) return std::nullopt;
  return Spot{chosen, best.gpu};
}

}  // namespace chamber::core
