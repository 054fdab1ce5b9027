#include "core/io/snapshot_yaml.h"

#include <gtest/gtest.h>

namespace chamber::core::io {
namespace {

constexpr const char* kSnapshot = R"(
now: 1h
nodes:
  - name: gpu
    count: 2
    gpus: 8
    gpuModel: H100
    gpuMemory: 80Gi
    cpu: "64"
    memory: 512Gi
    unhealthyGpus: [3]
    nvlinkIslands: [[0, 1, 2, 3], [4, 5, 6, 7]]
    taints: [{key: dedicated, value: infer, effect: NoExecute}]
    labels: {pool: a}
    topology: {zone: z1, block: r1, nvlinkDomain: nvl-1}
queues:
  - name: team
    resources: {gpu: {quota: 8}}
workloads:
  - name: ns/running
    queue: team
    priority: 100
    state: Running
    pods: 2
    gpu: 2
    placements: [{node: gpu-0, gpus: [0, 1]}, {node: gpu-1, gpus: [4, 5]}]
    startTime: 10m
    lastCheckpointTime: 50m
    recentPreemptions: [5m]
    checkpointGraceSeconds: 90
  - name: ns/gang
    queue: team
    minMember: 2
    awaitedPods: 3
    podSets:
      - {name: leader, count: 1, gpu: 1, cpu: 500m}
      - name: worker
        count: 3
        gpu: 2
        memory: 8Gi
        nodeSelector: {pool: a}
        tolerations: [{key: dedicated, operator: Exists}]
        gpuModels: [H100]
)";

TEST(SnapshotYaml, ReadsEveryField) {
  Result<Snapshot> s = ParseSnapshot(kSnapshot, "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->now, std::chrono::hours(1));
  ASSERT_EQ(s->nodes.size(), 2u);
  const Node& n = s->nodes[1];
  EXPECT_EQ(n.name, "gpu-1");
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_FALSE(n.gpus[3].healthy);
  EXPECT_TRUE(n.gpus[2].healthy);
  EXPECT_EQ(n.gpus[5].nvlink_island, 1);
  EXPECT_EQ(n.gpus[0].memory_mib, 80 * 1024);
  EXPECT_EQ(n.gpus[0].model, "H100");
  EXPECT_EQ(n.gpus[7].uuid, "GPU-gpu-1-7");
  EXPECT_EQ(n.allocatable.cpu_milli(), 64'000);
  EXPECT_EQ(n.taints.at(0).effect, TaintEffect::kNoExecute);
  EXPECT_EQ(n.topology.nvlink_domain, "nvl-1");
  EXPECT_EQ(n.labels[0], (std::pair<std::string, std::string>{"pool", "a"}));

  ASSERT_EQ(s->workloads.size(), 2u);
  const Workload& r = s->workloads[0];
  EXPECT_EQ(r.state, WorkloadState::kRunning);
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_EQ(r.placements[1].node.value, 1);
  EXPECT_EQ(r.placements[1].gpu_mask, 0b110000u);
  EXPECT_EQ(r.last_checkpoint_time, std::chrono::minutes(50));
  EXPECT_EQ(r.checkpoint_grace_seconds, 90);
  EXPECT_TRUE(r.reserved());

  const Workload& g = s->workloads[1];
  EXPECT_EQ(g.min_member, 2);
  EXPECT_EQ(g.awaited_pods, 3);
  EXPECT_EQ(r.awaited_pods, 0);
  ASSERT_EQ(g.pod_sets.size(), 2u);
  EXPECT_EQ(g.pod_sets[0].request.cpu_milli(), 500);
  EXPECT_EQ(g.pod_sets[1].count, 3);
  EXPECT_EQ(g.pod_sets[1].request.memory_bytes(), int64_t{8} << 30);
  EXPECT_EQ(g.pod_sets[1].tolerations->at(0).op, Toleration::Operator::kExists);
  EXPECT_EQ(g.TotalPods(), 4);
}

// Shares of a GPU and MIG devices: profiles in the order the file names them, each charged its
// compute slices over its GPU's.
TEST(SnapshotYaml, ReadsSharesAndMigDevices) {
  Result<Snapshot> s = ParseSnapshot(R"(
nodes:
  - {name: mig, mig: {3g.40gb: 2, 1g.10gb: 7}}
  - {name: a30, mig: {1g.6gb: 4}}
  - {name: l40s, gpus: 4, gpuMemory: 48Gi}
workloads:
  - {name: nb, gpu: 0.25, gpuMemory: 10Gi}
  - {name: half, gpu: 500m}
  - {name: server, pods: 2, mig: {profile: 1g.10gb, devices: 2}}
  - name: mixed
    podSets:
      - {name: leader, count: 1, mig: {profile: 2g.20gb}}
      - {name: worker, count: 2, gpu: 1}
)",
                                     "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->mig_profiles.size(), 4u);
  EXPECT_EQ(s->mig_profiles[0].name, "3g.40gb");
  EXPECT_EQ(s->mig_profiles[0].milli, 428);
  EXPECT_EQ(s->mig_profiles[1].name, "1g.10gb");
  EXPECT_EQ(s->mig_profiles[1].milli, 142);
  EXPECT_EQ(s->mig_profiles[2].milli, 250);       // an A30's 1g.6gb: one slice of 4
  EXPECT_EQ(s->mig_profiles[3].name, "2g.20gb");  // named first by a workload
  EXPECT_EQ(s->nodes[0].mig_devices[0], 2);
  EXPECT_EQ(s->nodes[0].mig_devices[1], 7);
  EXPECT_EQ(s->nodes[1].mig_devices[2], 4);
  EXPECT_TRUE(s->nodes[0].gpus.empty());
  EXPECT_EQ(s->workloads[0].pod_sets[0].request.gpu_milli(), 250);
  EXPECT_EQ(s->workloads[0].pod_sets[0].gpu_memory_mib, 10 * 1024);
  EXPECT_EQ(s->workloads[1].pod_sets[0].request.gpu_milli(), 500);
  const PodSet& server = s->workloads[2].pod_sets[0];
  EXPECT_EQ(server.mig, (MigAsk{1, 2, 142}));
  EXPECT_EQ(server.request.gpu_milli(), 0);
  EXPECT_EQ(s->workloads[2].TotalRequest().gpu_milli(), 2 * 2 * 142);
  EXPECT_EQ(s->workloads[3].pod_sets[0].mig, (MigAsk{3, 1, 285}));
  EXPECT_EQ(s->workloads[3].pod_sets[1].request.gpu_milli(), 1000);
}

struct BadSnapshot {
  const char* yaml;
  const char* expected;
};

class SnapshotErrors : public testing::TestWithParam<BadSnapshot> {};

TEST_P(SnapshotErrors, NameTheField) {
  Result<Snapshot> s = ParseSnapshot(GetParam().yaml, "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(GetParam().expected), std::string::npos)
      << s.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SnapshotErrors,
    testing::Values(
        BadSnapshot{"nodes:\n  - {name: a, gpus: 65}\n",
                    "s.yaml:2:21: field nodes[0].gpus: must be between 0 and 64"},
        BadSnapshot{"nodes:\n  - {name: a, gpus: 2, unhealthyGpus: [2]}\n",
                    "GPU index 2 does not exist on this node"},
        BadSnapshot{"nodes:\n  - {name: a}\n  - {name: a}\n", "duplicate node name a"},
        BadSnapshot{"workloads:\n  - {name: w, state: Running, placements: [{node: x}]}\n",
                    "field workloads[0].placements[0].node: no node named x"},
        BadSnapshot{"workloads:\n  - {name: w, state: Running}\n",
                    "a running workload needs its placements"},
        BadSnapshot{"workloads:\n  - {name: w, state: Done}\n",
                    "expected Pending, Running, Preempting or Suspended"},
        BadSnapshot{"workloads:\n  - {name: w, gpu: -1}\n", "field workloads[0].gpu"},
        BadSnapshot{"workloads:\n  - {name: w, pods: 2, podSets: [{count: 1}]}\n",
                    "give pod fields inside podSets"},
        BadSnapshot{"workloads:\n  - {name: w, cpu: lots}\n", "is not a CPU quantity"},
        BadSnapshot{"nodes: {a: 1}\n", "field nodes: expected a list"},
        BadSnapshot{"workload: []\n", "field workload: unknown field"},
        BadSnapshot{"nodes:\n  - {name: a, mig: {5g.big: 1}}\n",
                    "s.yaml:2:21: field nodes[0].mig.5g.big: \"5g.big\" is not a "
                    "MIG profile (forms like 1g.10gb, 3g.40gb)"},
        BadSnapshot{"nodes:\n  - {name: a, mig: {1g.10gb: 256}}\n",
                    "field nodes[0].mig.1g.10gb: must be between 0 and 255"},
        BadSnapshot{"workloads:\n  - {name: w, gpu: 1, mig: {profile: 1g.10gb}}\n",
                    "field workloads[0].mig: a pod asks for MIG devices, whole GPUs "
                    "or a share of one, not two of them"},
        BadSnapshot{"workloads:\n  - {name: w, mig: {devices: 1}}\n",
                    "field workloads[0].mig.profile: MIG devices need a profile"},
        BadSnapshot{"workloads:\n  - {name: w, gpu: 1.5}\n",
                    "field workloads[0].gpu: a share of one GPU is below 1"},
        BadSnapshot{"workloads:\n  - {name: w, gpu: 0.0001}\n", "has more than 3 decimals"},
        BadSnapshot{"workloads:\n  - {name: w, gpu: 0.5, gpuMemory: 0}\n",
                    "field workloads[0].gpuMemory: must be positive"}));

}  // namespace
}  // namespace chamber::core::io
