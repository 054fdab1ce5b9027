#include "core/model.h"

#include <algorithm>

namespace chamber::core {

int32_t Workload::TotalPods() const {
  int32_t n = 0;
  for (const PodSet& ps : pod_sets) n += ps.count;
  return n;
}

Resources Workload::TotalRequest() const { return RequestOfFirst(TotalPods()); }

Resources Workload::RequestOfFirst(int32_t pods) const {
  Resources total;
  for (const PodSet& ps : pod_sets) {
    if (pods <= 0) break;
    const int32_t n = ps.count < pods ? ps.count : pods;
    total += ps.Charge() * n;
    pods -= n;
  }
  return total;
}

Resources Workload::PlacementRequest(size_t i) const {
  const PodSet* ps = PlacementPodSet(i);
  return ps != nullptr ? ps->request : Resources{};
}

const PodSet* Workload::PlacementPodSet(size_t i) const {
  for (const PodSet& ps : pod_sets) {
    if (i < static_cast<size_t>(ps.count)) return &ps;
    i -= static_cast<size_t>(ps.count);
  }
  return nullptr;
}

bool Workload::AsksForShares() const {
  for (const PodSet& ps : pod_sets)
    if (ps.request.gpu_share()) return true;
  return false;
}

ShareableGpuMemories::ShareableGpuMemories(const std::vector<Node>& nodes) {
  for (const Node& n : nodes) {
    if (n.device_plugin_shares) continue;
    for (const Gpu& g : n.gpus)
      if (g.healthy && g.memory_mib > 0) kinds_.emplace_back(g.model.str(), g.memory_mib);
  }
  std::sort(kinds_.begin(), kinds_.end());
  kinds_.erase(std::unique(kinds_.begin(), kinds_.end()), kinds_.end());
}

int64_t ShareableGpuMemories::SmallestFor(const PodSet& ps) const {
  int64_t best = 0;
  for (const auto& [model, memory] : kinds_)
    if (memory >= ps.gpu_memory_mib && (best == 0 || memory < best) &&
        (ps.gpu_models.empty() ||
         std::find(ps.gpu_models.begin(), ps.gpu_models.end(), model) != ps.gpu_models.end()))
      best = memory;
  return best;
}

}  // namespace chamber::core
