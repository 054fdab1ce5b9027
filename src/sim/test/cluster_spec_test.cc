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
