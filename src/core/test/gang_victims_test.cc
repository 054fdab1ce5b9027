#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/cluster_state.h"
#include "core/placement.h"
#include "core/preemption.h"
#include "core/test/selection_state.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using testing::Sec;
using testing::SnapshotBuilder;

// The default placement, counting the tries victim selection asks of it.
class CountingPlacement final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "counting"; }
  std::optional<PlacementPlan> Place(const ClusterState& state, const FeasibilityCache& feasibility,
                                     const Workload& w, int32_t pods,
                                     const CapacityOverlay* overlay) const override {
    ++calls;
    return inner_.Place(state, feasibility, w, pods, overlay);
  }
  mutable int calls = 0;

 private:
  TopologyBinPacking inner_;
};

// Four nodes of 8 GPUs, each with one GPU free and seven single-GPU workloads of a borrowing
// queue on GPUs 0 to 6. Node i's workloads have lost i hours and some minutes since their last
// checkpoint, so preference order takes n0's first, then n1's, and so on. The preemptor is a
// gang of two pods of 8 GPUs.
class GangVictimsTest : public ::testing::Test {
 protected:
  GangVictimsTest() {
    b_.Queue("borrower");
    b_.Queue("owner").Quota(16);
    for (int n = 0; n < 4; ++n) {
      const std::string node = "n" + std::to_string(n);
      b_.Node(node, 8);
      for (int g = 0; g < 7; ++g) {
        b_.Workload(node + "-w" + std::to_string(g), "borrower")
            .Pods(1, 1)
            .Running(node, uint64_t{1} << g)
            .Start(b_.snapshot().now - Sec(3600 * n + 60 * g + 60));
      }
    }
    b_.Workload("gang", "owner").Pods(2, 8);
    sel_.Load(b_.snapshot());
  }

  // The running workloads on GPUs below `gpus` of every node, as reclaim candidates.
  std::vector<VictimCandidate> Candidates(int gpus) const {
    std::vector<VictimCandidate> out;
    const std::vector<Workload>& ws = b_.snapshot().workloads;
    for (size_t i = 0; i < ws.size(); ++i) {
      const Workload& w = ws[i];
      if (w.placements.empty() || w.placements[0].gpu_mask >= (uint64_t{1} << gpus)) continue;
      const double lost = static_cast<double>((b_.snapshot().now - w.start_time).count()) / 3.6e6;
      out.push_back({WorkloadId{static_cast<int32_t>(i)},
                     PreemptReason::kReclaim,
                     w.priority,
                     lost,
                     1.0,
                     -1,
                     {},
                     w.placements});
    }
    return out;
  }

  std::optional<VictimSet> Select(int gpus) {
    return selector_.Select({.state = *sel_.state,
                             .feasibility = *sel_.feas,
                             .placement = placement_,
                             .snapshot = b_.snapshot(),
                             .preemptor = b_.snapshot().workloads.back(),
                             .pods = 2,
                             .candidates = Candidates(gpus),
                             .releasing = sel_.releasing});
  }

  SnapshotBuilder b_;
  testing::SelectionState sel_;
  CountingPlacement placement_;
  MinimalVictimSelector selector_;
};

// With only GPUs 0 to 3 on offer, 20 GPUs could be freed, more than the gang's 16, but no node
// could ever have 8: placement is tried once, when the GPU total is reached, and never again
// however many more candidates there are.
TEST_F(GangVictimsTest, AGangThatNoNodeCouldHoldIsTriedOnce) {
  EXPECT_EQ(Select(4), std::nullopt);
  EXPECT_EQ(placement_.calls, 1);
}

// With every workload on offer, n0's seven and then n1's seven make room for the two pods. The
// GPU total is reached after twelve victims, where the one try fails; the next is at the
// fourteenth, when n1 can hold a pod; then each of the fourteen is tried without, and all are
// needed.
TEST_F(GangVictimsTest, AGangIsTriedAgainOnlyOnceEnoughNodesCouldHoldItsPods) {
  const std::optional<VictimSet> set = Select(7);
  ASSERT_TRUE(set.has_value());
  ASSERT_EQ(set->victims.size(), 14U);
  for (const VictimCandidate& v : set->victims) {
    const NodeId node = b_.snapshot().workloads[v.workload.index()].placements[0].node;
    EXPECT_LT(node.value, 2) << "victim on node " << node.value;
  }
  ASSERT_EQ(set->plan.pods.size(), 2U);
  EXPECT_NE(set->plan.pods[0].placement.node, set->plan.pods[1].placement.node);
  EXPECT_EQ(placement_.calls, 2 + 14);
}

}  // namespace
}  // namespace chamber::core
