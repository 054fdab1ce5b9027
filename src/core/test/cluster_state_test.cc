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

}  // namespace
}  // namespace chamber::core
