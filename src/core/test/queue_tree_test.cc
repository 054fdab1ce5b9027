#include "core/queue_tree.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using ::testing::ElementsAre;
using testing::SnapshotBuilder;

std::vector<std::string> Names(const QueueTree& t, const std::vector<QueueId>& ids) {
  std::vector<std::string> out;
  for (QueueId q : ids) out.push_back(t.queue(q).name);
  return out;
}

TEST(QueueTreeTest, ValidTree) {
  SnapshotBuilder b;
  b.Queue("eng").Quota(16);
  b.Queue("team-a", "eng").Quota(8);
  b.Queue("team-b", "eng").Quota(8);
  b.Queue("research").Quota(4);
  b.Queue("vision", "research");
  const QueueTree t(b.snapshot().queues);
  ASSERT_EQ(t.size(), 5u);
  for (size_t i = 0; i < t.size(); ++i) {
    const QueueId q{static_cast<int32_t>(i)};
    EXPECT_TRUE(t.valid(q)) << t.queue(q).name << ": " << t.error(q);
  }
  const QueueId eng = t.Find("eng");
  const QueueId a = t.Find("team-a");
  EXPECT_EQ(eng.value, 0);
  EXPECT_EQ(a.value, 1);
  EXPECT_FALSE(t.Find("nope").valid());
  EXPECT_EQ(t.parent(a), eng);
  EXPECT_FALSE(t.parent(eng).valid());
  EXPECT_THAT(Names(t, t.children(eng)), ElementsAre("team-a", "team-b"));
  EXPECT_THAT(Names(t, t.roots()), ElementsAre("eng", "research"));
  EXPECT_FALSE(t.leaf(eng));
  EXPECT_TRUE(t.leaf(a));
  EXPECT_THAT(Names(t, t.top_down()), ElementsAre("eng", "research", "team-a", "team-b", "vision"));
}

TEST(QueueTreeTest, UnknownParent) {
  SnapshotBuilder b;
  b.Queue("team-a", "ghost");
  b.Queue("team-b");
  const QueueTree t(b.snapshot().queues);
  EXPECT_FALSE(t.valid(t.Find("team-a")));
  EXPECT_EQ(t.error(t.Find("team-a")), "parent queue ghost does not exist");
  EXPECT_TRUE(t.valid(t.Find("team-b")));
  EXPECT_THAT(Names(t, t.roots()), ElementsAre("team-b"));
  EXPECT_THAT(Names(t, t.top_down()), ElementsAre("team-b"));
}

TEST(QueueTreeTest, SelfParent) {
  SnapshotBuilder b;
  b.Queue("loop", "loop");
  const QueueTree t(b.snapshot().queues);
  EXPECT_EQ(t.error(t.Find("loop")), "queue is its own parent");
  EXPECT_TRUE(t.roots().empty());
}

TEST(QueueTreeTest, TwoCycle) {
  SnapshotBuilder b;
  b.Queue("a", "b");
  b.Queue("b", "a");
  b.Queue("ok");
  const QueueTree t(b.snapshot().queues);
  EXPECT_EQ(t.error(t.Find("a")), "the parent chain of this queue contains a cycle");
  EXPECT_EQ(t.error(t.Find("b")), "the parent chain of this queue contains a cycle");
  EXPECT_TRUE(t.valid(t.Find("ok")));
  EXPECT_THAT(Names(t, t.top_down()), ElementsAre("ok"));
}

TEST(QueueTreeTest, ThreeCycleAndQueuesHangingOffIt) {
  SnapshotBuilder b;
  b.Queue("a", "c");
  b.Queue("b", "a");
  b.Queue("c", "b");
  b.Queue("leaf", "b");  // not in the cycle, but beneath it
  const QueueTree t(b.snapshot().queues);
  for (const char* n : {"a", "b", "c"})
    EXPECT_EQ(t.error(t.Find(n)), "the parent chain of this queue contains a cycle") << n;
  EXPECT_FALSE(t.valid(t.Find("leaf")));
  EXPECT_FALSE(t.error(t.Find("leaf")).empty());
  EXPECT_TRUE(t.top_down().empty());
}

TEST(QueueTreeTest, ChildOfInvalidQueueInheritsError) {
  SnapshotBuilder b;
  b.Queue("dept").Quota(-1);
  b.Queue("team", "dept");
  b.Queue("sub", "team");
  const QueueTree t(b.snapshot().queues);
  EXPECT_EQ(t.error(t.Find("dept")), "resources.gpu.quota must not be negative");
  EXPECT_EQ(t.error(t.Find("team")), "parent queue dept is invalid");
  EXPECT_EQ(t.error(t.Find("sub")), "parent queue dept is invalid");
  EXPECT_TRUE(t.roots().empty());
}

TEST(QueueTreeTest, DuplicateNameKeepsFirst) {
  SnapshotBuilder b;
  b.Queue("team").Quota(4);
  b.Queue("team").Quota(8);
  const QueueTree t(b.snapshot().queues);
  EXPECT_EQ(t.Find("team").value, 0);
  EXPECT_TRUE(t.valid(QueueId{0}));
  EXPECT_EQ(t.error(QueueId{1}), "duplicate queue name team (the first definition is used)");
  EXPECT_EQ(t.roots().size(), 1u);
}

// Finds(q, name) answers "is Find(name) q?" without a lookup.
TEST(QueueTreeTest, FindsAgreesWithFind) {
  SnapshotBuilder b;
  b.Queue("team").Quota(4);
  b.Queue("other");
  b.Queue("team").Quota(8);
  const QueueTree t(b.snapshot().queues);
  EXPECT_TRUE(t.Finds(QueueId{0}, "team"));
  EXPECT_TRUE(t.Finds(QueueId{1}, "other"));
  EXPECT_FALSE(t.Finds(QueueId{1}, "team"));  // another queue's name
  EXPECT_FALSE(t.Finds(QueueId{2}, "team"));  // a duplicate: Find gives the first
  EXPECT_FALSE(t.Finds(QueueId{3}, "team"));  // no such queue
  EXPECT_FALSE(t.Finds(QueueId{0}, "tea"));
}

TEST(QueueTreeTest, BadSpecs) {
  SnapshotBuilder b;
  b.Queue("neg").Quota(-2);
  b.Queue("low-limit").Quota(8).Limit(4);
  b.Queue("bad-limit").Limit(-5);
  b.Queue("bad-weight").Weight(-1);
  b.Queue("bad-lending").Lending(-3);
  b.Queue("cpu-limit").Res(Resource::kCpu, 4000, 2000);
  b.Queue("");
  b.Queue("limit-equals-quota").Quota(8).Limit(8);
  const QueueTree t(b.snapshot().queues);
  EXPECT_EQ(t.error(QueueId{0}), "resources.gpu.quota must not be negative");
  EXPECT_EQ(t.error(QueueId{1}), "resources.gpu.limit 4 gpu is below quota 8 gpu");
  EXPECT_EQ(t.error(QueueId{2}), "resources.gpu.limit must be -1 (none) or at least 0");
  EXPECT_EQ(t.error(QueueId{3}), "resources.gpu.overQuotaWeight must not be negative");
  EXPECT_EQ(t.error(QueueId{4}), "resources.gpu.lendingLimit must be -1 (all) or at least 0");
  EXPECT_EQ(t.error(QueueId{5}), "resources.cpu.limit 2 cpu is below quota 4 cpu");
  EXPECT_EQ(t.error(QueueId{6}), "queue has an empty name");
  EXPECT_TRUE(t.valid(QueueId{7}));
}

TEST(QueueTreeTest, ManagedResources) {
  {
    SnapshotBuilder b;
    b.Queue("a").Quota(8);
    const QueueTree t(b.snapshot().queues);
    EXPECT_TRUE(t.managed(Resource::kGpu));
    EXPECT_FALSE(t.managed(Resource::kCpu));
    EXPECT_FALSE(t.managed(Resource::kMemory));
  }
  {
    SnapshotBuilder b;
    b.Queue("a");
    b.Queue("b").Res(Resource::kCpu, 0, 64000);
    b.Queue("c").Res(Resource::kMemory, 1, kUnlimited);
    const QueueTree t(b.snapshot().queues);
    EXPECT_TRUE(t.managed(Resource::kGpu));  // always
    EXPECT_TRUE(t.managed(Resource::kCpu));
    EXPECT_TRUE(t.managed(Resource::kMemory));
  }
  {
    const std::vector<Queue> none;
    const QueueTree t(none);
    EXPECT_EQ(t.size(), 0u);
    EXPECT_TRUE(t.managed(Resource::kGpu));
    EXPECT_TRUE(t.roots().empty());
  }
}

}  // namespace
}  // namespace chamber::core
