// Fair share: how much of each resource every queue is entitled to right now.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/queue_tree.h"

namespace chamber::core {

using ShareVector = std::array<double, kNumResources>;

class FairSharePolicy {
 public:
  virtual ~FairSharePolicy() = default;
  virtual std::string_view name() const = 0;
  // `demand[q]` is what queue q's subtree holds plus what it waits for; `capacity` is the
  // schedulable cluster. Returns a share per queue (invalid queues get zero).
  virtual std::vector<ShareVector> Compute(const QueueTree& tree,
                                           const std::vector<Resources>& demand,
                                           const Resources& capacity) const = 0;
};

// Hierarchical water-filling, per resource, top down. At each level, with the parent's share S:
//   stage 1: every child gets min(demand, effective quota) (scaled down if the quotas
//            overcommit S);
//   stage 2: the rest of S is poured into children with unmet demand in proportion to their
//            over-quota weight, each capped at min(demand, limit); a child that fills up drops
//            out and the remainder is poured again.
// Capacity nobody demands stays unassigned, so a share never exceeds demand.
class WaterFillingFairShare final : public FairSharePolicy {
 public:
  std::string_view name() const override { return "water-filling"; }
  std::vector<ShareVector> Compute(const QueueTree& tree, const std::vector<Resources>& demand,
                                   const Resources& capacity) const override;
};

// Splits `total` among claimants: first min(demand, guaranteed) each, then the surplus by
// weight, capped by demand. Exposed for tests; the building block of the policy above.
std::vector<double> WaterFill(double total, const std::vector<double>& demand,
                              const std::vector<double>& guaranteed,
                              const std::vector<double>& weight);

// Exponentially decayed usage: `previous` decays with `half_life` over `elapsed`, and `gpus` held
// during `elapsed` add their GPU-hours. A half-life of zero turns decay off (returns 0).
double DecayUsage(double previous, double gpus, Duration elapsed, Duration half_life);

}  // namespace chamber::core
