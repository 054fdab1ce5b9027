#include "core/fair_share.h"

#include <cmath>
#include <numbers>
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
  EXPECT_NEAR(share[0][g] / kMilliPerGpu, 10, kTol);
  EXPECT_NEAR(share[3][g] / kMilliPerGpu, 2, kTol);
  // eng's 10: quotas {2, 2}, the 6 left split 1:3.
  EXPECT_NEAR(share[1][g] / kMilliPerGpu, 3.5, kTol);
  EXPECT_NEAR(share[2][g] / kMilliPerGpu, 6.5, kTol);
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
  EXPECT_NEAR(share[0][g] / kMilliPerGpu, 3, kTol);
  EXPECT_NEAR(share[1][g] / kMilliPerGpu, 7, kTol);
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
  EXPECT_NEAR(share[1][g] / kMilliPerGpu, 4, kTol);
}

TEST(DecayUsageTest, HalfLifeHalves) {
  const Duration hour = std::chrono::hours(1);
  EXPECT_NEAR(DecayUsage(100, 0, hour, hour), 50, 1e-9);
  EXPECT_NEAR(DecayUsage(100, 0, 2 * hour, hour), 25, 1e-9);
  EXPECT_NEAR(DecayUsage(100, 0, Duration{0}, hour), 100, 1e-9);
  // 8 GPUs for half an hour add 4 GPU-hours, less what decays within that half hour: the
  // integral of 8 * 2^(-s/1h) over s in [0, 0.5h] = 8 / ln 2 * (1 - 2^-0.5) = 3.380.
  EXPECT_NEAR(DecayUsage(100, 8, hour / 2, hour),
              100 / std::sqrt(2.0) + 8 / std::numbers::ln2 * (1 - 1 / std::sqrt(2.0)), 1e-9);
  EXPECT_NEAR(DecayUsage(0, 8, hour / 2, hour), 3.380, 1e-3);
  // One step or many: the same.
  double steps = 100;
  for (int i = 0; i < 30; ++i) steps = DecayUsage(steps, 8, hour / 60, hour);
  EXPECT_NEAR(steps, DecayUsage(100, 8, hour / 2, hour), 1e-9);
  // Decay off.
  EXPECT_EQ(DecayUsage(100, 8, hour, Duration{0}), 0);
}

TEST(DecayUsageTest, FractionOfTheClusterIsOneWhenEveryGpuWasHeldLongAgoAndStill) {
  const Duration hour = std::chrono::hours(1);
  // Holding all 8 GPUs for 40 half-lives: as close to "always" as doubles tell.
  double u = 0;
  for (int i = 0; i < 40; ++i) u = DecayUsage(u, 8, hour, hour);
  EXPECT_NEAR(DecayedUsageFraction(u, 8, hour), 1.0, 1e-9);
  EXPECT_NEAR(DecayedUsageFraction(u / 2, 8, hour), 0.5, 1e-9);  // half the cluster
  EXPECT_NEAR(DecayedUsageFraction(u, 16, hour), 0.5, 1e-9);     // or a cluster twice the size
  // Then nothing for one and for ten half-lives.
  EXPECT_NEAR(DecayedUsageFraction(DecayUsage(u, 0, hour, hour), 8, hour), 0.5, 1e-9);
  EXPECT_NEAR(DecayedUsageFraction(DecayUsage(u, 0, 10 * hour, hour), 8, hour), 1.0 / 1024, 1e-9);
  EXPECT_EQ(DecayedUsageFraction(u, 0, hour), 0);
  EXPECT_EQ(DecayedUsageFraction(u, 8, Duration{0}), 0);
}

Workload Holding(const std::string& queue, uint64_t mask, WorkloadState state) {
  Workload w;
  w.queue = queue;
  w.state = state;
  PodPlacement p;
  p.node = NodeId{0};
  p.gpu_mask = mask;
  w.placements.push_back(p);
  return w;
}

TEST(DecayedUsageTest, CountsWhatEachQueueHeldSinceTheLastCycle) {
  const Duration hour = std::chrono::hours(1);
  std::vector<Queue> queues(3);
  queues[0].name = "a";
  queues[1].name = "b";
  queues[2].name = "c";
  // a holds 4 GPUs (running) and 2 (preempting); b's pending work holds nothing.
  std::vector<Workload> workloads = {Holding("a", 0b1111, WorkloadState::kRunning),
                                     Holding("a", 0b110000, WorkloadState::kPreempting),
                                     Holding("b", 0b11, WorkloadState::kPending)};
  DecayedUsage ledger(hour);
  ledger.AdvanceByWorkloads(Time(0), queues, workloads);  // the first cycle only starts the clock
  ASSERT_FALSE(ledger.Fill(queues));
  ledger.AdvanceByWorkloads(Time(0) + hour / 2, queues, workloads);
  ASSERT_TRUE(ledger.Fill(queues));
  EXPECT_NEAR(queues[0].decayed_usage, DecayUsage(0, 6, hour / 2, hour), 1e-9);  // 6 GPUs
  EXPECT_GT(queues[0].decayed_usage, 2.5);
  EXPECT_EQ(queues[1].decayed_usage, 0);
  // Nothing held for a half-life: half of it is left.
  ledger.Advance(Time(0) + hour / 2 + hour, queues, std::vector<double>{});
  ledger.Fill(queues);
  EXPECT_NEAR(queues[0].decayed_usage, DecayUsage(0, 6, hour / 2, hour) / 2, 1e-9);
  EXPECT_FALSE(ledger.Fill(queues));  // nothing new
}

TEST(DecayedUsageTest, ARestoredRecordDecaysFromItsOwnTimeAndDeletedQueuesAreForgotten) {
  const Duration hour = std::chrono::hours(1);
  std::vector<Queue> queues(1);
  queues[0].name = "a";
  DecayedUsage ledger(hour);
  // Another leader wrote 40 GPU-hours as of 2 h ago; a holds 2 GPUs now.
  ledger.Restore("a", 40, Time(0));
  ledger.Restore("gone", 7, Time(0));
  ledger.Restore("a-bad", -1, Time(0));  // refused
  EXPECT_EQ(ledger.entries().size(), 2u);
  ledger.Advance(Time(0) + 2 * hour, queues, std::vector<double>{2});
  ledger.Fill(queues);
  EXPECT_NEAR(queues[0].decayed_usage, 40.0 / 4 + DecayUsage(0, 2, 2 * hour, hour), 1e-9);
  EXPECT_EQ(ledger.entries().size(), 1u);
  EXPECT_EQ(ledger.entries().begin()->first, "a");
  EXPECT_EQ(ledger.entries().begin()->second.at, Time(0) + 2 * hour);
  // Decay off keeps nothing.
  DecayedUsage off(Duration{0});
  off.Restore("a", 40, Time(0));
  off.AdvanceByWorkloads(Time(0) + hour, queues, {Holding("a", 0b11, WorkloadState::kRunning)});
  EXPECT_TRUE(off.entries().empty());
}

}  // namespace
}  // namespace chamber::core
