// The fleet model: what the GPUs are doing and what that costs, per GPU, node, pool, queue and
// cluster. ComputeFleet is a pure function from one observation (FleetInput) to its rollups
// (FleetView); Accumulate integrates views over time into GPU-hour and cost totals. The only
// state kept between observations lives in the caller: ActivityTracker (how long each GPU has
// been below the activity threshold) and the totals. Definitions: docs/fleet.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/shared_items.h"
#include "common/shared_string.h"
#include "common/shared_value.h"

namespace chamber::fleet {

// Unix time in milliseconds.
using TimeMs = int64_t;

enum class Pricing { kOnDemand, kReserved, kSpot };
std::string_view PricingName(Pricing p);  // "on-demand", "reserved", "spot"

enum class GpuState { kIdle, kAllocatedIdle, kBusy, kUnhealthy };
std::string_view GpuStateName(GpuState s);  // "idle", "allocated_idle", "busy", "unhealthy"

struct PoolInput {
  std::string name;
  std::string model;
  Pricing pricing = Pricing::kOnDemand;
  double price_per_gpu_hour = 0;
};

// GPU-equivalents are counted in thousandths of a GPU, as the engine counts them.
inline constexpr int32_t kMilliPerGpu = 1000;

// A pod's share of one GPU.
struct GpuShareInput {
  int32_t workload = -1;   // index into FleetInput::workloads
  int32_t gpu_milli = 0;   // thousandths of the GPU's compute, 1..999
  int64_t memory_mib = 0;  // of its memory; 0: none asked
  std::string pod;         // its pod's "namespace/name"; empty where the backend has no pods (demo)
  // A MIG device's profile ("1g.10gb") where the share is one of the GPU's MIG devices (its
  // gpu_milli the device's charge); empty for a share of compute.
  std::string mig_profile;
  // What its pod's processes hold of GPU memory, as the node's agent measures them; -1: not
  // measured. While that is more than memory_mib: since when (0: not over).
  int64_t memory_used_bytes = -1;
  TimeMs over_memory_since = 0;
  friend bool operator==(const GpuShareInput&, const GpuShareInput&) = default;
};

// A MIG device of a GPU in MIG mode, as the node's agent lists it.
struct MigDeviceInput {
  std::string uuid;                // "MIG-..."
  std::string profile;             // "3g.40gb"; empty when unknown
  int64_t memory_total_bytes = 0;  // 0: unknown
  std::string pod;  // "namespace/name" of the pod the device plugin gave it to; empty: none
  friend bool operator==(const MigDeviceInput&, const MigDeviceInput&) = default;
};

struct GpuInput {
  SharedString uuid;  // shared with the snapshot's GPU
  SharedString model;
  bool healthy = true;
  int64_t memory_total_bytes = 0;
  // The latest sample; utilization is the fraction of time the GPU was busy (0..1).
  double utilization = 0;
  int64_t memory_used_bytes = 0;
  // When the GPU last went below the activity threshold (ActivityTracker); empty while active.
  std::optional<TimeMs> below_threshold_since;
  int32_t workload = -1;  // index into FleetInput::workloads of the holder; -1 when unallocated
  // The pods holding a share of it (a fraction of its compute and memory), when no workload
  // holds it whole.
  std::vector<GpuShareInput> shares;
  // In MIG mode: its MIG devices and who holds each, as its node's agent reports them (none
  // where no agent lists them), and the MIG devices Chamber's pods hold as `shares`.
  bool mig = false;
  std::vector<MigDeviceInput> mig_devices;
  // Thousandths of it held: 1,000 when a workload holds it whole, else its shares' sum (at most
  // 1,000).
  int32_t HeldMilli() const;
};

struct NodeInput {
  std::string name;
  int32_t pool = -1;  // index into FleetInput::pools; -1: not in any priced pool
  bool schedulable = true;
  std::vector<GpuInput> gpus;  // index = device index
};

enum class WorkloadPhase { kPending, kRunning, kPreempting, kSuspended };
std::string_view WorkloadPhaseName(WorkloadPhase p);  // "pending", ...

// Why a workload was preempted (the engine's core::PreemptReason).
enum class PreemptionReason { kReclaim, kPriority, kHardwareFault };
inline constexpr size_t kPreemptionReasons = 3;
std::string_view PreemptionReasonName(PreemptionReason r);  // "Reclaim", "Priority", ...

// A workload's first start: how long it waited since submission, and where it went.
struct StartRecord {
  TimeMs time = 0;
  double wait_seconds = 0;
  std::string queue;
  int32_t pool = -1;  // index into FleetInput::pools of its first pod's node; -1: none
};

// A preemption and the work it cost: the GPU time since the workload's last checkpoint (or its
// start), which it will run again.
struct PreemptionRecord {
  TimeMs time = 0;
  std::string workload;
  std::string queue;
  int32_t pool = -1;  // as in StartRecord, for the GPUs it held
  PreemptionReason reason = PreemptionReason::kReclaim;
  double gpu_hours_lost = 0;
  friend bool operator==(const PreemptionRecord&, const PreemptionRecord&) = default;
};

// Preemptions and the GPU-hours they lost, per reason (indexed by PreemptionReason).
struct LostWork {
  int64_t preemptions = 0;
  double gpu_hours = 0;
  LostWork& operator+=(const LostWork& o);
  friend bool operator==(const LostWork&, const LostWork&) = default;
};
using LostByReason = std::array<LostWork, kPreemptionReasons>;
LostWork Sum(const LostByReason& by_reason);
// Since the server started, by the preempted workload's own queue.
using PreemptionTotals = std::map<std::string, LostByReason>;
void AddPreemption(PreemptionTotals& totals, const PreemptionRecord& p);

struct PendingWhy {
  std::string reason;  // the engine's reason name, e.g. "QuotaExceeded"
  std::string message;
  int32_t queue_position = 0;        // 0: not known
  std::vector<std::string> details;  // more lines on why it waits (the engine's details)
  friend bool operator==(const PendingWhy&, const PendingWhy&) = default;
};

struct WorkloadInput {
  std::string name;
  std::string queue;
  int32_t priority = 0;
  WorkloadPhase phase = WorkloadPhase::kPending;
  int64_t gpu_milli = 0;  // GPU-equivalents requested over all pods, in thousandths
  // The MIG devices its pods ask for over all pods, per profile ("3g.40gb"), by name; their
  // charge is part of gpu_milli.
  std::vector<std::pair<std::string, int32_t>> mig_devices;
  bool borrowing = false;  // admitted beyond its queue's quota (backfill)
  // Why it waits, as the engine said; empty unless pending. Shared with the daemon's record of
  // the cycle's decisions: most workloads of a large cluster run, and carry none.
  Shared<PendingWhy> pending;
  TimeMs submitted = 0;
  std::optional<TimeMs> started;
  std::vector<std::string> nodes;  // where its pods run
  bool reserved = false;           // priority at the reserved level: within quota, never preempted
  // "namespace/name" of its pods, when the backend has pods; none for a bare pod (below).
  std::vector<std::string> pods;
  bool bare_pod = false;            // one pod, whose "namespace/name" is `name`
  std::vector<TimeMs> preemptions;  // when it was preempted before (from the backend)
  // The preemptions this server decided for it, and the GPU-hours they lost in all.
  int64_t preemption_count = 0;
  double gpu_hours_lost = 0;
  std::vector<PreemptionRecord> preemption_history;  // the latest ones, oldest first
  // Its pods' "namespace/name": `pods`, or the name of a bare pod.
  std::vector<std::string> PodNames() const { return bare_pod ? std::vector{name} : pods; }
  friend bool operator==(const WorkloadInput&, const WorkloadInput&) = default;
};

struct QueueInput {
  std::string name;
  std::string parent;
  double quota = 0;             // GPUs
  std::optional<double> limit;  // GPUs; empty: unlimited
  double weight = 1;            // over-quota weight
  double allocated = 0;         // from the engine's queue status
  double fair_share = 0;
  double borrowed = 0;
  double lent = 0;
  double decayed_gpu_hours = 0;  // recent use (fairShare.usageHalfLife), 0 without decay
  std::string error;
};

struct FleetOptions {
  double activity_threshold = 0.05;         // utilization below this is idle
  int64_t idle_window_ms = 10 * 60 * 1000;  // for this long: allocated-but-idle
  // Wait percentiles, preemptions and lost GPU-hours "in the last hour" look back this far.
  int64_t recent_window_ms = 60 * 60 * 1000;
  std::string currency = "USD";
};

struct FleetInput {
  TimeMs now = 0;
  std::vector<PoolInput> pools;
  std::vector<NodeInput> nodes;
  // Shared with the previous cycle's input where a workload did not change.
  SharedItems<WorkloadInput> workloads;
  std::vector<QueueInput> queues;
  // Starts and preemptions of about the last recent_window_ms, oldest first; older ones are
  // ignored, so the caller may trim lazily.
  std::vector<StartRecord> recent_starts;
  std::vector<PreemptionRecord> recent_preemptions;
  PreemptionTotals preemption_totals;  // since the server started
};

struct GpuCounts {
  double capacity = 0;
  double allocated = 0;
  double used = 0;
  double idle = 0;            // healthy and unallocated
  double allocated_idle = 0;  // allocated, below the threshold for the idle window
  double unhealthy = 0;
  double backfill = 0;  // allocated to borrowing (backfilled) workloads
  // GPUs whose compute pods' shares divide (each counted whole). The other figures count a
  // shared GPU by parts: its shares' sum allocated, the rest idle.
  double shared = 0;
  // GPUs in MIG mode (each counted whole). The other figures count them as shared GPUs: the
  // charges of the MIG devices Chamber's pods hold allocated, the rest idle.
  double mig = 0;
  GpuCounts& operator+=(const GpuCounts& o);
  friend bool operator==(const GpuCounts&, const GpuCounts&) = default;
};

// Per-hour prices of GPUs in each condition. `total` is every GPU's price.
struct CostRates {
  double total = 0;
  double unallocated = 0;     // idle GPUs
  double allocated_idle = 0;  // allocated-but-idle GPUs
  double unhealthy = 0;
  double backfill = 0;  // GPUs held by borrowing (backfilled) workloads
  double idle() const { return unallocated + allocated_idle; }
  CostRates& operator+=(const CostRates& o);
  friend bool operator==(const CostRates&, const CostRates&) = default;
};

struct GpuView {
  int32_t node = 0;  // index into FleetView::nodes
  int32_t index = 0;
  GpuState state = GpuState::kIdle;
  double utilization = 0;
  int64_t memory_used_bytes = 0;
  int32_t workload = -1;   // the holder of the whole GPU; -1: none (shares are in the input)
  int32_t held_milli = 0;  // thousandths held: 1,000 whole, or the shares' sum
};

struct Ratios {
  double utilization = 0;    // used / capacity
  double allocation = 0;     // allocated / capacity
  double idle_fraction = 0;  // (idle + allocated_idle) / capacity
};

struct NodeView {
  GpuCounts gpus;
  Ratios ratios;
  CostRates cost;
  bool healthy = true;
};

// Over the recent window (FleetOptions::recent_window_ms): the workloads that started in it and
// their waits (nearest-rank percentiles; 0 when none started), the preemptions decided in it
// and the GPU-hours they lost.
struct RecentFigures {
  int32_t started = 0;
  double wait_p50_seconds = 0;
  double wait_p95_seconds = 0;
  int64_t preemptions = 0;
  double gpu_hours_lost = 0;
};

struct PoolView {
  int32_t nodes = 0;
  GpuCounts gpus;
  Ratios ratios;
  CostRates cost;
  RecentFigures recent;  // of the workloads whose first pod's node is in the pool
};

struct QueueView {
  double allocated_gpus = 0;  // GPUs its running workloads hold
  double used = 0;            // utilization summed over those GPUs
  int32_t pending_workloads = 0;
  double pending_gpus = 0;
  int32_t running_workloads = 0;
  CostRates cost;  // total: price of the GPUs it holds; backfill: of those it borrows
  // A parent queue's figures include its children's.
  RecentFigures recent;
  LostByReason lost_total;  // since the server started
};

struct QueueStats {
  int32_t pending_workloads = 0;
  double pending_gpus = 0;
};

struct FleetView {
  TimeMs now = 0;
  GpuCounts gpus;
  Ratios ratios;
  CostRates cost;
  QueueStats queue;
  RecentFigures recent;
  int32_t running_workloads = 0;
  std::vector<PoolView> pools;     // parallel to FleetInput::pools
  std::vector<NodeView> nodes;     // parallel to FleetInput::nodes
  std::vector<GpuView> gpus_flat;  // every GPU, node by node
  std::vector<QueueView> queues;   // parallel to FleetInput::queues
};

// Classifies a GPU: unhealthy beats everything; an allocated GPU below the threshold for the
// whole idle window is allocated-idle (never one in MIG mode, whose utilization NVML does not
// measure); other allocated GPUs are busy; the rest idle.
GpuState ClassifyGpu(const GpuInput& gpu, TimeMs now, const FleetOptions& options);

// Nearest-rank percentile (p in (0, 1]); 0 for no values.
double Percentile(std::vector<double> values, double p);

FleetView ComputeFleet(const FleetInput& input, const FleetOptions& options);

// GPU-hours and money accumulated over time. Add a view with the time it stood for.
struct Totals {
  TimeMs since = 0;
  double hours = 0;
  double capacity_gpu_hours = 0;
  double allocated_gpu_hours = 0;
  double used_gpu_hours = 0;
  double idle_gpu_hours = 0;  // idle + allocated-idle
  double cost = 0;
  double idle_cost = 0;
  double backfill_gpu_hours = 0;
  double backfill_savings = 0;  // price of the GPU-hours backfilled work ran on
  // Efficiency: used GPU-hours over capacity GPU-hours, and over allocated GPU-hours; 0 when
  // the denominator is 0.
  double UsedOverCapacity() const;
  double UsedOverAllocated() const;
};
struct PoolTotals {
  std::vector<Totals> pools;  // parallel to FleetInput::pools
  Totals cluster;
};

// Adds `hours` of the state in `view` (a step function: the state held for that long).
void Accumulate(const FleetView& view, double hours, Totals& cluster,
                std::vector<Totals>* pools = nullptr);

// Keeps, per GPU (by uuid), when it last went below the activity threshold.
class ActivityTracker {
 public:
  explicit ActivityTracker(double threshold) : threshold_(threshold) {}
  // Records a sample and returns the GPU's below_threshold_since.
  std::optional<TimeMs> Observe(const SharedString& uuid, double utilization, TimeMs now);
  // Drops GPUs not observed since `before` (removed nodes).
  void Forget(TimeMs before);

 private:
  struct Entry {
    std::optional<TimeMs> below_since;
    TimeMs last_seen = 0;
  };
  double threshold_;
  std::map<SharedString, Entry, std::less<>> gpus_;
};

}  // namespace chamber::fleet
