#include <gtest/gtest.h>

#include "agent/gpu_collector.h"

namespace chamber::agent {
namespace {

GpuInfo Gpu(int index, const std::string& name, std::uint64_t mib) {
  GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.name = name;
  g.memory_total_bytes = mib << 20;
  return g;
}

TEST(NodeLabelsTest, UniformNode) {
  Inventory inv;
  inv.driver_version = "550.54.15";
  for (int i = 0; i < 8; ++i) inv.gpus.push_back(Gpu(i, "NVIDIA H100 80GB HBM3", 81559));
  auto labels = NodeLabels(inv);
  EXPECT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels["chamber.io/gpu.count"], "8");
  EXPECT_EQ(labels["chamber.io/gpu.model"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(labels["chamber.io/gpu.memory"], "81559");
  EXPECT_EQ(labels["chamber.io/gpu.driver"], "550.54.15");
}

TEST(NodeLabelsTest, MixedModelsAndSmallestMemory) {
  Inventory inv;
  inv.driver_version = "535.161.08";
  inv.gpus.push_back(Gpu(0, "NVIDIA A100-SXM4-80GB", 81920));
  inv.gpus.push_back(Gpu(1, "NVIDIA A100-SXM4-40GB", 40960));
  auto labels = NodeLabels(inv);
  EXPECT_EQ(labels["chamber.io/gpu.model"], "mixed");
  EXPECT_EQ(labels["chamber.io/gpu.memory"], "40960");
  EXPECT_EQ(labels["chamber.io/gpu.count"], "2");
}

TEST(NodeLabelsTest, NoGpusOnlyCount) {
  Inventory inv;
  auto labels = NodeLabels(inv);
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(labels["chamber.io/gpu.count"], "0");
}

TEST(NodeLabelsTest, UnknownDriverHasNoDriverLabel) {
  Inventory inv;
  inv.gpus.push_back(Gpu(0, "Tesla T4", 15360));
  auto labels = NodeLabels(inv);
  EXPECT_EQ(labels.count("chamber.io/gpu.driver"), 0u);
  EXPECT_EQ(labels["chamber.io/gpu.model"], "Tesla-T4");
}

TEST(SanitizeLabelValueTest, ProducesValidLabelValues) {
  EXPECT_EQ(SanitizeLabelValue("NVIDIA GeForce RTX 4090"), "NVIDIA-GeForce-RTX-4090");
  EXPECT_EQ(SanitizeLabelValue("  (weird) name!! "), "weird--name");
  EXPECT_EQ(SanitizeLabelValue("A100_SXM4.80GB"), "A100_SXM4.80GB");
  EXPECT_EQ(SanitizeLabelValue(""), "");
  EXPECT_EQ(SanitizeLabelValue("!!!"), "");
  std::string longest = SanitizeLabelValue(std::string(100, 'x') + " tail");
  EXPECT_EQ(longest.size(), 63u);
  // Truncation that ends on a separator trims it.
  std::string cut = SanitizeLabelValue(std::string(62, 'a') + " b");
  EXPECT_EQ(cut, std::string(62, 'a'));
}

}  // namespace
}  // namespace chamber::agent
