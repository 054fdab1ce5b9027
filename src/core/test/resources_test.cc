#include "core/resources.h"

#include <gtest/gtest.h>

namespace chamber::core {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

TEST(ResourcesTest, OfAndAccessors) {
  const Resources r = Resources::Of(8, 4000, 16 * kGi);
  EXPECT_EQ(r.whole_gpus(), 8);
  EXPECT_EQ(r.cpu_milli(), 4000);
  EXPECT_EQ(r.memory_bytes(), 16 * kGi);
  EXPECT_EQ(r.gpu_milli(), 8000) << "GPUs are kept in thousandths";
  EXPECT_EQ(r[Resource::kGpu], Gpus(8));
  EXPECT_EQ(r[Resource::kCpu], 4000);
  EXPECT_EQ(r[Resource::kMemory], 16 * kGi);
  EXPECT_TRUE(Resources().IsZero());
  EXPECT_FALSE(r.IsZero());
  const Resources half = Resources::OfMilli(500, 0, 0);
  EXPECT_EQ(half.gpu_milli(), 500);
  EXPECT_EQ(half.whole_gpus(), 0);
  EXPECT_EQ(Resources::OfMilli(2500, 0, 0).whole_gpus(), 2);
  EXPECT_DOUBLE_EQ(GpusOf(2500), 2.5);
}

TEST(ResourcesTest, Arithmetic) {
  const Resources a = Resources::Of(8, 4000, 100);
  const Resources b = Resources::Of(3, 500, 40);
  EXPECT_EQ(a + b, Resources::Of(11, 4500, 140));
  EXPECT_EQ(a - b, Resources::Of(5, 3500, 60));
  EXPECT_EQ(b - a, Resources::Of(-5, -3500, -60));
  EXPECT_EQ(b * 4, Resources::Of(12, 2000, 160));
  EXPECT_EQ(b * 0, Resources());
  Resources c = a;
  c += b;
  c -= b;
  EXPECT_EQ(c, a);
  EXPECT_TRUE((b - a).AnyNegative());
  EXPECT_FALSE((a - b).AnyNegative());
  EXPECT_TRUE(Resources::Of(0, 0, -1).AnyNegative());
  EXPECT_EQ(Min(a, Resources::Of(9, 100, 200)), Resources::Of(8, 100, 100));
  EXPECT_EQ(Max(a, Resources::Of(9, 100, 200)), Resources::Of(9, 4000, 200));
}

TEST(ResourcesTest, RepeatedAddAndSubtractDoesNotDrift) {
  Resources r;
  const Resources step = Resources::Of(1, 333, 7);
  for (int i = 0; i < 100000; ++i) r += step;
  for (int i = 0; i < 100000; ++i) r -= step;
  EXPECT_TRUE(r.IsZero());
}

TEST(ResourcesTest, FitsInComparesEveryResource) {
  const Resources cap = Resources::Of(8, 4000, 16 * kGi);
  EXPECT_TRUE(Resources::Of(8, 4000, 16 * kGi).FitsIn(cap));
  EXPECT_TRUE(Resources().FitsIn(cap));
  EXPECT_FALSE(Resources::Of(9, 0, 0).FitsIn(cap));
  EXPECT_FALSE(Resources::Of(0, 4001, 0).FitsIn(cap));
  EXPECT_FALSE(Resources::Of(0, 0, 16 * kGi + 1).FitsIn(cap));
  EXPECT_FALSE(cap.FitsIn(Resources()));
}

TEST(ResourcesTest, ResourceNames) {
  EXPECT_EQ(ResourceName(Resource::kGpu), "gpu");
  EXPECT_EQ(ResourceName(Resource::kCpu), "cpu");
  EXPECT_EQ(ResourceName(Resource::kMemory), "memory");
}

TEST(ResourcesTest, FormatQuantity) {
  EXPECT_EQ(FormatQuantity(Resource::kGpu, Gpus(8)), "8 gpu");
  EXPECT_EQ(FormatQuantity(Resource::kGpu, 0), "0 gpu");
  EXPECT_EQ(FormatQuantity(Resource::kGpu, 500), "0.5 gpu");
  EXPECT_EQ(FormatQuantity(Resource::kCpu, 500), "500m cpu");
  EXPECT_EQ(FormatQuantity(Resource::kCpu, 4000), "4 cpu");
  EXPECT_EQ(FormatQuantity(Resource::kCpu, 1500), "1500m cpu");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 16 * kGi), "16Gi memory");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 2 * (kGi << 10)), "2Ti memory");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 512 * (int64_t{1} << 20)), "512Mi memory");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 3072), "3Ki memory");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 1536), "1536 memory");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 1000), "1000 memory");
  EXPECT_EQ(FormatQuantity(Resource::kMemory, 0), "0 memory");
}

// Thousandths of a GPU print exactly, without trailing zeros, negative ones too (a borrowed
// amount can be).
TEST(ResourcesTest, FormatGpus) {
  EXPECT_EQ(FormatGpus(0), "0");
  EXPECT_EQ(FormatGpus(8000), "8");
  EXPECT_EQ(FormatGpus(500), "0.5");
  EXPECT_EQ(FormatGpus(2125), "2.125");
  EXPECT_EQ(FormatGpus(1), "0.001");
  EXPECT_EQ(FormatGpus(1050), "1.05");
  EXPECT_EQ(FormatGpus(-1250), "-1.25");
  EXPECT_EQ(FormatGpus(-3000), "-3");
  EXPECT_EQ(FormatGpus(INT64_MIN), "-9223372036854775.808");
}

TEST(ResourcesTest, FormatResourcesSkipsZeros) {
  EXPECT_EQ(FormatResources(Resources::Of(8, 500, 16 * kGi)), "8 gpu, 500m cpu, 16Gi memory");
  EXPECT_EQ(FormatResources(Resources::Of(0, 2000, 0)), "2 cpu");
  EXPECT_EQ(FormatResources(Resources()), "nothing");
}

}  // namespace
}  // namespace chamber::core
