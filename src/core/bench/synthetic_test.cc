#include "core/bench/synthetic.h"

#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/cluster_state.h"
#include "core/engine.h"

namespace chamber::core {
namespace {

SyntheticSpec Small() {
  SyntheticSpec s;
  s.nodes = 200;
  s.pods = 2000;
  s.queues = 12;
  return s;
}

// Everything that identifies a snapshot, as text.
std::string Digest(const Snapshot& s) {
  std::string out;
  for (const Node& n : s.nodes)
    out += n.name + n.topology.zone + n.topology.block + n.gpus.front().model.str() + ";";
  for (const Queue& q : s.queues)
    out += q.name + q.parent + std::to_string(q.res(Resource::kGpu).quota) + ";";
  for (const Workload& w : s.workloads) {
    out += w.name + std::to_string(w.priority) + std::to_string(w.submit_time.count());
    for (const PodPlacement& p : w.placements)
      out += std::to_string(p.node.value) + ":" + std::to_string(p.gpu_mask);
    out += ";";
  }
  return out;
}

int64_t LeafQuotaSum(const Snapshot& s) {
  int64_t sum = 0;
  for (const Queue& q : s.queues)
    if (!q.parent.empty()) sum += q.res(Resource::kGpu).quota;
  return sum;
}

TEST(SyntheticCluster, SameSeedSameSnapshotOtherSeedAnother) {
  const SyntheticSpec spec = Small();
  EXPECT_EQ(Digest(MakeSyntheticCluster(spec)), Digest(MakeSyntheticCluster(spec)));
  SyntheticSpec other = spec;
  other.seed = 2;
  EXPECT_NE(Digest(MakeSyntheticCluster(spec)), Digest(MakeSyntheticCluster(other)));
}

TEST(SyntheticCluster, ShapeFollowsTheSpec) {
  SyntheticSpec spec = Small();
  spec.gang_size = 8;
  spec.nvlink_domain_nodes = 8;
  const Snapshot s = MakeSyntheticCluster(spec);
  ASSERT_EQ(s.nodes.size(), 200U);
  std::set<std::string> blocks, zones, domains, models;
  for (const Node& n : s.nodes) {
    EXPECT_EQ(n.gpus.size(), 8U);
    blocks.insert(n.topology.block);
    zones.insert(n.topology.zone);
    domains.insert(n.topology.nvlink_domain);
    for (const Gpu& g : n.gpus) models.insert(g.model);
  }
  EXPECT_EQ(blocks.size(), 7U);  // 200 nodes in blocks of 32
  EXPECT_EQ(zones.size(), 3U);
  EXPECT_EQ(domains.size(), 6U * 4U + 1U);  // four 8-node domains per full block, one in the last
  EXPECT_GE(models.size(), 2U);
  EXPECT_EQ(s.workloads.size(), 2000U / 8U);
  for (const Workload& w : s.workloads) EXPECT_EQ(w.TotalPods(), 8);
  int32_t departments = 0;
  for (const Queue& q : s.queues) departments += q.parent.empty() ? 1 : 0;
  EXPECT_EQ(departments, 2);  // 12 teams, 10 per department
  EXPECT_EQ(s.queues.size(), 14U);
}

// Quotas split the capacity exactly; each department's quota is its teams' sum.
TEST(SyntheticCluster, QuotasSumToCapacity) {
  const Snapshot s = MakeSyntheticCluster(Small());
  EXPECT_EQ(LeafQuotaSum(s), Gpus(200 * 8));
  std::map<std::string, int64_t> children;
  for (const Queue& q : s.queues) {
    const QueueResource& gpu = q.res(Resource::kGpu);
    EXPECT_TRUE(gpu.limit == kUnlimited || gpu.limit >= gpu.quota) << q.name;
    if (!q.parent.empty()) children[q.parent] += gpu.quota;
  }
  for (const Queue& q : s.queues)
    if (q.parent.empty()) {
      EXPECT_EQ(children[q.name], q.res(Resource::kGpu).quota) << q.name;
    }
}

// Running work holds distinct, existing GPUs: the engine accepts every placement.
TEST(SyntheticCluster, RunningWorkIsPlacedConsistently) {
  for (int32_t gang : {1, 8}) {
    SyntheticSpec spec = Small();
    spec.gang_size = gang;
    spec.running_fraction = 0.9;
    const Snapshot s = MakeSyntheticCluster(spec);
    ClusterState state(s);
    int64_t running_gpus = 0;
    for (const Workload& w : s.workloads) {
      if (w.state != WorkloadState::kRunning) continue;
      ASSERT_EQ(w.placements.size(), static_cast<size_t>(w.TotalPods())) << w.name;
      for (size_t i = 0; i < w.placements.size(); ++i) {
        ASSERT_TRUE(state.ClaimExisting(w.placements[i], w.PlacementRequest(i)).ok()) << w.name;
        running_gpus += w.PlacementRequest(i).gpu_milli();
      }
      EXPECT_LE(w.start_time, s.now);
    }
    EXPECT_GT(running_gpus, 0);
    EXPECT_LE(running_gpus, Gpus(200 * 8));
    EXPECT_TRUE(state.CheckInvariants().ok());
    EXPECT_TRUE(Engine().Schedule(s).issues.empty());
  }
}

// Steady load: no queue runs beyond its quota, and nothing waiting outranks its queue's running
// work, so a cycle on a full cluster places what fits without preempting.
TEST(SyntheticCluster, SteadyLoadStaysWithinQuota) {
  const Snapshot s = MakeSyntheticCluster(Small());
  std::map<std::string, int64_t> running;
  for (const Workload& w : s.workloads) {
    if (w.state == WorkloadState::kRunning) {
      running[w.queue] += w.TotalRequest().gpu_milli();
      EXPECT_GE(w.priority, 50);
    } else {
      EXPECT_LE(w.priority, 50);
    }
  }
  for (const Queue& q : s.queues)
    if (!q.parent.empty()) {
      EXPECT_LE(running[q.name], q.res(Resource::kGpu).quota) << q.name;
    }
}

// Churn: all waiting work belongs to lenders (even teams), borrowers run beyond quota, and a cycle
// over a full cluster reclaims from borrowers.
TEST(SyntheticCluster, ChurnMakesTheCycleReclaim) {
  SyntheticSpec spec = Small();
  spec.churn = true;
  spec.running_fraction = 0.8;
  const Snapshot s = MakeSyntheticCluster(spec);
  std::map<std::string, int64_t> running;
  for (const Workload& w : s.workloads) {
    const int team = std::stoi(w.queue.substr(w.queue.find('-') + 1));
    if (w.state == WorkloadState::kPending) {
      EXPECT_EQ(team % 2, 0) << w.name;
    }
    if (w.state == WorkloadState::kRunning) running[w.queue] += w.TotalRequest().gpu_milli();
  }
  int64_t borrowed = 0;
  for (const Queue& q : s.queues)
    if (!q.parent.empty())
      borrowed += std::max<int64_t>(0, running[q.name] - q.res(Resource::kGpu).quota);
  EXPECT_GT(borrowed, 0);
  const CycleResult r = Engine().Schedule(s);
  ASSERT_FALSE(r.preemptions.empty());
  for (const PreemptDecision& p : r.preemptions) EXPECT_EQ(p.reason, PreemptReason::kReclaim);
}

TEST(SyntheticCluster, RunningWorkNeverExceedsTheCluster) {
  SyntheticSpec spec = Small();
  spec.pods = 5000;
  spec.running_fraction = 1.0;
  const Snapshot s = MakeSyntheticCluster(spec);
  int64_t gpus = 0;
  for (const Workload& w : s.workloads)
    if (w.state == WorkloadState::kRunning) gpus += w.TotalRequest().gpu_milli();
  EXPECT_LE(gpus, Gpus(200 * 8));
  EXPECT_EQ(s.workloads.size(), 5000U);
}

TEST(SyntheticCluster, RejectsBadSpecs) {
  EXPECT_EQ(ValidateSyntheticSpec(Small()), "");
  SyntheticSpec s = Small();
  s.nodes = 0;
  EXPECT_EQ(ValidateSyntheticSpec(s), "nodes must be at least 1");
  s = Small();
  s.gpus_per_pod = 9;
  EXPECT_EQ(ValidateSyntheticSpec(s), "GPUs per pod must be between 1 and the GPUs per node");
  s = Small();
  s.running_fraction = 1.5;
  EXPECT_EQ(ValidateSyntheticSpec(s), "running fraction must be between 0 and 1");
  s = Small();
  s.queues = 1;
  s.churn = true;
  EXPECT_EQ(ValidateSyntheticSpec(s), "churn needs at least 2 queues (a lender and a borrower)");
}

}  // namespace
}  // namespace chamber::core
