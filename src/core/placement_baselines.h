// Baseline placement policies, for comparing against TopologyBinPacking in simulation.
#pragma once

#include "core/placement.h"

namespace chamber::core {

// Each pod on the lowest-numbered node that fits (pods of a gang placed together or not at all).
class FirstFitPlacement final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "first-fit"; }
  std::optional<PlacementPlan> Place(const ClusterState& state, const FeasibilityCache& feasibility,
                                     const Workload& w, int32_t pods,
                                     const CapacityOverlay* overlay) const override;
};

// Each pod on the node with the most free GPUs, as kube-scheduler's default least-allocated
// score spreads pods; ties go to the lowest-numbered node.
class LeastAllocatedPlacement final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "least-allocated"; }
  std::optional<PlacementPlan> Place(const ClusterState& state, const FeasibilityCache& feasibility,
                                     const Workload& w, int32_t pods,
                                     const CapacityOverlay* overlay) const override;
};

}  // namespace chamber::core
