#include "core/engine.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::Mask;
using testing::Sec;
using testing::SnapshotBuilder;
using ::testing::UnorderedElementsAre;

constexpr int kGpu = static_cast<int>(Resource::kGpu);

class EngineTest : public ::testing::Test {
 protected:
  CycleResult Run(const EngineConfig& cfg = {}) {
    result_ = Engine(cfg).Schedule(b_.snapshot());
    return result_;
  }
  const BindDecision* Bind(const std::string& w) const {
    for (const BindDecision& d : result_.binds)
      if (d.workload == b_.id(w)) return &d;
    return nullptr;
  }
  const ResumeDecision* Resume(const std::string& w) const {
    for (const ResumeDecision& d : result_.resumes)
      if (d.workload == b_.id(w)) return &d;
    return nullptr;
  }
  const PendingDecision* Pending(const std::string& w) const {
    for (const PendingDecision& d : result_.pending)
      if (d.workload == b_.id(w)) return &d;
    return nullptr;
  }
  const PreemptDecision* Preempt(const std::string& w) const {
    for (const PreemptDecision& d : result_.preemptions)
      if (d.workload == b_.id(w)) return &d;
    return nullptr;
  }
  const QueueStatus& Status(const std::string& q) const {
    for (const QueueStatus& s : result_.queues)
      if (s.name == q) return s;
    throw std::logic_error("no queue " + q);
  }
  std::vector<std::string> Names(const std::vector<WorkloadId>& ids) const {
    std::vector<std::string> out;
    for (WorkloadId id : ids) out.push_back(b_.snapshot().workloads[id.index()].name);
    return out;
  }
  std::vector<std::string> Bound() const {
    std::vector<WorkloadId> ids;
    for (const BindDecision& d : result_.binds) ids.push_back(d.workload);
    return Names(ids);
  }
  std::vector<std::string> Preempted() const {
    std::vector<WorkloadId> ids;
    for (const PreemptDecision& d : result_.preemptions) ids.push_back(d.workload);
    return Names(ids);
  }
  // Turns a bind of this cycle into a running workload started at `start`.
  void MakeRunning(const std::string& w, Time start) {
    const BindDecision* d = Bind(w);
    ASSERT_NE(d, nullptr) << w << " was not bound";
    Workload& work = b_.snapshot().workloads[b_.id(w).index()];
    work.state = WorkloadState::kRunning;
    work.start_time = start;
    work.placements.clear();
    for (const PodAssignment& a : d->pods) work.placements.push_back(a.placement);
  }
  Workload& W(const std::string& w) { return b_.snapshot().workloads[b_.id(w).index()]; }
  const NominationDecision* Nomination(const std::string& w) const {
    for (const NominationDecision& d : result_.nominations)
      if (d.workload == b_.id(w)) return &d;
    return nullptr;
  }

  SnapshotBuilder b_;
  CycleResult result_;
};

TEST_F(EngineTest, BindsWhatFits) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Workload("ml/a", "team-a").Pods(1, 4);
  b_.Workload("ml/b", "team-a").Pods(2, 2).Submit(Sec(1));
  Run();
  EXPECT_THAT(result_.pending, IsEmpty());
  EXPECT_THAT(result_.preemptions, IsEmpty());
  ASSERT_THAT(Bound(), ElementsAre("ml/a", "ml/b"));
  const BindDecision& a = *Bind("ml/a");
  ASSERT_EQ(a.pods.size(), 1u);
  EXPECT_EQ(a.pods[0].placement, (PodPlacement{NodeId{0}, Mask(0, 4)}));
  EXPECT_FALSE(a.borrowing);
  const BindDecision& b = *Bind("ml/b");
  ASSERT_EQ(b.pods.size(), 2u);
  EXPECT_EQ(b.pods[0].placement.gpu_mask | b.pods[1].placement.gpu_mask, Mask(4, 4));
  EXPECT_EQ(b.pods[1].replica, 1);
  EXPECT_EQ(Status("team-a").allocated.whole_gpus(), 8);
  EXPECT_EQ(Status("team-a").running_workloads, 2);
  EXPECT_EQ(result_.stats.workloads_considered, 2);
}

TEST_F(EngineTest, BindBeyondQuotaIsBorrowing) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(2);
  b_.Workload("ml/a", "team-a").Pods(1, 4);
  Run();
  ASSERT_NE(Bind("ml/a"), nullptr);
  EXPECT_TRUE(Bind("ml/a")->borrowing);
  EXPECT_EQ(Status("team-a").borrowed.whole_gpus(), 2);
}

TEST_F(EngineTest, GangIsAllOrNothing) {
  b_.Node("n0", 8);
  b_.Node("n1", 8).Unhealthy({7});  // room for 15 single-GPU pods
  b_.Queue("team-a").Quota(16);
  b_.Workload("ml/gang", "team-a").Pods(16, 1);
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  EXPECT_THAT(result_.preemptions, IsEmpty());
  const PendingDecision* p = Pending("ml/gang");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->reason, PendingReason::kNoNodeFits);
  EXPECT_EQ(p->message(), "gang of 16 pods (16 gpu) does not fit at once: room for 15 of its pods");
  EXPECT_THAT(p->details(), ElementsAre("pod set ps0: 2 nodes have room for 15 of its 16 pods"));
  EXPECT_EQ(p->queue_position, 1);
}

TEST_F(EngineTest, MinMemberBindsPartialGang) {
  b_.Node("n0", 8);
  b_.Node("n1", 8).Unhealthy({7});
  b_.Queue("team-a").Quota(16);
  b_.Workload("ml/elastic", "team-a").Pods(16, 1).MinMember(12);
  Run();
  const BindDecision* d = Bind("ml/elastic");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->pods.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(d->pods[i].pod_set, 0);
    EXPECT_EQ(d->pods[i].replica, i);
  }
  EXPECT_EQ(Status("team-a").allocated.whole_gpus(), 12);
}

TEST_F(EngineTest, MinMemberAboveRoomBindsNothing) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(16);
  b_.Workload("ml/elastic", "team-a").Pods(16, 1).MinMember(9);
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  ASSERT_NE(Pending("ml/elastic"), nullptr);
  EXPECT_EQ(Pending("ml/elastic")->reason, PendingReason::kNoNodeFits);
  EXPECT_EQ(Pending("ml/elastic")->message(),
            "gang of 9 pods (9 gpu) does not fit at once: room for 8 of its pods");
}

// Queue team-a has quota 8 and is idle, team-b has none and borrows all 8 GPUs. When team-a
// submits, team-b's work is reclaimed; team-a waits until it is gone, then binds.
TEST_F(EngineTest, BorrowThenReclaim) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Queue("team-b").Quota(0);
  b_.Workload("team-b/w1", "team-b").Pods(1, 4);
  b_.Workload("team-b/w2", "team-b").Pods(1, 4).Submit(Sec(1));

  // Cycle 0: team-b borrows everything.
  Run();
  ASSERT_THAT(Bound(), ElementsAre("team-b/w1", "team-b/w2"));
  EXPECT_TRUE(Bind("team-b/w1")->borrowing);
  EXPECT_TRUE(Bind("team-b/w2")->borrowing);
  EXPECT_EQ(Status("team-b").borrowed.whole_gpus(), 8);
  EXPECT_EQ(Status("team-b").fair_share[kGpu] / kMilliPerGpu, 8);
  EXPECT_EQ(Status("team-a").lent.whole_gpus(), 8);
  EXPECT_EQ(Status("team-a").fair_share[kGpu] / kMilliPerGpu, 0);
  MakeRunning("team-b/w1", Sec(0));
  MakeRunning("team-b/w2", Sec(0));

  // Cycle 1: team-a wants its quota back.
  b_.Workload("team-a/train", "team-a").Pods(1, 8).Submit(Sec(3000));
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  ASSERT_THAT(Preempted(), ElementsAre("team-b/w1", "team-b/w2"));
  for (const PreemptDecision& v : result_.preemptions) {
    EXPECT_EQ(v.reason, PreemptReason::kReclaim);
    EXPECT_EQ(v.preemptor, b_.id("team-a/train"));
    EXPECT_EQ(v.grace_seconds, 30);
    EXPECT_DOUBLE_EQ(v.gpu_hours_lost, 4.0);  // 4 GPUs for an hour, never checkpointed
    EXPECT_EQ(v.message, "reclaimed for team-a/train: queue team-a is below its quota");
  }
  const PendingDecision* p = Pending("team-a/train");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->reason, PendingReason::kWaitingForPreemption);
  EXPECT_EQ(p->message(), "preempting 2 workloads to make room");
  EXPECT_THAT(p->details(),
              ElementsAre("victim team-b/w1 (Reclaim)", "victim team-b/w2 (Reclaim)"));
  EXPECT_EQ(Status("team-b").allocated.whole_gpus(), 0);  // victims no longer count
  EXPECT_EQ(Status("team-b").running_workloads, 0);

  // Cycle 2: the victims are in their grace period. Nothing new is preempted.
  W("team-b/w1").state = WorkloadState::kPreempting;
  W("team-b/w2").state = WorkloadState::kPreempting;
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  EXPECT_THAT(result_.preemptions, IsEmpty());
  p = Pending("team-a/train");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->reason, PendingReason::kWaitingForPreemption);
  EXPECT_EQ(p->message(), "waiting for capacity that preempted workloads are releasing");

  // Cycle 3: the victims are gone.
  W("team-b/w1").state = WorkloadState::kSuspended;
  W("team-b/w1").placements.clear();
  W("team-b/w2").state = WorkloadState::kSuspended;
  W("team-b/w2").placements.clear();
  Run();
  ASSERT_THAT(Bound(), ElementsAre("team-a/train"));
  EXPECT_FALSE(Bind("team-a/train")->borrowing);
  EXPECT_EQ(Bind("team-a/train")->pods[0].placement.gpu_mask, Mask(0, 8));
  EXPECT_THAT(result_.resumes, IsEmpty());
  // team-b, beyond its quota of 0, waits behind team-a's guaranteed work: a rule's wait.
  ASSERT_NE(Pending("team-b/w1"), nullptr);
  EXPECT_EQ(Pending("team-b/w1")->reason, PendingReason::kPreemptionNotAllowed);
  EXPECT_THAT(result_.preemptions, IsEmpty());
}

TEST_F(EngineTest, ReclaimTakesOnlyWhatIsNeeded) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Queue("team-b");
  b_.Workload("team-b/small", "team-b").Pods(1, 2).Running("n0", Mask(0, 2));
  b_.Workload("team-b/big", "team-b").Pods(1, 6).Running("n0", Mask(2, 6));
  b_.Workload("team-a/two", "team-a").Pods(1, 2);
  Run();
  EXPECT_THAT(Preempted(), ElementsAre("team-b/small"));
  EXPECT_EQ(Pending("team-a/two")->reason, PendingReason::kWaitingForPreemption);
  EXPECT_EQ(Pending("team-a/two")->message(), "preempting 1 workload to make room");
}

TEST_F(EngineTest, PriorityPreemptionWithinQueue) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Workload("team-a/low", "team-a").Priority(0).Pods(1, 8).Running("n0", Mask(0, 8));
  b_.Workload("team-a/high", "team-a").Priority(50).Pods(1, 8);
  b_.Workload("team-a/same", "team-a").Priority(0).Pods(1, 8);
  Run();
  ASSERT_THAT(Preempted(), ElementsAre("team-a/low"));
  const PreemptDecision& v = *Preempt("team-a/low");
  EXPECT_EQ(v.reason, PreemptReason::kPriority);
  EXPECT_EQ(v.preemptor, b_.id("team-a/high"));
  EXPECT_EQ(v.message, "preempted by team-a/high (priority 50 over 0)");
  EXPECT_EQ(Pending("team-a/high")->reason, PendingReason::kWaitingForPreemption);
  EXPECT_THAT(Pending("team-a/high")->details(), ElementsAre("victim team-a/low (Priority)"));
  // Equal priority never preempts, and work beyond its fair share does not wait on the room
  // that victims release for others. team-a/high counts against team-a from its preemption on,
  // so team-a/same is beyond quota: a rule's wait, not a shortage of capacity.
  EXPECT_EQ(Pending("team-a/same")->reason, PendingReason::kPreemptionNotAllowed);
}

// The cycle after a priority preemption: the victim is releasing the room, and the preemptor
// (beyond its fair share, so served in pass 2) must wait for it rather than evict more work.
TEST_F(EngineTest, PreemptorWaitsForItsVictimInsteadOfPreemptingMore) {
  b_.Node("n0", 8);
  b_.Node("n1", 8);
  b_.Node("n2", 8);
  b_.Queue("team-a").Quota(8);
  b_.Queue("team-b").Quota(8);
  b_.Workload("a/low", "team-a").Pods(1, 8).Running("n0", Mask(0, 8)).Preempting();
  b_.Workload("a/low2", "team-a").Pods(1, 8).Running("n1", Mask(0, 8));
  b_.Workload("a/high", "team-a").Priority(50).Pods(1, 8);
  b_.Workload("b/run", "team-b").Pods(1, 8).Running("n2", Mask(0, 8));
  b_.Workload("b/huge", "team-b").Pods(1, 16);
  Run();
  // Shares: 12 each; team-a holds 8 and a/high would take it to 16, so it is served in pass 2.
  ASSERT_DOUBLE_EQ(Status("team-a").fair_share[kGpu] / kMilliPerGpu, 12);
  EXPECT_THAT(result_.preemptions, IsEmpty());
  ASSERT_NE(Pending("a/high"), nullptr);
  EXPECT_EQ(Pending("a/high")->reason, PendingReason::kWaitingForPreemption);
}

TEST_F(EngineTest, EqualPriorityDoesNotPreempt) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Workload("team-a/old", "team-a").Priority(10).Pods(1, 8).Running("n0", Mask(0, 8));
  b_.Workload("team-a/new", "team-a").Priority(10).Pods(1, 8);
  Run();
  EXPECT_THAT(result_.preemptions, IsEmpty());
  EXPECT_EQ(Pending("team-a/new")->reason, PendingReason::kPreemptionNotAllowed);
  EXPECT_EQ(Pending("team-a/new")->message(),
            "the room is held by work it may not preempt: queue team-a's own running work is "
            "not of lower priority");
}

TEST_F(EngineTest, ReservedIsNeverPreempted) {
  b_.Node("n0", 8);
  b_.Node("n1", 8);
  b_.Queue("team-a").Quota(16);
  b_.Queue("team-b");
  // A reserved workload of team-a, and one team-b holds beyond its quota (quota was cut).
  b_.Workload("team-a/reserved", "team-a").Priority(100).Pods(1, 8).Running("n0", Mask(0, 8));
  b_.Workload("team-b/reserved", "team-b").Priority(150).Pods(1, 8).Running("n1", Mask(0, 8));
  b_.Workload("team-a/urgent", "team-a").Priority(1000).Pods(1, 8);
  Run();
  EXPECT_THAT(result_.preemptions, IsEmpty());
  ASSERT_NE(Pending("team-a/urgent"), nullptr);
  EXPECT_EQ(Pending("team-a/urgent")->reason, PendingReason::kNoNodeFits);
}

TEST_F(EngineTest, ReservedRunsOnlyWithinQuota) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(4);
  b_.Workload("team-a/big", "team-a").Priority(100).Pods(1, 8);
  b_.Workload("team-a/fits", "team-a").Priority(100).Pods(1, 4).Submit(Sec(1));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-a/fits"));
  EXPECT_FALSE(Bind("team-a/fits")->borrowing);
  ASSERT_NE(Pending("team-a/big"), nullptr);
  EXPECT_EQ(Pending("team-a/big")->reason, PendingReason::kOverQuota);
  EXPECT_EQ(
      Pending("team-a/big")->message(),
      "reserved work runs only within quota: queue team-a: needs 8 gpu; quota 4 gpu, reserved in "
      "use 0 gpu");
}

// Reserved work counts only reserved usage against quota: elastic work of its own queue that
// fills the quota is preempted by priority to make room.
TEST_F(EngineTest, ReservedWorkTakesQuotaBackFromElasticWorkOfItsQueue) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Workload("team-a/elastic", "team-a").Pods(1, 8).Running("n0", Mask(0, 8));
  b_.Workload("team-a/reserved", "team-a").Priority(100).Pods(1, 8);
  Run();
  ASSERT_THAT(Preempted(), ElementsAre("team-a/elastic"));
  EXPECT_EQ(Preempt("team-a/elastic")->reason, PreemptReason::kPriority);
  EXPECT_EQ(Pending("team-a/reserved")->reason, PendingReason::kWaitingForPreemption);
}

// Shared scenario for the victim-protection tests: team-b borrows all of n0 with one workload,
// team-a (quota 8) wants it back.
class ReclaimProtectionTest : public EngineTest {
 protected:
  void SetUp() override {
    b_.Node("n0", 8);
    b_.Queue("team-a").Quota(8);
    b_.Queue("team-b");
    b_.Workload("team-b/borrower", "team-b").Pods(1, 8).Running("n0", Mask(0, 8));
    b_.Workload("team-a/owner", "team-a").Pods(1, 8);
  }
};

TEST_F(ReclaimProtectionTest, MinRuntimeProtectsYoungWork) {
  W("team-b/borrower").start_time = b_.snapshot().now - Sec(30);
  Run();
  EXPECT_THAT(result_.preemptions, IsEmpty());
  EXPECT_EQ(Pending("team-a/owner")->reason, PendingReason::kNoNodeFits);

  EngineConfig cfg;
  cfg.min_runtime = Sec(20);
  Run(cfg);
  EXPECT_THAT(Preempted(), ElementsAre("team-b/borrower"));
  EXPECT_DOUBLE_EQ(result_.preemptions[0].gpu_hours_lost, 8 * 30.0 / 3600);
}

TEST_F(ReclaimProtectionTest, PreemptionBudgetProtects) {
  const Time now = b_.snapshot().now;
  for (int i = 1; i <= 3; ++i)
    W("team-b/borrower").recent_preemptions.push_back(now - Sec(600 * i));
  Run();
  EXPECT_THAT(result_.preemptions, IsEmpty());
  EXPECT_EQ(Pending("team-a/owner")->reason, PendingReason::kNoNodeFits);

  // One of the three falls out of the window: the budget allows another preemption.
  W("team-b/borrower").recent_preemptions[2] = now - Sec(3601);
  Run();
  EXPECT_THAT(Preempted(), ElementsAre("team-b/borrower"));
}

TEST_F(ReclaimProtectionTest, ReclaimCanBeTurnedOff) {
  EngineConfig cfg;
  cfg.reclaim_enabled = false;
  Run(cfg);
  EXPECT_THAT(result_.preemptions, IsEmpty());
  EXPECT_EQ(Pending("team-a/owner")->reason, PendingReason::kNoNodeFits);
}

TEST_F(ReclaimProtectionTest, CheckpointLimitsLostHours) {
  W("team-b/borrower").last_checkpoint_time = b_.snapshot().now - Sec(900);
  W("team-b/borrower").checkpoint_grace_seconds = 120;
  Run();
  ASSERT_THAT(Preempted(), ElementsAre("team-b/borrower"));
  EXPECT_DOUBLE_EQ(result_.preemptions[0].gpu_hours_lost, 8 * 0.25);
  EXPECT_EQ(result_.preemptions[0].grace_seconds, 120);
}

// A gang whose pods do not all exist yet waits and says so, holding nothing, while work behind
// it starts; once its last pod exists it is placed.
TEST_F(EngineTest, AGangMissingPodsWaitsForThemAndHoldsNothing) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Workload("team-a/gang", "team-a").Pods(3, 1).Submit(Sec(1));
  b_.Workload("team-a/later", "team-a").Pods(1, 1).Submit(Sec(2));
  W("team-a/gang").awaited_pods = 4;
  Run();
  ASSERT_NE(Pending("team-a/gang"), nullptr);
  EXPECT_EQ(Pending("team-a/gang")->reason, PendingReason::kWaitingForPods);
  EXPECT_EQ(Pending("team-a/gang")->message(),
            "the gang needs 7 pods and 3 exist; it is placed once the rest are created");
  EXPECT_THAT(Bound(), ElementsAre("team-a/later"));
  W("team-a/gang").pod_sets[0].count = 7;
  W("team-a/gang").awaited_pods = 0;
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-a/gang", "team-a/later"));
}

// A gang rolled back after a failed bind waits out its backoff (docs/scheduling.md, "When a
// bind fails"): it holds nothing and takes no place in its queue, even a strict-FIFO one, so
// work behind it starts; its reason names the failure and when it is tried again. Once the
// time has come it is placed as any other.
TEST_F(EngineTest, AGangInBindBackoffWaitsItOutAndHoldsNothing) {
  b_.Node("n0", 4);
  b_.Queue("team-a").Quota(4).StrictFifo();
  b_.Workload("team-a/gang", "team-a").Pods(3, 1).Submit(Sec(1));
  b_.Workload("team-a/later", "team-a").Pods(1, 1).Submit(Sec(2));
  b_.Now(Sec(1'796'600'000));
  W("team-a/gang").bind_retry_at = Sec(1'796'600'020);
  W("team-a/gang").bind_rollbacks = 2;
  W("team-a/gang").bind_failure = "ml/gang-2: admission refused the binding";
  Run();
  ASSERT_NE(Pending("team-a/gang"), nullptr);
  EXPECT_EQ(Pending("team-a/gang")->reason, PendingReason::kBindBackoff);
  EXPECT_EQ(PendingReasonName(PendingReason::kBindBackoff), "BindBackoff");
  EXPECT_EQ(Pending("team-a/gang")->message(),
            "its gang's bind failed and was rolled back 2 times in a row (ml/gang-2: admission "
            "refused the binding); it is tried again from 2026-12-06T23:33:40Z");
  EXPECT_THAT(Bound(), ElementsAre("team-a/later"));
  b_.Now(Sec(1'796'600'020));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-a/gang", "team-a/later"));

  // A bind the caller held back, with no rollback: its reason is the caller's.
  b_.Now(Sec(1'796'600'000));
  W("team-a/gang").bind_rollbacks = 0;
  W("team-a/gang").bind_failure =
      "its share waits for the device plugin to give a GPU to a reservation pod on node n0";
  Run();
  ASSERT_NE(Pending("team-a/gang"), nullptr);
  EXPECT_EQ(Pending("team-a/gang")->reason, PendingReason::kBindBackoff);
  EXPECT_EQ(Pending("team-a/gang")->message(),
            "its share waits for the device plugin to give a GPU to a reservation pod on node "
            "n0; it is tried again from 2026-12-06T23:33:40Z");
}

TEST_F(EngineTest, StrictFifoBlocksBehindHead) {
  b_.Node("n0", 4);
  b_.Queue("team-a").Quota(4).StrictFifo();
  b_.Workload("team-a/big", "team-a").Pods(1, 8).Submit(Sec(1));
  b_.Workload("team-a/small", "team-a").Pods(1, 2).Submit(Sec(2));
  b_.Workload("team-a/later", "team-a").Pods(1, 1).Submit(Sec(3));
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  EXPECT_EQ(Pending("team-a/big")->reason, PendingReason::kNoNodeFits);
  EXPECT_EQ(Pending("team-a/big")->message(), "no node fits a pod of 8 gpu: 1 node too few GPUs");
  for (const char* w : {"team-a/small", "team-a/later"}) {
    ASSERT_NE(Pending(w), nullptr) << w;
    EXPECT_EQ(Pending(w)->reason, PendingReason::kBlockedByQueueHead);
    EXPECT_EQ(Pending(w)->message(),
              "queue team-a is strict FIFO and team-a/big ahead of it cannot start");
  }
  EXPECT_EQ(Pending("team-a/small")->queue_position, 2);
  EXPECT_EQ(Pending("team-a/later")->queue_position, 3);
}

TEST_F(EngineTest, StrictFifoFromConfigDefault) {
  b_.Node("n0", 4);
  b_.Queue("team-a").Quota(4);
  b_.Workload("team-a/big", "team-a").Pods(1, 8).Submit(Sec(1));
  b_.Workload("team-a/small", "team-a").Pods(1, 2).Submit(Sec(2));
  EngineConfig cfg;
  cfg.default_queueing = QueueingStrategy::kStrictFifo;
  Run(cfg);
  EXPECT_THAT(result_.binds, IsEmpty());
  EXPECT_EQ(Pending("team-a/small")->reason, PendingReason::kBlockedByQueueHead);
  // The queue's own setting wins over the default.
  b_.snapshot().queues[0].queueing = QueueingStrategy::kBestEffort;
  Run(cfg);
  EXPECT_THAT(Bound(), ElementsAre("team-a/small"));
}

TEST_F(EngineTest, BestEffortBackfillsBehindHead) {
  b_.Node("n0", 4);
  b_.Queue("team-a").Quota(4);
  b_.Workload("team-a/big", "team-a").Pods(1, 8).Submit(Sec(1));
  b_.Workload("team-a/small", "team-a").Pods(1, 2).Submit(Sec(2));
  b_.Workload("team-a/later", "team-a").Pods(1, 1).Submit(Sec(3));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-a/small", "team-a/later"));
  EXPECT_EQ(Pending("team-a/big")->reason, PendingReason::kNoNodeFits);
  EXPECT_EQ(Pending("team-a/big")->queue_position, 1);
}

TEST_F(EngineTest, QueueLimit) {
  b_.Node("n0", 8);
  b_.Node("n1", 8);
  b_.Node("n2", 8);
  b_.Queue("team-a").Quota(16).Limit(16);
  for (int i = 0; i < 3; ++i)
    b_.Workload("team-a/r" + std::to_string(i), "team-a")
        .Pods(1, 4)
        .Running("n" + std::to_string(i), Mask(0, 4));
  b_.Workload("team-a/eight", "team-a").Pods(1, 8);
  b_.Workload("team-a/four", "team-a").Pods(1, 4).Submit(Sec(1));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-a/four"));
  ASSERT_NE(Pending("team-a/eight"), nullptr);
  EXPECT_EQ(Pending("team-a/eight")->reason, PendingReason::kOverQueueLimit);
  EXPECT_EQ(Pending("team-a/eight")->message(),
            "queue team-a: needs 8 gpu; quota 16 gpu, in use 12 gpu, limit 16 gpu");
}

TEST_F(EngineTest, ParentQueueLimitApplies) {
  b_.Node("n0", 8);
  b_.Queue("dept").Limit(6);
  b_.Queue("team-a", "dept").Quota(0);
  b_.Queue("team-b", "dept").Quota(0);
  b_.Workload("team-a/w", "team-a").Pods(1, 4);
  b_.Workload("team-b/w", "team-b").Pods(1, 4);
  Run();
  // Both are beyond their fair share of 3 and wait for pass 2, where team-a comes first (by name).
  EXPECT_THAT(Bound(), ElementsAre("team-a/w"));
  ASSERT_NE(Pending("team-b/w"), nullptr);
  EXPECT_EQ(Pending("team-b/w")->reason, PendingReason::kOverQueueLimit);
  EXPECT_EQ(Pending("team-b/w")->message(),
            "queue dept: needs 4 gpu; quota 0 gpu, in use 4 gpu, limit 6 gpu");
}

TEST_F(EngineTest, CpuLimitApplies) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Res(Resource::kCpu, 0, 4000);
  b_.Workload("team-a/w", "team-a").Pods(1, 1).Cpu(3000);
  b_.Workload("team-a/v", "team-a").Pods(1, 1).Cpu(1500).Submit(Sec(1));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-a/w"));
  EXPECT_EQ(Pending("team-a/v")->reason, PendingReason::kOverQueueLimit);
  EXPECT_EQ(Pending("team-a/v")->message(),
            "queue team-a: needs 1500m cpu; quota 0 cpu, in use 3 cpu, limit 4 cpu");
}

TEST_F(EngineTest, LendingLimit) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8).Lending(2);  // lends at most 2 of its idle 8
  b_.Queue("team-b").Quota(0);
  b_.Workload("team-b/big", "team-b").Priority(10).Pods(1, 4);
  b_.Workload("team-b/small", "team-b").Pods(1, 2);
  Run();
  EXPECT_THAT(Bound(), ElementsAre("team-b/small"));
  EXPECT_TRUE(Bind("team-b/small")->borrowing);
  ASSERT_NE(Pending("team-b/big"), nullptr);
  EXPECT_EQ(Pending("team-b/big")->reason, PendingReason::kLendingLimit);
  EXPECT_EQ(Pending("team-b/big")->message(),
            "borrowing 4 gpu would use quota its owners do not lend: queue team-a keeps 6 gpu "
            "(lendingLimit 2 gpu of 8 gpu unused)");
  EXPECT_EQ(Status("team-a").lent.whole_gpus(), 2);
}

TEST_F(EngineTest, HardwareFaultPreemptsEvenReservedWork) {
  b_.Node("n0", 8).Unhealthy({3});
  b_.Node("n1", 8).Unhealthy({0});
  b_.Queue("team-a").Quota(16);
  b_.Workload("team-a/hit", "team-a")
      .Pods(1, 4)
      .Running("n0", Mask(0, 4))
      .Checkpoint(Sec(1800))
      .Grace(120);
  b_.Workload("team-a/reserved", "team-a").Priority(500).Pods(1, 2).Running("n1", Mask(0, 2));
  b_.Workload("team-a/healthy", "team-a").Pods(1, 2).Running("n1", Mask(2, 2));
  b_.Workload("team-a/four", "team-a").Pods(1, 4).Submit(Sec(1));
  b_.Workload("team-a/five", "team-a").Pods(1, 5).Submit(Sec(2));
  Run();
  ASSERT_THAT(Preempted(), ElementsAre("team-a/hit", "team-a/reserved"));
  const PreemptDecision& v = *Preempt("team-a/hit");
  EXPECT_EQ(v.reason, PreemptReason::kHardwareFault);
  EXPECT_FALSE(v.preemptor.valid());
  EXPECT_EQ(v.grace_seconds, 120);
  EXPECT_DOUBLE_EQ(v.gpu_hours_lost, 4 * 0.5);  // since the checkpoint half an hour ago
  EXPECT_EQ(v.message, "holds a GPU that failed its health checks");
  EXPECT_EQ(Preempt("team-a/reserved")->reason, PreemptReason::kHardwareFault);
  EXPECT_FALSE(Preempt("team-a/reserved")->preemptor.valid());
  // Free: n0 GPUs 4-7 and n1 GPUs 4-7; the victims release n0 0-2 and n1 1 (not the failed ones).
  EXPECT_THAT(Bound(), ElementsAre("team-a/four"));
  EXPECT_EQ(Bind("team-a/four")->pods[0].placement, (PodPlacement{NodeId{0}, Mask(4, 4)}));
  EXPECT_EQ(Pending("team-a/five")->reason, PendingReason::kWaitingForPreemption);
  EXPECT_EQ(Status("team-a").allocated.whole_gpus(), 2 + 4);
  EXPECT_EQ(Status("team-a").running_workloads, 2);
}

TEST_F(EngineTest, HardwareFaultPreemptsWorkWhoseQueueIsGone) {
  b_.Node("n0", 8).Unhealthy({0});
  b_.Queue("team-a").Quota(8);
  b_.Workload("orphan", "deleted-queue").Pods(1, 2).Running("n0", Mask(0, 2));
  b_.Workload("healthy-orphan", "deleted-queue").Pods(1, 2).Running("n0", Mask(2, 2));
  Run();
  ASSERT_THAT(Preempted(), ElementsAre("orphan"));
  EXPECT_EQ(Preempt("orphan")->reason, PreemptReason::kHardwareFault);
  EXPECT_EQ(Status("team-a").allocated.whole_gpus(), 0);
}

TEST_F(EngineTest, HardwareFaultPreemptionCanBeTurnedOff) {
  b_.Node("n0", 8).Unhealthy({3});
  b_.Queue("team-a").Quota(8);
  b_.Workload("team-a/hit", "team-a").Pods(1, 4).Running("n0", Mask(0, 4));
  EngineConfig cfg;
  cfg.preempt_on_unhealthy_gpu = false;
  Run(cfg);
  EXPECT_THAT(result_.preemptions, IsEmpty());
  EXPECT_EQ(Status("team-a").allocated.whole_gpus(), 4);
}

TEST_F(EngineTest, BadInputPendsWithReasonWhileOthersBind) {
  b_.Node("n0", 8);
  b_.Queue("good").Quota(8);
  b_.Queue("cyc-a", "cyc-b");
  b_.Queue("cyc-b", "cyc-a");
  b_.Queue("dept");
  b_.Queue("team", "dept");
  b_.Queue("bad-spec").Quota(4).Limit(2);
  b_.Workload("ok", "good").Pods(1, 1);
  b_.Workload("unknown-queue", "nope").Pods(1, 1);
  b_.Workload("cyclic", "cyc-a").Pods(1, 1);
  b_.Workload("bad-queue", "bad-spec").Pods(1, 1);
  b_.Workload("negative", "good").Pods(1, 1).Cpu(-1);
  b_.Workload("min-member", "good").Pods(2, 1).MinMember(5);
  b_.Workload("non-leaf", "dept").Pods(1, 1);
  b_.Workload("no-pods", "good");
  b_.Workload("zero-count", "good").Pods(0, 1);
  b_.Workload("too-many-gpus", "good").Pods(1, 65);
  b_.Workload("part-of-a-gpu", "good").Pods(1, 1).get().pod_sets[0].request[Resource::kGpu] = 1500;
  b_.Workload("memory-whole", "good").Pods(1, 1).get().pod_sets[0].gpu_memory_mib = 1024;
  b_.Workload("memory-negative", "good").Shares(1, 500, -1);
  b_.Workload("caller-says", "good").Shares(1, 500).get().pod_sets[0].invalid_reason =
      "annotation chamber.io/gpu-fraction: \"half\" is not a fraction of one GPU";
  b_.Workload("leaf-ok", "team").Pods(1, 1);
  Run();
  EXPECT_THAT(Bound(), UnorderedElementsAre("ok", "leaf-ok"));
  struct Want {
    const char* workload;
    PendingReason reason;
    const char* message;
  };
  const Want wants[] = {
      {"unknown-queue", PendingReason::kQueueNotFound, "queue nope does not exist"},
      {"cyclic", PendingReason::kQueueInvalid,
       "queue cyc-a: the parent chain of this queue contains a cycle"},
      {"bad-queue", PendingReason::kQueueInvalid,
       "queue bad-spec: resources.gpu.limit 2 gpu is below quota 4 gpu"},
      {"negative", PendingReason::kInvalidWorkload,
       "pod set ps0: negative request (1 gpu, -1m cpu)"},
      {"min-member", PendingReason::kInvalidWorkload, "min-member 5 exceeds the workload's 2 pods"},
      {"non-leaf", PendingReason::kNotLeafQueue,
       "queue dept has child queues; submit to one of them"},
      {"no-pods", PendingReason::kInvalidWorkload, "workload has no pods"},
      {"zero-count", PendingReason::kInvalidWorkload, "pod set ps0: count must be positive, got 0"},
      {"too-many-gpus", PendingReason::kInvalidWorkload,
       "pod set ps0: requests 65 GPUs per pod; a node has at most 64"},
      {"part-of-a-gpu", PendingReason::kInvalidWorkload,
       "pod set ps0: requests 1.5 GPUs per pod; a pod asks for whole GPUs or a share of one (less "
       "than 1)"},
      {"memory-whole", PendingReason::kInvalidWorkload,
       "pod set ps0: asks for 1024 MiB of GPU memory with 1 GPUs; GPU memory is asked for with a "
       "share of one GPU"},
      {"memory-negative", PendingReason::kInvalidWorkload,
       "pod set ps0: GPU memory -1 MiB per pod must not be negative"},
      {"caller-says", PendingReason::kInvalidWorkload,
       "pod set ps0: annotation chamber.io/gpu-fraction: \"half\" is not a fraction of one GPU"},
  };
  for (const Want& want : wants) {
    const PendingDecision* p = Pending(want.workload);
    ASSERT_NE(p, nullptr) << want.workload;
    EXPECT_EQ(p->reason, want.reason) << want.workload << ": " << p->message();
    EXPECT_EQ(p->message(), want.message) << want.workload;
    EXPECT_EQ(p->queue_position, 0) << want.workload;
  }
  EXPECT_EQ(result_.pending.size(), std::size(wants));
  // Pending decisions come sorted by workload.
  EXPECT_TRUE(std::is_sorted(
      result_.pending.begin(), result_.pending.end(),
      [](const PendingDecision& a, const PendingDecision& b) { return a.workload < b.workload; }));
  // The bad queues are reported as snapshot issues and in their status.
  std::vector<std::string> objects;
  for (const SnapshotIssue& i : result_.issues) objects.push_back(i.object);
  EXPECT_THAT(objects, ElementsAre("queue cyc-a", "queue cyc-b", "queue bad-spec"));
  EXPECT_EQ(Status("bad-spec").error, "resources.gpu.limit 2 gpu is below quota 4 gpu");
  EXPECT_EQ(Status("good").error, "");
}

// --- Shares of a GPU (docs/sharing.md, "In the engine") ---

// Shares are charged as the GPU-equivalents they hold: two 0.5 pods and one 0.25 pod use 1.25 of
// a queue's quota, and a limit of 1.5 GPUs admits shares up to it and no further.
TEST_F(EngineTest, SharesAreChargedTheirFractionAndStopAtTheLimit) {
  b_.Node("n0", 2);
  b_.Queue("q").Quota(1).Limit(kUnlimited);
  b_.snapshot().queues.back().res(Resource::kGpu).limit = 1500;
  b_.Workload("half-a", "q").Shares(1, 500);
  b_.Workload("half-b", "q").Shares(1, 500).Submit(Sec(1));
  b_.Workload("quarter", "q").Shares(1, 250).Submit(Sec(2));
  b_.Workload("half-c", "q").Shares(1, 500).Submit(Sec(3));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("half-a", "half-b", "quarter"));
  ASSERT_NE(Pending("half-c"), nullptr);
  EXPECT_EQ(Pending("half-c")->reason, PendingReason::kOverQueueLimit);
  EXPECT_EQ(Pending("half-c")->message(),
            "queue q: needs 0.5 gpu; quota 1 gpu, in use 1.25 gpu, limit 1.5 gpu");
  EXPECT_EQ(Status("q").allocated.gpu_milli(), 1250);
  // The two halves share one GPU; the quarter sits on the other.
  EXPECT_EQ(Bind("half-a")->pods[0].placement.gpu_mask, Bind("half-b")->pods[0].placement.gpu_mask);
  EXPECT_NE(Bind("quarter")->pods[0].placement.gpu_mask,
            Bind("half-a")->pods[0].placement.gpu_mask);
}

// A pod set's charge, where the caller sets it (units of a node whose device plugin divides its
// GPUs: docs/sharing.md), is what its queue holds and frees: three running quarter-GPU replicas
// and a fourth fill a limit of one GPU; a pod charged its whole unit waits at the limit.
TEST_F(EngineTest, APodSetsChargeIsWhatItsQueueHolds) {
  b_.Node("sliced", 8).get().device_plugin_shares = true;
  b_.Queue("q").Quota(1).Limit(1);
  b_.Workload("running", "q")
      .Pods(3, 1)
      .Charge(250)
      .Running("sliced", 0b0001)
      .Running("sliced", 0b0010)
      .Running("sliced", 0b0100);
  b_.Workload("quarter", "q").Pods(1, 1).Charge(250).Submit(Sec(1));
  b_.Workload("whole", "q").Pods(1, 1).Submit(Sec(2));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("quarter"));
  ASSERT_NE(Pending("whole"), nullptr);
  EXPECT_EQ(Pending("whole")->reason, PendingReason::kOverQueueLimit);
  EXPECT_EQ(Pending("whole")->message(),
            "queue q: needs 1 gpu; quota 1 gpu, in use 1 gpu, limit 1 gpu");
  EXPECT_EQ(Status("q").allocated.gpu_milli(), 1000);
}

// MIG devices (docs/sharing.md, "MIG devices in the engine"): counted per node and profile, the
// kubelet choosing the device; a pod goes only where its profile has a free device, holds no GPU
// of the node's `gpus`, and never takes more devices than the node advertises.
TEST_F(EngineTest, MigPodsTakeTheDevicesTheirNodesAdvertiseAndNoMore) {
  b_.Node("plain", 8);
  b_.Node("mig-a", 0).Mig("1g.10gb", 3).Mig("3g.40gb", 1);
  b_.Node("mig-b", 0).Mig("1g.10gb", 2);
  b_.Queue("q").Quota(8);
  for (int i = 0; i < 6; ++i)
    b_.Workload("small-" + std::to_string(i), "q").Mig(1, "1g.10gb").Submit(Sec(i));
  b_.Workload("big", "q").Mig(1, "3g.40gb").Submit(Sec(10));
  b_.Workload("two-big", "q").Mig(1, "3g.40gb").Submit(Sec(11));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("small-0", "small-1", "small-2", "small-3", "small-4", "big"));
  std::map<int32_t, int> small_on;
  for (int i = 0; i < 5; ++i) {
    const BindDecision* d = Bind("small-" + std::to_string(i));
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->pods[0].placement.gpu_mask, 0u);
    ++small_on[d->pods[0].placement.node.value];
  }
  // The fullest node first: mig-b's two devices before mig-a's three.
  EXPECT_EQ(small_on, (std::map<int32_t, int>{{1, 3}, {2, 2}}));
  EXPECT_EQ(Bind("small-0")->pods[0].placement.node, b_.node_id("mig-b"));
  EXPECT_EQ(Bind("big")->pods[0].placement.node, b_.node_id("mig-a"));
  ASSERT_NE(Pending("small-5"), nullptr);
  EXPECT_EQ(Pending("small-5")->reason, PendingReason::kNoNodeFits);
  EXPECT_EQ(Pending("small-5")->message(),
            "no node fits a pod of MIG 1g.10gb: 2 nodes too few free MIG devices of the profile, 1 "
            "node no MIG devices of the profile");
  // A MIG device is charged its compute slices over the GPU's seven, rounded down.
  EXPECT_EQ(Status("q").allocated.gpu_milli(), 5 * 142 + 428);
}

// Pods of one profile asking for different numbers of devices are different shapes to place: a
// pod of two devices that fits nowhere does not stop one of one device.
TEST_F(EngineTest, AMigPodOfTwoDevicesIsNotTheSameShapeAsOneOfOne) {
  b_.Node("n0", 0).Mig("3g.40gb", 1);
  b_.Queue("q").Quota(4);
  b_.Workload("two", "q").Mig(1, "3g.40gb", 2);
  b_.Workload("one", "q").Mig(1, "3g.40gb").Submit(Sec(1));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("one"));
  ASSERT_NE(Pending("two"), nullptr);
  EXPECT_EQ(
      Pending("two")->message(),
      "no node fits a pod of 2 x MIG 3g.40gb: 1 node too few free MIG devices of the profile");
}

TEST_F(EngineTest, MigDevicesAreChargedTheirSlicesAndStopAtTheLimit) {
  b_.Node("n0", 0).Mig("1g.10gb", 7);
  b_.Queue("q").Quota(0).Limit(kUnlimited);
  b_.snapshot().queues.back().res(Resource::kGpu).limit = 500;
  for (int i = 0; i < 4; ++i)
    b_.Workload("w" + std::to_string(i), "q").Mig(1, "1g.10gb").Submit(Sec(i));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("w0", "w1", "w2"));
  ASSERT_NE(Pending("w3"), nullptr);
  EXPECT_EQ(Pending("w3")->reason, PendingReason::kOverQueueLimit);
  EXPECT_EQ(Pending("w3")->message(),
            "queue q: needs 0.142 gpu; quota 0 gpu, in use 0.426 gpu, limit 0.5 gpu");
  EXPECT_EQ(Status("q").allocated.gpu_milli(), 426);
}

// A MIG pod preempts only work holding a device of its profile on the node it goes to: not the
// whole-GPU pod, nor the pod of another profile, though all are of lower priority.
TEST_F(EngineTest, AMigPreemptorTakesOnlyAVictimHoldingItsProfile) {
  b_.Node("n0", 1).Mig("1g.10gb", 1).Mig("2g.20gb", 1);
  b_.Queue("q").Quota(4);
  b_.Workload("whole", "q").Pods(1, 1).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("other-profile", "q").Mig(1, "2g.20gb").Running("n0", 0).Priority(0);
  b_.Workload("same-profile", "q").Mig(1, "1g.10gb").Running("n0", 0).Priority(10);
  b_.Workload("urgent", "q").Mig(1, "1g.10gb").Priority(50);
  Run();
  EXPECT_THAT(Preempted(), ElementsAre("same-profile"));
  ASSERT_NE(Pending("urgent"), nullptr);
  EXPECT_EQ(Pending("urgent")->reason, PendingReason::kWaitingForPreemption);
}

// Running MIG pods hold their devices: a snapshot naming more of them on a node than it
// advertises is reported, and the extra pod is not counted.
TEST_F(EngineTest, MigPodsBeyondTheAdvertisedDevicesAreASnapshotIssue) {
  b_.Node("n0", 0).Mig("1g.10gb", 1);
  b_.Queue("q").Quota(4);
  b_.Workload("a", "q").Mig(1, "1g.10gb").Running("n0", 0);
  b_.Workload("b", "q").Mig(1, "1g.10gb").Running("n0", 0);
  b_.Workload("c", "q").Mig(1, "1g.10gb");
  Run();
  ASSERT_EQ(result_.issues.size(), 1u);
  EXPECT_EQ(result_.issues[0].message,
            "node n0: MIG 1g.10gb: pods would hold 2 devices of the 1 it advertises");
  EXPECT_THAT(Bound(), IsEmpty());
}

// A running pod naming a profile past the snapshot's (a caller's mistake) holds no device and
// reads nothing out of bounds; a waiting one is invalid.
TEST_F(EngineTest, AMigProfilePastTheLastIsNone) {
  b_.Node("n0", 0).Mig("1g.10gb", 1);
  b_.Queue("q").Quota(4);
  b_.Workload("running", "q").Mig(1, "1g.10gb").Running("n0", 0);
  b_.snapshot().workloads.back().pod_sets[0].mig.profile = 9;
  b_.Workload("waiting", "q").Mig(1, "1g.10gb");
  b_.snapshot().workloads.back().pod_sets[0].mig.profile = 9;
  b_.Workload("fits", "q").Mig(1, "1g.10gb");
  Run();
  EXPECT_THAT(Bound(), ElementsAre("fits"));
  ASSERT_NE(Pending("waiting"), nullptr);
  EXPECT_EQ(Pending("waiting")->message(),
            "pod set ps0: asks for MIG devices of profile 9, which the snapshot does not name");
}

TEST_F(EngineTest, AMigPodSetAskingForGpusTooIsInvalid) {
  b_.Node("n0", 1).Mig("1g.10gb", 1);
  b_.Queue("q").Quota(4);
  b_.Workload("both", "q").Mig(1, "1g.10gb");
  b_.snapshot().workloads.back().pod_sets[0].request[Resource::kGpu] = Gpus(1);
  b_.Workload("none", "q").Mig(1, "1g.10gb");
  b_.snapshot().workloads.back().pod_sets[0].mig.devices = 0;
  b_.Workload("wrong-charge", "q").Mig(1, "1g.10gb");
  b_.snapshot().workloads.back().pod_sets[0].mig.milli = 1000;
  Run();
  ASSERT_NE(Pending("both"), nullptr);
  EXPECT_EQ(Pending("both")->reason, PendingReason::kInvalidWorkload);
  EXPECT_EQ(Pending("both")->message(),
            "pod set ps0: asks for MIG 1g.10gb devices with 1 GPUs; a pod asks for MIG devices, "
            "whole GPUs or a share of one");
  EXPECT_EQ(Pending("none")->message(),
            "pod set ps0: asks for 0 MIG 1g.10gb devices per pod; 1 to 255");
  EXPECT_EQ(Pending("wrong-charge")->message(),
            "pod set ps0: charges 1000 thousandths per MIG 1g.10gb device; the profile's charge is "
            "142");
}

// Running shares hold their GPU: a whole-GPU pod waits for a GPU no share is on, and a share
// that fits beside them is bound there rather than preempt.
TEST_F(EngineTest, SharesHoldTheirGpuAndFitBesideEachOther) {
  b_.Node("n0", 1);
  b_.Queue("q").Quota(1);
  b_.Workload("low-share", "q").Shares(1, 600).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("small-share", "q").Shares(1, 400).Priority(0).Submit(Sec(5));
  b_.Workload("same-whole", "q").Pods(1, 1).Priority(0);
  Run();
  EXPECT_THAT(Preempted(), IsEmpty());
  EXPECT_THAT(Bound(), ElementsAre("small-share"));
  EXPECT_EQ(Bind("small-share")->pods[0].placement.gpu_mask, Mask(0, 1));
  ASSERT_NE(Pending("same-whole"), nullptr);
  EXPECT_NE(Pending("same-whole")->reason, PendingReason::kWaitingForPreemption);
}

// A share that asks for more GPU memory than any GPU has does not stop one asking the same
// compute without memory: the two are different shapes to place.
TEST_F(EngineTest, AShareAskingForMemoryIsNotTheSameShapeAsOneAskingNone) {
  b_.Node("n0", 1).get().gpus[0].memory_mib = 24576;
  b_.Queue("q").Quota(1);
  b_.Workload("too-much-memory", "q").Shares(1, 100, 40960);
  b_.Workload("no-memory", "q").Shares(1, 100).Submit(Sec(1));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("no-memory"));
}

// Shares are preempted by priority as whole-GPU work is. A whole-GPU preemptor counts a shared
// GPU only once every share on it leaves, and takes the GPU whose shares are fewest: here the
// one share on GPU 1, not the three on GPU 0, although those are of lower priority.
TEST_F(EngineTest, AWholePreemptorTakesTheSharedGpuOfFewestShares) {
  b_.Node("n0", 2);
  b_.Queue("q").Quota(2);
  b_.Workload("s0", "q").Shares(1, 300).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("s1", "q").Shares(1, 300).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("s2", "q").Shares(1, 300).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("lone", "q").Shares(1, 800).Running("n0", Mask(1, 1)).Priority(10);
  b_.Workload("high-whole", "q").Pods(1, 1).Priority(50);
  Run();
  EXPECT_THAT(Preempted(), ElementsAre("lone"));
  EXPECT_EQ(Preempt("lone")->reason, PreemptReason::kPriority);
  ASSERT_NE(Nomination("high-whole"), nullptr);
  EXPECT_EQ(Nomination("high-whole")->pods[0].placement.gpu_mask, Mask(1, 1));
}

// A share preemptor's victims come from the GPU it goes on, fewest first: one 700 share on GPU 1
// rather than two 300 shares on GPU 0. Were that one not a candidate (priority above the
// preemptor's), two of GPU 0's would go, the lowest in preference first, and no more.
TEST_F(EngineTest, ASharePreemptorTakesTheFewestSharesOnOneGpu) {
  for (const int32_t lone_priority : {10, 60}) {
    SCOPED_TRACE(lone_priority);
    b_ = SnapshotBuilder();
    b_.Node("n0", 2);
    b_.Queue("q").Quota(2);
    b_.Workload("a", "q").Shares(1, 300).Running("n0", Mask(0, 1)).Priority(0);
    b_.Workload("b", "q").Shares(1, 300).Running("n0", Mask(0, 1)).Priority(0);
    b_.Workload("c", "q").Shares(1, 400).Running("n0", Mask(0, 1)).Priority(0);
    b_.Workload("lone", "q").Shares(1, 700).Running("n0", Mask(1, 1)).Priority(lone_priority);
    b_.Workload("want", "q").Shares(1, 600).Priority(50);
    Run();
    ASSERT_NE(Nomination("want"), nullptr);
    if (lone_priority < 50) {
      EXPECT_THAT(Preempted(), ElementsAre("lone"));
      EXPECT_EQ(Nomination("want")->pods[0].placement.gpu_mask, Mask(1, 1));
    } else {
      // a and b hold the least: each 0.3 GPU of the hours since they started.
      EXPECT_THAT(Preempted(), UnorderedElementsAre("a", "b"));
      EXPECT_EQ(Nomination("want")->pods[0].placement.gpu_mask, Mask(0, 1));
    }
    EXPECT_EQ(Pending("want")->reason, PendingReason::kWaitingForPreemption);
  }
}

// Fewest victims come before their priority: three quarters of GPU 0 would make room for 0.75,
// but two halves of GPU 1, of higher priority, are fewer.
TEST_F(EngineTest, ASharePreemptorTakesFewerVictimsOverLowerPriorityOnes) {
  b_.Node("n0", 2);
  b_.Queue("q").Quota(2);
  for (const char* name : {"a", "b", "c", "d"})
    b_.Workload(name, "q").Shares(1, 250).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("x", "q").Shares(1, 500).Running("n0", Mask(1, 1)).Priority(10);
  b_.Workload("y", "q").Shares(1, 500).Running("n0", Mask(1, 1)).Priority(10);
  b_.Workload("want", "q").Shares(1, 750).Priority(50);
  Run();
  EXPECT_THAT(Preempted(), UnorderedElementsAre("x", "y"));
  ASSERT_NE(Nomination("want"), nullptr);
  EXPECT_EQ(Nomination("want")->pods[0].placement.gpu_mask, Mask(1, 1));
}

// Victims taken in preference order until the share fits are spared again where not needed:
// the smallest share goes first, but once the two larger ones are gone it is not needed.
TEST_F(EngineTest, ASharePreemptorSparesTheVictimsItDoesNotNeed) {
  b_.Node("n0", 1);
  b_.Queue("q").Quota(1);
  b_.Workload("small", "q").Shares(1, 100).Running("n0", Mask(0, 1)).Priority(0);
  b_.Workload("mid", "q").Shares(1, 400).Running("n0", Mask(0, 1)).Priority(5);
  b_.Workload("big", "q").Shares(1, 500).Running("n0", Mask(0, 1)).Priority(5);
  b_.Workload("want", "q").Shares(1, 900).Priority(50);
  Run();
  EXPECT_THAT(Preempted(), UnorderedElementsAre("mid", "big"));
  ASSERT_NE(Nomination("want"), nullptr);
}

// A running share naming other than one GPU is a snapshot issue and holds nothing, so leaving
// frees nothing either: a preemptor's victim is the valid share, not the malformed ones.
TEST_F(EngineTest, AMalformedShareFreesNoRoomForAPreemptor) {
  b_.Node("n0", 2);
  b_.Queue("q").Quota(2);
  b_.Workload("two-gpus", "q").Shares(1, 500).Running("n0", Mask(0, 2)).Priority(0);
  b_.Workload("no-gpu", "q").Shares(1, 500).Running("n0", 0).Priority(0);
  b_.Workload("low", "q").Shares(1, 600).Running("n0", Mask(0, 1)).Priority(10).Submit(Sec(1));
  b_.Workload("whole", "q").Pods(1, 1).Running("n0", Mask(1, 1)).Priority(100);
  b_.Workload("want", "q").Shares(1, 500).Priority(50);
  Run();
  EXPECT_EQ(result_.issues.size(), 2u);
  EXPECT_THAT(Preempted(), ElementsAre("low"));
  ASSERT_NE(Nomination("want"), nullptr);
  EXPECT_EQ(Nomination("want")->pods[0].placement.gpu_mask, Mask(0, 1));
}

// Reclaim takes back only as many shares as the owner needs: a borrower's four quarters fill the
// GPU, the owner asks for half of it, and two quarters go.
TEST_F(EngineTest, ReclaimTakesOnlyAsManySharesAsNeeded) {
  b_.Node("n0", 1);
  b_.Queue("owner").Quota(1);
  b_.Queue("borrower");
  for (int i = 0; i < 4; ++i)
    b_.Workload("q" + std::to_string(i), "borrower").Shares(1, 250).Running("n0", Mask(0, 1));
  b_.Workload("half", "owner").Shares(1, 500);
  Run();
  ASSERT_EQ(result_.preemptions.size(), 2u);
  for (const PreemptDecision& p : result_.preemptions) EXPECT_EQ(p.reason, PreemptReason::kReclaim);
  EXPECT_EQ(Pending("half")->message(), "preempting 2 workloads to make room");
  ASSERT_NE(Nomination("half"), nullptr);
  EXPECT_EQ(Nomination("half")->pods[0].placement.gpu_mask, Mask(0, 1));
}

// Victims being deleted that the caller can only report as holding their GPU externally (bare
// pods in their grace period): the GPU is closed, and no more of its shares are taken for room
// that cannot come.
TEST_F(EngineTest, NoShareIsPreemptedOnAGpuHeldExternally) {
  b_.Node("n0", 1);
  b_.snapshot().nodes.back().external_gpu_mask = Mask(0, 1);
  b_.Queue("owner").Quota(1);
  b_.Queue("borrower");
  for (int i = 0; i < 2; ++i)
    b_.Workload("q" + std::to_string(i), "borrower").Shares(1, 250).Running("n0", Mask(0, 1));
  b_.Workload("half", "owner").Shares(1, 500);
  Run();
  EXPECT_THAT(result_.preemptions, IsEmpty());
}

// A node whose device plugin divides its GPUs (time-slicing replicas, MIG devices under the
// single strategy) takes no share of a GPU, nor does a share preempt there; pods of whole GPUs
// still go there. The waiting share says why.
TEST_F(EngineTest, NoShareGoesToANodeWhoseDevicePluginDividesItsGpus) {
  b_.Node("replicas", 4);
  b_.snapshot().nodes.back().device_plugin_shares = true;
  b_.Node("plain", 1);
  b_.Queue("owner").Quota(4);
  b_.Queue("borrower");
  b_.Workload("full", "borrower").Pods(1, 1).Running("plain", Mask(0, 1));
  b_.Workload("half", "owner").Shares(1, 500);
  b_.Workload("whole", "owner").Pods(1, 2).Submit(Sec(1));
  Run();
  // The share reclaims the plain node's GPU rather than go on the free replicas.
  ASSERT_EQ(result_.preemptions.size(), 1u);
  EXPECT_EQ(result_.preemptions[0].workload.value, 0);
  EXPECT_THAT(Bound(), ElementsAre("whole"));
  EXPECT_EQ(result_.binds[0].pods[0].placement.node.value, 0);

  // With nothing to preempt it waits, naming the nodes it cannot use.
  b_ = SnapshotBuilder();
  b_.Node("replicas", 4);
  b_.snapshot().nodes.back().device_plugin_shares = true;
  b_.Queue("owner").Quota(4);
  b_.Workload("half", "owner").Shares(1, 500);
  Run();
  EXPECT_THAT(Bound(), IsEmpty());
  ASSERT_NE(Pending("half"), nullptr);
  EXPECT_EQ(Pending("half")->reason, PendingReason::kNoNodeFits);
  EXPECT_NE(Pending("half")->message().find("1 node GPUs divided by the device plugin"),
            std::string::npos)
      << Pending("half")->message();
}

// A share goes on a GPU a reservation pod holds before another free GPU of equal standing
// (docs/sharing.md, "Reservation pods"), on the same node and across nodes, placed alone (the
// fragmentation scores) or in a gang (the bucketed fit); between GPUs it would leave unequally,
// the reservation does not count.
TEST_F(EngineTest, ASharePrefersAGpuAReservationPodHolds) {
  b_.Node("n0", 4);
  b_.Node("n1", 4);
  b_.snapshot().nodes[0].reserved_gpu_mask = Mask(2, 1);
  b_.snapshot().nodes[1].reserved_gpu_mask = Mask(1, 1);
  b_.Queue("q").Quota(8);
  b_.Workload("single", "q").Shares(1, 500);
  Run();
  ASSERT_THAT(Bound(), ElementsAre("single"));
  EXPECT_EQ(result_.binds[0].pods[0].placement.node.value, 0);
  EXPECT_EQ(result_.binds[0].pods[0].placement.gpu_mask, Mask(2, 1));

  // Only the second node holds a reservation: the share goes there, not to the lower node.
  b_.snapshot().nodes[0].reserved_gpu_mask = 0;
  Run();
  ASSERT_THAT(Bound(), ElementsAre("single"));
  EXPECT_EQ(result_.binds[0].pods[0].placement.node.value, 1);
  EXPECT_EQ(result_.binds[0].pods[0].placement.gpu_mask, Mask(1, 1));

  // A gang of two shares of 0.6 (one GPU each) takes the node's reserved GPUs first.
  b_ = SnapshotBuilder();
  b_.Node("n0", 4);
  b_.snapshot().nodes[0].reserved_gpu_mask = Mask(1, 1) | Mask(3, 1);
  b_.Queue("q").Quota(8);
  b_.Workload("gang", "q").Shares(2, 600);
  Run();
  ASSERT_THAT(Bound(), ElementsAre("gang"));
  uint64_t gpus = 0;
  for (const PodAssignment& a : result_.binds[0].pods) gpus |= a.placement.gpu_mask;
  EXPECT_EQ(gpus, Mask(1, 1) | Mask(3, 1));

  // A GPU with a share on it that the new share fills exactly wins over a reserved free GPU.
  b_ = SnapshotBuilder();
  b_.Node("n0", 2);
  b_.snapshot().nodes[0].reserved_gpu_mask = Mask(1, 1);
  b_.Queue("q").Quota(8);
  b_.Workload("running", "q").Shares(1, 500).Running("n0", Mask(0, 1));
  b_.Workload("half", "q").Shares(1, 500);
  Run();
  ASSERT_THAT(Bound(), ElementsAre("half"));
  EXPECT_EQ(result_.binds[0].pods[0].placement.gpu_mask, Mask(0, 1));
}

// The cycles after: a share waits for the room its victims' shares release and preempts no
// more; the room is its own, so a share of the same queue that would fit in it waits too
// rather than take it. Once the victims are gone the preemptor is bound there.
TEST_F(EngineTest, ASharePreemptorWaitsForItsVictimsAndKeepsTheirRoom) {
  b_.Node("n0", 1);
  b_.Queue("q").Quota(1);
  b_.Workload("leaving", "q").Shares(1, 500).Running("n0", Mask(0, 1)).Preempting();
  b_.Workload("staying", "q").Shares(1, 500).Running("n0", Mask(0, 1)).Priority(40);
  b_.Workload("want", "q").Shares(1, 500).Priority(50);
  b_.Workload("later", "q").Shares(1, 500).Priority(0).Submit(Sec(5));
  Run();
  EXPECT_THAT(result_.preemptions, IsEmpty());
  EXPECT_THAT(Bound(), IsEmpty());
  EXPECT_EQ(Pending("want")->reason, PendingReason::kWaitingForPreemption);
  EXPECT_EQ(Pending("want")->message(),
            "waiting for capacity that preempted workloads are releasing");
  ASSERT_NE(Nomination("want"), nullptr);
  EXPECT_EQ(Nomination("later"), nullptr);
  // The victim is gone: the preemptor binds on its room, beside the share that stays.
  auto& ws = b_.snapshot().workloads;
  ws.erase(ws.begin() + b_.id("leaving").index());
  Run();
  EXPECT_THAT(Bound(), ElementsAre("want"));
}

// A share on a GPU that fails is preempted like any work on a failed GPU; the GPU stays out of
// use.
TEST_F(EngineTest, ShareOnAFailedGpuIsPreempted) {
  b_.Node("n0", 2).Unhealthy({0});
  b_.Queue("q").Quota(2);
  b_.Workload("on-failed", "q").Shares(1, 500).Running("n0", Mask(0, 1));
  b_.Workload("waiting", "q").Shares(1, 500).Submit(Sec(1));
  Run();
  EXPECT_THAT(Preempted(), ElementsAre("on-failed"));
  EXPECT_EQ(Preempt("on-failed")->reason, PreemptReason::kHardwareFault);
  ASSERT_NE(Bind("waiting"), nullptr);
  EXPECT_EQ(Bind("waiting")->pods[0].placement.gpu_mask, Mask(1, 1));
}

TEST_F(EngineTest, MalformedRunningPlacementIsReportedAndIgnored) {
  b_.Node("n0", 8);
  b_.Queue("q").Quota(8);
  b_.Workload("a", "q").Pods(1, 4).Running("n0", Mask(0, 4));
  b_.Workload("b", "q").Pods(1, 4).Running("n0", Mask(2, 4));  // overlaps a
  b_.Workload("c", "q").Pods(1, 2);
  Run();
  ASSERT_EQ(result_.issues.size(), 1u);
  EXPECT_EQ(result_.issues[0].object, "workload b");
  EXPECT_EQ(result_.issues[0].message, "GPU already held on node n0");
  // Only a's GPUs count as held: c fits on GPUs 4-5.
  ASSERT_THAT(Bound(), ElementsAre("c"));
  EXPECT_EQ(Bind("c")->pods[0].placement.gpu_mask, Mask(4, 2));
}

TEST_F(EngineTest, SuspendedWorkloadIsResumed) {
  b_.Node("n0", 8);
  b_.Queue("team-a").Quota(8);
  b_.Workload("team-a/paused", "team-a").Pods(1, 4).Suspended();
  b_.Workload("team-a/too-big", "team-a").Pods(1, 16).Suspended();
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  ASSERT_EQ(result_.resumes.size(), 1u);
  const ResumeDecision* r = Resume("team-a/paused");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->borrowing);
  ASSERT_EQ(r->pods.size(), 1u);
  EXPECT_EQ(r->pods[0].placement, (PodPlacement{NodeId{0}, Mask(0, 4)}));
  EXPECT_EQ(Pending("team-a/too-big")->reason, PendingReason::kNoNodeFits);
  EXPECT_EQ(Status("team-a").allocated.whole_gpus(), 4);
}

TEST_F(EngineTest, QueueStatusValues) {
  b_.Node("n0", 8);
  b_.Node("n1", 8);
  b_.Queue("eng").Quota(12);
  b_.Queue("team-a", "eng").Quota(8);
  b_.Queue("team-b", "eng").Quota(4);
  b_.Queue("team-c").Quota(0);
  b_.Workload("a/1", "team-a").Pods(1, 2).Running("n0", Mask(0, 2));
  b_.Workload("b/1", "team-b").Pods(1, 5).Running("n0", Mask(2, 5));
  b_.Workload("b/2", "team-b").Pods(1, 5).Running("n1", Mask(0, 5));
  b_.Workload("c/1", "team-c").Pods(1, 8);  // 4 GPUs free, but no node has 8
  Run();
  EXPECT_THAT(result_.binds, IsEmpty());
  EXPECT_THAT(result_.preemptions, IsEmpty());
  ASSERT_EQ(result_.queues.size(), 4u);
  const QueueStatus& eng = Status("eng");
  const QueueStatus& a = Status("team-a");
  const QueueStatus& b = Status("team-b");
  const QueueStatus& c = Status("team-c");
  EXPECT_EQ(a.queue.value, 1);
  EXPECT_EQ(a.allocated, Resources::Of(2, 0, 0));
  EXPECT_EQ(b.allocated, Resources::Of(10, 0, 0));
  EXPECT_EQ(c.allocated, Resources());
  EXPECT_EQ(eng.allocated, Resources::Of(12, 0, 0));
  // Capacity 16. Roots: eng gets its quota 12, team-c the 4 left. Within eng: quotas {2 (its
  // demand), 4}, then team-b takes the rest up to its demand of 10.
  EXPECT_DOUBLE_EQ(eng.fair_share[kGpu] / kMilliPerGpu, 12);
  EXPECT_DOUBLE_EQ(c.fair_share[kGpu] / kMilliPerGpu, 4);
  EXPECT_DOUBLE_EQ(a.fair_share[kGpu] / kMilliPerGpu, 2);
  EXPECT_DOUBLE_EQ(b.fair_share[kGpu] / kMilliPerGpu, 10);
  EXPECT_EQ(b.borrowed.whole_gpus(), 6);
  EXPECT_EQ(a.borrowed.whole_gpus(), 0);
  EXPECT_EQ(eng.borrowed.whole_gpus(), 0);
  // team-b borrows 6: 4 from capacity no queue is guaranteed (16 - 12), 2 from team-a.
  EXPECT_EQ(a.lent.whole_gpus(), 2);
  EXPECT_EQ(b.lent.whole_gpus(), 0);
  EXPECT_EQ(eng.lent.whole_gpus(), 2);
  EXPECT_EQ(a.running_workloads, 1);
  EXPECT_EQ(b.running_workloads, 2);
  EXPECT_EQ(eng.running_workloads, 3);
  EXPECT_EQ(c.running_workloads, 0);
  EXPECT_EQ(c.pending_workloads, 1);
  EXPECT_EQ(eng.pending_workloads, 0);
}

TEST_F(EngineTest, QueuePositionFollowsPriorityThenSubmitTime) {
  b_.Node("n0", 4);
  b_.Queue("team-a").Quota(4);
  b_.Queue("team-b").Quota(0);
  b_.Workload("p2", "team-a").Pods(1, 8).Priority(0).Submit(Sec(1));
  b_.Workload("p3", "team-a").Pods(1, 8).Priority(0).Submit(Sec(3));
  b_.Workload("fits", "team-a").Pods(1, 1).Priority(5).Submit(Sec(0));
  b_.Workload("p1", "team-a").Pods(1, 8).Priority(10).Submit(Sec(5));
  b_.Workload("p0", "team-a").Pods(1, 8).Priority(0).Submit(Sec(1));  // ties: by name
  b_.Workload("other", "team-b").Pods(1, 8);
  Run();
  EXPECT_THAT(Bound(), ElementsAre("fits"));
  EXPECT_EQ(Pending("p1")->queue_position, 1);
  EXPECT_EQ(Pending("p0")->queue_position, 2);
  EXPECT_EQ(Pending("p2")->queue_position, 3);
  EXPECT_EQ(Pending("p3")->queue_position, 4);
  EXPECT_EQ(Pending("other")->queue_position, 1);
}

TEST_F(EngineTest, HigherPriorityQueueServedFirst) {
  b_.Node("n0", 4);
  b_.Queue("a-low");
  b_.Queue("b-high").Priority(10);
  b_.Workload("low", "a-low").Pods(1, 4);
  b_.Workload("high", "b-high").Pods(1, 4);
  Run();
  EXPECT_THAT(Bound(), ElementsAre("high"));
  // Neither queue has quota: low waits for its fair share of what high now holds.
  EXPECT_EQ(Pending("low")->reason, PendingReason::kFairShare);
}

TEST_F(EngineTest, DecayedUsageLowersStanding) {
  b_.Node("n0", 4);
  b_.Queue("team-a").DecayedUsage(100);
  b_.Queue("team-b");
  b_.Workload("a", "team-a").Pods(1, 4);
  b_.Workload("b", "team-b").Pods(1, 4);
  Run();  // decay off: equal standing, team-a first by name
  EXPECT_THAT(Bound(), ElementsAre("a"));
  EngineConfig cfg;
  cfg.usage_half_life = std::chrono::hours(24);
  Run(cfg);
  EXPECT_THAT(Bound(), ElementsAre("b"));
}

TEST_F(EngineTest, DecayedUsageFadesWithTheHalfLife) {
  // team-b runs 1 of the 8 GPUs now; team-a ran the whole cluster until `ago` and nothing since.
  // Both want 7 GPUs, room for one of them.
  const Duration half_life = std::chrono::hours(2);
  auto first = [&](Duration ago) {
    b_ = SnapshotBuilder();
    b_.Node("n0", 8);
    double usage = 0;
    for (int i = 0; i < 40; ++i) usage = DecayUsage(usage, 8, half_life, half_life);
    b_.Queue("team-a").DecayedUsage(DecayUsage(usage, 0, ago, half_life));
    b_.Queue("team-b");
    b_.Workload("b/small", "team-b").Pods(1, 1).Running("n0", Mask(0, 1));
    b_.Workload("a", "team-a").Pods(1, 7);
    b_.Workload("b", "team-b").Pods(1, 7);
    EngineConfig cfg;
    cfg.usage_half_life = half_life;
    Run(cfg);
    return Bound();
  };
  // One half-life on, team-a's recent use (half the cluster) outweighs team-b's running GPU.
  EXPECT_THAT(first(half_life), ElementsAre("b"));
  // Ten half-lives on, it has faded below it.
  EXPECT_THAT(first(10 * half_life), ElementsAre("a"));
}

TEST_F(EngineTest, QueueFurthestBelowFairShareGoesFirst) {
  // Quotas overcommit the 8 GPUs, so shares scale to a-busy 4.8, b-idle 3.2. Both fit within
  // quota; b-idle (0 of 3.2 used) goes before a-busy (2 of 4.8), whatever the names and times.
  b_.Node("n0", 8);
  b_.Queue("a-busy").Quota(6);
  b_.Queue("b-idle").Quota(6);
  b_.Workload("a/running", "a-busy").Pods(1, 2).Running("n0", Mask(0, 2));
  b_.Workload("a/more", "a-busy").Pods(1, 4);
  b_.Workload("b/first", "b-idle").Pods(1, 4).Submit(Sec(100));
  Run();
  EXPECT_THAT(Bound(), ElementsAre("b/first"));
  // Within quota: the cluster owes it room it does not have.
  EXPECT_EQ(Pending("a/more")->reason, PendingReason::kNoNodeFits);
  EXPECT_NEAR(Status("a-busy").fair_share[kGpu] / kMilliPerGpu, 4.8, 1e-9);
  EXPECT_NEAR(Status("b-idle").fair_share[kGpu] / kMilliPerGpu, 3.2, 1e-9);
}

TEST_F(EngineTest, ScheduleIsDeterministic) {
  b_.Node("n0", 8).Block("b1");
  b_.Node("n1", 8).Block("b1");
  b_.Node("n2", 4).Block("b2").Unhealthy({1});
  b_.Queue("team-a").Quota(8);
  b_.Queue("team-b").Quota(4);
  b_.Workload("b/run", "team-b").Pods(2, 4).Running("n0", Mask(0, 4)).Running("n1", Mask(0, 4));
  b_.Workload("a/gang", "team-a").Pods(2, 4);
  b_.Workload("a/one", "team-a").Pods(1, 1);
  b_.Workload("b/two", "team-b").Pods(1, 2);
  const CycleResult first = Run();
  const CycleResult second = Run();
  EXPECT_EQ(first.binds, second.binds);
  EXPECT_EQ(first.resumes, second.resumes);
  EXPECT_EQ(first.preemptions, second.preemptions);
  EXPECT_EQ(first.pending, second.pending);
}

// A session checks a reloaded workload's queue from its last load before it looks the name up:
// a workload moved to another queue is found in its new one, never in a refused duplicate.
TEST_F(EngineTest, SessionFindsAMovedWorkloadInItsNewQueue) {
  b_.Node("n0", 8);
  b_.Queue("a").Quota(8).Limit(8);
  b_.Queue("b").Quota(0).Limit(0);
  b_.Queue("a").Quota(0).Limit(0);  // a duplicate name: refused, the first "a" is used
  b_.Workload("to-a", "b").Pods(1, 1);
  b_.Workload("to-b", "a").Pods(1, 70);  // more GPUs than a node can have
  const Engine engine;
  EngineSession session(engine, b_.snapshot());
  result_ = session.Schedule();
  ASSERT_NE(Pending("to-a"), nullptr);
  EXPECT_EQ(Pending("to-a")->reason, PendingReason::kOverQueueLimit);
  ASSERT_NE(Pending("to-b"), nullptr);
  EXPECT_EQ(Pending("to-b")->reason, PendingReason::kInvalidWorkload);
  session.MutableWorkload(b_.id("to-a")).queue = "a";
  session.MutableWorkload(b_.id("to-b")).queue = "b";
  session.MutableWorkload(b_.id("to-b")).pod_sets[0].request = Resources::Of(1, 0, 0);
  result_ = session.Schedule();
  EXPECT_THAT(Bound(), UnorderedElementsAre("to-a"));
  ASSERT_NE(Pending("to-b"), nullptr);
  EXPECT_EQ(Pending("to-b")->reason, PendingReason::kOverQueueLimit);
  EXPECT_THAT(Pending("to-b")->message(), ::testing::HasSubstr("queue b:"));
  EXPECT_EQ(Status("a").allocated.whole_gpus(), 1);
}

// A kept session loads a workload in bind backoff again once its time has come, with nothing
// else about it changed: it decides as a fresh cycle would.
TEST_F(EngineTest, SessionPlacesAGangOnceItsBindBackoffIsOver) {
  b_.Node("n0", 4);
  b_.Queue("a").Quota(4);
  b_.Workload("gang", "a").Pods(2, 1);
  b_.Now(Sec(100));
  W("gang").bind_retry_at = Sec(130);
  W("gang").bind_rollbacks = 1;
  const Engine engine;
  EngineSession session(engine, b_.snapshot());
  result_ = session.Schedule();
  ASSERT_NE(Pending("gang"), nullptr);
  EXPECT_EQ(Pending("gang")->reason, PendingReason::kBindBackoff);
  session.SetNow(Sec(120));
  result_ = session.Schedule();
  EXPECT_THAT(Bound(), IsEmpty());
  session.SetNow(Sec(130));
  result_ = session.Schedule();
  EXPECT_THAT(Bound(), ElementsAre("gang"));
}

}  // namespace
}  // namespace chamber::core
