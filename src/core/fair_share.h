// Fair share: how much of each resource every queue is entitled to right now.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
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
// during `elapsed` add their GPU-hours, each moment decayed by the time since (so that the result
// does not depend on how `elapsed` is cut into steps). A half-life of zero turns decay off
// (returns 0).
double DecayUsage(double previous, double gpus, Duration elapsed, Duration half_life);

// Decayed GPU-hours as a part of the whole cluster: 1 for a queue that has held every one of
// `cluster_gpus` for much longer than `half_life`, 0.5 for one that held half of them, and
// falling by half with every half-life once it holds nothing. The engine adds
// `usageWeight` times this to a queue's standing. 0 without GPUs or decay.
double DecayedUsageFraction(double gpu_hours, double cluster_gpus, Duration half_life);

// Each queue's decayed GPU-hours (Queue::decayed_usage), as the engine's callers keep them:
// chamberd, the simulator and the demo advance it once per cycle with what each queue's
// running work held since the last one. With a half-life of zero it keeps nothing.
class DecayedUsage {
 public:
  struct Entry {
    double gpu_hours = 0;
    Time at{0};  // the time gpu_hours is as of
  };

  explicit DecayedUsage(Duration half_life) : half_life_(half_life) {}
  bool enabled() const { return half_life_.count() > 0; }
  Duration half_life() const { return half_life_; }

  // Continues from an earlier record (another process's, e.g. a Queue's status): `gpu_hours` as
  // of `at`. Kept until the next Advance() moves it on; replaces what is known of `queue`.
  void Restore(const std::string& queue, double gpu_hours, Time at);
  // Moves every queue of `queues` to `now`: its usage decays, and `held[i]` GPUs count as held
  // by queues[i] since its last update (for a restored queue: since its record; for a queue
  // new since the last call: since that call; on the first call: nothing). Queues no longer in
  // `queues` are forgotten.
  void Advance(Time now, const std::vector<Queue>& queues, const std::vector<double>& held);
  // The same with what the running and preempting workloads in `workloads` hold now, for a
  // caller that sees the cluster once per cycle.
  void AdvanceByWorkloads(Time now, const std::vector<Queue>& queues,
                          const std::vector<Workload>& workloads);
  // Sets Queue::decayed_usage of every queue in `queues`: what is known (0 for the rest).
  // Returns whether any value changed.
  bool Fill(std::vector<Queue>& queues) const;

  const std::map<std::string, Entry>& entries() const { return entries_; }

 private:
  Duration half_life_;
  std::map<std::string, Entry> entries_;
  std::optional<Time> last_;  // the last Advance()
};

}  // namespace chamber::core
