#include "backend/kube/gpu_pricing.h"

#include <gtest/gtest.h>

#include "backend/kube/snapshot_builder.h"
#include "core/io/config_yaml.h"
#include "kube/client.h"

namespace chamber::backend {
namespace {

using fleet::Pricing;

core::Node GpuNode(const std::string& name, const std::string& model, NodeLabels labels,
                   int gpus = 8) {
  core::Node n;
  n.name = name;
  n.labels = std::move(labels);
  for (int g = 0; g < gpus; ++g) {
    core::Gpu gpu;
    gpu.uuid = name + "/gpu" + std::to_string(g);
    gpu.model = model;
    n.gpus.push_back(gpu);
  }
  return n;
}

PricingConfig Parse(const std::string& yaml) {
  Result<PricingConfig> c = ParsePricingConfig(yaml, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : PricingConfig{};
}

std::string Error(const std::string& yaml) {
  Result<PricingConfig> c = ParsePricingConfig(yaml, "c.yaml");
  return c.ok() ? "(no error)" : c.status().message();
}

TEST(DetectPricingTest, ReadsTheWellKnownCapacityTypeLabels) {
  EXPECT_EQ(DetectPricing({{"karpenter.sh/capacity-type", "spot"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"karpenter.sh/capacity-type", "on-demand"}}), Pricing::kOnDemand);
  EXPECT_EQ(DetectPricing({{"karpenter.sh/capacity-type", "reserved"}}), Pricing::kReserved);
  EXPECT_EQ(DetectPricing({{"eks.amazonaws.com/capacityType", "SPOT"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"eks.amazonaws.com/capacityType", "ON_DEMAND"}}), Pricing::kOnDemand);
  EXPECT_EQ(DetectPricing({{"eks.amazonaws.com/capacityType", "CAPACITY_BLOCK"}}),
            Pricing::kReserved);
  EXPECT_EQ(DetectPricing({{"cloud.google.com/gke-spot", "true"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"cloud.google.com/gke-preemptible", "true"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"kubernetes.azure.com/scalesetpriority", "spot"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"kubernetes.azure.com/scalesetpriority", "regular"}}),
            Pricing::kOnDemand);
  // Case does not matter; unknown values and "false" say nothing.
  EXPECT_EQ(DetectPricing({{"karpenter.sh/capacity-type", "Spot"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"eks.amazonaws.com/capacityType", "spot"}}), Pricing::kSpot);
  EXPECT_EQ(DetectPricing({{"cloud.google.com/gke-spot", "false"}}), std::nullopt);
  EXPECT_EQ(DetectPricing({{"karpenter.sh/capacity-type", "preemptible"}}), std::nullopt);
  EXPECT_EQ(DetectPricing({{"node.kubernetes.io/instance-type", "p5.48xlarge"}}), std::nullopt);
  EXPECT_EQ(DetectPricing({}), std::nullopt);
  // Karpenter's label comes first when two disagree.
  EXPECT_EQ(DetectPricing({{"eks.amazonaws.com/capacityType", "ON_DEMAND"},
                           {"karpenter.sh/capacity-type", "spot"}}),
            Pricing::kSpot);
}

TEST(PriceNodeTest, TheFirstMatchingRuleWins) {
  const PricingConfig c = Parse(R"(
pricing:
  defaultPricePerGpuHour: 1.25
  rules:
    - gpuModel: H100
      nodeSelector: {pool: reserved-a, zone: z1}
      pricing: reserved
      pricePerGpuHour: 2
    - gpuModel: H100
      nodeSelector: {pool: reserved-a}
      pricePerGpuHour: 3
    - gpuModel: H100
      pricePerGpuHour: 4
    - nodeSelector: {pool: reserved-a}
      pricePerGpuHour: 5
)");
  ASSERT_EQ(c.rules.size(), 4u);
  // Rules 0, 1, 2 and 3 all match: the first wins, with its own pricing type.
  NodePrice p = PriceNode(
      c, "H100", {{"karpenter.sh/capacity-type", "spot"}, {"pool", "reserved-a"}, {"zone", "z1"}});
  EXPECT_EQ(p.rule, 0);
  EXPECT_EQ(p.pricing, Pricing::kReserved);
  EXPECT_DOUBLE_EQ(p.price_per_gpu_hour, 2);
  // Another zone: rule 1, which sets no pricing type, so the capacity-type label says spot.
  p = PriceNode(c, "H100", {{"karpenter.sh/capacity-type", "spot"}, {"pool", "reserved-a"}});
  EXPECT_EQ(p.rule, 1);
  EXPECT_EQ(p.pricing, Pricing::kSpot);
  EXPECT_DOUBLE_EQ(p.price_per_gpu_hour, 3);
  // Not in the pool: rule 2; no capacity-type label: on-demand.
  p = PriceNode(c, "H100", {{"pool", "other"}});
  EXPECT_EQ(p.rule, 2);
  EXPECT_EQ(p.pricing, Pricing::kOnDemand);
  EXPECT_DOUBLE_EQ(p.price_per_gpu_hour, 4);
  // Another model in the pool: rule 3.
  p = PriceNode(c, "A100", {{"pool", "reserved-a"}});
  EXPECT_EQ(p.rule, 3);
  EXPECT_DOUBLE_EQ(p.price_per_gpu_hour, 5);
  // Nothing matches: the default price, the pricing type from the labels.
  p = PriceNode(c, "A100", {{"cloud.google.com/gke-spot", "true"}});
  EXPECT_EQ(p.rule, -1);
  EXPECT_EQ(p.pricing, Pricing::kSpot);
  EXPECT_DOUBLE_EQ(p.price_per_gpu_hour, 1.25);
  // A rule whose selector names a capacity-type label prices that type.
  const PricingConfig eks = Parse(
      "pricing:\n  rules:\n    - nodeSelector: {eks.amazonaws.com/capacityType: SPOT}\n"
      "      pricePerGpuHour: 1\n");
  p = PriceNode(eks, "H100", {{"eks.amazonaws.com/capacityType", "SPOT"}});
  EXPECT_EQ(p.rule, 0);
  EXPECT_EQ(p.pricing, Pricing::kSpot);
  // A selector's value must be equal, not just present.
  p = PriceNode(c, "A100", {{"pool", "reserved-b"}});
  EXPECT_EQ(p.rule, -1);
  EXPECT_EQ(p.pricing, Pricing::kOnDemand);
}

TEST(PriceNodeTest, WithoutRulesEveryGpuHasTheDefaultPrice) {
  const PricingConfig none;
  const NodePrice p = PriceNode(none, "H100", {{"eks.amazonaws.com/capacityType", "SPOT"}});
  EXPECT_EQ(p.rule, -1);
  EXPECT_EQ(p.pricing, Pricing::kSpot);
  EXPECT_DOUBLE_EQ(p.price_per_gpu_hour, 0);
}

TEST(AssignPoolsTest, SplitsPoolsByModelPricingTypeAndPrice) {
  const PricingConfig c = Parse(R"(
pricing:
  defaultPricePerGpuHour: 1
  rules:
    - gpuModel: NVIDIA-H100-80GB-HBM3
      nodeSelector: {karpenter.sh/capacity-type: spot}
      pricePerGpuHour: 2.5
    - gpuModel: NVIDIA-H100-80GB-HBM3
      pricePerGpuHour: 6.98
    - name: research
      nodeSelector: {team: research}
      pricing: reserved
      pricePerGpuHour: 1.1
)");
  const std::vector<core::Node> nodes = {
      GpuNode("h-od-1", "NVIDIA-H100-80GB-HBM3", {{"karpenter.sh/capacity-type", "on-demand"}}),
      GpuNode("h-spot-1", "NVIDIA-H100-80GB-HBM3", {{"karpenter.sh/capacity-type", "spot"}}),
      GpuNode("cpu-1", "", {}, 0),
      GpuNode("h-od-2", "NVIDIA-H100-80GB-HBM3", {}),
      GpuNode("a100-spot", "NVIDIA-A100-SXM4-80GB", {{"cloud.google.com/gke-spot", "true"}}),
      GpuNode("a100-research", "NVIDIA-A100-SXM4-80GB", {{"team", "research"}}),
      GpuNode("unlabelled", "", {}, 4),
      GpuNode("h-spot-2", "NVIDIA-H100-80GB-HBM3", {{"karpenter.sh/capacity-type", "spot"}}),
  };
  const PoolAssignment a = AssignPools(c, nodes);
  ASSERT_EQ(a.pools.size(), 5u);
  auto expect_pool = [&](size_t i, const std::string& name, const std::string& model,
                         Pricing pricing, double price) {
    SCOPED_TRACE(name);
    EXPECT_EQ(a.pools[i].name, name);
    EXPECT_EQ(a.pools[i].model, model);
    EXPECT_EQ(a.pools[i].pricing, pricing);
    EXPECT_DOUBLE_EQ(a.pools[i].price_per_gpu_hour, price);
  };
  // Sorted by name.
  expect_pool(0, "NVIDIA-A100-SXM4-80GB/reserved/research", "NVIDIA-A100-SXM4-80GB",
              Pricing::kReserved, 1.1);
  expect_pool(1, "NVIDIA-A100-SXM4-80GB/spot", "NVIDIA-A100-SXM4-80GB", Pricing::kSpot, 1);
  expect_pool(2, "NVIDIA-H100-80GB-HBM3/on-demand", "NVIDIA-H100-80GB-HBM3", Pricing::kOnDemand,
              6.98);
  expect_pool(3, "NVIDIA-H100-80GB-HBM3/spot", "NVIDIA-H100-80GB-HBM3", Pricing::kSpot, 2.5);
  expect_pool(4, "gpu/on-demand", "gpu", Pricing::kOnDemand, 1);
  EXPECT_EQ(a.node_pool, (std::vector<int32_t>{2, 3, -1, 2, 1, 0, 4, 3}));
}

TEST(AssignPoolsTest, PoolsThatCouldShareANameCarryTheirPrice) {
  // An unnamed rule and the default could both price on-demand H100s, differently (say, by
  // region): the later one's pools carry the price, whichever nodes exist.
  const PricingConfig c = Parse(R"(
pricing:
  defaultPricePerGpuHour: 3
  rules:
    - nodeSelector: {topology.kubernetes.io/region: us-east-1}
      pricePerGpuHour: 2.75
    - name: lab
      gpuModel: A100
      pricePerGpuHour: 1
    - name: lab
      nodeSelector: {karpenter.sh/capacity-type: spot}
      pricePerGpuHour: 0.5
)");
  const PoolAssignment split =
      AssignPools(c, {GpuNode("a", "H100", {{"topology.kubernetes.io/region", "us-east-1"}}),
                      GpuNode("b", "H100", {{"topology.kubernetes.io/region", "eu-west-1"}})});
  ASSERT_EQ(split.pools.size(), 2u);
  EXPECT_EQ(split.pools[0].name, "H100/on-demand");
  EXPECT_DOUBLE_EQ(split.pools[0].price_per_gpu_hour, 2.75);
  EXPECT_EQ(split.pools[1].name, "H100/on-demand@3");
  EXPECT_DOUBLE_EQ(split.pools[1].price_per_gpu_hour, 3);
  EXPECT_EQ(split.node_pool, (std::vector<int32_t>{0, 1}));
  const PoolAssignment one = AssignPools(c, {GpuNode("b", "H100", {})});
  ASSERT_EQ(one.pools.size(), 1u);
  EXPECT_EQ(one.pools[0].name, "H100/on-demand@3");
  // Named rules are compared with rules of the same name: rule 2 (spot, 0.5) could clash with
  // rule 1 only on A100s, which are rule 1's; so neither name carries a price.
  const PoolAssignment lab =
      AssignPools(c, {GpuNode("c", "A100", {{"karpenter.sh/capacity-type", "spot"}}),
                      GpuNode("d", "H100", {{"karpenter.sh/capacity-type", "spot"}})});
  ASSERT_EQ(lab.pools.size(), 2u);
  EXPECT_EQ(lab.pools[0].name, "A100/spot/lab");
  EXPECT_DOUBLE_EQ(lab.pools[0].price_per_gpu_hour, 1);
  EXPECT_EQ(lab.pools[1].name, "H100/spot/lab");
  EXPECT_DOUBLE_EQ(lab.pools[1].price_per_gpu_hour, 0.5);
}

TEST(AssignPoolsTest, PoolsKeepTheirIndexWhenNodesComeAndGo) {
  const PricingConfig c = Parse(R"(
pricing:
  rules:
    - gpuModel: H100
      pricePerGpuHour: 4
    - pricePerGpuHour: 2
)");
  const PoolAssignment first = AssignPools(
      c, {GpuNode("h", "H100", {}), GpuNode("s", "L4", {{"cloud.google.com/gke-spot", "true"}})});
  ASSERT_EQ(first.pools.size(), 2u);
  EXPECT_EQ(first.pools[0].name, "H100/on-demand");
  EXPECT_EQ(first.pools[1].name, "L4/spot");
  // The spot node goes and two new pools come: the old pools keep their places, the new ones
  // follow in name order.
  const PoolAssignment next =
      AssignPools(c, {GpuNode("a", "A100", {}), GpuNode("h", "H100", {}), GpuNode("b", "B200", {})},
                  first.pools);
  ASSERT_EQ(next.pools.size(), 4u);
  EXPECT_EQ(next.pools[0].name, "H100/on-demand");
  EXPECT_EQ(next.pools[1].name, "L4/spot");
  EXPECT_EQ(next.pools[1].pricing, Pricing::kSpot);
  EXPECT_DOUBLE_EQ(next.pools[1].price_per_gpu_hour, 2);
  EXPECT_EQ(next.pools[2].name, "A100/on-demand");
  EXPECT_EQ(next.pools[3].name, "B200/on-demand");
  EXPECT_EQ(next.node_pool, (std::vector<int32_t>{2, 0, 3}));
}

// From Node objects as the API server has them: the model is nvidia.com/gpu.product, the
// labels are the Node's.
TEST(AssignPoolsTest, PricesNodesOfTheSnapshotByTheirLabels) {
  auto node = [](const std::string& name, kube::Json labels) {
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3";
    kube::Json j = {
        {"metadata", {{"name", name}, {"uid", "uid-" + name}, {"labels", labels}}},
        {"spec", kube::Json::object()},
        {"status",
         {{"allocatable",
           {{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}}},
          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    return std::make_shared<const kube::Node>(kube::Node::FromJson(j).value());
  };
  ClusterObjects objects;
  objects.nodes = {node("od", kube::Json::object()),
                   node("spot", {{"eks.amazonaws.com/capacityType", "SPOT"}}),
                   node("rsv", {{"eks.amazonaws.com/nodegroup", "h100-reserved"}})};
  const BuiltSnapshot built = BuildSnapshot(objects, BuildOptions{});
  ASSERT_EQ(built.snapshot.nodes.size(), 3u);
  const PricingConfig c = Parse(R"(
pricing:
  rules:
    - nodeSelector: {eks.amazonaws.com/nodegroup: h100-reserved}
      pricing: reserved
      pricePerGpuHour: 3.9
    - gpuModel: NVIDIA-H100-80GB-HBM3
      nodeSelector: {eks.amazonaws.com/capacityType: SPOT}
      pricePerGpuHour: 3.1
    - gpuModel: NVIDIA-H100-80GB-HBM3
      pricePerGpuHour: 12.29
)");
  const PoolAssignment a = AssignPools(c, built.snapshot.nodes);
  ASSERT_EQ(a.pools.size(), 3u);
  std::map<std::string, std::pair<std::string, double>> pool_of_node;
  for (size_t n = 0; n < built.snapshot.nodes.size(); ++n) {
    ASSERT_GE(a.node_pool[n], 0);
    const fleet::PoolInput& p = a.pools[a.node_pool[n]];
    pool_of_node[built.snapshot.nodes[n].name] = {p.name, p.price_per_gpu_hour};
  }
  using Row = std::pair<std::string, double>;
  EXPECT_EQ(pool_of_node["od"], Row("NVIDIA-H100-80GB-HBM3/on-demand", 12.29));
  EXPECT_EQ(pool_of_node["spot"], Row("NVIDIA-H100-80GB-HBM3/spot", 3.1));
  EXPECT_EQ(pool_of_node["rsv"], Row("NVIDIA-H100-80GB-HBM3/reserved", 3.9));
}

TEST(PricingConfigTest, ReadsEveryField) {
  bool found = false;
  Result<PricingConfig> r = ParsePricingConfig(R"(
cyclePeriod: 1s
pricing:
  currency: EUR
  defaultPricePerGpuHour: 0.5
  rules:
    - name: gke-spot
      gpuModel: NVIDIA-L4
      nodeSelector:
        cloud.google.com/gke-spot: "true"
        cloud.google.com/gke-nodepool: l4-pool
      pricing: spot
      pricePerGpuHour: 0.22
    - pricePerGpuHour: 7
)",
                                               "c.yaml", &found);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(found);
  EXPECT_EQ(r->currency, "EUR");
  EXPECT_DOUBLE_EQ(r->default_price_per_gpu_hour, 0.5);
  ASSERT_EQ(r->rules.size(), 2u);
  EXPECT_EQ(r->rules[0].name, "gke-spot");
  EXPECT_EQ(r->rules[0].gpu_model, "NVIDIA-L4");
  EXPECT_EQ(r->rules[0].node_selector, (NodeLabels{{"cloud.google.com/gke-spot", "true"},
                                                   {"cloud.google.com/gke-nodepool", "l4-pool"}}));
  EXPECT_EQ(r->rules[0].pricing, Pricing::kSpot);
  EXPECT_DOUBLE_EQ(r->rules[0].price_per_gpu_hour, 0.22);
  EXPECT_EQ(r->rules[1].name, "");
  EXPECT_EQ(r->rules[1].gpu_model, "");
  EXPECT_TRUE(r->rules[1].node_selector.empty());
  EXPECT_EQ(r->rules[1].pricing, std::nullopt);
  EXPECT_DOUBLE_EQ(r->rules[1].price_per_gpu_hour, 7);

  // Printed and read back, it is the same.
  Result<PricingConfig> again = ParsePricingConfig(PricingConfigToYaml(*r), "printed.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << PricingConfigToYaml(*r);
  EXPECT_EQ(PricingConfigToYaml(*again), PricingConfigToYaml(*r));
  EXPECT_EQ(again->rules[0].node_selector, r->rules[0].node_selector);
  EXPECT_EQ(again->rules[1].pricing, std::nullopt);
}

TEST(PricingConfigTest, WithoutTheSectionNothingIsPriced) {
  bool found = true;
  Result<PricingConfig> r = ParsePricingConfig("cyclePeriod: 1s\n", "c.yaml", &found);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(r->currency, "USD");
  EXPECT_DOUBLE_EQ(r->default_price_per_gpu_hour, 0);
  EXPECT_TRUE(r->rules.empty());
  r = ParsePricingConfig("pricing:\n", "c.yaml", &found);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(found);
  EXPECT_TRUE(r->rules.empty());
}

TEST(PricingConfigTest, TheEngineReaderLeavesTheSectionToChamberd) {
  Result<core::EngineConfig> e = core::io::ParseEngineConfig(
      "cyclePeriod: 2s\npricing:\n  rules:\n    - pricePerGpuHour: 1\n", "c.yaml");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->cycle_period, std::chrono::seconds(2));
}

TEST(PricingConfigTest, ErrorsNameTheFileLineColumnAndField) {
  EXPECT_EQ(Error("pricing:\n  rule: []\n"),
            "c.yaml:2:3: field pricing.rule: unknown field (known: currency, "
            "defaultPricePerGpuHour, rules)");
  EXPECT_EQ(Error("pricing: 3\n"), "c.yaml:1:10: field pricing: expected a mapping");
  EXPECT_EQ(Error("pricing:\n  rules: {a: 1}\n"),
            "c.yaml:2:10: field pricing.rules: expected a list");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - 4\n"),
            "c.yaml:3:7: field pricing.rules[0]: expected a mapping");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - pricePerGpuHour: 1\n      price: 2\n"),
            "c.yaml:4:7: field pricing.rules[0].price: unknown field (known: name, gpuModel, "
            "nodeSelector, pricing, pricePerGpuHour)");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - pricePerGpuHour: -0.5\n"),
            "c.yaml:3:24: field pricing.rules[0].pricePerGpuHour: must not be negative");
  EXPECT_EQ(
      Error("pricing:\n  rules:\n    - pricePerGpuHour: 1\n    - pricePerGpuHour: cheap\n"),
      "c.yaml:4:24: field pricing.rules[1].pricePerGpuHour: expected a number, got \"cheap\"");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - pricePerGpuHour: [1]\n"),
            "c.yaml:3:24: field pricing.rules[0].pricePerGpuHour: expected a number");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - gpuModel: H100\n      pricing: preemptible\n"
                  "      pricePerGpuHour: 1\n"),
            "c.yaml:4:16: field pricing.rules[0].pricing: \"preemptible\" is not a pricing type "
            "(use on-demand, spot or reserved)");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - gpuModel: H100\n      pricing: spot\n"),
            "c.yaml:3:7: field pricing.rules[0]: pricePerGpuHour is required (the price of one "
            "GPU for an hour)");
  EXPECT_EQ(Error("pricing:\n  defaultPricePerGpuHour: -1\n"),
            "c.yaml:2:27: field pricing.defaultPricePerGpuHour: must not be negative");
  EXPECT_EQ(Error("pricing:\n  defaultPricePerGpuHour: free\n"),
            "c.yaml:2:27: field pricing.defaultPricePerGpuHour: expected a number, got \"free\"");
  EXPECT_EQ(Error("pricing:\n  currency: dollars\n"),
            "c.yaml:2:13: field pricing.currency: \"dollars\" is not a three-letter currency code "
            "such as USD");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - name: a/b\n      pricePerGpuHour: 1\n"),
            "c.yaml:3:13: field pricing.rules[0].name: must be a non-empty word without '/', '@' "
            "or spaces (it is part of the pool's name)");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - gpuModel: \"\"\n      pricePerGpuHour: 1\n"),
            "c.yaml:3:17: field pricing.rules[0].gpuModel: must not be empty (leave it out to "
            "match any model)");
  // Label keys and values as Kubernetes takes them, GPU models as nodes are labelled with them:
  // anything else (bytes that are not UTF-8 among them, which no written file could hold) is
  // refused where it is read.
  EXPECT_EQ(Error("pricing:\n  rules:\n    - nodeSelector: {\"cloud.goog\xbc/x\": \"y\"}\n"
                  "      pricePerGpuHour: 1\n"),
            "c.yaml:3:21: field pricing.rules[0].nodeSelector: \"cloud.goog\xbc/x\" is not a label "
            "key (an optional DNS-subdomain prefix and '/', then at most 63 of A-Z, a-z, 0-9, "
            "'-', '_', '.')");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - nodeSelector: {pool: \"a b\"}\n"
                  "      pricePerGpuHour: 1\n"),
            "c.yaml:3:28: field pricing.rules[0].nodeSelector.pool: \"a b\" is not a label value "
            "(at most 63 of A-Z, a-z, 0-9, '-', '_', '.', beginning and ending with a letter or "
            "digit)");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - gpuModel: \"H100 80GB\"\n      pricePerGpuHour: 1\n"),
            "c.yaml:3:17: field pricing.rules[0].gpuModel: \"H100 80GB\" is not a GPU model as "
            "nodes are labelled with it (a label value: at most 63 of A-Z, a-z, 0-9, '-', '_', "
            "'.')");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - name: \"a\xc3\"\n      pricePerGpuHour: 1\n"),
            "c.yaml:3:13: field pricing.rules[0].name: must be printable ASCII (it is part of the "
            "pool's name)");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - nodeSelector: "
                  "{karpenter.sh/capacity-type: spot, pool: \"\"}\n      pricePerGpuHour: 1\n"),
            "(no error)");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - nodeSelector: [spot]\n      pricePerGpuHour: 1\n"),
            "c.yaml:3:21: field pricing.rules[0].nodeSelector: expected a mapping");
  EXPECT_EQ(Error("pricing:\n  rules:\n    - nodeSelector: {pool: [a, b]}\n"
                  "      pricePerGpuHour: 1\n"),
            "c.yaml:3:28: field pricing.rules[0].nodeSelector.pool: expected a string");
  // A rule after a broader one would never be used.
  EXPECT_EQ(Error("pricing:\n  rules:\n    - gpuModel: H100\n      pricePerGpuHour: 4\n"
                  "    - gpuModel: H100\n      nodeSelector: {karpenter.sh/capacity-type: spot}\n"
                  "      pricePerGpuHour: 2\n"),
            "c.yaml:5:7: field pricing.rules[1]: never matches: pricing.rules[0] before it "
            "matches every GPU this rule would (the first match wins; put the more specific "
            "rule first)");
  // YAML syntax errors keep their position too.
  EXPECT_EQ(Error("pricing:\n  rules: [\n"), "c.yaml:3:1: end of sequence flow not found");
}

}  // namespace
}  // namespace chamber::backend
