#include "sim/cluster_spec.h"

#include <gtest/gtest.h>

#include "sim/synthetic.h"

namespace chamber::sim {
namespace {

TEST(ClusterSpec, ParsesPoolsAndBuildsNodes) {
  Result<ClusterSpec> spec = ParseClusterSpec(R"(
pools:
  - name: h100
    count: 4
    gpusPerNode: 8
    gpuModel: H100-SXM5-80GB
    gpuMemory: 80Gi
    cpu: "96"
    memory: 1Ti
    zone: us-east-1a
    nodesPerBlock: 2
    price: {perGpuHour: 2.5, type: spot}
  - name: a100
    count: 2
    gpusPerNode: 4
    gpuModel: A100
    taints: [{key: old, effect: NoSchedule}]
)",
                                              "cluster.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->TotalGpus(), 40);
  EXPECT_EQ(spec->pools[0].pricing, PricingType::kSpot);
  EXPECT_DOUBLE_EQ(spec->pools[0].price_per_gpu_hour, 2.5);
  const std::vector<core::Node> nodes = BuildNodes(*spec);
  ASSERT_EQ(nodes.size(), 6u);
  EXPECT_EQ(nodes[3].name, "h100-3");
  EXPECT_EQ(nodes[3].topology.block, "h100/block-1");
  EXPECT_EQ(nodes[3].topology.zone, "us-east-1a");
  EXPECT_EQ(nodes[3].gpus.size(), 8u);
  EXPECT_EQ(nodes[3].gpus[0].memory_mib, 80 * 1024);
  EXPECT_EQ(nodes[3].allocatable.cpu_milli(), 96'000);
  EXPECT_EQ(nodes[5].taints.at(0).key, "old");
}

TEST(ClusterSpec, ErrorsNameTheField) {
  Result<ClusterSpec> spec =
      ParseClusterSpec("pools:\n  - name: a\n    gpusPerNode: 128\n", "cluster.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "cluster.yaml:3:18: field pools[0].gpusPerNode: must be between 0 and 64");
  spec = ParseClusterSpec("pools:\n  - name: a\n    price: {type: preemptible}\n", "cluster.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("expected on-demand, spot or reserved"),
            std::string::npos);
  spec = ParseClusterSpec("nodes: []\n", "cluster.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("field nodes: unknown field"), std::string::npos);
}

// MIG layouts: the last `gpus` GPUs of each node in MIG mode, their devices the node's, checked
// against the GPU model's profiles and NVIDIA's placements.
TEST(ClusterSpec, MigLayoutsMakeTheNodesMigDevices) {
  Result<ClusterSpec> spec = ParseClusterSpec(R"(
pools:
  - name: a100
    count: 2
    gpusPerNode: 8
    gpuModel: A100-SXM4-80GB
    mig: {gpus: 2, devices: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}
  - name: h100
    count: 1
    gpusPerNode: 4
    gpuModel: H100-SXM5-80GB
    mig: {devices: {1g.10gb: 7}}
)",
                                              "cluster.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->TotalGpus(), 20);       // GPUs in MIG mode count
  EXPECT_EQ(spec->pools[1].mig_gpus, 4);  // every GPU of the node when `gpus` is not given
  const std::vector<core::MigResource> profiles = spec->MigProfiles();
  ASSERT_EQ(profiles.size(), 3u);  // in name order, charged by compute slices over 7
  EXPECT_EQ(profiles[0].name, "1g.10gb");
  EXPECT_EQ(profiles[0].milli, 142);
  EXPECT_EQ(profiles[1].name, "2g.20gb");
  EXPECT_EQ(profiles[1].milli, 285);
  EXPECT_EQ(profiles[2].name, "3g.40gb");
  EXPECT_EQ(profiles[2].milli, 428);
  const std::vector<core::Node> nodes = BuildNodes(*spec);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].gpus.size(), 6u);    // 8 less the 2 in MIG mode
  EXPECT_EQ(nodes[0].mig_devices[0], 4);  // 2 GPUs x 2 x 1g.10gb
  EXPECT_EQ(nodes[0].mig_devices[1], 2);
  EXPECT_EQ(nodes[0].mig_devices[2], 2);
  EXPECT_EQ(nodes[2].gpus.size(), 0u);
  EXPECT_EQ(nodes[2].mig_devices[0], 28);
  EXPECT_EQ(nodes[2].mig_devices[2], 0);

  auto error = [](const std::string& mig, const std::string& model = "A100-SXM4-80GB") {
    Result<ClusterSpec> s = ParseClusterSpec(
        "pools:\n  - name: a\n    gpuModel: " + model + "\n    mig: " + mig + "\n", "cluster.yaml");
    return s.ok() ? std::string("ok") : s.status().message();
  };
  EXPECT_EQ(error("{devices: {5g.50gb: 1}}"),
            "cluster.yaml:4:20: field pools[0].mig.devices.5g.50gb: no MIG profile 5g.50gb on "
            "A100-SXM4-80GB (1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)");
  // Two 3g.40gb take all eight memory slots: no place for a 1g.10gb.
  EXPECT_EQ(error("{devices: {3g.40gb: 2, 1g.10gb: 1}}"),
            "cluster.yaml:4:20: field pools[0].mig.devices: the devices do not fit on one "
            "A100-SXM4-80GB in any of the placements NVIDIA allows");
  EXPECT_EQ(error("{devices: {1g.10gb: 8}}"),
            "cluster.yaml:4:30: field pools[0].mig.devices.1g.10gb: must be between 1 and 7");
  EXPECT_EQ(error("{gpus: 9, devices: {1g.10gb: 1}}"),
            "cluster.yaml:4:17: field pools[0].mig.gpus: must be between 1 and gpusPerNode (8)");
  EXPECT_EQ(error("{devices: {1g.10gb: 1}}", "L40S-48GB"),
            "cluster.yaml:4:10: field pools[0].mig: gpuModel \"L40S-48GB\" has no MIG profiles "
            "Chamber knows (A100 40GB or 80GB, H100 80GB)");
  EXPECT_EQ(error("{gpus: 1}"),
            "cluster.yaml:4:10: field pools[0].mig.devices: a MIG layout "
            "needs its devices");
  // Pools of A100 40GB and 80GB may name 11 profiles; a snapshot holds 8.
  Result<ClusterSpec> many = ParseClusterSpec(R"(pools:
  - {name: a, gpuModel: A100-40GB, mig: {devices: {1g.5gb: 1, 2g.10gb: 1, 3g.20gb: 1}}}
  - {name: b, gpuModel: A100-40GB, mig: {devices: {4g.20gb: 1, 1g.10gb: 1}}}
  - {name: c, gpuModel: A100-80GB, mig: {devices: {1g.20gb: 1, 2g.20gb: 1, 3g.40gb: 1}}}
  - {name: d, gpuModel: A100-80GB, mig: {devices: {4g.40gb: 1}}}
)",
                                              "cluster.yaml");
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().message(),
            "cluster.yaml:2:3: field pools: the pools' MIG layouts name 9 profiles; a cluster may "
            "have at most 8");
  // The layouts NVIDIA's mig-parted offers fit: all 1g.10gb, balanced, all 3g.40gb, one 7g.
  for (const char* ok :
       {"{devices: {1g.10gb: 7}}", "{devices: {3g.40gb: 2}}",
        "{devices: {4g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}}", "{devices: {7g.80gb: 1}}"})
    EXPECT_EQ(error(ok), "ok") << ok;
}

// Found by the cluster_spec fuzz harness: an empty name (`name: ""`, or a bare tag such as
// `name: !x`) made a pool whose nodes were named "-0", "-1", ...
TEST(ClusterSpec, EmptyPoolNameIsAnError) {
  for (const char* name : {"\"\"", "!x"}) {
    Result<ClusterSpec> spec = ParseClusterSpec(
        std::string("pools:\n  - name: ") + name + "\n    count: 4\n", "cluster.yaml");
    ASSERT_FALSE(spec.ok()) << name;
    EXPECT_EQ(spec.status().message(),
              "cluster.yaml:2:11: field pools[0].name: a pool needs a name");
  }
}

TEST(Synthetic, MatchesThePublishedDurationStatistics) {
  SyntheticSpec spec;
  spec.jobs = 200'000;
  spec.seed = 3;
  const Trace t = GenerateSyntheticTrace(spec);
  ASSERT_EQ(t.jobs.size(), 200'000u);
  std::vector<double> d;
  int64_t one_gpu = 0, big = 0;
  for (const TraceJob& j : t.jobs) {
    d.push_back(static_cast<double>(j.duration.count()) / 1000);
    one_gpu += j.pods * j.gpus_per_pod == 1;
    big += j.pods * j.gpus_per_pod >= 64;
  }
  std::sort(d.begin(), d.end());
  const double median = d[d.size() / 2];
  EXPECT_NEAR(median, 206, 206 * 0.05);  // Helios: median about 206 s
  // The mean of a log-normal this heavy converges slowly; within 15% at this size.
  double mean = 0;
  for (double x : d) mean += x / static_cast<double>(d.size());
  EXPECT_NEAR(mean, 6650, 6650 * 0.15);
  EXPECT_NEAR(static_cast<double>(one_gpu) / 200'000, 0.70, 0.01);
  EXPECT_GT(big, 0);
  for (size_t i = 1; i < t.jobs.size(); ++i) ASSERT_LE(t.jobs[i - 1].submit, t.jobs[i].submit);
}

TEST(Synthetic, SameSeedSameTrace) {
  SyntheticSpec spec;
  spec.jobs = 1000;
  spec.profile = SyntheticSpec::Profile::kPhilly;
  const Trace a = GenerateSyntheticTrace(spec), b = GenerateSyntheticTrace(spec);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].duration, b.jobs[i].duration);
    EXPECT_EQ(a.jobs[i].queue, b.jobs[i].queue);
  }
}

}  // namespace
}  // namespace chamber::sim
