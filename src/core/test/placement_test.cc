#include "core/placement.h"

#include <bit>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Mask;
using testing::SnapshotBuilder;

// Holds a built snapshot and the cluster state with its running workloads claimed.
class PlacementTest : public ::testing::Test {
 protected:
  void Build() {
    state_.emplace(b_.snapshot());
    feas_.emplace(*state_);
    for (const Workload& w : b_.snapshot().workloads) {
      if (w.state != WorkloadState::kRunning) continue;
      for (size_t i = 0; i < w.placements.size(); ++i) {
        const PodSet& ps = *w.PlacementPodSet(i);
        ASSERT_TRUE(state_->ClaimExisting(w.placements[i], ps.request, ps.gpu_memory_mib).ok());
      }
    }
  }
  std::optional<PlacementPlan> Place(const std::string& workload, int32_t pods = -1,
                                     const CapacityOverlay* overlay = nullptr) {
    const Workload& w = b_.snapshot().workloads[b_.id(workload).index()];
    return TopologyBinPacking().Place(*state_, *feas_, w, pods < 0 ? w.TotalPods() : pods, overlay);
  }
  PlacementExplanation Explain(const std::string& workload) {
    const Workload& w = b_.snapshot().workloads[b_.id(workload).index()];
    return ExplainNoFit(*state_, *feas_, w, w.TotalPods());
  }
  std::string NodeOf(const PodAssignment& a) const {
    return b_.snapshot().nodes[a.placement.node.index()].name;
  }
  std::vector<std::string> Nodes(const PlacementPlan& plan) const {
    std::vector<std::string> out;
    for (const PodAssignment& a : plan.pods) out.push_back(NodeOf(a));
    return out;
  }
  // Fills `gpus` GPUs of `node` (the lowest indices) with a running filler workload.
  void Fill(const std::string& node, int gpus) {
    b_.Workload("filler-" + node, "q").Pods(1, gpus).Running(node, Mask(0, gpus));
  }

  SnapshotBuilder b_;
  std::optional<ClusterState> state_;
  std::optional<FeasibilityCache> feas_;
};

TEST_F(PlacementTest, SinglePodGoesToFullestNodeThatFits) {
  b_.Node("empty", 8);
  b_.Node("three-free", 8);
  b_.Node("one-free", 8);
  Fill("three-free", 5);
  Fill("one-free", 7);
  b_.Workload("two", "q").Pods(1, 2);
  b_.Workload("one", "q").Pods(1, 1);
  b_.Workload("nine", "q").Pods(1, 9);
  Build();
  auto two = Place("two");
  ASSERT_TRUE(two);
  EXPECT_THAT(Nodes(*two), ElementsAre("three-free"));
  EXPECT_EQ(two->pods[0].placement.gpu_mask, Mask(5, 2));
  auto one = Place("one");
  ASSERT_TRUE(one);
  EXPECT_THAT(Nodes(*one), ElementsAre("one-free"));
  EXPECT_EQ(one->pods[0].placement.gpu_mask, Mask(7, 1));
  EXPECT_FALSE(Place("nine"));
}

TEST_F(PlacementTest, CpuMemoryAndPodLimitsCount) {
  // Best fit would try busy-cpu first (fewest free GPUs), then no-pods (listed before roomy).
  b_.Node("busy-cpu", 8).Cpu(4000);
  b_.Node("no-pods", 8).MaxPods(0);
  b_.Node("roomy", 8);
  Fill("busy-cpu", 4);
  b_.Workload("cpu-heavy", "q").Pods(1, 1).Cpu(8000);
  b_.Workload("mem-heavy", "q").Pods(1, 1).Memory(2048 * testing::kGi);
  Build();
  auto p = Place("cpu-heavy");
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("roomy"));
  EXPECT_FALSE(Place("mem-heavy"));
}

TEST_F(PlacementTest, EightSingleGpuPodsLandOnOneNode) {
  b_.Node("half", 8);
  b_.Node("full-free", 8);
  b_.Node("six", 8);
  Fill("half", 4);
  Fill("six", 2);
  b_.Workload("gang", "q").Pods(8, 1);
  Build();
  auto plan = Place("gang");
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->pods.size(), 8u);
  uint64_t masks = 0;
  for (size_t i = 0; i < plan->pods.size(); ++i) {
    EXPECT_EQ(NodeOf(plan->pods[i]), "full-free");
    EXPECT_EQ(plan->pods[i].pod_set, 0);
    EXPECT_EQ(plan->pods[i].replica, static_cast<int32_t>(i));
    EXPECT_EQ(masks & plan->pods[i].placement.gpu_mask, 0u);
    masks |= plan->pods[i].placement.gpu_mask;
  }
  EXPECT_EQ(masks, Mask(0, 8));
}

TEST_F(PlacementTest, MultiNodeGangStaysInOneBlock) {
  // The only block with room for 2x8 is b2; b1 has 12 free GPUs, b3 has 8.
  b_.Node("b1-a", 8).Block("b1");
  b_.Node("b1-b", 8).Block("b1");
  b_.Node("b2-a", 8).Block("b2");
  b_.Node("b2-b", 8).Block("b2");
  b_.Node("b3-a", 8).Block("b3");
  Fill("b1-b", 4);
  b_.Workload("gang", "q").Pods(2, 8);
  Build();
  auto plan = Place("gang");
  ASSERT_TRUE(plan);
  const std::vector<std::string> nodes = Nodes(*plan);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()),
            (std::set<std::string>{"b2-a", "b2-b"}));
}

TEST_F(PlacementTest, MultiNodeGangPicksTightestBlock) {
  // b1 has exactly 16 free GPUs, b2 has 24: the gang goes to b1.
  b_.Node("b2-a", 8).Block("b2");
  b_.Node("b2-b", 8).Block("b2");
  b_.Node("b2-c", 8).Block("b2");
  b_.Node("b1-a", 8).Block("b1");
  b_.Node("b1-b", 8).Block("b1");
  b_.Workload("gang", "q").Pods(2, 8);
  Build();
  auto plan = Place("gang");
  ASSERT_TRUE(plan);
  const std::vector<std::string> nodes = Nodes(*plan);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()),
            (std::set<std::string>{"b1-a", "b1-b"}));
}

TEST_F(PlacementTest, NvlinkDomainBeforeBlock) {
  // Both blocks could hold 2x4; the NVLink domain (finest level) decides.
  b_.Node("a", 4).Block("b1");
  b_.Node("b", 4).Block("b1");
  b_.Node("c", 4).Block("b1").Nvlink("rack");
  b_.Node("d", 4).Block("b1").Nvlink("rack");
  b_.Workload("gang", "q").Pods(2, 4);
  Build();
  auto plan = Place("gang");
  ASSERT_TRUE(plan);
  const std::vector<std::string> nodes = Nodes(*plan);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()), (std::set<std::string>{"c", "d"}));
}

TEST_F(PlacementTest, GangSpreadsWhenNoDomainHoldsIt) {
  b_.Node("a", 8).Block("b1");
  b_.Node("b", 8).Block("b2");
  b_.Workload("gang", "q").Pods(2, 8);
  b_.Workload("too-big", "q").Pods(3, 8);
  Build();
  auto plan = Place("gang");
  ASSERT_TRUE(plan);
  const std::vector<std::string> nodes = Nodes(*plan);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()), (std::set<std::string>{"a", "b"}));
  EXPECT_FALSE(Place("too-big"));
  EXPECT_TRUE(Place("too-big", 2));  // the first two pods only
}

TEST_F(PlacementTest, SelectorTaintAndModelFilters) {
  // Each filtered node is fuller than "plain", so best fit would pick it if it were allowed.
  b_.Node("plain", 8).Label("pool", "a");
  b_.Node("other-pool", 8).Label("pool", "b");
  b_.Node("tainted", 8).Label("pool", "a").Taint("dedicated", "infer");
  b_.Node("a100", 8, "A100").Label("pool", "a");
  for (const char* n : {"other-pool", "tainted", "a100"}) Fill(n, 4);
  b_.Workload("pool-a-h100", "q").Pods(1, 2).Selector("pool", "a").Models({"H100"});
  b_.Workload("tolerant", "q")
      .Pods(1, 2)
      .Selector("pool", "a")
      .Tolerate("dedicated", "infer")
      .Models({"H100"});
  b_.Workload("wrong-value", "q").Pods(1, 2).Tolerate("dedicated", "train").Models({"H100"});
  b_.Workload("a100-only", "q").Pods(1, 2).Models({"A100"});
  b_.Workload("b200-only", "q").Pods(1, 2).Models({"B200"});
  b_.Workload("pool-c", "q").Pods(1, 2).Selector("pool", "c");
  Build();
  auto p = Place("pool-a-h100");
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("plain"));
  p = Place("tolerant");
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("tainted"));  // tolerated, and fuller than "plain"
  p = Place("wrong-value");
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("other-pool"));  // not "tainted"
  p = Place("a100-only");
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("a100"));
  EXPECT_FALSE(Place("b200-only"));
  EXPECT_FALSE(Place("pool-c"));
}

TEST_F(PlacementTest, PreferNoScheduleTaintDoesNotFilter) {
  b_.Node("soft", 8).Taint("spot", "true", TaintEffect::kPreferNoSchedule);
  b_.Workload("w", "q").Pods(1, 8);
  Build();
  EXPECT_TRUE(Place("w"));
}

TEST_F(PlacementTest, CordonedAndUnhealthyAreAvoided) {
  b_.Node("cordoned", 8).Cordon();
  b_.Node("sick", 8).Unhealthy({0, 1, 2});
  b_.Workload("five", "q").Pods(1, 5);
  b_.Workload("six", "q").Pods(1, 6);
  Build();
  auto p = Place("five");
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("sick"));
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(3, 5));
  EXPECT_FALSE(Place("six"));
}

// --- Shares of a GPU ---

// Two halves share one GPU; a whole-GPU pod never lands on a GPU holding a share, so an 8-GPU pod
// goes to the node without one; a share goes beside the shares of the GPU it leaves least room on.
TEST_F(PlacementTest, SharesPackOntoTheFullestSharedGpu) {
  b_.Node("a", 8);
  b_.Node("b", 8);
  b_.Workload("half", "q").Shares(1, 500).Running("a", Mask(3, 1));
  b_.Workload("seventy", "q").Shares(1, 700).Running("a", Mask(5, 1));
  b_.Workload("twenty", "q").Shares(1, 200).Running("b", Mask(1, 1));
  b_.Workload("whole8", "q").Pods(1, 8);
  b_.Workload("share3", "q").Shares(1, 300);
  b_.Workload("share5", "q").Shares(1, 500);
  b_.Workload("share9", "q").Shares(1, 900);
  Build();
  // Node a holds shares on GPUs 3 and 5, node b on GPU 1: neither has 8 free GPUs.
  EXPECT_FALSE(Place("whole8"));
  // 0.3 fits beside 0.7 exactly (GPU 5 of a), beside 0.5 and 0.2 with more left.
  auto p = Place("share3");
  ASSERT_TRUE(p);
  EXPECT_EQ(NodeOf(p->pods[0]), "a");
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(5, 1));
  p = Place("share5");
  ASSERT_TRUE(p);
  EXPECT_EQ(NodeOf(p->pods[0]), "a");
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(3, 1));
  // 0.9 fits beside no share: a free GPU of the fullest node (a has 6 free, b 7).
  p = Place("share9");
  ASSERT_TRUE(p);
  EXPECT_EQ(NodeOf(p->pods[0]), "a");
  EXPECT_EQ(std::popcount(p->pods[0].placement.gpu_mask), 1);
  EXPECT_EQ(p->pods[0].placement.gpu_mask & (Mask(3, 1) | Mask(5, 1)), 0u);
}

// A share that asks for GPU memory fits only where that much is left beside the other shares, and
// a free GPU only when it has that much; a GPU whose memory is unknown takes no such share.
TEST_F(PlacementTest, SharesAskingForMemoryFitWhereTheMemoryIs) {
  b_.Node("small", 2).GpuMemory(24576);
  b_.Node("unknown", 2).GpuMemory(0);
  b_.Node("big", 2).GpuMemory(81920);
  b_.Workload("held", "q").Shares(1, 200, 60000).Running("big", Mask(0, 1));
  b_.Workload("mem30g", "q").Shares(1, 100, 30720);
  b_.Workload("mem20g", "q").Shares(1, 100, 20480);
  b_.Workload("compute", "q").Shares(1, 100);
  Build();
  // 30 GiB: not beside the 60,000 MiB on big's GPU 0, not on small's 24 GiB GPUs, not on GPUs of
  // unknown memory: big's free GPU 1.
  auto p = Place("mem30g");
  ASSERT_TRUE(p);
  EXPECT_EQ(NodeOf(p->pods[0]), "big");
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(1, 1));
  // 20 GiB fits beside the 60,000 MiB (81,920 in all).
  p = Place("mem20g");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(0, 1));
  EXPECT_EQ(NodeOf(p->pods[0]), "big");
  // Without memory, the shared GPU is the fullest that fits.
  p = Place("compute");
  ASSERT_TRUE(p);
  EXPECT_EQ(NodeOf(p->pods[0]), "big");
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(0, 1));
}

// A gang of shares counts what its own pods take: two GPUs hold four 0.4 shares, not five. The
// gang is placed whole or not at all.
TEST_F(PlacementTest, GangOfSharesIsPlacedWholeOrNotAtAll) {
  b_.Node("a", 2);
  b_.Workload("gang", "q").Shares(5, 400);
  b_.Workload("gang4", "q").Shares(4, 400);
  b_.Workload("mixed", "q").Pods(1, 1).Shares(3, 500);
  Build();
  EXPECT_FALSE(Place("gang"));  // two GPUs hold four 0.4 shares, not five
  auto p = Place("gang4");
  ASSERT_TRUE(p);
  std::map<uint64_t, int> per_gpu;
  for (const PodAssignment& a : p->pods) ++per_gpu[a.placement.gpu_mask];
  EXPECT_EQ(per_gpu, (std::map<uint64_t, int>{{Mask(0, 1), 2}, {Mask(1, 1), 2}}));
  // A whole GPU and three halves: one GPU whole, the other holds two halves, the third finds no
  // room.
  EXPECT_FALSE(Place("mixed"));
  EXPECT_TRUE(Place("mixed", 3));
}

TEST_F(PlacementTest, ExplainNoFitForAShareNamesGpusWithoutRoom) {
  b_.Node("a", 1);
  b_.Node("b", 0);
  b_.Workload("big-share", "q").Shares(1, 800).Running("a", Mask(0, 1));
  b_.Workload("share", "q").Shares(1, 300);
  Build();
  EXPECT_FALSE(Place("share"));
  EXPECT_EQ(Explain("share").message,
            "no node fits a pod of 0.3 gpu: 1 node too few GPUs, 1 node no GPU with room for "
            "the share");
}

TEST(PickGpusTest, PrefersTightestIsland) {
  const std::vector<uint64_t> islands = {0x0F, 0xF0};
  const uint64_t free = 0xEF;  // GPU 4 busy: island 1 has 3 free, island 0 has 4
  EXPECT_EQ(PickGpus(free, islands, 3), 0xE0u);
  EXPECT_EQ(PickGpus(free, islands, 4), 0x0Fu);
  EXPECT_EQ(PickGpus(free, islands, 2), 0x60u);  // lowest two of the tighter island
  EXPECT_EQ(PickGpus(free, islands, 5), 0x2Fu);  // no island fits: lowest free GPUs
  EXPECT_EQ(PickGpus(free, islands, 7), free);
  EXPECT_EQ(PickGpus(free, islands, 0), 0u);
  EXPECT_EQ(PickGpus(0xFF, std::vector<uint64_t>{0xFF}, 1), 0x01u);
}

TEST_F(PlacementTest, PlacementUsesNodeIslands) {
  b_.Node("n", 8).Islands({0, 0, 0, 0, 1, 1, 1, 1});
  Fill("n", 1);  // GPU 0 busy: island 0 has 3 free, island 1 has 4
  b_.Workload("three", "q").Pods(1, 3);
  b_.Workload("four", "q").Pods(1, 4);
  Build();
  auto p = Place("three");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(1, 3));
  p = Place("four");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(4, 4));
}

TEST_F(PlacementTest, ExplainNoFitCountsNodesByFirstCause) {
  b_.Node("t1", 8).Taint("dedicated", "infer");
  b_.Node("t2", 8).Taint("dedicated", "infer");
  b_.Node("small", 4);
  b_.Node("busy", 8);
  b_.Node("cordoned", 8).Cordon();
  Fill("busy", 2);
  b_.Workload("big", "q").Pods(1, 8);
  Build();
  EXPECT_FALSE(Place("big"));
  const PlacementExplanation e = Explain("big");
  EXPECT_EQ(e.message,
            "no node fits a pod of 8 gpu: 2 nodes untolerated taint, 1 node cordoned, 1 node too "
            "few GPUs, 1 node too few free GPUs");
  EXPECT_THAT(e.message, HasSubstr("no node fits a pod of 8 gpu"));
  EXPECT_THAT(e.message, HasSubstr("2 nodes untolerated taint"));
}

TEST_F(PlacementTest, ExplainNoFitOtherCauses) {
  b_.Node("sick", 8).Unhealthy({0});
  b_.Node("cpu", 8).Cpu(1000);
  b_.Node("a100", 8, "A100");
  b_.Workload("w", "q").Pods(1, 8).Cpu(2000).Models({"H100"});
  b_.Workload("sel", "q").Pods(1, 1).Selector("pool", "x");
  Build();
  EXPECT_EQ(Explain("w").message,
            "no node fits a pod of 8 gpu, 2 cpu: 1 node wrong GPU model, 1 node unhealthy GPUs, "
            "1 node insufficient cpu");
  EXPECT_EQ(Explain("sel").message, "no node fits a pod of 1 gpu: 3 nodes node selector mismatch");
}

TEST_F(PlacementTest, ExplainNoFitOnEmptyCluster) {
  b_.Workload("w", "q").Pods(1, 1);
  Build();
  EXPECT_EQ(Explain("w").message, "no node fits a pod of 1 gpu: the cluster has no nodes");
}

TEST_F(PlacementTest, ExplainGangThatFitsOnlyPodByPod) {
  b_.Node("a", 8);
  b_.Node("b", 8).Unhealthy({7});
  b_.Workload("gang", "q").Pods(16, 1);
  Build();
  EXPECT_FALSE(Place("gang"));
  const PlacementExplanation e = Explain("gang");
  EXPECT_EQ(e.message, "gang of 16 pods (16 gpu) does not fit at once: room for 15 of its pods");
  EXPECT_THAT(e.details, ElementsAre("pod set ps0: 2 nodes have room for 15 of its 16 pods"));
}

// A gang whose pod sets fit one by one but not together says so, and never counts room for more
// pods than a set has; a gang's pod set that fits nowhere is named as the gang's.
TEST_F(PlacementTest, ExplainGangNamesItsPodSetsAndNeverOvercounts) {
  b_.Node("a", 4);
  b_.Workload("pair", "q").Pods(1, 4).Pods(1, 4);
  b_.Workload("mixed", "q").Pods(2, 1).Pods(1, 8);
  Build();
  EXPECT_FALSE(Place("pair"));
  PlacementExplanation e = Explain("pair");
  EXPECT_EQ(e.message,
            "gang of 2 pods (8 gpu) does not fit at once: each pod set has room for its pods "
            "alone, not all of them together");
  EXPECT_THAT(e.details, ElementsAre("pod set ps0: 1 node has room for 1 of its 1 pods",
                                     "pod set ps1: 1 node has room for 1 of its 1 pods"));
  e = Explain("mixed");
  EXPECT_EQ(e.message,
            "no node fits a pod of pod set ps1 (8 gpu; 1 of the gang's 3 pods): 1 node too few "
            "GPUs");
}

TEST_F(PlacementTest, OverlayPlacementUsesReleasedCapacity) {
  b_.Node("n0", 8);
  b_.Node("n1", 8);
  b_.Workload("victim", "q").Pods(1, 8).Running("n1", Mask(0, 8));
  b_.Workload("other", "q").Pods(1, 6).Running("n0", Mask(0, 6));
  b_.Workload("wants", "q").Pods(1, 4);
  b_.Workload("gang", "q").Pods(2, 4);
  Build();
  EXPECT_FALSE(Place("wants"));
  CapacityOverlay o;
  const Workload& victim = b_.snapshot().workloads[b_.id("victim").index()];
  o.Add(*state_, victim.placements[0], victim.PlacementRequest(0));
  EXPECT_EQ(o.gpus(), 8);
  EXPECT_EQ(o.nodes(), std::vector<int32_t>{1});
  auto p = Place("wants", -1, &o);
  ASSERT_TRUE(p);
  EXPECT_THAT(Nodes(*p), ElementsAre("n1"));
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(0, 4));
  auto g = Place("gang", -1, &o);
  ASSERT_TRUE(g);
  EXPECT_THAT(Nodes(*g), ElementsAre("n1", "n1"));
  // The overlay is an addition for this call only: the state did not change.
  EXPECT_EQ(state_->free_gpus(NodeId{1}), 0);
  EXPECT_TRUE(state_->CheckInvariants().ok());
}

TEST_F(PlacementTest, OverlayKeepsUnhealthyGpusOut) {
  b_.Node("n", 4).Unhealthy({0});
  b_.Workload("victim", "q").Pods(1, 4).Running("n", Mask(0, 4));
  b_.Workload("wants", "q").Pods(1, 4);
  b_.Workload("wants3", "q").Pods(1, 3);
  Build();
  CapacityOverlay o;
  const Workload& victim = b_.snapshot().workloads[b_.id("victim").index()];
  o.Add(*state_, victim.placements[0], victim.PlacementRequest(0));
  EXPECT_EQ(o.gpus(), 3);
  EXPECT_FALSE(Place("wants", -1, &o));
  auto p = Place("wants3", -1, &o);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->pods[0].placement.gpu_mask, Mask(1, 3));
}

TEST_F(PlacementTest, MixedPodSetsPlaceLargestFirstAndReportInPodSetOrder) {
  b_.Node("n0", 8);
  b_.Node("n1", 2);
  b_.Workload("mixed", "q").Pods(2, 1).Pods(1, 6);
  Build();
  auto p = Place("mixed");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->pods.size(), 3u);
  EXPECT_EQ(p->pods[0].pod_set, 0);
  EXPECT_EQ(p->pods[1].pod_set, 0);
  EXPECT_EQ(p->pods[1].replica, 1);
  EXPECT_EQ(p->pods[2].pod_set, 1);
  EXPECT_THAT(Nodes(*p), ElementsAre("n0", "n0", "n0"));
}

TEST_F(PlacementTest, FeasibilityCacheSharesConstraintSets) {
  b_.Node("n", 8).Label("pool", "a");
  b_.Workload("x", "q").Pods(1, 1).Selector("pool", "a");
  b_.Workload("y", "q").Pods(3, 2).Selector("pool", "a");
  b_.Workload("z", "q").Pods(1, 1).Selector("pool", "b");
  Build();
  const auto& ws = b_.snapshot().workloads;
  int32_t x = -1, y = -1, z = -1;
  feas_->For(ws[0].pod_sets[0], &x);
  feas_->For(ws[1].pod_sets[0], &y);
  EXPECT_EQ(feas_->For(ws[2].pod_sets[0], &z)[0], NodeFilter::kNodeSelector);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

// The first Place of a workload whose pod sets have distinct, uncached constraints: the cache
// grows while the policy holds the filters it already looked up.
TEST_F(PlacementTest, PodSetsWithDistinctConstraintsOnAFreshCache) {
  b_.Node("a", 8).Label("pool", "a");
  b_.Node("b", 8).Label("pool", "b");
  b_.Workload("w", "q")
      .Pods(1, 4)
      .Selector("pool", "a")
      .Pods(1, 2)
      .Selector("pool", "b")
      .Pods(1, 1)
      .Models({"H100"})
      .Pods(2, 1)
      .Tolerate("x");
  Build();
  auto p = Place("w");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->pods.size(), 5u);
  EXPECT_EQ(NodeOf(p->pods[0]), "a");
  EXPECT_EQ(NodeOf(p->pods[1]), "b");
}

}  // namespace
}  // namespace chamber::core
