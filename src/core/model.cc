#include "core/model.h"

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

}  // namespace chamber::core
