// The engine's policy knobs: one configuration, read from the same YAML file by the daemon, the
// simulator and the demo (see docs/configuration.md for every field and its default).
#pragma once

#include <cstdint>

#include "core/model.h"

namespace chamber::core {

// How queues take turns.
enum class QueueOrder {
  kFairShare,      // lowest usage over fair share first (dominant resource): Chamber's default
  kDominantShare,  // lowest share of the cluster's dominant resource first (DRF)
  kOldestHead,     // the queue whose next workload was submitted first (FIFO across queues)
};

struct EngineConfig {
  QueueOrder queue_order = QueueOrder::kFairShare;

  // Fair share. With a half-life above zero, a queue's recent consumption (Queue::decayed_usage)
  // lowers its standing in the queue order; usage_weight scales that effect.
  Duration usage_half_life{0};
  double usage_weight = 1.0;

  // Ordering within a queue when the queue does not say: best effort lets later workloads run
  // when the head cannot; strict FIFO holds them behind it.
  QueueingStrategy default_queueing = QueueingStrategy::kBestEffort;

  // Preemption. Reclaim: a queue below quota takes back what others borrowed. Priority: within a
  // queue, higher priority evicts lower-priority elastic work.
  bool reclaim_enabled = true;
  // Fair-share reclaim: a queue within its fair share takes from a queue further over its fair
  // share, when the two do not trade places (docs/fairness.md, promise 5).
  bool fair_share_reclaim_enabled = true;
  bool priority_preemption_enabled = true;
  Duration min_runtime{std::chrono::minutes(1)};  // work younger than this is not a victim
  int32_t max_preemptions_per_window = 3;         // a workload preempted this often is spared
  Duration preemption_window{std::chrono::hours(1)};
  int32_t default_checkpoint_grace_seconds = 30;
  // Workloads holding a GPU that turned unhealthy are preempted with reason HardwareFault; that
  // preemption does not count against their preemption budget.
  bool preempt_on_unhealthy_gpu = true;

  // Daemon and simulator cycle period.
  Duration cycle_period{std::chrono::seconds(1)};
};

}  // namespace chamber::core
