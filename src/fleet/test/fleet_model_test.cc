#include "fleet/fleet_model.h"

#include <gtest/gtest.h>

namespace chamber::fleet {
namespace {

constexpr TimeMs kNow = 100 * 60 * 1000;
constexpr TimeMs kMinute = 60 * 1000;

GpuInput Gpu(std::string uuid, double util, int32_t workload, bool healthy = true) {
  GpuInput g;
  g.uuid = std::move(uuid);
  g.utilization = util;
  g.workload = workload;
  g.healthy = healthy;
  g.memory_total_bytes = 80;
  g.memory_used_bytes = static_cast<int64_t>(util * 80);
  return g;
}

WorkloadInput Workload(std::string name, std::string queue, WorkloadPhase phase, int32_t gpus,
                       bool borrowing = false) {
  WorkloadInput w;
  w.name = std::move(name);
  w.queue = std::move(queue);
  w.phase = phase;
  w.gpu_milli = int64_t{gpus} * kMilliPerGpu;
  w.borrowing = borrowing;
  return w;
}

// Two pools, six GPUs in every state: see the comments for each GPU.
FleetInput Example() {
  FleetInput in;
  in.now = kNow;
  in.pools = {{"h100", "H100", Pricing::kOnDemand, 2.5}, {"a100", "A100", Pricing::kReserved, 1.2}};
  in.workloads = {Workload("a/train", "a", WorkloadPhase::kRunning, 2),
                  Workload("b/backfill", "b", WorkloadPhase::kRunning, 1, /*borrowing=*/true),
                  Workload("a/wait", "a", WorkloadPhase::kPending, 4),
                  Workload("b/paused", "b", WorkloadPhase::kSuspended, 2)};
  NodeInput n0;
  n0.name = "n0";
  n0.pool = 0;
  n0.gpus = {Gpu("g00", 0.8, 0),           // busy
             Gpu("g01", 0.01, 0),          // allocated, quiet for 15 minutes: allocated-idle
             Gpu("g02", 0.0, -1),          // idle
             Gpu("g03", 0.0, -1, false)};  // unhealthy
  n0.gpus[1].below_threshold_since = kNow - 15 * kMinute;
  NodeInput n1;
  n1.name = "n1";
  n1.pool = 1;
  n1.gpus = {Gpu("g10", 0.5, 1),    // busy, borrowed
             Gpu("g11", 0.1, -1)};  // idle (unallocated), with stray activity
  in.nodes = {n0, n1};
  in.queues.resize(2);
  in.queues[0].name = "a";
  in.queues[1].name = "b";
  for (const double wait : {40, 10, 100, 30, 20})
    in.recent_starts.push_back({kNow - 5 * kMinute, wait, "a", 0});
  for (int i = 0; i < 3; ++i)
    in.recent_preemptions.push_back(
        {kNow - kMinute, "b/backfill", "b", 1, PreemptionReason::kReclaim, 0.5});
  return in;
}

TEST(FleetModelTest, ClusterCountsCostAndRatios) {
  const FleetView v = ComputeFleet(Example(), FleetOptions{});
  EXPECT_EQ(v.gpus.capacity, 6);
  EXPECT_EQ(v.gpus.allocated, 3);
  EXPECT_DOUBLE_EQ(v.gpus.used, 1.41);
  EXPECT_EQ(v.gpus.idle, 2);
  EXPECT_EQ(v.gpus.allocated_idle, 1);
  EXPECT_EQ(v.gpus.unhealthy, 1);
  EXPECT_EQ(v.gpus.backfill, 1);
  EXPECT_DOUBLE_EQ(v.ratios.utilization, 1.41 / 6);
  EXPECT_DOUBLE_EQ(v.ratios.allocation, 0.5);
  EXPECT_DOUBLE_EQ(v.ratios.idle_fraction, 0.5);
  EXPECT_DOUBLE_EQ(v.cost.total, 4 * 2.5 + 2 * 1.2);
  EXPECT_DOUBLE_EQ(v.cost.unallocated, 2.5 + 1.2);
  EXPECT_DOUBLE_EQ(v.cost.allocated_idle, 2.5);
  EXPECT_DOUBLE_EQ(v.cost.unhealthy, 2.5);
  EXPECT_DOUBLE_EQ(v.cost.backfill, 1.2);
  EXPECT_DOUBLE_EQ(v.cost.idle(), 6.2);
  EXPECT_EQ(v.recent.preemptions, 3);
  EXPECT_DOUBLE_EQ(v.recent.gpu_hours_lost, 1.5);
  EXPECT_EQ(v.running_workloads, 2);
}

TEST(FleetModelTest, GpuStates) {
  const FleetView v = ComputeFleet(Example(), FleetOptions{});
  ASSERT_EQ(v.gpus_flat.size(), 6u);
  const GpuState want[] = {GpuState::kBusy,      GpuState::kAllocatedIdle, GpuState::kIdle,
                           GpuState::kUnhealthy, GpuState::kBusy,          GpuState::kIdle};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(v.gpus_flat[i].state, want[i]) << i;
  EXPECT_EQ(v.gpus_flat[4].node, 1);
  EXPECT_EQ(v.gpus_flat[4].index, 0);
  EXPECT_EQ(v.gpus_flat[4].workload, 1);
  EXPECT_EQ(v.gpus_flat[5].workload, -1);
  EXPECT_EQ(v.gpus_flat[0].memory_used_bytes, 64);
}

TEST(FleetModelTest, IdleWindowBoundary) {
  FleetOptions o;
  o.idle_window_ms = 10 * kMinute;
  GpuInput g = Gpu("g", 0.0, 0);
  g.below_threshold_since = kNow - 10 * kMinute;
  EXPECT_EQ(ClassifyGpu(g, kNow, o), GpuState::kAllocatedIdle);
  g.below_threshold_since = kNow - 10 * kMinute + 1;
  EXPECT_EQ(ClassifyGpu(g, kNow, o), GpuState::kBusy);
  g.below_threshold_since.reset();
  EXPECT_EQ(ClassifyGpu(g, kNow, o), GpuState::kBusy);
  g.healthy = false;
  EXPECT_EQ(ClassifyGpu(g, kNow, o), GpuState::kUnhealthy);
}

GpuShareInput Share(int32_t workload, int32_t milli, int64_t memory_mib) {
  GpuShareInput s;
  s.workload = workload;
  s.gpu_milli = milli;
  s.memory_mib = memory_mib;
  return s;
}

// One node of four GPUs priced 2.0 an hour: GPU 0 held whole by "a/whole"; GPU 1 divided by a
// quarter of "a/nb" and a half of "b/nb" (borrowing), busy; GPU 2 a quarter of "a/nb", quiet
// for the idle window; GPU 3 free.
FleetInput SharedExample() {
  FleetInput in;
  in.now = kNow;
  in.pools = {{"l40s", "L40S", Pricing::kSpot, 2.0}};
  WorkloadInput a_nb = Workload("a/nb", "a", WorkloadPhase::kRunning, 0);
  a_nb.gpu_milli = 500;  // two pods of a quarter
  WorkloadInput b_nb = Workload("b/nb", "b", WorkloadPhase::kRunning, 0, /*borrowing=*/true);
  b_nb.gpu_milli = 500;
  WorkloadInput a_wait = Workload("a/wait", "a", WorkloadPhase::kPending, 0);
  a_wait.gpu_milli = 250;  // a quarter waits
  in.workloads = {Workload("a/whole", "a", WorkloadPhase::kRunning, 1), a_nb, b_nb, a_wait};
  NodeInput n;
  n.name = "n";
  n.pool = 0;
  n.gpus = {Gpu("g0", 0.9, 0), Gpu("g1", 0.6, -1), Gpu("g2", 0.0, -1), Gpu("g3", 0.0, -1)};
  n.gpus[1].shares = {Share(1, 250, 0), Share(2, 500, 20480)};
  n.gpus[2].shares = {Share(1, 250, 0)};
  n.gpus[2].below_threshold_since = kNow - 15 * kMinute;
  in.nodes = {n};
  in.queues.resize(2);
  in.queues[0].name = "a";
  in.queues[1].name = "b";
  return in;
}

TEST(FleetModelTest, ASharedGpuCountsByParts) {
  const FleetView v = ComputeFleet(SharedExample(), FleetOptions{});
  ASSERT_EQ(v.gpus_flat.size(), 4u);
  EXPECT_EQ(v.gpus_flat[0].held_milli, 1000);
  EXPECT_EQ(v.gpus_flat[0].workload, 0);
  EXPECT_EQ(v.gpus_flat[1].held_milli, 750);
  EXPECT_EQ(v.gpus_flat[1].workload, -1);  // no workload holds it whole
  EXPECT_EQ(v.gpus_flat[1].state, GpuState::kBusy);
  EXPECT_EQ(v.gpus_flat[2].held_milli, 250);
  EXPECT_EQ(v.gpus_flat[2].state, GpuState::kAllocatedIdle);
  EXPECT_EQ(v.gpus_flat[3].held_milli, 0);
  EXPECT_EQ(v.gpus_flat[3].state, GpuState::kIdle);

  // Capacity 4 = 2 allocated (1 + 0.75 + 0.25) + 2 idle (0.25 + 0.75 + 1); of the allocated,
  // GPU 2's quarter is allocated-idle.
  EXPECT_DOUBLE_EQ(v.gpus.capacity, 4);
  EXPECT_DOUBLE_EQ(v.gpus.allocated, 2);
  EXPECT_DOUBLE_EQ(v.gpus.idle, 2);
  EXPECT_DOUBLE_EQ(v.gpus.allocated_idle, 0.25);
  EXPECT_DOUBLE_EQ(v.gpus.shared, 2);
  EXPECT_DOUBLE_EQ(v.gpus.backfill, 0.5);
  EXPECT_DOUBLE_EQ(v.gpus.used, 1.5);
  EXPECT_DOUBLE_EQ(v.ratios.allocation, 0.5);
  EXPECT_DOUBLE_EQ(v.ratios.idle_fraction, (2 + 0.25) / 4);
  EXPECT_DOUBLE_EQ(v.cost.total, 8);
  EXPECT_DOUBLE_EQ(v.cost.unallocated, 2.0 * 2);
  EXPECT_DOUBLE_EQ(v.cost.allocated_idle, 2.0 * 0.25);
  EXPECT_DOUBLE_EQ(v.cost.backfill, 2.0 * 0.5);

  // Each queue is charged its shares; a shared GPU's use is divided by the shares' sizes.
  EXPECT_DOUBLE_EQ(v.queues[0].allocated_gpus, 1.5);
  EXPECT_DOUBLE_EQ(v.queues[0].used, 0.9 + 0.6 * 250 / 750);
  EXPECT_DOUBLE_EQ(v.queues[0].cost.total, 2.0 * 1.5);
  EXPECT_DOUBLE_EQ(v.queues[0].cost.allocated_idle, 2.0 * 0.25);
  EXPECT_DOUBLE_EQ(v.queues[1].allocated_gpus, 0.5);
  EXPECT_DOUBLE_EQ(v.queues[1].used, 0.6 * 500 / 750);
  EXPECT_DOUBLE_EQ(v.queues[1].cost.backfill, 2.0 * 0.5);
  // A waiting share counts its GPU-equivalents.
  EXPECT_DOUBLE_EQ(v.queues[0].pending_gpus, 0.25);
  EXPECT_DOUBLE_EQ(v.queue.pending_gpus, 0.25);
}

// A GPU in MIG mode counts as a shared GPU does, its pods' MIG devices its shares: GPU 0 of an
// H100 holds a 3g.40gb of "a/infer" (0.428) and two 1g.10gb of "b/nb" (0.142 each), GPU 1 is
// in MIG mode with no device held, GPU 2 is a whole GPU held by "a/infer"'s neighbour.
TEST(FleetModelTest, AMigGpuCountsByTheChargesOfTheDevicesHeld) {
  FleetInput in;
  in.now = kNow;
  in.pools = {{"h100", "H100", Pricing::kOnDemand, 3.0}};
  in.workloads = {Workload("a/infer", "a", WorkloadPhase::kRunning, 0),
                  Workload("b/nb", "b", WorkloadPhase::kRunning, 0),
                  Workload("a/train", "a", WorkloadPhase::kRunning, 1)};
  NodeInput n;
  n.name = "n";
  n.pool = 0;
  n.gpus = {Gpu("MIG-GPU-0", 0.0, -1), Gpu("MIG-GPU-1", 0.0, -1), Gpu("g2", 0.5, 2)};
  n.gpus[0].mig = n.gpus[1].mig = true;
  GpuShareInput three = Share(0, 428, 0), one = Share(1, 142, 0);
  three.mig_profile = "3g.40gb";
  one.mig_profile = "1g.10gb";
  n.gpus[0].shares = {three, one, one};
  // NVML gives no utilization of a GPU in MIG mode: held, it is not called idle.
  n.gpus[0].below_threshold_since = kNow - 60 * kMinute;
  in.nodes = {n};
  in.queues.resize(2);
  in.queues[0].name = "a";
  in.queues[1].name = "b";
  const FleetView v = ComputeFleet(in, FleetOptions{});
  ASSERT_EQ(v.gpus_flat.size(), 3u);
  EXPECT_EQ(v.gpus_flat[0].held_milli, 712);
  EXPECT_EQ(v.gpus_flat[0].state, GpuState::kBusy);
  EXPECT_EQ(v.gpus_flat[1].held_milli, 0);
  EXPECT_EQ(v.gpus_flat[1].state, GpuState::kIdle);
  EXPECT_DOUBLE_EQ(v.gpus.capacity, 3);
  EXPECT_DOUBLE_EQ(v.gpus.mig, 2);
  EXPECT_DOUBLE_EQ(v.gpus.shared, 0);  // MIG GPUs are counted as such, not as shared
  EXPECT_DOUBLE_EQ(v.gpus.allocated, 1.712);
  EXPECT_DOUBLE_EQ(v.gpus.idle, 0.288 + 1);
  EXPECT_DOUBLE_EQ(v.cost.unallocated, 3.0 * 1.288);
  EXPECT_DOUBLE_EQ(v.queues[0].allocated_gpus, 1.428);
  EXPECT_DOUBLE_EQ(v.queues[1].allocated_gpus, 0.284);
  EXPECT_DOUBLE_EQ(v.queues[1].cost.total, 3.0 * 0.284);
  EXPECT_DOUBLE_EQ(v.pools[0].gpus.mig, 2);
  EXPECT_DOUBLE_EQ(v.nodes[0].gpus.mig, 2);
}

TEST(FleetModelTest, HeldMilliIsTheWholeGpuOrTheSharesSumAtMostOne) {
  GpuInput g;
  EXPECT_EQ(g.HeldMilli(), 0);
  EXPECT_EQ(ClassifyGpu(g, kNow, FleetOptions{}), GpuState::kIdle);
  g.shares = {Share(0, 600, 0)};
  EXPECT_EQ(g.HeldMilli(), 600);
  EXPECT_EQ(ClassifyGpu(g, kNow, FleetOptions{}), GpuState::kBusy);
  g.shares.push_back(Share(1, 600, 0));
  EXPECT_EQ(g.HeldMilli(), 1000);  // a snapshot's over-committed GPU is shown full, not more
  g.shares.clear();
  g.workload = 3;
  EXPECT_EQ(g.HeldMilli(), 1000);
}

TEST(FleetModelTest, PoolsNodesAndQueues) {
  const FleetView v = ComputeFleet(Example(), FleetOptions{});
  ASSERT_EQ(v.pools.size(), 2u);
  EXPECT_EQ(v.pools[0].nodes, 1);
  EXPECT_EQ(v.pools[0].gpus.capacity, 4);
  EXPECT_EQ(v.pools[0].gpus.allocated, 2);
  EXPECT_DOUBLE_EQ(v.pools[0].gpus.used, 0.81);
  EXPECT_DOUBLE_EQ(v.pools[0].cost.total, 10);
  EXPECT_DOUBLE_EQ(v.pools[0].cost.idle(), 5);
  EXPECT_DOUBLE_EQ(v.pools[0].ratios.allocation, 0.5);
  EXPECT_DOUBLE_EQ(v.pools[1].cost.backfill, 1.2);
  EXPECT_DOUBLE_EQ(v.pools[1].ratios.utilization, 0.3);
  EXPECT_FALSE(v.nodes[0].healthy);
  EXPECT_TRUE(v.nodes[1].healthy);
  EXPECT_EQ(v.nodes[1].gpus.idle, 1);

  ASSERT_EQ(v.queues.size(), 2u);
  EXPECT_EQ(v.queues[0].allocated_gpus, 2);
  EXPECT_DOUBLE_EQ(v.queues[0].used, 0.81);
  EXPECT_EQ(v.queues[0].pending_workloads, 1);
  EXPECT_EQ(v.queues[0].pending_gpus, 4);
  EXPECT_EQ(v.queues[0].running_workloads, 1);
  EXPECT_DOUBLE_EQ(v.queues[0].cost.total, 5);
  EXPECT_DOUBLE_EQ(v.queues[0].cost.allocated_idle, 2.5);
  EXPECT_EQ(v.queues[1].pending_workloads, 1);  // suspended counts as waiting
  EXPECT_EQ(v.queues[1].pending_gpus, 2);
  EXPECT_DOUBLE_EQ(v.queues[1].cost.backfill, 1.2);

  EXPECT_EQ(v.queue.pending_workloads, 2);
  EXPECT_EQ(v.queue.pending_gpus, 6);
  EXPECT_EQ(v.recent.started, 5);
  EXPECT_EQ(v.recent.wait_p50_seconds, 30);
  EXPECT_EQ(v.recent.wait_p95_seconds, 100);
}

// Waits and preemptions by hand, per queue (a parent with its children) and per pool: what
// happened in the last hour counts, what happened 60 minutes ago or earlier does not.
TEST(FleetModelTest, RecentFiguresPerQueueAndPool) {
  FleetInput in;
  in.now = kNow;
  in.pools = {{"h100", "H100", Pricing::kOnDemand, 2.5}, {"a100", "A100", Pricing::kReserved, 1.2}};
  in.queues.resize(4);
  in.queues[0].name = "dept";
  in.queues[1].name = "a";
  in.queues[1].parent = "dept";
  in.queues[2].name = "b";
  in.queues[3].name = "idle";
  // Queue a, pool h100: waits 10, 20, 30, 40 and 100 s; queue b, pool a100: 600 s.
  for (const double wait : {40, 10, 100, 30, 20})
    in.recent_starts.push_back({kNow - 30 * kMinute, wait, "a", 0});
  in.recent_starts.push_back({kNow - 59 * kMinute, 600, "b", 1});
  // Too old: 61 minutes ago and exactly an hour ago.
  in.recent_starts.push_back({kNow - 61 * kMinute, 5000, "a", 0});
  in.recent_starts.push_back({kNow - 60 * kMinute, 7000, "b", 1});
  // A queue the fleet does not know (deleted): counted for the cluster and its pool only.
  in.recent_starts.push_back({kNow - kMinute, 50, "gone", 1});

  const PreemptionRecord preemptions[] = {
      {kNow - 10 * kMinute, "a/1", "a", 0, PreemptionReason::kReclaim, 2.5},
      {kNow - 59 * kMinute, "a/2", "a", 0, PreemptionReason::kHardwareFault, 1.0},
      {kNow - 61 * kMinute, "b/1", "b", 1, PreemptionReason::kPriority, 4.0},  // too old
      {kNow - kMinute, "b/2", "b", 1, PreemptionReason::kReclaim, 0.5},
  };
  for (const PreemptionRecord& p : preemptions) {
    in.recent_preemptions.push_back(p);
    AddPreemption(in.preemption_totals, p);
  }

  const FleetView v = ComputeFleet(in, FleetOptions{});
  // Cluster: 10, 20, 30, 40, 50, 100, 600: p50 the 4th, p95 the 7th.
  EXPECT_EQ(v.recent.started, 7);
  EXPECT_EQ(v.recent.wait_p50_seconds, 40);
  EXPECT_EQ(v.recent.wait_p95_seconds, 600);
  EXPECT_EQ(v.recent.preemptions, 3);
  EXPECT_DOUBLE_EQ(v.recent.gpu_hours_lost, 4.0);

  const RecentFigures& a = v.queues[1].recent;
  EXPECT_EQ(a.started, 5);
  EXPECT_EQ(a.wait_p50_seconds, 30);
  EXPECT_EQ(a.wait_p95_seconds, 100);
  EXPECT_EQ(a.preemptions, 2);
  EXPECT_DOUBLE_EQ(a.gpu_hours_lost, 3.5);
  // The parent sees its child's work.
  const RecentFigures& dept = v.queues[0].recent;
  EXPECT_EQ(dept.started, 5);
  EXPECT_EQ(dept.wait_p50_seconds, 30);
  EXPECT_EQ(dept.wait_p95_seconds, 100);
  EXPECT_EQ(dept.preemptions, 2);
  EXPECT_DOUBLE_EQ(dept.gpu_hours_lost, 3.5);
  const RecentFigures& b = v.queues[2].recent;
  EXPECT_EQ(b.started, 1);
  EXPECT_EQ(b.wait_p50_seconds, 600);
  EXPECT_EQ(b.wait_p95_seconds, 600);
  EXPECT_EQ(b.preemptions, 1);
  EXPECT_DOUBLE_EQ(b.gpu_hours_lost, 0.5);
  const RecentFigures& idle = v.queues[3].recent;
  EXPECT_EQ(idle.started, 0);
  EXPECT_EQ(idle.wait_p95_seconds, 0);
  EXPECT_EQ(idle.preemptions, 0);

  const RecentFigures& h100 = v.pools[0].recent;
  EXPECT_EQ(h100.started, 5);
  EXPECT_EQ(h100.wait_p50_seconds, 30);
  EXPECT_EQ(h100.wait_p95_seconds, 100);
  EXPECT_EQ(h100.preemptions, 2);
  EXPECT_DOUBLE_EQ(h100.gpu_hours_lost, 3.5);
  const RecentFigures& a100 = v.pools[1].recent;  // 50 and 600
  EXPECT_EQ(a100.started, 2);
  EXPECT_EQ(a100.wait_p50_seconds, 50);
  EXPECT_EQ(a100.wait_p95_seconds, 600);
  EXPECT_EQ(a100.preemptions, 1);
  EXPECT_DOUBLE_EQ(a100.gpu_hours_lost, 0.5);

  // Since the server started, the hour does not matter: b's Priority preemption counts.
  const auto reason = [](PreemptionReason r) { return static_cast<size_t>(r); };
  EXPECT_EQ(v.queues[2].lost_total[reason(PreemptionReason::kPriority)], (LostWork{1, 4.0}));
  EXPECT_EQ(v.queues[2].lost_total[reason(PreemptionReason::kReclaim)], (LostWork{1, 0.5}));
  EXPECT_EQ(Sum(v.queues[2].lost_total), (LostWork{2, 4.5}));
  EXPECT_EQ(v.queues[0].lost_total, v.queues[1].lost_total);
  EXPECT_EQ(Sum(v.queues[0].lost_total), (LostWork{2, 3.5}));
  EXPECT_EQ(Sum(v.queues[3].lost_total), (LostWork{0, 0}));
}

TEST(FleetModelTest, RecentWindowIsAnOption) {
  FleetInput in;
  in.now = kNow;
  in.queues.resize(1);
  in.queues[0].name = "a";
  in.recent_starts = {{kNow - 20 * kMinute, 10, "a", -1}, {kNow - 5 * kMinute, 30, "a", -1}};
  FleetOptions o;
  o.recent_window_ms = 10 * kMinute;
  const FleetView v = ComputeFleet(in, o);
  EXPECT_EQ(v.queues[0].recent.started, 1);
  EXPECT_EQ(v.queues[0].recent.wait_p95_seconds, 30);
}

// The window's percentiles are the nearest-rank ones of Percentile, whatever the order and
// the repeats of the waits.
TEST(FleetModelTest, RecentPercentilesAreNearestRank) {
  for (const int n : {1, 2, 3, 19, 20, 21, 100, 1001}) {
    FleetInput in;
    in.now = kNow;
    std::vector<double> waits;
    for (int i = 0; i < n; ++i) {
      const double wait = static_cast<double>((i * 7919) % 97);  // shuffled, with repeats
      waits.push_back(wait);
      in.recent_starts.push_back({kNow - kMinute, wait, "a", -1});
    }
    const FleetView v = ComputeFleet(in, FleetOptions{});
    EXPECT_EQ(v.recent.started, n);
    EXPECT_EQ(v.recent.wait_p50_seconds, Percentile(waits, 0.50)) << n;
    EXPECT_EQ(v.recent.wait_p95_seconds, Percentile(waits, 0.95)) << n;
  }
}

// Parents that form a cycle (the engine rejects such queues) still count each queue once.
TEST(FleetModelTest, ParentCycleCountsEachQueueOnce) {
  FleetInput in;
  in.now = kNow;
  in.queues.resize(2);
  in.queues[0].name = "x";
  in.queues[0].parent = "y";
  in.queues[1].name = "y";
  in.queues[1].parent = "x";
  in.recent_preemptions = {{kNow - kMinute, "w", "x", -1, PreemptionReason::kPriority, 2}};
  const FleetView v = ComputeFleet(in, FleetOptions{});
  EXPECT_EQ(v.queues[0].recent.preemptions, 1);
  EXPECT_EQ(v.queues[1].recent.preemptions, 1);
  EXPECT_EQ(v.recent.preemptions, 1);
}

TEST(FleetModelTest, PercentileIsNearestRank) {
  EXPECT_EQ(Percentile({}, 0.5), 0);
  EXPECT_EQ(Percentile({7}, 0.95), 7);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 0.5), 2);
  EXPECT_EQ(Percentile({4, 3, 2, 1}, 0.75), 3);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 0.76), 4);
}

TEST(FleetModelTest, AccumulateIntegratesGpuHoursAndMoney) {
  const FleetView v = ComputeFleet(Example(), FleetOptions{});
  Totals t;
  std::vector<Totals> pools;
  Accumulate(v, 0.5, t, &pools);
  Accumulate(v, 0.0, t, &pools);  // no time, no change
  EXPECT_DOUBLE_EQ(t.hours, 0.5);
  EXPECT_DOUBLE_EQ(t.capacity_gpu_hours, 3);
  EXPECT_DOUBLE_EQ(t.allocated_gpu_hours, 1.5);
  EXPECT_DOUBLE_EQ(t.used_gpu_hours, 0.705);
  EXPECT_DOUBLE_EQ(t.idle_gpu_hours, 1.5);
  EXPECT_DOUBLE_EQ(t.cost, 6.2);
  EXPECT_DOUBLE_EQ(t.idle_cost, 3.1);
  EXPECT_DOUBLE_EQ(t.backfill_gpu_hours, 0.5);
  EXPECT_DOUBLE_EQ(t.backfill_savings, 0.6);
  EXPECT_DOUBLE_EQ(t.UsedOverCapacity(), 0.235);
  EXPECT_DOUBLE_EQ(t.UsedOverAllocated(), 0.47);
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_DOUBLE_EQ(pools[0].cost, 5);
  EXPECT_DOUBLE_EQ(pools[1].backfill_savings, 0.6);
  EXPECT_EQ(Totals{}.UsedOverAllocated(), 0);
}

TEST(FleetModelTest, ActivityTrackerRemembersWhenAGpuWentQuiet) {
  ActivityTracker t(0.05);
  EXPECT_FALSE(t.Observe("u", 0.5, 0));
  EXPECT_EQ(t.Observe("u", 0.01, 1000), 1000);
  EXPECT_EQ(t.Observe("u", 0.049, 5000), 1000);
  EXPECT_FALSE(t.Observe("u", 0.05, 6000));
  EXPECT_EQ(t.Observe("u", 0.0, 7000), 7000);
  EXPECT_EQ(t.Observe("v", 0.0, 7000), 7000);
  t.Forget(7001);
  EXPECT_EQ(t.Observe("u", 0.0, 9000), 9000);  // forgotten: starts over
}

}  // namespace
}  // namespace chamber::fleet
