#include "core/fair_share.h"

#include <cmath>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using testing::SnapshotBuilder;

constexpr double kTol = 1e-9;

TEST(WaterFillTest, QuotaThenSurplusByWeight) {
  // Stage 1 gives {2, 2}; the 6 left split 1:3.
  EXPECT_THAT(WaterFill(10, {8, 8}, {2, 2}, {1, 3}),
              ElementsAre(DoubleNear(3.5, kTol), DoubleNear(6.5, kTol)));
}

TEST(WaterFillTest, CappedDemandIsRedistributed) {
  // Equal weights would give 4 each, but the first wants only 1: the others share its rest.
  EXPECT_THAT(WaterFill(12, {1, 10, 10}, {0, 0, 0}, {1, 1, 1}),
              ElementsAre(DoubleNear(1, kTol), DoubleNear(5.5, kTol), DoubleNear(5.5, kTol)));
  // Cascading: 9 over weights {1,1,1} is 3 each; a fills at 2, then b at 3.5 of the remainder.
  EXPECT_THAT(WaterFill(9, {2, 3, 10}, {0, 0, 0}, {1, 1, 1}),
              ElementsAre(DoubleNear(2, kTol), DoubleNear(3, kTol), DoubleNear(4, kTol)));
}

TEST(WaterFillTest, NeverExceedsDemandAndLeavesUnwantedCapacity) {
  const std::vector<double> got = WaterFill(100, {5, 7}, {10, 0}, {1, 1});
  EXPECT_THAT(got, ElementsAre(DoubleNear(5, kTol), DoubleNear(7, kTol)));
}

TEST(WaterFillTest, OvercommittedQuotasScale) {
  // Quotas {6, 10} on 8: scaled by 8/16.
  EXPECT_THAT(WaterFill(8, {6, 10}, {6, 10}, {1, 1}),
              ElementsAre(DoubleNear(3, kTol), DoubleNear(5, kTol)));
  // Demand below quota counts as the guarantee: {2, 10} on 8 scales by 8/12.
  EXPECT_THAT(WaterFill(8, {2, 12}, {6, 10}, {1, 1}),
              ElementsAre(DoubleNear(2 * 8.0 / 12, kTol), DoubleNear(10 * 8.0 / 12, kTol)));
}

TEST(WaterFillTest, ZeroWeightGetsOnlyQuota) {
  EXPECT_THAT(WaterFill(10, {8, 8}, {2, 0}, {0, 1}),
              ElementsAre(DoubleNear(2, kTol), DoubleNear(8, kTol)));
}

TEST(WaterFillTest, NothingToShare) {
  EXPECT_THAT(WaterFill(0, {8, 8}, {2, 2}, {1, 1}), ElementsAre(0.0, 0.0));
  EXPECT_THAT(WaterFill(-3, {8}, {2}, {1}), ElementsAre(0.0));
  EXPECT_TRUE(WaterFill(10, {}, {}, {}).empty());
}

TEST(WaterFillingFairShareTest, TwoLevelTree) {
  SnapshotBuilder b;
  b.Queue("eng").Quota(8);                 // 0
  b.Queue("a", "eng").Quota(2);            // 1
  b.Queue("b", "eng").Quota(2).Weight(3);  // 2
  b.Queue("research").Quota(4);            // 3
  const QueueTree tree(b.snapshot().queues);
  // Demand: a 8, b 8 (eng 16), research 2.
  std::vector<Resources> demand = {Resources::Of(16, 0, 0), Resources::Of(8, 0, 0),
                                   Resources::Of(8, 0, 0), Resources::Of(2, 0, 0)};
  const auto share = WaterFillingFairShare().Compute(tree, demand, Resources::Of(12, 0, 0));
  ASSERT_EQ(share.size(), 4u);
  const int g = static_cast<int>(Resource::kGpu);
  // Roots: quotas {8, 2 (demand)}, the 2 left all go to eng (research is satisfied).
  EXPECT_NEAR(share[0][g], 10, kTol);
  EXPECT_NEAR(share[3][g], 2, kTol);
  // eng's 10: quotas {2, 2}, the 6 left split 1:3.
  EXPECT_NEAR(share[1][g], 3.5, kTol);
  EXPECT_NEAR(share[2][g], 6.5, kTol);
  // Unmanaged resources: no demand, no share.
  EXPECT_EQ(share[1][static_cast<int>(Resource::kCpu)], 0);
}

TEST(WaterFillingFairShareTest, LimitCapsShare) {
  SnapshotBuilder b;
  b.Queue("a").Limit(3);
  b.Queue("b");
  const QueueTree tree(b.snapshot().queues);
  const auto share = WaterFillingFairShare().Compute(
      tree, {Resources::Of(10, 0, 0), Resources::Of(10, 0, 0)}, Resources::Of(10, 0, 0));
  const int g = static_cast<int>(Resource::kGpu);
  EXPECT_NEAR(share[0][g], 3, kTol);
  EXPECT_NEAR(share[1][g], 7, kTol);
}

TEST(WaterFillingFairShareTest, InvalidQueuesGetNothing) {
  SnapshotBuilder b;
  b.Queue("bad").Quota(-1);
  b.Queue("good");
  const QueueTree tree(b.snapshot().queues);
  const auto share = WaterFillingFairShare().Compute(
      tree, {Resources::Of(10, 0, 0), Resources::Of(4, 0, 0)}, Resources::Of(10, 0, 0));
  const int g = static_cast<int>(Resource::kGpu);
  EXPECT_EQ(share[0][g], 0);
  EXPECT_NEAR(share[1][g], 4, kTol);
}

TEST(DecayUsageTest, HalfLifeHalves) {
  const Duration hour = std::chrono::hours(1);
  EXPECT_NEAR(DecayUsage(100, 0, hour, hour), 50, 1e-9);
  EXPECT_NEAR(DecayUsage(100, 0, 2 * hour, hour), 25, 1e-9);
  EXPECT_NEAR(DecayUsage(100, 0, Duration{0}, hour), 100, 1e-9);
  // 8 GPUs for half an hour add 4 GPU-hours on top of the decayed past.
  EXPECT_NEAR(DecayUsage(100, 8, hour / 2, hour), 100 / std::sqrt(2.0) + 4, 1e-9);
  // Decay off.
  EXPECT_EQ(DecayUsage(100, 8, hour, Duration{0}), 0);
}

}  // namespace
}  // namespace chamber::core
