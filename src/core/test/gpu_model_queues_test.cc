#include "core/gpu_model_queues.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/engine.h"
#include "core/queue_tree.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using testing::SnapshotBuilder;

GpuModelQuota Model(std::string name, int64_t quota, int64_t limit = -1) {
  GpuModelQuota m{std::move(name), {}};
  m.gpu.quota = Gpus(quota);
  m.gpu.limit = limit < 0 ? kUnlimited : Gpus(limit);
  return m;
}

const Queue* Find(const Snapshot& s, const std::string& name) {
  for (const Queue& q : s.queues)
    if (q.name == name) return &q;
  return nullptr;
}

// The workload of `s` named `name`.
const Workload& Named(const Snapshot& s, const std::string& name) {
  for (const Workload& x : s.workloads)
    if (x.name == name) return x;
  throw std::runtime_error(name);
}

// Two nodes of four H100s and one of four A100s; queue "team" lists H100 (quota 2, limit 4)
// before A100 (quota 4).
SnapshotBuilder TwoModels() {
  SnapshotBuilder b;
  b.Node("h0", 4, "H100");
  b.Node("h1", 4, "H100");
  b.Node("a0", 4, "A100");
  b.Queue("team").Priority(5).StrictFifo().DecayedUsage(7);
  b.snapshot().queues.back().gpu_models = {Model("H100", 2, 4), Model("A100", 4)};
  b.snapshot().queues.back().preemption.within_queue = WithinQueuePreemption::kNever;
  b.Queue("other").Quota(4);
  return b;
}

TEST(GpuModelQueuesTest, AQueueBecomesTheParentOfOneQueuePerModel) {
  Snapshot s = TwoModels().snapshot();
  SplitGpuModelQueues(s);
  ASSERT_EQ(s.queues.size(), 4u);
  const Queue& team = *Find(s, "team");
  EXPECT_TRUE(team.gpu_models.empty());
  EXPECT_EQ(team.res(Resource::kGpu).quota, 0);  // a grouping: its quota is its models' sum
  const Queue* h100 = Find(s, "team/H100");
  const Queue* a100 = Find(s, "team/A100");
  ASSERT_NE(h100, nullptr);
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(h100->parent, "team");
  EXPECT_EQ(h100->res(Resource::kGpu).quota, Gpus(2));
  EXPECT_EQ(h100->res(Resource::kGpu).limit, Gpus(4));
  EXPECT_EQ(a100->res(Resource::kGpu).limit, kUnlimited);
  EXPECT_EQ(h100->priority, 5);
  EXPECT_EQ(h100->queueing, QueueingStrategy::kStrictFifo);
  EXPECT_EQ(h100->preemption.within_queue, WithinQueuePreemption::kNever);
  EXPECT_EQ(h100->decayed_usage, 7);  // the parent adds up its children's
  EXPECT_EQ(a100->decayed_usage, 0);
  const QueueTree tree(s.queues);
  EXPECT_EQ(tree.effective_quota(tree.Find("team"))[Resource::kGpu], Gpus(6));
  for (size_t q = 0; q < tree.size(); ++q)
    EXPECT_TRUE(tree.valid(QueueId{static_cast<int32_t>(q)}));
  EXPECT_EQ(GpuModelQueueOwner("team/H100"), "team");
  EXPECT_EQ(GpuModelQueueOwner("team"), "team");
}

// Running work goes where it runs; waiting work to the first model within quota, else the first
// within its limit with that many GPUs free, else the first within its limit, else the first it
// allows; pods are narrowed to that model.
TEST(GpuModelQueuesTest, EachWorkloadGoesToTheQueueOfOneModel) {
  SnapshotBuilder b = TwoModels();
  b.Workload("on-a100", "team").Pods(1, 2).Running("a0", 0b11);
  b.Workload("on-h100", "team").Pods(1, 2).Running("h0", 0b11);
  b.Workload("small", "team").Pods(1, 1);  // H100 within quota 2? 2 + 1 > 2: no
  b.Workload("a100-only", "team").Pods(1, 1).Models({"A100", "V100"});
  b.Workload("two", "team").Pods(1, 2);  // A100 within quota: 2 + 2 <= 4
  b.Workload("big", "team").Pods(1, 6);  // no quota holds it; H100 limit 4 neither
  b.Workload("v100", "team").Pods(1, 1).Models({"V100"});
  b.Workload("cpu", "team").Pods(1, 0).Cpu(1000);
  b.Workload("elsewhere", "other").Pods(1, 1).Models({"A100"});
  Snapshot s = b.snapshot();
  SplitGpuModelQueues(s);
  auto w = [&](const std::string& name) -> const Workload& { return Named(s, name); };
  EXPECT_EQ(w("on-a100").queue, "team/A100");
  EXPECT_EQ(w("on-h100").queue, "team/H100");
  // H100 holds 2 of quota 2: one more goes over it; A100 holds 2 of 4 and takes it.
  EXPECT_EQ(w("small").queue, "team/A100");
  EXPECT_EQ(w("small").pod_sets[0].gpu_models, std::vector<std::string>{"A100"});
  EXPECT_EQ(w("a100-only").queue, "team/A100");
  EXPECT_EQ(w("two").queue, "team/A100");
  // Over both quotas; H100's limit 4 cannot take 6 more, A100 has no limit but only 2 GPUs free:
  // the first within its limit, A100.
  EXPECT_EQ(w("big").queue, "team/A100");
  // It allows no model of the queue: it waits, named as invalid.
  EXPECT_EQ(w("v100").queue, "team/H100");
  EXPECT_EQ(w("v100").pod_sets[0].invalid_reason,
            "pod set ps0 may use GPU models V100 only, and queue team runs work on GPU models "
            "H100, A100 only (resources.gpu.models)");
  EXPECT_EQ(w("cpu").queue, "team/H100");
  EXPECT_TRUE(w("cpu").pod_sets[0].gpu_models.empty());
  EXPECT_EQ(w("elsewhere").queue, "other");

  // Over quota on both, within the H100 limit, and H100s free: H100.
  SnapshotBuilder c = TwoModels();
  c.Workload("on-a100", "team").Pods(1, 4).Running("a0", 0b1111);
  c.Workload("on-h100", "team").Pods(1, 2).Running("h0", 0b11);
  c.Workload("next", "team").Pods(1, 1);
  Snapshot t = c.snapshot();
  SplitGpuModelQueues(t);
  EXPECT_EQ(t.workloads[2].queue, "team/H100");
  EXPECT_EQ(t.workloads[2].pod_sets[0].gpu_models, std::vector<std::string>{"H100"});
}

TEST(GpuModelQueuesTest, AParentOrABadListIsRejectedByTheEngine) {
  SnapshotBuilder b;
  b.Node("h0", 4, "H100");
  b.Queue("dept");
  b.snapshot().queues.back().gpu_models = {Model("H100", 2)};
  b.Queue("team", "dept");
  b.Queue("bad");
  b.snapshot().queues.back().gpu_models = {Model("H100", 4, 2)};
  b.Queue("twice");
  b.snapshot().queues.back().gpu_models = {Model("H100", 1), Model("H100", 1)};
  Snapshot s = b.snapshot();
  SplitGpuModelQueues(s);
  ASSERT_EQ(s.queues.size(), 4u);  // none split
  const QueueTree tree(s.queues);
  EXPECT_EQ(tree.error(tree.Find("dept")),
            "resources.gpu.models: a queue with GPU models holds its work itself, in one queue "
            "per model, and cannot be the parent of queue team");
  EXPECT_EQ(tree.error(tree.Find("team")), "parent queue dept is invalid");
  EXPECT_EQ(tree.error(tree.Find("bad")),
            "resources.gpu.models[H100].limit 2 gpu is below quota 4 gpu");
  EXPECT_EQ(tree.error(tree.Find("twice")),
            "resources.gpu.models[H100]: the model is listed twice");
  // A list the caller did not split.
  SnapshotBuilder c;
  c.Queue("raw");
  c.snapshot().queues.back().gpu_models = {Model("H100", 2)};
  const QueueTree raw(c.snapshot().queues);
  EXPECT_EQ(raw.error(raw.Find("raw")),
            "resources.gpu.models: the queue was not split into one queue per GPU model");
}

// The engine on a split snapshot: the H100 limit holds per model while A100s stay free for the
// same queue, and the wait names the queue per model.
TEST(GpuModelQueuesTest, AModelsLimitHoldsWhileAnotherModelRuns) {
  SnapshotBuilder b = TwoModels();
  b.Workload("h-run", "team").Pods(1, 4).Running("h0", 0b1111);
  b.Workload("h-more", "team").Pods(1, 1).Models({"H100"});
  b.Workload("any", "team").Pods(1, 2);
  Snapshot s = b.snapshot();
  SplitGpuModelQueues(s);
  const CycleResult r = Engine().Schedule(s);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(s.workloads[r.binds[0].workload.index()].name, "any");
  EXPECT_EQ(s.nodes[r.binds[0].pods[0].placement.node.index()].name, "a0");
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(r.pending[0].reason, PendingReason::kOverQueueLimit);
  EXPECT_NE(r.pending[0].message().find("queue team/H100: needs 1 gpu; quota 2 gpu, in use 4 gpu, "
                                        "limit 4 gpu"),
            std::string::npos)
      << r.pending[0].message();
}

// MIG devices count under the model of their node's GPUs in MIG mode (Node::mig_model): running
// MIG work goes to that model's queue and its charge is that model's usage; waiting MIG work
// chooses a model as whole GPUs do, by its charge, and is then placed only on that model's
// nodes. A node that does not name its model counts for none.
TEST(GpuModelQueuesTest, MigDevicesCountUnderTheModelOfTheirNode) {
  SnapshotBuilder b;
  b.Node("h0", 4, "H100");
  b.Node("a-mig", 0, "A100").Mig("3g.40gb", 2);
  b.snapshot().nodes.back().mig_model = "A100";
  b.Node("h-mig", 0, "H100").Mig("3g.40gb", 2);
  b.snapshot().nodes.back().mig_model = "H100";
  b.Queue("team");
  // H100 quota 1 (the 0.428 of a 3g device fits twice: 0.856), A100 quota 0.5.
  b.snapshot().queues.back().gpu_models = {Model("H100", 1), Model("A100", 0)};
  b.snapshot().queues.back().gpu_models[1].gpu.quota = 500;
  b.Workload("mig-on-a100", "team").Mig(1, "3g.40gb").Running("a-mig", 0);
  b.Workload("next", "team").Mig(1, "3g.40gb");
  Snapshot s = b.snapshot();
  SplitGpuModelQueues(s);
  auto w = [&](const std::string& name) -> const Workload& { return Named(s, name); };
  EXPECT_EQ(w("mig-on-a100").queue, "team/A100");
  // H100 first in the list and within its quota: 0 + 0.428 <= 1.
  EXPECT_EQ(w("next").queue, "team/H100");
  EXPECT_EQ(w("next").pod_sets[0].gpu_models, std::vector<std::string>{"H100"});
  const CycleResult r = Engine().Schedule(s);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(s.nodes[r.binds[0].pods[0].placement.node.index()].name, "h-mig")
      << "only the H100 node's devices, though the A100 node has one free";

  // A100's quota holds 0.428 already: with H100 listed second, the next one still goes to H100
  // (A100: 0.428 + 0.428 > 0.5), where the free devices are.
  b.snapshot().queues.back().gpu_models = {Model("A100", 0), Model("H100", 1)};
  b.snapshot().queues.back().gpu_models[0].gpu.quota = 500;
  s = b.snapshot();
  SplitGpuModelQueues(s);
  EXPECT_EQ(w("next").queue, "team/H100");

  // A node that names no model: its MIG work counts on the first model, and no model's pod
  // goes there.
  SnapshotBuilder c;
  c.Node("mig", 0, "A100").Mig("3g.40gb", 2);
  c.Queue("team");
  c.snapshot().queues.back().gpu_models = {Model("H100", 1), Model("A100", 1)};
  c.Workload("running", "team").Mig(1, "3g.40gb").Running("mig", 0);
  c.Workload("next", "team").Mig(1, "3g.40gb");
  Snapshot t = c.snapshot();
  SplitGpuModelQueues(t);
  EXPECT_EQ(t.workloads[0].queue, "team/H100");
  EXPECT_TRUE(Engine().Schedule(t).binds.empty());
}

}  // namespace
}  // namespace chamber::core
