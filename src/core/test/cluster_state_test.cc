#include "core/cluster_state.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using ::testing::HasSubstr;
using testing::Mask;
using testing::SnapshotBuilder;
using ::testing::UnorderedElementsAre;

Resources Gpus(int64_t n, int64_t cpu = 0) { return Resources::Of(n, cpu, 0); }

// Three nodes: n0 and n1 in block b1 / zone z1 (n0 also in NVLink domain d1), n2 in b2 / z1.
SnapshotBuilder ThreeNodes() {
  SnapshotBuilder b;
  b.Node("n0", 8).Block("b1").Zone("z1").Nvlink("d1");
  b.Node("n1", 8).Block("b1").Zone("z1");
  b.Node("n2", 4).Block("b2").Zone("z1");
  return b;
}

TEST(ClusterStateTest, InitialBucketsAndDomains) {
  SnapshotBuilder b = ThreeNodes();
  const ClusterState s(b.snapshot());
  EXPECT_EQ(s.num_nodes(), 3u);
  EXPECT_EQ(s.max_gpus_per_node(), 8);
  EXPECT_THAT(s.nodes_with_free_gpus(8), UnorderedElementsAre(0, 1));
  EXPECT_THAT(s.nodes_with_free_gpus(4), UnorderedElementsAre(2));
  EXPECT_TRUE(s.nodes_with_free_gpus(0).empty());
  EXPECT_EQ(s.num_domains(DomainLevel::kNvlink), 1);
  EXPECT_EQ(s.num_domains(DomainLevel::kBlock), 2);
  EXPECT_EQ(s.num_domains(DomainLevel::kZone), 1);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kNvlink, 0), 8);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 0), 16);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 1), 4);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kZone, 0), 20);
  EXPECT_THAT(s.domain_nodes(DomainLevel::kBlock, 0), UnorderedElementsAre(0, 1));
  EXPECT_EQ(s.capacity(), Resources::Of(20, 3 * 128000, 3 * 1024 * testing::kGi));
  EXPECT_EQ(s.total_free(), s.capacity());
  EXPECT_EQ(s.model_id("H100"), 0);
  EXPECT_EQ(s.model_id("A100"), -1);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// A session passes the NodeIndex it built for the same nodes; one built from another number of
// nodes is ignored. Either way the state holds what a fresh one holds.
TEST(ClusterStateTest, KeptNodeIndexGivesTheFreshState) {
  SnapshotBuilder b = ThreeNodes();
  const Snapshot& snap = b.snapshot();
  const auto kept = std::make_shared<const NodeIndex>(snap.nodes);
  const auto fewer = std::make_shared<const NodeIndex>(
      std::vector<Node>(snap.nodes.begin(), snap.nodes.end() - 1));
  ClusterState fresh(snap), with_kept(snap, kept), with_fewer(snap, fewer);
  for (ClusterState* s : {&fresh, &with_kept, &with_fewer}) {
    s->Claim({NodeId{0}, 0x0f}, Gpus(4));
    s->Claim({NodeId{2}, 0x01}, Gpus(1));
    ASSERT_TRUE(s->CheckInvariants().ok());
  }
  for (const ClusterState* s : {&with_kept, &with_fewer}) {
    EXPECT_EQ(s->num_nodes(), fresh.num_nodes());
    EXPECT_EQ(s->capacity(), fresh.capacity());
    EXPECT_EQ(s->total_free(), fresh.total_free());
    for (int k = 0; k <= fresh.max_gpus_per_node(); ++k)
      EXPECT_EQ(s->nodes_with_free_gpus(k), fresh.nodes_with_free_gpus(k));
  }
}

TEST(ClusterStateTest, ClaimAndReleaseKeepIndexesInStep) {
  SnapshotBuilder b = ThreeNodes();
  ClusterState s(b.snapshot());
  const PodPlacement p{NodeId{0}, Mask(0, 3)};
  s.Claim(p, Gpus(3, 1000));
  EXPECT_EQ(s.free_gpus(NodeId{0}), 5);
  EXPECT_EQ(s.free(NodeId{0}).gpu_mask, Mask(3, 5));
  EXPECT_EQ(s.free(NodeId{0}).cpu_milli, 127000);
  EXPECT_EQ(s.free(NodeId{0}).pods, 109);
  EXPECT_THAT(s.nodes_with_free_gpus(8), UnorderedElementsAre(1));
  EXPECT_THAT(s.nodes_with_free_gpus(5), UnorderedElementsAre(0));
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kNvlink, 0), 5);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 0), 13);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 1), 4);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kZone, 0), 17);
  EXPECT_EQ(s.total_free().whole_gpus(), 17);
  EXPECT_EQ(s.total_free().cpu_milli(), 3 * 128000 - 1000);
  EXPECT_TRUE(s.CheckInvariants().ok());

  ASSERT_TRUE(s.ClaimExisting({NodeId{2}, Mask(0, 4)}, Gpus(4)).ok());
  EXPECT_THAT(s.nodes_with_free_gpus(0), UnorderedElementsAre(2));
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 1), 0);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kZone, 0), 13);

  s.Release(p, Gpus(3, 1000));
  EXPECT_EQ(s.free_gpus(NodeId{0}), 8);
  EXPECT_THAT(s.nodes_with_free_gpus(8), UnorderedElementsAre(0, 1));
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kNvlink, 0), 8);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kZone, 0), 16);
  EXPECT_EQ(s.total_free(), Resources::Of(16, 3 * 128000, 3 * 1024 * testing::kGi));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterStateTest, ClaimExistingRejectsDoubleClaimWithoutChange) {
  SnapshotBuilder b = ThreeNodes();
  ClusterState s(b.snapshot());
  ASSERT_TRUE(s.ClaimExisting({NodeId{1}, Mask(0, 2)}, Gpus(2, 500)).ok());
  const NodeCapacity before = s.free(NodeId{1});
  const Resources total_before = s.total_free();

  const Status st = s.ClaimExisting({NodeId{1}, Mask(1, 2)}, Gpus(2, 500));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "GPU already held on node n1");
  EXPECT_EQ(s.free(NodeId{1}).gpu_mask, before.gpu_mask);
  EXPECT_EQ(s.free(NodeId{1}).cpu_milli, before.cpu_milli);
  EXPECT_EQ(s.free(NodeId{1}).pods, before.pods);
  EXPECT_EQ(s.total_free(), total_before);
  EXPECT_THAT(s.nodes_with_free_gpus(6), UnorderedElementsAre(1));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterStateTest, ClaimExistingRejectsBadPlacements) {
  SnapshotBuilder b = ThreeNodes();
  ClusterState s(b.snapshot());
  EXPECT_EQ(s.ClaimExisting({NodeId{7}, 1}, Gpus(1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ClaimExisting({NodeId{}, 1}, Gpus(1)).code(), StatusCode::kInvalidArgument);
  const Status beyond = s.ClaimExisting({NodeId{2}, Mask(4, 1)}, Gpus(1));
  EXPECT_EQ(beyond.message(), "placement on node n2 names a GPU index the node does not have");
  const Status count = s.ClaimExisting({NodeId{2}, Mask(0, 2)}, Gpus(3));
  EXPECT_EQ(count.message(), "placement on node n2 holds 2 GPUs for a pod that requests 3");
  EXPECT_EQ(s.total_free(), s.capacity());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterStateTest, UnhealthyGpusAreNeverFree) {
  SnapshotBuilder b;
  b.Node("n0", 8).Unhealthy({2, 5}).Block("b");
  ClusterState s(b.snapshot());
  EXPECT_EQ(s.facts(NodeId{0}).healthy_mask, Mask(0, 8) & ~(Mask(2, 1) | Mask(5, 1)));
  EXPECT_EQ(s.free_gpus(NodeId{0}), 6);
  EXPECT_EQ(s.capacity().whole_gpus(), 6);
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 0), 6);
  // Running work may hold a GPU that failed under it; releasing it does not make it free.
  const PodPlacement p{NodeId{0}, Mask(0, 4)};  // GPUs 0-3, including failed GPU 2
  ASSERT_TRUE(s.ClaimExisting(p, Gpus(4)).ok());
  EXPECT_EQ(s.free_gpus(NodeId{0}), 3);
  s.Release(p, Gpus(4));
  EXPECT_EQ(s.free_gpus(NodeId{0}), 6);
  EXPECT_EQ(s.free(NodeId{0}).gpu_mask & Mask(2, 1), 0u);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterStateTest, CordonedNodeIsNotCapacity) {
  SnapshotBuilder b;
  b.Node("n0", 8).Cordon().Block("b");
  b.Node("n1", 4).Block("b");
  const ClusterState s(b.snapshot());
  EXPECT_FALSE(s.facts(NodeId{0}).schedulable);
  EXPECT_EQ(s.capacity().whole_gpus(), 4);
  EXPECT_TRUE(s.nodes_with_free_gpus(8).empty());
  EXPECT_EQ(s.domain_free_gpus(DomainLevel::kBlock, 0), 4);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterStateTest, NodeWithTooManyGpusIsRejected) {
  SnapshotBuilder b;
  b.Node("huge", 65);
  b.Node("ok", 64);
  ClusterState s(b.snapshot());
  ASSERT_EQ(s.issues().size(), 1u);
  EXPECT_EQ(s.issues()[0].object, "node huge");
  EXPECT_THAT(s.issues()[0].message, HasSubstr("has 65 GPUs; at most 64"));
  EXPECT_FALSE(s.facts(NodeId{0}).schedulable);
  EXPECT_TRUE(s.facts(NodeId{1}).schedulable);
  EXPECT_EQ(s.capacity().whole_gpus(), 64);
  EXPECT_EQ(s.free(NodeId{1}).gpu_mask, ~uint64_t{0});
  EXPECT_EQ(s.max_gpus_per_node(), 64);
  // A placement on the rejected node cannot be recorded.
  EXPECT_FALSE(s.ClaimExisting({NodeId{0}, 1}, Gpus(1)).ok());
  ASSERT_TRUE(s.ClaimExisting({NodeId{1}, Mask(60, 4)}, Gpus(4)).ok());
  EXPECT_THAT(s.nodes_with_free_gpus(60), UnorderedElementsAre(1));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterStateTest, NegativeAllocatableIsRejected) {
  SnapshotBuilder b;
  b.Node("bad", 8).Cpu(-1);
  const ClusterState s(b.snapshot());
  ASSERT_EQ(s.issues().size(), 1u);
  EXPECT_EQ(s.issues()[0].message, "negative allocatable resources, node ignored");
  EXPECT_EQ(s.capacity(), Resources());
}

TEST(ClusterStateTest, MarkReleasingRecordsHealthyCapacity) {
  SnapshotBuilder b;
  b.Node("n0", 8).Unhealthy({1});
  ClusterState s(b.snapshot());
  const PodPlacement p{NodeId{0}, Mask(0, 2)};
  ASSERT_TRUE(s.ClaimExisting(p, Gpus(2, 300)).ok());
  s.MarkReleasing(p, Gpus(2, 300));
  EXPECT_EQ(s.releasing(NodeId{0}).gpu_mask, Mask(0, 1));
  EXPECT_EQ(s.releasing(NodeId{0}).cpu_milli, 300);
  EXPECT_EQ(s.releasing(NodeId{0}).pods, 1);
  EXPECT_EQ(s.free_gpus(NodeId{0}), 6);  // still held until the victim is gone
}

TEST(ClusterStateTest, InvariantsHoldAfterRandomOperations) {
  SnapshotBuilder b;
  for (int i = 0; i < 12; ++i) {
    auto n = b.Node("n" + std::to_string(i), i % 5 == 0 ? 0 : 1 << (i % 4));
    n.Block("b" + std::to_string(i % 3)).Zone("z" + std::to_string(i % 2));
    if (i % 4 == 1) n.Nvlink("d" + std::to_string(i % 2));
    if (i == 7) n.Unhealthy({0});
    if (i == 9) n.Cordon();
  }
  ClusterState s(b.snapshot());
  std::mt19937 rng(12345);
  std::vector<std::pair<PodPlacement, Resources>> held;
  for (int step = 0; step < 2000; ++step) {
    if (!held.empty() && rng() % 3 == 0) {
      const size_t k = rng() % held.size();
      s.Release(held[k].first, held[k].second);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const NodeId n{static_cast<int32_t>(rng() % s.num_nodes())};
      const uint64_t free = s.free(n).gpu_mask;
      const uint64_t pick = free & rng();  // any subset of the free GPUs
      const Resources req = Gpus(std::popcount(pick), static_cast<int64_t>(rng() % 2000));
      if (s.free(n).cpu_milli < req.cpu_milli() || s.free(n).pods < 1) continue;
      if (rng() % 2 == 0) {
        ASSERT_TRUE(s.ClaimExisting({n, pick}, req).ok());
      } else {
        s.Claim({n, pick}, req);
      }
      held.push_back({{n, pick}, req});
    }
    const Status st = s.CheckInvariants();
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.message();
  }
  // Free everything: back to the initial totals.
  for (const auto& [p, r] : held) s.Release(p, r);
  EXPECT_EQ(s.total_free(), s.capacity());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// Buckets list their nodes in index order, whatever order the holdings were claimed and
// released in: equally full nodes are offered alike to a fresh cycle and to one whose state
// came about by other steps.
TEST(ClusterStateTest, BucketsDependOnTheHoldingsNotTheirOrder) {
  SnapshotBuilder b;
  for (int i = 0; i < 70; ++i) b.Node("n" + std::to_string(i), 8);  // two bitset words
  std::vector<PodPlacement> pods;
  for (int i = 0; i < 70; ++i) pods.push_back({NodeId{i}, Mask(0, 1 + i % 3)});
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> first;
  for (int round = 0; round < 4; ++round) {
    ClusterState s(b.snapshot());
    std::shuffle(pods.begin(), pods.end(), rng);
    // Claim everything, release a shuffled half and claim it again: other paths, same holdings.
    for (const PodPlacement& p : pods) s.Claim(p, Gpus(std::popcount(p.gpu_mask)));
    for (size_t i = 0; i < pods.size() / 2; ++i)
      s.Release(pods[i], Gpus(std::popcount(pods[i].gpu_mask)));
    for (size_t i = 0; i < pods.size() / 2; ++i)
      s.Claim(pods[i], Gpus(std::popcount(pods[i].gpu_mask)));
    ASSERT_TRUE(s.CheckInvariants().ok());
    std::vector<std::vector<int32_t>> buckets;
    for (int k = 0; k <= s.max_gpus_per_node(); ++k) {
      buckets.push_back(s.nodes_with_free_gpus(k));
      EXPECT_TRUE(std::is_sorted(buckets.back().begin(), buckets.back().end()));
    }
    EXPECT_EQ(buckets[7].size(), 24u);  // nodes 0, 3, ..., 69 hold one GPU
    EXPECT_EQ(buckets[7].front(), 0);
    EXPECT_EQ(buckets[7].back(), 69);
    EXPECT_EQ(s.NextWithFreeGpus(7, 64), 66);  // across the word boundary
    EXPECT_EQ(s.NextWithFreeGpus(7, 70), -1);
    if (round == 0) {
      first = buckets;
    } else {
      EXPECT_EQ(buckets, first);
    }
  }
}

// --- Shares of a GPU ---

Resources Share(int64_t milli, int64_t cpu = 0) { return Resources::OfMilli(milli, cpu, 0); }

// Shares sit beside each other on one GPU up to all of its compute; the GPU leaves the free GPUs
// with its first share and comes back with its last, and the free total counts what is left
// beside the shares.
TEST(ClusterStateTest, SharesFillOneGpuAndFreeItWithTheLast) {
  SnapshotBuilder b;
  b.Node("n0", 8);
  ClusterState s(b.snapshot());
  const PodPlacement on2{NodeId{0}, Mask(2, 1)};
  s.Claim(on2, Share(300, 100), 1024);
  EXPECT_EQ(s.free_gpus(NodeId{0}), 7);
  EXPECT_EQ(s.shared_mask(NodeId{0}), Mask(2, 1));
  EXPECT_EQ(s.share_milli(NodeId{0}, 2), 300);
  EXPECT_EQ(s.share_memory_mib(NodeId{0}, 2), 1024);
  EXPECT_EQ(s.total_free().gpu_milli(), 7700);
  EXPECT_EQ(s.total_free().cpu_milli(), 128000 - 100);
  EXPECT_EQ(s.NextWithShareRoom(0), 0);
  EXPECT_TRUE(s.ShareFits(NodeId{0}, 2, 700, 0));
  EXPECT_FALSE(s.ShareFits(NodeId{0}, 2, 701, 0));
  EXPECT_TRUE(s.ShareFits(NodeId{0}, 2, 100, 81920 - 1024));
  EXPECT_FALSE(s.ShareFits(NodeId{0}, 2, 100, 81920 - 1023));
  ASSERT_TRUE(s.CheckInvariants().ok());

  ASSERT_TRUE(s.ClaimExisting(on2, Share(700)).ok());
  EXPECT_EQ(s.NextWithShareRoom(0), -1);  // full: no room for another share
  EXPECT_EQ(s.total_free().gpu_milli(), 7000);
  ASSERT_TRUE(s.CheckInvariants().ok());

  s.Release(on2, Share(300, 100), 1024);
  EXPECT_EQ(s.NextWithShareRoom(0), 0);
  EXPECT_EQ(s.free_gpus(NodeId{0}), 7);
  EXPECT_EQ(s.total_free().gpu_milli(), 7300);
  s.Release(on2, Share(700));
  EXPECT_EQ(s.free_gpus(NodeId{0}), 8);
  EXPECT_EQ(s.shared_mask(NodeId{0}), 0u);
  EXPECT_EQ(s.NextWithShareRoom(0), -1);
  EXPECT_EQ(s.total_free(), s.capacity());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// No existing holding over-commits a GPU: a share beside a pod holding it whole, a whole pod on a
// shared GPU, shares beyond its compute or known memory, and a share naming two GPUs are refused,
// and the state is left as it was.
TEST(ClusterStateTest, ClaimExistingRefusesOverCommittedGpus) {
  SnapshotBuilder b;
  b.Node("n0", 4).GpuMemory(40960);
  ClusterState s(b.snapshot());
  ASSERT_TRUE(s.ClaimExisting({NodeId{0}, Mask(0, 1)}, Gpus(1)).ok());
  ASSERT_TRUE(s.ClaimExisting({NodeId{0}, Mask(1, 1)}, Share(600), 30000).ok());
  const Resources before = s.total_free();

  Status st = s.ClaimExisting({NodeId{0}, Mask(0, 1)}, Share(100));
  EXPECT_THAT(st.message(), HasSubstr("GPU 0 of node n0 is held whole"));
  st = s.ClaimExisting({NodeId{0}, Mask(1, 1)}, Gpus(1));
  EXPECT_THAT(st.message(), HasSubstr("already held"));
  st = s.ClaimExisting({NodeId{0}, Mask(1, 2)}, Gpus(2));
  EXPECT_THAT(st.message(), HasSubstr("already held"));
  st = s.ClaimExisting({NodeId{0}, Mask(1, 1)}, Share(401));
  EXPECT_THAT(st.message(), HasSubstr("GPU 1 of node n0: shares would hold 1.001 of its compute"));
  st = s.ClaimExisting({NodeId{0}, Mask(1, 1)}, Share(100), 10961);
  EXPECT_THAT(st.message(), HasSubstr("shares would hold 40961 MiB of its 40960 MiB"));
  st = s.ClaimExisting({NodeId{0}, Mask(2, 2)}, Share(500));
  EXPECT_THAT(st.message(), HasSubstr("holds 2 GPUs for a pod that asks for a share of one"));
  EXPECT_EQ(s.total_free(), before);
  EXPECT_EQ(s.share_milli(NodeId{0}, 1), 600);
  EXPECT_EQ(s.share_memory_mib(NodeId{0}, 1), 30000);
  ASSERT_TRUE(s.CheckInvariants().ok());
  // Exactly the rest fits.
  EXPECT_TRUE(s.ClaimExisting({NodeId{0}, Mask(1, 1)}, Share(400), 10960).ok());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// A GPU that failed under its shares stays held; its room is no one's, and when the last share
// leaves it does not return to the free GPUs. A share being released is not marked releasing as
// a GPU: its GPU is free only once every share on it is gone.
TEST(ClusterStateTest, SharesOnAFailedGpuAndSharesReleasing) {
  SnapshotBuilder b;
  b.Node("n0", 2).Unhealthy({0});
  ClusterState s(b.snapshot());
  const PodPlacement on0{NodeId{0}, Mask(0, 1)};
  ASSERT_TRUE(s.ClaimExisting(on0, Share(500)).ok());
  EXPECT_EQ(s.NextWithShareRoom(0), -1);
  EXPECT_EQ(s.total_free().gpu_milli(), 1000);
  s.Release(on0, Share(500));
  EXPECT_EQ(s.free(NodeId{0}).gpu_mask, Mask(1, 1));
  ASSERT_TRUE(s.CheckInvariants().ok());

  const PodPlacement on1{NodeId{0}, Mask(1, 1)};
  ASSERT_TRUE(s.ClaimExisting(on1, Share(500, 200)).ok());
  s.MarkReleasing(on1, Share(500, 200));
  EXPECT_EQ(s.releasing(NodeId{0}).gpu_mask, 0u);
  EXPECT_EQ(s.releasing(NodeId{0}).cpu_milli, 200);
  EXPECT_EQ(s.releasing(NodeId{0}).pods, 1);
  s.UnmarkReleasing(on1, Share(500, 200));
  EXPECT_EQ(s.releasing(NodeId{0}).pods, 0);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// Random claims and releases of whole GPUs and shares, some of them inside a journal that is then
// rolled back: the indexes stay in step throughout, and a rollback restores exactly what was held
// before the journal began.
TEST(ClusterStateTest, SharesKeepIndexesInStepAndRollBack) {
  SnapshotBuilder b;
  for (int i = 0; i < 70; ++i) {
    auto n = b.Node("n" + std::to_string(i), i % 7 == 0 ? 0 : 1 + i % 8).GpuMemory(1000 * (i % 3));
    n.Block("b" + std::to_string(i % 4));
    if (i == 11) n.Unhealthy({0});
    if (i == 13) n.Cordon();
  }
  ClusterState s(b.snapshot());
  std::mt19937 rng(20261205);
  struct Held {
    PodPlacement p;
    Resources r;
    int64_t memory;
  };
  std::vector<Held> held;
  auto snapshot_of = [&] {
    std::vector<int64_t> out{s.total_free().gpu_milli(), s.total_free().cpu_milli()};
    for (size_t n = 0; n < s.num_nodes(); ++n) {
      const NodeId id{static_cast<int32_t>(n)};
      out.push_back(static_cast<int64_t>(s.free(id).gpu_mask));
      out.push_back(static_cast<int64_t>(s.shared_mask(id)));
      for (int g = 0; g < s.facts(id).gpu_count; ++g) {
        out.push_back(s.share_milli(id, g));
        out.push_back(s.share_memory_mib(id, g));
      }
    }
    for (int32_t n = s.NextWithShareRoom(0); n >= 0; n = s.NextWithShareRoom(n + 1))
      out.push_back(-n);
    return out;
  };
  auto step = [&] {
    if (!held.empty() && rng() % 3 == 0) {
      const size_t k = rng() % held.size();
      s.Release(held[k].p, held[k].r, held[k].memory);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      return;
    }
    const NodeId n{static_cast<int32_t>(rng() % s.num_nodes())};
    if (s.facts(n).gpu_count == 0 || s.free(n).pods < 1) return;
    const int g = static_cast<int>(rng() % static_cast<uint32_t>(s.facts(n).gpu_count));
    if (rng() % 2 == 0) {
      const uint64_t pick = s.free(n).gpu_mask & rng();
      s.Claim({n, pick}, Gpus(std::popcount(pick)));
      held.push_back({{n, pick}, Gpus(std::popcount(pick)), 0});
      return;
    }
    const int64_t milli = 1 + rng() % 999;
    const int64_t memory = rng() % 2 == 0 ? 0 : static_cast<int64_t>(rng() % 600);
    const bool shared = (s.shared_mask(n) >> g & 1) != 0;
    const bool free = (s.free(n).gpu_mask >> g & 1) != 0;
    const bool fits =
        (shared && (s.facts(n).healthy_mask >> g & 1) != 0 && s.ShareFits(n, g, milli, memory)) ||
        (free && (memory == 0 || memory <= s.gpu_memory_mib(n, g)));
    if (!fits) return;
    s.Claim({n, uint64_t{1} << g}, Share(milli), memory);
    held.push_back({{n, uint64_t{1} << g}, Share(milli), memory});
  };
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 50; ++i) step();
    ASSERT_TRUE(s.CheckInvariants().ok())
        << "round " << round << ": " << s.CheckInvariants().message();
    const std::vector<int64_t> before = snapshot_of();
    const std::vector<Held> held_before = held;
    s.BeginJournal();
    for (int i = 0; i < 30; ++i) step();
    ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
    s.RollBack();
    held = held_before;
    ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
    ASSERT_EQ(snapshot_of(), before) << "round " << round;
  }
  for (const Held& h : held) s.Release(h.p, h.r, h.memory);
  EXPECT_EQ(s.total_free(), s.capacity());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

}  // namespace
}  // namespace chamber::core
