// Where the engine puts a share (share_scores.h): against trying every node and GPU, as the state
// changes under it through claims, holds, releases and roll-backs; the mix a snapshot gives; and
// a scenario worked out by hand in
// src/core/io/test/scenarios/share-goes-where-it-fragments-least.yaml.
#include "core/share_scores.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/placement.h"
#include "core/test/generators.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using testing::Chance;
using testing::Pick;

// The choice a scan of every node and GPU makes: least increase of the node's fragmentation
// (NodeFragmentation, recomputed in full), then a node of `gang` (the nodes a gang's earlier pods
// went to), then least compute left, then a GPU a reservation pod holds, then lowest node and
// GPU.
struct Scan {
  int64_t delta = 0;
  bool apart = true;  // not a node of the gang's
  int32_t left = 0;
  bool reserved = false;
  int32_t node = -1;
  int gpu = -1;
  auto Key() const { return std::tuple(delta, apart, left, !reserved, node, gpu); }
};

std::optional<Scan> ScanEveryGpu(const ClusterState& state, const PodSet& ps,
                                 const std::vector<NodeFilter>& filter,
                                 std::span<const MixClass> mix,
                                 std::span<const int32_t> gang = {}) {
  std::optional<Scan> best;
  StateNodeFree f;
  for (int32_t n = 0; n < static_cast<int32_t>(state.num_nodes()); ++n) {
    const NodeId id{n};
    if (filter[static_cast<size_t>(n)] != NodeFilter::kOk ||
        !state.free(id).Fits(ps.request, ps.mig))
      continue;
    const uint64_t room = state.free(id).gpu_mask | state.share_open_mask(id);
    for (int g = 0; g < state.facts(id).gpu_count; ++g) {
      if ((room >> g & 1) == 0) continue;
      const bool free_gpu = (state.free(id).gpu_mask >> g & 1) != 0;
      const bool fits = free_gpu
                            ? ps.gpu_memory_mib <= state.gpu_memory_mib(id, g)
                            : state.ShareFits(id, g, ps.request.gpu_milli(), ps.gpu_memory_mib);
      if (!fits) continue;
      FillNodeFree(state, n, f);
      const int64_t before = NodeFragmentation(f.node, mix);
      GpuFree& gpu = f.gpus[static_cast<size_t>(g)];
      gpu.milli -= static_cast<int32_t>(ps.request.gpu_milli());
      gpu.memory_mib -= ps.gpu_memory_mib;
      f.node.cpu_milli -= ps.request.cpu_milli();
      f.node.memory_bytes -= ps.request.memory_bytes();
      const bool reserved = (state.node(id).reserved_gpu_mask >> g & 1) != 0;
      const bool apart = std::find(gang.begin(), gang.end(), n) == gang.end();
      const Scan s{NodeFragmentation(f.node, mix) - before, apart, gpu.milli, reserved, n, g};
      if (!best || s.Key() < best->Key()) best = s;
    }
  }
  return best;
}

// Share pod sets of the snapshot, or one made up when it has none.
std::vector<PodSet> SharePodSets(const Snapshot& s) {
  std::vector<PodSet> out;
  for (const Workload& w : s.workloads)
    for (const PodSet& ps : w.pod_sets)
      if (ps.request.gpu_share()) out.push_back(ps);
  if (out.empty()) {
    PodSet ps;
    ps.request = Resources::OfMilli(250, 1000, 0);  // a quarter of a GPU, one core
    out.push_back(ps);
  }
  return out;
}

// What the snapshot's running pods hold, claimed on `state`.
void ClaimRunning(const Snapshot& s, ClusterState& state) {
  for (const Workload& w : s.workloads) {
    if (w.state != WorkloadState::kRunning) continue;
    for (size_t i = 0; i < w.placements.size(); ++i) {
      const PodSet* ps = w.PlacementPodSet(i);
      if (ps != nullptr)
        (void)state.ClaimExisting(w.placements[i], ps->request, ps->gpu_memory_mib, ps->mig);
    }
  }
}

RC_GTEST_PROP(ShareScoresProperty, ChooseAsAScanOfEveryGpuAsTheStateChanges, ()) {
  const Snapshot s = testing::GenShareSnapshot();
  ClusterState state(s);
  ClaimRunning(s, state);
  FeasibilityCache feas(state, &s);
  ShareScores* scores = feas.ScoresFor(state);
  RC_ASSERT(scores != nullptr);
  RC_ASSERT(feas.ScoresFor(ClusterState(s)) == nullptr);  // another state: none
  const std::vector<MixClass> mix(scores->mix().begin(), scores->mix().end());
  RC_ASSERT(mix == SnapshotShareMix(s));
  const std::vector<PodSet> sets = SharePodSets(s);
  struct Held {
    PodPlacement p;
    PodSet ps;
  };
  std::vector<Held> held;
  bool journaling = false;
  int placed = 0, on_reserved = 0;
  for (int step = 0; step < 60; ++step) {
    const int action = Pick(0, 9);
    if (action < 6) {
      const PodSet& ps = sets[static_cast<size_t>(Pick(0, static_cast<int>(sets.size()) - 1))];
      int32_t id = -1;
      const std::vector<NodeFilter>& filter = feas.For(ps, &id);
      const std::optional<ShareScores::Spot> got = scores->Choose(ps, id, filter);
      const std::optional<Scan> want = ScanEveryGpu(state, ps, filter, mix);
      RC_ASSERT(got.has_value() == want.has_value());
      if (!got) continue;
      RC_ASSERT(got->node == want->node);
      RC_ASSERT(got->gpu == want->gpu);
      if (want->reserved) ++on_reserved;
      const PodPlacement p{NodeId{got->node}, uint64_t{1} << got->gpu};
      state.Claim(p, ps.request, ps.gpu_memory_mib);
      held.push_back({p, ps});
      ++placed;
    } else if (action < 8 && !held.empty()) {
      const size_t i = static_cast<size_t>(Pick(0, static_cast<int>(held.size()) - 1));
      state.Release(held[i].p, held[i].ps.request, held[i].ps.gpu_memory_mib);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (!journaling) {
      state.BeginJournal();
      journaling = true;
      held.clear();  // claimed before the journal: kept, no longer released here
    } else {
      state.RollBack();  // what was claimed since BeginJournal is gone
      journaling = false;
      held.clear();
    }
  }
  RC_ASSERT(state.CheckInvariants().ok());
  RC_CLASSIFY(placed >= 10, "10 or more shares placed");
  RC_CLASSIFY(on_reserved > 0, "a share went on a GPU a reservation pod holds");
}

// A gang of shares on free capacity (TopologyBinPacking): each pod, in pod-set and replica order,
// goes where a scan of every node and GPU, with the gang's earlier pods claimed, puts it; the
// gang waits exactly when some pod finds no room. Between gangs the state changes (a gang's pods
// bound, shares released), so a gang's try that left the scores other than it found them fails
// the choices after it.
RC_GTEST_PROP(ShareScoresProperty, AGangOfSharesGoesPodByPodWhereEachLeastRaisesFragmentation, ()) {
  const Snapshot s = testing::GenShareSnapshot();
  ClusterState state(s);
  ClaimRunning(s, state);
  FeasibilityCache feas(state, &s);
  ShareScores* scores = feas.ScoresFor(state);
  RC_ASSERT(scores != nullptr);
  const std::vector<MixClass> mix(scores->mix().begin(), scores->mix().end());
  const std::vector<PodSet> sets = SharePodSets(s);
  struct Held {
    PodPlacement p;
    Resources request;
    int64_t gpu_memory_mib;
  };
  std::vector<Held> held;
  auto expect_single = [&](const PodSet& ps) {
    int32_t id = -1;
    const std::vector<NodeFilter>& filter = feas.For(ps, &id);
    const std::optional<ShareScores::Spot> got = scores->Choose(ps, id, filter);
    const std::optional<Scan> want = ScanEveryGpu(state, ps, filter, mix);
    RC_ASSERT(got.has_value() == want.has_value());
    if (got) RC_ASSERT(std::pair(got->node, got->gpu) == std::pair(want->node, want->gpu));
  };
  int gangs_placed = 0, together = 0, spread = 0, waiting = 0;
  for (int step = 0; step < 24; ++step) {
    const int action = Pick(0, 9);
    if (action < 6) {
      Workload gang;
      gang.name = "ns/gang";
      gang.queue = "q";
      for (int k = Pick(1, 2); k > 0; --k) {
        gang.pod_sets.push_back(
            sets[static_cast<size_t>(Pick(0, static_cast<int>(sets.size()) - 1))]);
        gang.pod_sets.back().count = Pick(1, 4);
      }
      int32_t pods = 0;
      for (const PodSet& ps : gang.pod_sets) pods += ps.count;
      if (pods < 2) gang.pod_sets.front().count = pods = 2;
      const std::optional<PlacementPlan> got =
          TopologyBinPacking().Place(state, feas, gang, pods, nullptr);
      // A share of the gang's first pod set right after, on the state the try found: the try
      // left the scores it read as it found them.
      expect_single(gang.pod_sets.front());
      // The scan, pod by pod, each claimed before the next; rolled back after.
      state.BeginJournal();
      std::vector<int32_t> nodes;
      std::vector<PodPlacement> want;
      bool fits = true;
      for (const PodSet& ps : gang.pod_sets) {
        for (int32_t r = 0; r < ps.count && fits; ++r) {
          const std::optional<Scan> spot = ScanEveryGpu(state, ps, feas.For(ps), mix, nodes);
          if (!spot) {
            fits = false;
            break;
          }
          const PodPlacement p{NodeId{spot->node}, uint64_t{1} << spot->gpu};
          state.Claim(p, ps.request, ps.gpu_memory_mib);
          want.push_back(p);
          if (std::find(nodes.begin(), nodes.end(), spot->node) == nodes.end())
            nodes.push_back(spot->node);
        }
      }
      state.RollBack();
      RC_ASSERT(got.has_value() == fits);
      if (!got) {
        ++waiting;
        continue;
      }
      RC_ASSERT(got->pods.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) RC_ASSERT(got->pods[i].placement == want[i]);
      ++gangs_placed;
      ++(nodes.size() == 1 ? together : spread);
      if (Chance(50)) {  // bound: the next gangs find it there
        for (const PodAssignment& a : got->pods) {
          const PodSet& ps = gang.pod_sets[static_cast<size_t>(a.pod_set)];
          state.Claim(a.placement, ps.request, ps.gpu_memory_mib);
          held.push_back({a.placement, ps.request, ps.gpu_memory_mib});
        }
      }
    } else if (!held.empty()) {
      const size_t i = static_cast<size_t>(Pick(0, static_cast<int>(held.size()) - 1));
      state.Release(held[i].p, held[i].request, held[i].gpu_memory_mib);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    }
    // A single share after the state changed.
    expect_single(sets[static_cast<size_t>(Pick(0, static_cast<int>(sets.size()) - 1))]);
  }
  RC_ASSERT(state.CheckInvariants().ok());
  RC_CLASSIFY(together > 0, "a gang on one node");
  RC_CLASSIFY(spread > 0, "a gang over several nodes");
  RC_CLASSIFY(waiting > 0, "a gang waits");
  RC_CLASSIFY(gangs_placed >= 5, "5 or more gangs placed");
}

TEST(ShareScoresTest, ANodesGpusAsTheSharingModelSeesThem) {
  // Four GPUs of 80 GiB: 0 free, 1 holding 0.3 and 10 GiB of shares, 2 held whole, 3 failed.
  testing::SnapshotBuilder b;
  b.Node("n", 4).GpuMemory(81920).Unhealthy({3}).MaxPods(3);
  ClusterState state(b.snapshot());
  const NodeId n{0};
  state.Claim({n, 0b0010}, Resources::OfMilli(300, 2000, 0), 10240);
  state.Claim({n, 0b0100}, Resources::Of(1, 4000, 0));
  StateNodeFree f;
  FillNodeFree(state, 0, f);
  ASSERT_EQ(f.gpus.size(), 4u);
  EXPECT_EQ(f.gpus[0].milli, 1000);
  EXPECT_TRUE(f.gpus[0].EntirelyFree() && f.gpus[0].Shareable());
  EXPECT_EQ(f.gpus[1].milli, 700);
  EXPECT_EQ(f.gpus[1].memory_mib, 81920 - 10240);
  EXPECT_FALSE(f.gpus[1].EntirelyFree());
  EXPECT_EQ(f.gpus[2].UsableMilli(), 0);
  EXPECT_EQ(f.gpus[3].UsableMilli(), 0);
  EXPECT_EQ(f.node.cpu_milli, state.free(n).cpu_milli);
  EXPECT_EQ(f.node.gpus.size(), 4u);
  // With its last pod slot taken, the node fits no class.
  state.Claim({n, 0b0001}, Resources::OfMilli(100, 0, 0));
  FillNodeFree(state, 0, f);
  EXPECT_EQ(f.gpus[0].milli, 900);
  EXPECT_EQ(f.node.cpu_milli, -1);
  EXPECT_EQ(NodeScorer(f.node, {}).Best(GpuShare(100)).delta, NodeScorer::kNoPlacement);
}

TEST(ShareScoresTest, TheMixWeighsEachClassByItsPodsDemand) {
  testing::SnapshotBuilder b;
  b.Node("n", 8);
  b.Queue("a");
  b.Workload("a/nb", "a").Shares(3, 250).Cpu(2000);
  b.Workload("a/train", "a").Pods(2, 1).Cpu(8000);
  b.Workload("a/nb2", "a").Shares(1, 250).Cpu(2000);
  b.Workload("a/cpu", "a").Pods(4, 0).Cpu(1000);
  const std::vector<MixClass> mix = SnapshotShareMix(b.snapshot());
  ASSERT_EQ(mix.size(), 2u);
  // Two 1-GPU pods (2,000) weigh more than four quarter shares (1,000); CPU-only pods are not
  // part of the mix.
  EXPECT_EQ(mix[0].request.gpus, 1);
  EXPECT_EQ(mix[0].request.cpu_milli, 8000);
  EXPECT_EQ(mix[0].weight, 2000);
  EXPECT_EQ(mix[1].request.gpu_milli, 250);
  EXPECT_EQ(mix[1].weight, 1000);
  EXPECT_EQ(SnapshotShareMix(b.snapshot(), 1).size(), 1u);
}

}  // namespace
}  // namespace chamber::core
