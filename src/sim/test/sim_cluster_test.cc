// The steppable simulated cluster: internal stepping matches Simulate, and external scheduling
// (the daemon's way) runs the same jobs through the same engine.
#include <cmath>
#include <map>
#include <optional>
#include <string>

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
      EXPECT_EQ(sim.GpuMilliHeld(w), 8000);
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

// The snapshot each cycle sees carries a running job's last checkpoint as of that cycle (every
// checkpoint_interval from the start of its current run), through a restart after a fault.
// With quotas per GPU model, the cycle sees the queues split per model, as chamberd's, and each
// model's queue carries its own decayed usage: queue speech lists H100 and A100 (quota 8
// each); a runs on 8 A100s (it allows only A100), b on 4 H100s, both from t=0. After an hour at
// a one-hour half-life, each model's decayed GPU-hours are what it held times (1 - 1/2) / ln 2:
// 5.771 for A100, 2.885 for H100, twice as many.
TEST(SimCluster, EachGpuModelOfAQueueKeepsItsOwnDecayedUsage) {
  Trace trace;
  trace.jobs = {Job("a", Time(0), hours(10), 1, 8, "speech"),
                Job("b", Time(0), hours(10), 1, 4, "speech")};
  trace.jobs[0].gpu_models = {"A100"};
  core::EngineConfig config;
  config.usage_half_life = hours(1);
  const SimPolicy policy = *MakePolicy("chamber", config);
  SimOptions options;
  core::Queue q;
  q.name = "speech";
  q.gpu_models = {testing::ModelQuota("H100", 8), testing::ModelQuota("A100", 8)};
  options.queues = {q};
  auto c = SimCluster::Create(testing::NodePerModel({"H100", "A100"}, 8), trace, policy, options,
                              {}, SimCluster::Scheduling::kExternal);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  SimCluster& sim = **c;
  const core::Engine engine(policy.config, policy.policies);
  sim.AdvanceTo(Time(0));
  sim.ApplyCycle(engine.Schedule(sim.PrepareCycle()));
  for (size_t w = 0; w < 2; ++w)
    ASSERT_EQ(sim.snapshot().workloads[w].state, core::WorkloadState::kRunning) << w;
  sim.AdvanceTo(Time(hours(1)));
  const core::Snapshot& s = sim.PrepareCycle();
  std::map<std::string, double> usage;
  for (const core::Queue& queue : s.queues) usage[queue.name] = queue.decayed_usage;
  ASSERT_TRUE(usage.contains("speech/H100") && usage.contains("speech/A100"))
      << "the cycle sees the queues per model";
  const double per_gpu = 0.5 / std::log(2.0);
  EXPECT_NEAR(usage["speech/A100"], 8 * per_gpu, 1e-9);
  EXPECT_NEAR(usage["speech/H100"], 4 * per_gpu, 1e-9);
}

TEST(SimCluster, CyclesSeeEachRunningJobsLastCheckpoint) {
  Trace trace;
  trace.jobs = {Job("a", Time(0), hours(10), 1, 8)};
  const SimPolicy policy = *MakePolicy("chamber", core::EngineConfig{});
  SimOptions options;
  options.checkpoint_interval = minutes(30);
  auto c = SimCluster::Create(Cluster(1, 8), trace, policy, options, {},
                              SimCluster::Scheduling::kExternal);
  ASSERT_TRUE(c.ok());
  SimCluster& sim = **c;
  const core::Engine engine(policy.config, policy.policies);
  // The last checkpoint the cycle at `t` sees; the cycle's decisions are applied.
  auto checkpoint_at = [&](Time t) {
    sim.AdvanceTo(t);
    const core::Snapshot& s = sim.PrepareCycle();
    EXPECT_EQ(s.workloads.size(), 1u);
    const std::optional<Time> last = s.workloads[0].last_checkpoint_time;
    sim.ApplyCycle(engine.Schedule(s));
    return last;
  };
  EXPECT_EQ(checkpoint_at(Time(minutes(1))), std::nullopt);  // starts now
  EXPECT_EQ(checkpoint_at(Time(minutes(20))), Time(minutes(1)));
  EXPECT_EQ(checkpoint_at(Time(minutes(30))), Time(minutes(1)));
  EXPECT_EQ(checkpoint_at(Time(minutes(31))), Time(minutes(31)));
  EXPECT_EQ(checkpoint_at(Time(minutes(75))), Time(minutes(61)));
  // A GPU fails under it: the next cycle preempts it, and it runs again once the GPU is back.
  ASSERT_TRUE(sim.FailGpu(0, 3, minutes(5)));
  EXPECT_EQ(checkpoint_at(Time(minutes(76))), Time(minutes(61)));
  EXPECT_EQ(sim.snapshot().workloads[0].state, core::WorkloadState::kPreempting);
  sim.AdvanceTo(Time(minutes(90)));
  EXPECT_EQ(sim.snapshot().workloads[0].state, core::WorkloadState::kSuspended);
  checkpoint_at(Time(minutes(90)));  // resumes
  EXPECT_EQ(sim.snapshot().workloads[0].state, core::WorkloadState::kRunning);
  EXPECT_EQ(sim.snapshot().workloads[0].last_checkpoint_time, std::nullopt);
  // The first run's next checkpoint (91 min) is not the new run's.
  EXPECT_EQ(checkpoint_at(Time(minutes(100))), Time(minutes(90)));
  EXPECT_EQ(checkpoint_at(Time(minutes(125))), Time(minutes(120)));
  EXPECT_EQ(checkpoint_at(Time(minutes(200))), Time(minutes(180)));
}

}  // namespace
}  // namespace chamber::sim
