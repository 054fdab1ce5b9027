// The engine's output: decisions as values. Bind, Resume and Preempt are acted on by the caller;
// Pending explains why a workload waits, in a code for machines and a message for people.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"

namespace chamber::core {

// One placed pod: which pod set and replica, and where.
struct PodAssignment {
  int32_t pod_set = 0;
  int32_t replica = 0;
  PodPlacement placement;
  friend bool operator==(const PodAssignment&, const PodAssignment&) = default;
};

struct BindDecision {
  WorkloadId workload;
  std::vector<PodAssignment> pods;
  bool borrowing = false;  // the queue is beyond its quota with this workload
  friend bool operator==(const BindDecision&, const BindDecision&) = default;
};

// A suspended workload admitted again: unsuspend it; its pods are then bound as they appear.
// `pods` is the placement the engine planned, for use as nominated nodes.
struct ResumeDecision {
  WorkloadId workload;
  std::vector<PodAssignment> pods;
  bool borrowing = false;
  friend bool operator==(const ResumeDecision&, const ResumeDecision&) = default;
};

enum class PreemptReason {
  kReclaim,        // its queue borrowed capacity whose owner wants it back
  kPriority,       // higher-priority work in the same queue needs the room
  kHardwareFault,  // it holds a GPU that is no longer healthy
};
std::string_view PreemptReasonName(PreemptReason r);

struct PreemptDecision {
  WorkloadId workload;
  PreemptReason reason = PreemptReason::kReclaim;
  WorkloadId preemptor;  // invalid for kHardwareFault
  int32_t grace_seconds = 0;
  double gpu_hours_lost = 0;  // GPU time since the last checkpoint (or start)
  std::string message;
  friend bool operator==(const PreemptDecision&, const PreemptDecision&) = default;
};

// Where a workload that waits for its victims will run: the room the cycle held for it (its
// victims' GPUs and the free ones its placement also needs). Callers show it as the pods'
// nominated nodes; the next cycle plans again.
struct NominationDecision {
  WorkloadId workload;
  std::vector<PodAssignment> pods;
  friend bool operator==(const NominationDecision&, const NominationDecision&) = default;
};

enum class PendingReason {
  kInvalidWorkload,       // a bad request: negative, empty, min-member above pod count, ...
  kQueueNotFound,         // names a queue the snapshot lacks
  kQueueInvalid,          // its queue (or an ancestor) has a bad spec or is in a cycle
  kNotLeafQueue,          // submitted to a queue that has child queues
  kOverQueueLimit,        // would exceed its queue's (or an ancestor's) limit
  kOverQuota,             // reserved work beyond quota, which reserved work never exceeds
  kLendingLimit,          // borrowing would take quota its owners do not lend
  kFairShare,             // beyond its fair share, or held back by queues no further over theirs
  kPreemptionNotAllowed,  // the room is held by work a rule protects (quota, priority, runtime)
  kNoNodeFits,            // a capacity shortage: no room even without elastic running work
  kWaitingForPreemption,  // victims are releasing the room it will take
  kBlockedByQueueHead,    // strict FIFO: an earlier workload of the queue cannot start
  kWaitingForPods,        // its gang lacks pods that do not exist yet (Workload::awaited_pods)
  kBindBackoff,           // its gang's bind failed and was rolled back: not tried again before
                          // Workload::bind_retry_at
};
std::string_view PendingReasonName(PendingReason r);

// Why a workload waits, for people.
struct PendingExplanation {
  std::string message;               // one line
  std::vector<std::string> details;  // more lines (per-cause node counts, victims awaited)
  friend bool operator==(const PendingExplanation&, const PendingExplanation&) = default;
};

// Workloads pending for the same cause in one cycle share one explanation: a cycle with 100,000
// waiting workloads of a few shapes would otherwise build, copy and free the same text 100,000
// times.
struct PendingDecision {
  WorkloadId workload;
  PendingReason reason = PendingReason::kNoNodeFits;
  std::shared_ptr<const PendingExplanation> explanation;  // never null in an engine result
  int32_t queue_position = 0;  // 1-based among its queue's waiting workloads

  const std::string& message() const;
  const std::vector<std::string>& details() const;
  // Explanations compare by their text, not by whether they are shared.
  friend bool operator==(const PendingDecision& a, const PendingDecision& b) {
    return a.workload == b.workload && a.reason == b.reason &&
           a.queue_position == b.queue_position && a.message() == b.message() &&
           a.details() == b.details();
  }
};

// A queue's standing after the cycle, per resource in Resources units (fair share is fractional).
struct QueueStatus {
  QueueId queue;
  std::string name;
  Resources allocated;
  std::array<double, kNumResources> fair_share{};
  Resources borrowed;  // allocated beyond quota
  Resources lent;      // own unused quota that others are using
  int32_t pending_workloads = 0;
  int32_t running_workloads = 0;
  std::string error;  // non-empty when the queue's spec is rejected
};

// A problem with the snapshot itself that the cycle worked around (for logs and metrics).
struct SnapshotIssue {
  std::string object;  // "node gpu-17", "workload ml/train-3", "queue team-a"
  std::string message;
};

struct CycleStats {
  int32_t workloads_considered = 0;
  int32_t placement_attempts = 0;
  int32_t placement_cache_hits = 0;
  int32_t preemption_searches = 0;
  int32_t indexed_preemption_searches = 0;  // of those, answered from the cycle's victim index
  int32_t pending = 0;  // workloads that wait after the cycle, whether explained or not
};

struct CycleResult {
  std::vector<BindDecision> binds;
  std::vector<ResumeDecision> resumes;
  std::vector<PreemptDecision> preemptions;
  std::vector<NominationDecision> nominations;
  std::vector<PendingDecision> pending;
  std::vector<QueueStatus> queues;
  std::vector<SnapshotIssue> issues;
  CycleStats stats;
};

}  // namespace chamber::core
