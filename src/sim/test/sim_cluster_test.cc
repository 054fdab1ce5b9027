// The steppable simulated cluster: internal stepping matches Simulate, and external scheduling
// (the daemon's way) runs the same jobs through the same engine.
#include <gtest/gtest.h>

#include "sim/cluster_spec.h"
#include "sim/policy.h"
#include "sim/simulator.h"
#include "sim/test/sim_test_util.h"

namespace chamber::sim {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

using testing::Cluster;
using testing::Job;

// Two 8-GPU jobs on one 8-GPU node: a runs 0-1h, b 1h-2h.
Trace TwoJobs() {
  Trace t;
  t.jobs = {Job("a", Time(0), hours(1), 1, 8), Job("b", Time(0), hours(1), 1, 8)};
  return t;
}

TEST(SimCluster, InternalSteppingMatchesSimulate) {
  const Trace trace = TwoJobs();
  const SimPolicy policy = *MakePolicy("chamber", core::EngineConfig{});
  const SimOptions options;
  auto c = SimCluster::Create(Cluster(1, 8), trace, policy, options);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  SimCluster& sim = **c;
  sim.AdvanceTo(Time(minutes(30)));
  EXPECT_EQ(sim.now(), Time(minutes(30)));
  ASSERT_EQ(sim.snapshot().workloads.size(), 2u);
  int running = 0;
  for (size_t w = 0; w < 2; ++w) {
    if (sim.snapshot().workloads[w].state == core::WorkloadState::kRunning) {
      ++running;
      EXPECT_EQ(sim.JobOf(w).id, "a");
      EXPECT_EQ(sim.GpusHeld(w), 8);
    }
  }
  EXPECT_EQ(running, 1);
  sim.AdvanceTo(Time(hours(3)));
  const SimMetrics stepped = sim.Metrics();
  const SimMetrics whole = *Simulate(Cluster(1, 8), trace, policy, options);
  EXPECT_EQ(stepped.finished, 2);
  EXPECT_DOUBLE_EQ(stepped.wait_hours.mean, whole.wait_hours.mean);
  EXPECT_DOUBLE_EQ(stepped.jct_hours.mean, whole.jct_hours.mean);
  EXPECT_DOUBLE_EQ(stepped.allocation, 2.0 / 3.0);  // 2 of 3 hours busy when stepped to 3h
  EXPECT_DOUBLE_EQ(whole.allocation, 1.0);
}

TEST(SimCluster, ExternalSchedulingAndInjectedFaults) {
  const Trace trace = TwoJobs();
  const SimPolicy policy = *MakePolicy("chamber", core::EngineConfig{});
  const SimOptions options;
  auto c = SimCluster::Create(Cluster(1, 8), trace, policy, options, {},
                              SimCluster::Scheduling::kExternal);
  ASSERT_TRUE(c.ok());
  SimCluster& sim = **c;
  const core::Engine engine(policy.config, policy.policies);
  auto cycle = [&] { sim.ApplyCycle(engine.Schedule(sim.PrepareCycle())); };
  sim.AdvanceTo(Time(minutes(1)));
  // Nothing runs until the caller schedules.
  for (const core::Workload& w : sim.snapshot().workloads)
    EXPECT_EQ(w.state, core::WorkloadState::kPending);
  cycle();
  EXPECT_EQ(sim.Metrics().wait_hours.count, 1);
  // A fault on the running job's GPU: the next cycle preempts it (HardwareFault).
  EXPECT_TRUE(sim.FailGpu(0, 3, hours(1)));
  EXPECT_FALSE(sim.FailGpu(0, 3, hours(1)));
  EXPECT_FALSE(sim.snapshot().nodes[0].gpus[3].healthy);
  sim.AdvanceTo(Time(minutes(2)));
  cycle();
  int preempting = 0;
  for (const core::Workload& w : sim.snapshot().workloads)
    preempting += w.state == core::WorkloadState::kPreempting ? 1 : 0;
  EXPECT_EQ(preempting, 1);
  EXPECT_EQ(sim.Metrics().gpu_failures, 1);
  // Repaired an hour after the fault.
  sim.AdvanceTo(Time(minutes(61)));
  EXPECT_TRUE(sim.snapshot().nodes[0].gpus[3].healthy);
  sim.SetUnschedulable(0, true);
  EXPECT_TRUE(sim.snapshot().nodes[0].unschedulable);
}

}  // namespace
}  // namespace chamber::sim
