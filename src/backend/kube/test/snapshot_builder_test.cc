#include "backend/kube/snapshot_builder.h"

#include <array>
#include <bit>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "backend/kube/gpu_reservations.h"
#include "backend/kube/kube_backend.h"
#include "backend/kube/queue_resource.h"
#include "common/gpu_share_ask.h"
#include "common/time.h"
#include "core/engine.h"
#include "kube/client.h"

namespace chamber::backend {
namespace {

using kube::Json;

std::shared_ptr<const kube::Node> GpuNode(const std::string& name, int gpus, Json extra = {}) {
  Json j = {
      {"metadata",
       {{"name", name},
        {"uid", "uid-" + name},
        {"labels", {{"nvidia.com/gpu.product", "H100"}, {"topology.kubernetes.io/zone", "z1"}}}}},
      {"spec", Json::object()},
      {"status",
       {{"allocatable",
         {{"cpu", "64"},
          {"memory", "512Gi"},
          {"pods", "110"},
          {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"capacity",
         {{"cpu", "64"}, {"memory", "512Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return std::make_shared<const kube::Node>(kube::Node::FromJson(j).value());
}

Json PodJson(const std::string& ns, const std::string& name, int gpus, Json extra = {}) {
  Json j = {
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"uid", "uid-" + ns + "-" + name},
        {"resourceVersion", "7"},
        {"creationTimestamp", "2026-11-30T10:00:00Z"}}},
      {"spec",
       {{"schedulerName", "chamber"},
        {"priority", 10},
        {"containers",
         {{{"name", "main"},
           {"image", "trainer"},
           {"resources",
            {{"requests",
              {{"cpu", "2"}, {"memory", "8Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
      {"status", {{"phase", "Pending"}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return j;
}

std::shared_ptr<const kube::Pod> Pod(const std::string& ns, const std::string& name, int gpus,
                                     Json extra = {}) {
  return std::make_shared<const kube::Pod>(
      kube::Pod::FromJson(PodJson(ns, name, gpus, extra)).value());
}

Json OwnedBy(const std::string& job) {
  return {{"metadata",
           {{"ownerReferences",
             {{{"apiVersion", "batch/v1"},
               {"kind", "Job"},
               {"name", job},
               {"uid", "uid-job-" + job},
               {"controller", true}}}}}}};
}

std::shared_ptr<const kube::Job> JobObj(const std::string& ns, const std::string& name,
                                        int parallelism, int gpus, Json extra = {}) {
  Json tmpl = PodJson(ns, "", gpus);
  tmpl["metadata"] = {{"labels", {{"chamber.io/queue", "team-a"}}}};
  tmpl["spec"].erase("priority");
  Json j = {
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"uid", "uid-job-" + name},
        {"resourceVersion", "3"},
        {"creationTimestamp", "2026-11-30T09:00:00Z"}}},
      {"spec", {{"parallelism", parallelism}, {"completions", parallelism}, {"template", tmpl}}},
      {"status", Json::object()}};
  if (!extra.is_null()) j.merge_patch(extra);
  return std::make_shared<const kube::Job>(kube::Job::FromJson(j).value());
}

// What the Job controller writes once it has acted on spec.suspend.
const Json kSuspendSeen = {
    {"status", {{"conditions", {{{"type", "Suspended"}, {"status", "True"}}}}}}};

// `job` with `status` as its status.
std::shared_ptr<const kube::Job> WithStatus(const std::shared_ptr<const kube::Job>& job,
                                            const Json& status) {
  Json j = job->ToJson();
  j["status"] = status;
  return std::make_shared<const kube::Job>(kube::Job::FromJson(j).value());
}

// The Job controller has acted on the suspension of every Job of `in`.
void JobsStopped(ClusterObjects* in) {
  for (auto& j : in->jobs) j = WithStatus(j, kSuspendSeen["status"]);
}

core::Queue QueueNamed(const std::string& name, int64_t gpus) {
  core::Queue q;
  q.name = name;
  q.res(core::Resource::kGpu).quota = core::Gpus(gpus);
  return q;
}

int64_t UnixMs(const std::string& t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             ParseRfc3339(t).value().time_since_epoch())
      .count();
}

BuildOptions Opts() {
  BuildOptions o;
  o.now = core::Time(1'796'000'000'000);
  return o;
}

TEST(SnapshotBuilderTest, NodesCarryGpusHealthTopologyAndReadiness) {
  ClusterObjects in;
  in.nodes = {
      GpuNode("b", 8, {{"metadata", {{"annotations", {{"chamber.io/unhealthy-gpus", "1,6"}}}}}}),
      GpuNode("a", 4,
              {{"spec",
                {{"taints", {{{"key", "dedicated"}, {"value", "ml"}, {"effect", "NoSchedule"}}}}}},
               {"status", {{"conditions", {{{"type", "Ready"}, {"status", "False"}}}}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.nodes.size(), 2u);
  const core::Node& a = b.snapshot.nodes[0];
  EXPECT_EQ(a.name, "a");  // sorted by name
  EXPECT_TRUE(a.unschedulable) << "a node that is not Ready takes no work";
  ASSERT_EQ(a.taints.size(), 1u);
  EXPECT_EQ(a.taints[0].key, "dedicated");
  EXPECT_EQ(a.gpus.size(), 4u);
  const core::Node& n = b.snapshot.nodes[1];
  EXPECT_FALSE(n.unschedulable);
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_EQ(n.gpus[0].model, "H100");
  EXPECT_EQ(n.gpus[3].uuid, "b/gpu3");
  EXPECT_FALSE(n.gpus[1].healthy);
  EXPECT_FALSE(n.gpus[6].healthy);
  EXPECT_TRUE(n.gpus[0].healthy);
  EXPECT_EQ(n.topology.zone, "z1");
  EXPECT_EQ(n.allocatable.cpu_milli(), 64'000);
  EXPECT_EQ(n.allocatable.memory_bytes(), int64_t{512} << 30);
  EXPECT_TRUE(b.problems.empty());
}

TEST(SnapshotBuilderTest, AJobIsOneGangOnceAllItsPodsExist) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.jobs = {JobObj("ml", "train", 4, 2), JobObj("ml", "half", 4, 1)};
  for (int i = 0; i < 4; ++i)
    in.pods.push_back(Pod("ml", "train-" + std::to_string(i), 2, OwnedBy("train")));
  for (int i = 0; i < 2; ++i)
    in.pods.push_back(Pod("ml", "half-" + std::to_string(i), 1, OwnedBy("half")));
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  EXPECT_EQ(b.incomplete_gangs, 1);
  const size_t t = b.snapshot.workloads[0].name == "ml/train" ? 0 : 1;
  const core::Workload& half = b.snapshot.workloads[1 - t];
  EXPECT_EQ(half.name, "ml/half");
  EXPECT_EQ(half.awaited_pods, 2) << "half has 2 of its 4 pods: not yet a gang";
  EXPECT_EQ(half.TotalPods(), 2);
  const core::Workload& w = b.snapshot.workloads[t];
  EXPECT_EQ(w.name, "ml/train");
  EXPECT_EQ(w.awaited_pods, 0);
  EXPECT_EQ(w.queue, "team-a");  // from the template's labels
  EXPECT_EQ(w.priority, 10);
  EXPECT_EQ(w.state, core::WorkloadState::kPending);
  ASSERT_EQ(w.pod_sets.size(), 1u);
  EXPECT_EQ(w.pod_sets[0].count, 4);
  EXPECT_EQ(w.pod_sets[0].request, core::Resources::Of(2, 2000, int64_t{8} << 30));
  EXPECT_EQ(w.submit_time.count(), UnixMs("2026-11-30T09:00:00Z"));  // the Job's creation
  const WorkloadSource& src = b.sources[t];
  EXPECT_EQ(src.kind, WorkloadSource::Kind::kJob);
  EXPECT_EQ(src.suspendable_uid(), "uid-job-train");
  EXPECT_EQ(src.namespace_name(), "ml");
  EXPECT_EQ(src.name(), "train");
  EXPECT_EQ(
      src.Involved(),
      (Json{{"apiVersion", "batch/v1"},
            {"kind", "Job"},
            {"metadata", {{"name", "train"}, {"namespace", "ml"}, {"uid", "uid-job-train"}}}}));
  ASSERT_EQ(src.pods.size(), 1u);
  ASSERT_EQ(src.pods[0].size(), 4u);
  EXPECT_EQ(src.pods[0][2].name(), "train-2");
  EXPECT_EQ(src.PodKeys(),
            (std::vector<std::string>{"ml/train-0", "ml/train-1", "ml/train-2", "ml/train-3"}));
  EXPECT_FALSE(src.IsPodNamed("ml/train"));

  // The engine binds the whole gang, and the replicas name real pods.
  core::CycleResult r = core::Engine().Schedule([&] {
    core::Snapshot s = b.snapshot;
    s.queues = {QueueNamed("team-a", 8)};
    return s;
  }());
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods.size(), 4u);
  EXPECT_EQ(r.binds[0].workload.index(), t);
  // The pods of half wait, and say why (chamberd writes it on them).
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(r.pending[0].workload.index(), 1 - t);
  EXPECT_EQ(r.pending[0].reason, core::PendingReason::kWaitingForPods);
  EXPECT_EQ(r.pending[0].message(),
            "the gang needs 4 pods and 2 exist; it is placed once the rest are created");
}

TEST(SnapshotBuilderTest, BoundPodsHoldTheirSlotsAndForeignPodsHoldTheRest) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.jobs = {JobObj("ml", "train", 2, 2)};
  Json bound = OwnedBy("train");
  bound["spec"] = {{"nodeName", "n1"}};
  bound["status"] = {{"phase", "Running"}, {"startTime", "2026-11-30T10:30:00Z"}};
  Json b0 = bound, b1 = bound;
  b0["metadata"]["annotations"] = {{"chamber.io/gpu-indices", "4,5"}};
  b1["metadata"]["annotations"] = {{"chamber.io/gpu-indices", "6,7"}};
  in.pods = {Pod("ml", "train-0", 2, b0), Pod("ml", "train-1", 2, b1),
             // Another scheduler's pod: two GPUs, slots unknown.
             Pod("ml", "other", 2,
                 {{"spec", {{"schedulerName", "default-scheduler"}, {"nodeName", "n1"}}},
                  {"status", {{"phase", "Running"}}}}),
             // Finished pods hold nothing.
             Pod("ml", "done", 8,
                 {{"spec", {{"schedulerName", "default-scheduler"}, {"nodeName", "n1"}}},
                  {"status", {{"phase", "Succeeded"}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.state, core::WorkloadState::kRunning);
  ASSERT_EQ(w.placements.size(), 2u);
  EXPECT_EQ(w.placements[0].gpu_mask, 0b0011'0000u);
  EXPECT_EQ(w.placements[1].gpu_mask, 0b1100'0000u);
  EXPECT_EQ(w.start_time.count(), UnixMs("2026-11-30T10:30:00Z"));
  const core::Node& n = b.snapshot.nodes[0];
  EXPECT_EQ(n.external_gpu_mask, 0b0000'0011u) << "the lowest free slots";
  EXPECT_EQ(n.allocatable.cpu_milli(), 62'000) << "less the foreign pod's CPU";
  EXPECT_EQ(n.max_pods, 109);

  // The engine sees only slots 2 and 3 free.
  core::Snapshot s = b.snapshot;
  s.queues = {QueueNamed("team-a", 8)};
  s.workloads.push_back(s.workloads[0]);
  s.workloads[1].name = "ml/more";
  s.workloads[1].state = core::WorkloadState::kPending;
  s.workloads[1].placements.clear();
  s.workloads[1].pod_sets[0].count = 1;
  s.workloads[1].pod_sets[0].request = core::Resources::Of(3, 0, 0);
  core::CycleResult r = core::Engine().Schedule(s);
  EXPECT_TRUE(r.binds.empty()) << "3 GPUs do not fit in the 2 free slots";
  s.workloads[1].pod_sets[0].request = core::Resources::Of(2, 0, 0);
  r = core::Engine().Schedule(s);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods[0].placement.gpu_mask, 0b0000'1100u);
}

TEST(SnapshotBuilderTest, ConflictingOrMalformedSlotAnnotationsAreReassignedAndReported) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 4)};
  auto on = [](const char* gpus) {
    return Json{{"metadata", {{"annotations", {{"chamber.io/gpu-indices", gpus}}}}},
                {"spec", {{"nodeName", "n1"}}},
                {"status", {{"phase", "Running"}}}};
  };
  in.pods = {Pod("ml", "a", 2, on("0,1")), Pod("ml", "b", 1, on("1")), Pod("ml", "c", 1, on("x"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 3u);
  uint64_t all = 0;
  for (const core::Workload& w : b.snapshot.workloads) {
    ASSERT_EQ(w.placements.size(), 1u);
    EXPECT_EQ(all & w.placements[0].gpu_mask, 0u) << w.name << " shares a slot";
    all |= w.placements[0].gpu_mask;
  }
  EXPECT_EQ(all, 0b1111u);
  ASSERT_EQ(b.problems.size(), 2u);
  EXPECT_EQ(b.problems[0],
            "pod ml/c: annotation chamber.io/gpu-indices: \"x\" is not a GPU index (0 to 63); "
            "given free GPU slots instead");
  EXPECT_EQ(b.problems[1],
            "pod ml/b: annotation chamber.io/gpu-indices=1 does not match its 1 GPUs on node n1; "
            "given free GPU slots instead");
}

// A share of one GPU is asked for by annotation (docs/sharing.md, "Asking for a share"); a
// share is bound only once the webhook gave its containers the GPU's environment, and an
// annotation that does not read leaves the pod waiting with a reason that names it.
TEST(SnapshotBuilderTest, SharesAreReadFromAnnotationsAndWaitForTheirEnvironment) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 2, {{"metadata", {{"labels", {{"nvidia.com/gpu.memory", "81920"}}}}}})};
  auto share = [](Json annotations, bool env = true) {
    if (env) annotations["chamber.io/gpu-env"] = "downward-api";
    return Json{
        {"metadata", {{"annotations", annotations}, {"labels", {{"chamber.io/queue", "q"}}}}}};
  };
  in.pods = {
      Pod("ml", "half", 0,
          share({{"chamber.io/gpu-fraction", "0.5"}, {"chamber.io/gpu-memory", "10Gi"}})),
      Pod("ml", "bad", 0, share({{"chamber.io/gpu-fraction", "1.5"}})),
      Pod("ml", "bare", 0, share({{"chamber.io/gpu-fraction", "0.25"}}, false)),
      Pod("ml", "both", 1, share({{"chamber.io/gpu-fraction", "0.5"}})),
  };
  in.queues = {QueueNamed("q", 2)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 4u);
  std::map<std::string, const core::PodSet*> sets;
  for (const core::Workload& w : b.snapshot.workloads) sets[w.name] = &w.pod_sets.at(0);
  EXPECT_EQ(sets.at("ml/half")->request.gpu_milli(), 500);
  EXPECT_TRUE(sets.at("ml/half")->request.gpu_share());
  EXPECT_EQ(sets.at("ml/half")->gpu_memory_mib, 10240);
  EXPECT_EQ(sets.at("ml/half")->invalid_reason, "");

  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[r.binds[0].workload.index()].name, "ml/half");
  std::map<std::string, std::string> why;
  for (const core::PendingDecision& p : r.pending) {
    EXPECT_EQ(p.reason, core::PendingReason::kInvalidWorkload) << p.message();
    why[b.snapshot.workloads[p.workload.index()].name] = p.message();
  }
  EXPECT_EQ(why["ml/bad"],
            "pod set bad: annotation chamber.io/gpu-fraction: \"1.5\" is not a fraction of one GPU "
            "(use forms like 0.5, 0.25 or 250m; at most 3 decimals)");
  EXPECT_EQ(
      why["ml/bare"],
      "pod set bare: asks for a share of a GPU but its containers were not given the GPU's "
      "environment (annotation chamber.io/gpu-env: downward-api, set by chamberd's admission "
      "webhook; docs/sharing.md): created while the webhook did not answer? Delete the pod so "
      "that it is created again");
  EXPECT_EQ(why["ml/both"],
            "pod set both: requests nvidia.com/gpu: 1 and annotation chamber.io/gpu-fraction: "
            "\"0.5\"; a pod asks for whole GPUs or a share of one, not both");
}

// A node of `gpus` GPUs of `model` with `memory_mib` each, as GPU feature discovery labels it.
std::shared_ptr<const kube::Node> ModelNode(const std::string& name, int gpus,
                                            const std::string& model, int64_t memory_mib) {
  return GpuNode(name, gpus,
                 {{"metadata",
                   {{"labels",
                     {{"nvidia.com/gpu.product", model},
                      {"nvidia.com/gpu.memory", std::to_string(memory_mib)}}}}}});
}

// A share of `memory` alone (docs/sharing.md, "A share of memory alone") in queue q, given its
// environment; `extra` merged in.
std::shared_ptr<const kube::Pod> MemoryShare(const std::string& name, const std::string& memory,
                                             Json extra = {}) {
  Json j = {{"metadata",
             {{"annotations",
               {{"chamber.io/gpu-memory", memory}, {"chamber.io/gpu-env", "downward-api"}}},
              {"labels", {{"chamber.io/queue", "q"}}}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return Pod("ml", name, 0, j);
}

// Bound to GPU `gpu` of `node` and running; `extra` merged in.
Json BoundTo(const std::string& node, const std::string& gpu, const Json& extra = {}) {
  Json j = {{"metadata", {{"annotations", {{"chamber.io/gpu-indices", gpu}}}}},
            {"spec", {{"nodeName", node}}},
            {"status", {{"phase", "Running"}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return j;
}

// docs/sharing.md, "A share of memory alone": bound, a share holds and is charged its memory's
// part of its own GPU (a gang's pods, of the smallest of theirs); waiting, of the smallest GPU
// it may go on; one that no GPU can take waits, naming the annotation, until a node can.
TEST(SnapshotBuilderTest, AShareOfMemoryAloneIsChargedByItsGpuOnceBoundAndByTheSmallestBefore) {
  ClusterObjects in;
  in.nodes = {ModelNode("small", 2, "A100-40GB", 40960), ModelNode("big", 2, "H100-80GB", 81920)};
  Json group = {{"metadata", {{"labels", {{"chamber.io/pod-group", "g"}}}}}};
  in.pods = {
      MemoryShare("waiting", "20Gi"),
      MemoryShare("h100-only", "20Gi",
                  {{"metadata", {{"annotations", {{"chamber.io/gpu-models", "H100-80GB"}}}}}}),
      MemoryShare("large", "60Gi"),
      MemoryShare("too-large", "100Gi"),
      MemoryShare("bound-big", "20Gi", BoundTo("big", "1")),
      MemoryShare("bound-small", "10Gi", BoundTo("small", "1")),
      MemoryShare("gang-small", "20Gi", BoundTo("small", "0", group)),
      MemoryShare("gang-big", "20Gi", BoundTo("big", "0", group)),
  };
  in.queues = {QueueNamed("q", 8)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.problems.empty()) << b.problems.front();
  std::map<std::string, const core::PodSet*> sets;
  for (const core::Workload& w : b.snapshot.workloads) sets[w.name] = &w.pod_sets.at(0);
  auto charged = [&](const std::string& name) {
    const core::PodSet* ps = sets.at("ml/" + name);
    EXPECT_TRUE(ps->gpu_memory_only) << name;
    EXPECT_TRUE(ps->request.gpu_share()) << name;
    return ps->request.gpu_milli();
  };
  EXPECT_EQ(charged("waiting"), 500) << "20 GiB of the smallest GPU it may go on, 40 GiB";
  EXPECT_EQ(charged("h100-only"), 250) << "it names the 80 GiB model";
  EXPECT_EQ(charged("large"), 750) << "60 GiB: only the 80 GiB GPUs have that much";
  EXPECT_EQ(charged("bound-big"), 250) << "its own GPU's part";
  EXPECT_EQ(charged("bound-small"), 250) << "10 GiB of 40";
  EXPECT_EQ(sets.at("ml/g")->count, 2);
  EXPECT_EQ(sets.at("ml/g")->request.gpu_milli(), 500) << "the smallest GPU of its pods";
  EXPECT_EQ(sets.at("ml/too-large")->invalid_reason,
            "annotation chamber.io/gpu-memory asks for 102400 MiB alone: no GPU it may go on has "
            "that much memory (GPU memory is read from the nodes' nvidia.com/gpu.memory label)");
  EXPECT_EQ(sets.at("ml/waiting")->invalid_reason, "");

  // Through the engine: the waiting ones go where there is room, the too large one waits.
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  std::map<std::string, core::PodPlacement> placed;
  for (const core::BindDecision& d : r.binds)
    placed[b.snapshot.workloads[d.workload.index()].name] = d.pods.at(0).placement;
  EXPECT_EQ(placed.size(), 3u);
  for (const core::PendingDecision& p : r.pending) {
    if (b.snapshot.workloads[p.workload.index()].name == "ml/too-large") {
      EXPECT_EQ(p.reason, core::PendingReason::kInvalidWorkload);
    }
  }
  ASSERT_TRUE(placed.contains("ml/large"));
  EXPECT_EQ(b.snapshot.nodes[placed["ml/large"].node.index()].name, "big")
      << "only the big node has 60 GiB on a GPU";

  // A node that can take it ends the wait: charged by it, the reason gone.
  in.nodes.push_back(ModelNode("huge", 1, "H200-141GB", 131072));
  b = BuildSnapshot(in, Opts());
  sets.clear();
  for (const core::Workload& w : b.snapshot.workloads) sets[w.name] = &w.pod_sets.at(0);
  EXPECT_EQ(sets.at("ml/too-large")->invalid_reason, "");
  EXPECT_EQ(charged("too-large"), 782) << "100 GiB of 128, rounded up";
  EXPECT_EQ(charged("waiting"), 500);
}

// Queue q with a quota and a hard limit of `gpus` (a lone queue borrows past its quota; the
// limit never gives).
void LimitedQueue(ClusterObjects& in, int64_t gpus) {
  in.queues = {QueueNamed("q", gpus)};
  in.queues[0].res(core::Resource::kGpu).limit = core::Gpus(gpus);
}

// Binds, as chamberd does, each one-pod workload of `built` that `r` placed: its pod in `in`
// becomes what `bound_pod(name, node, placement)` makes. Returns, by pod name, the node name and
// the placement.
std::map<std::string, std::pair<std::string, core::PodPlacement>> BindAsPlaced(
    const BuiltSnapshot& built, const core::CycleResult& r, ClusterObjects& in,
    const std::function<std::shared_ptr<const kube::Pod>(const std::string&, const std::string&,
                                                         const core::PodPlacement&)>& bound_pod) {
  std::map<std::string, std::pair<std::string, core::PodPlacement>> bound;
  for (const core::BindDecision& d : r.binds) {
    const std::string name = built.snapshot.workloads[d.workload.index()].name.substr(3);
    const core::PodPlacement& pl = d.pods.at(0).placement;
    const std::string& node = built.snapshot.nodes[pl.node.index()].name;
    bound[name] = {node, pl};
    for (auto& p : in.pods)
      if (p->metadata.name == name) p = bound_pod(name, node, pl);
  }
  return bound;
}

// A node whose device plugin divides its GPUs, labelled as GPU feature discovery does, with
// `pool` as its chamber-test/pool label.
std::shared_ptr<const kube::Node> DividingNode(const std::string& name, int units,
                                               const std::string& pool, Json labels) {
  labels["chamber-test/pool"] = pool;
  return GpuNode(name, units, {{"metadata", {{"labels", labels}}}});
}

// A pod of `gpus` whole GPUs (units) in queue q; `extra` merged in.
std::shared_ptr<const kube::Pod> UnitPod(const std::string& name, int gpus, Json extra = {}) {
  Json j = {{"metadata", {{"labels", {{"chamber.io/queue", "q"}}}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return Pod("ml", name, gpus, j);
}

// docs/sharing.md, "Nodes whose device plugin divides GPUs": a unit is charged the part of a GPU
// it is (replicas, a MIG device of the single strategy, both; a sharing strategy without
// replicas is whole GPUs); bound, by the units held (a gang's pods, the most of theirs); waiting,
// by the largest unit of the nodes its node selector allows.
TEST(SnapshotBuilderTest, UnitsOfADividingNodeAreChargedAsThePartsTheyAre) {
  ClusterObjects in;
  in.nodes = {
      GpuNode("plain", 2),
      DividingNode(
          "sliced", 8, "sliced",
          {{"nvidia.com/gpu.replicas", "4"}, {"nvidia.com/gpu.sharing-strategy", "time-slicing"}}),
      DividingNode("mig", 7, "mig",
                   {{"nvidia.com/mig.strategy", "single"},
                    {"nvidia.com/gpu.product", "A100-SXM4-40GB-MIG-1g.5gb"}}),
      DividingNode("both", 4, "both",
                   {{"nvidia.com/gpu.replicas", "2"},
                    {"nvidia.com/mig.strategy", "single"},
                    {"nvidia.com/gpu.product", "A100-SXM4-40GB-MIG-3g.20gb"}}),
      DividingNode("mps", 2, "mps", {{"nvidia.com/gpu.sharing-strategy", "mps"}}),
  };
  auto to = [](const std::string& pool) {
    return Json{{"spec", {{"nodeSelector", {{"chamber-test/pool", pool}}}}}};
  };
  Json group = {{"metadata", {{"labels", {{"chamber.io/pod-group", "g"}}}}}};
  in.pods = {
      UnitPod("anywhere", 1),
      UnitPod("to-sliced", 2, to("sliced")),
      UnitPod("to-mig", 1, to("mig")),
      UnitPod("bound-sliced", 1, BoundTo("sliced", "0")),
      UnitPod("bound-both", 1, BoundTo("both", "0")),
      UnitPod("bound-mig", 1, BoundTo("mig", "0")),
      UnitPod("bound-mps", 1, BoundTo("mps", "0")),
      UnitPod("g-a", 1, BoundTo("sliced", "1", group)),
      UnitPod("g-b", 1, BoundTo("mig", "1", group)),
  };
  in.queues = {QueueNamed("q", 16)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.problems.empty()) << b.problems.front();
  std::map<std::string, const core::PodSet*> sets;
  for (const core::Workload& w : b.snapshot.workloads) sets[w.name] = &w.pod_sets.at(0);
  auto charge = [&](const std::string& name) {
    return sets.at("ml/" + name)->Charge().gpu_milli();
  };
  EXPECT_EQ(charge("anywhere"), 1000) << "a plain node may take it: a whole GPU while it waits";
  EXPECT_EQ(charge("to-sliced"), 500) << "two quarter replicas";
  EXPECT_EQ(charge("to-mig"), 142) << "1g of 7";
  EXPECT_EQ(charge("bound-sliced"), 250);
  EXPECT_EQ(charge("bound-both"), 214) << "3g of 7 over 2 replicas";
  EXPECT_EQ(charge("bound-mig"), 142);
  EXPECT_EQ(charge("bound-mps"), 1000) << "a sharing strategy without replicas: whole GPUs";
  EXPECT_EQ(sets.at("ml/g")->count, 2);
  EXPECT_EQ(charge("g"), 250) << "the most either pod holds";
  EXPECT_EQ(sets.at("ml/bound-sliced")->request.whole_gpus(), 1) << "placed as a unit";

  // The engine charges the queue what the pod sets say.
  const core::CycleResult r = core::Engine().Schedule(b.snapshot);
  int64_t allocated = -1;
  for (const core::QueueStatus& q : r.queues)
    if (q.name == "q") allocated = q.allocated.gpu_milli();
  // Running 250 + 214 + 142 + 1000 + 2 x 250; placed now 1000 + 500 + 142.
  EXPECT_EQ(allocated, 2106 + 1642);
  EXPECT_EQ(r.binds.size(), 3u);
}

// The promises of docs/sharing.md, "Nodes whose device plugin divides GPUs", on random clusters:
// plain nodes, nodes of replicas, of MIG devices under the single strategy and of both, in two
// pools; pods of 1 to 3 units, some held to a pool; built, scheduled by the real engine, bound
// where it said and built again, under a hard limit.
RC_GTEST_PROP(DividedUnitProperty, ChargedNoLessWhileWaitingThanOnceBoundAndNeverOverALimit, ()) {
  struct Kind {
    int64_t replicas;     // 1: none
    std::string profile;  // MIG single strategy; empty: none
    int64_t unit;         // thousandths, as docs/sharing.md's table gives it
  };
  static const Kind kKinds[] = {{1, "", 1000},       {2, "", 500},       {4, "", 250},
                                {8, "", 125},        {1, "1g.5gb", 142}, {1, "3g.20gb", 428},
                                {2, "2g.10gb", 142}, {4, "3g.20gb", 107}};
  ClusterObjects in;
  std::map<std::string, std::pair<int64_t, std::string>> node_unit;  // unit, pool
  const int nodes = *rc::gen::inRange(1, 6);
  for (int n = 0; n < nodes; ++n) {
    const Kind& k = kKinds[*rc::gen::inRange<size_t>(0, std::size(kKinds))];
    const std::string name = "n" + std::to_string(n), pool = "p" + std::to_string(n % 2);
    Json labels = Json::object();
    if (k.replicas > 1) labels["nvidia.com/gpu.replicas"] = std::to_string(k.replicas);
    if (!k.profile.empty()) {
      labels["nvidia.com/mig.strategy"] = "single";
      labels["nvidia.com/gpu.product"] = "A100-SXM4-40GB-MIG-" + k.profile;
    }
    in.nodes.push_back(DividingNode(name, *rc::gen::inRange(1, 5), pool, labels));
    node_unit[name] = {k.unit, pool};
  }
  struct Ask {
    int gpus;
    std::string pool;  // empty: any
  };
  std::map<std::string, Ask> asks;
  const int pods = *rc::gen::inRange(1, 10);
  for (int i = 0; i < pods; ++i) {
    Ask a{*rc::gen::inRange(1, 4), ""};
    if (*rc::gen::inRange(0, 2) == 0) a.pool = "p" + std::to_string(*rc::gen::inRange(0, 2));
    Json extra = Json::object();
    if (!a.pool.empty()) extra = {{"spec", {{"nodeSelector", {{"chamber-test/pool", a.pool}}}}}};
    const std::string name = "u" + std::to_string(i);
    in.pods.push_back(UnitPod(name, a.gpus, extra));
    asks[name] = a;
  }
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 4);
  LimitedQueue(in, limit);

  BuiltSnapshot b = BuildSnapshot(in, Opts());
  std::map<std::string, int64_t> waiting_charge;
  for (const core::Workload& w : b.snapshot.workloads) {
    const std::string name = w.name.substr(3);
    const Ask& a = asks.at(name);
    int64_t largest = 0;
    for (const auto& [node, up] : node_unit)
      if (a.pool.empty() || a.pool == up.second) largest = std::max(largest, up.first);
    if (largest == 0) largest = 1000;  // no node for it: its request's whole GPUs
    waiting_charge[name] = w.pod_sets[0].Charge().gpu_milli();
    RC_ASSERT(waiting_charge[name] == a.gpus * largest);
  }

  const auto bound = BindAsPlaced(
      b, core::Engine().Schedule(b.snapshot), in,
      [&](const std::string& name, const std::string& node, const core::PodPlacement& pl) {
        Json extra = {{"metadata", {{"labels", {{"chamber.io/queue", "q"}}}}}};
        if (!asks[name].pool.empty())
          extra["spec"]["nodeSelector"] = {{"chamber-test/pool", asks[name].pool}};
        return Pod("ml", name, asks[name].gpus,
                   BoundTo(node, FormatIndexList(MaskToIndices(pl.gpu_mask)), extra));
      });
  b = BuildSnapshot(in, Opts());
  int64_t held = 0;
  for (const core::Workload& w : b.snapshot.workloads) {
    const std::string name = w.name.substr(3);
    auto it = bound.find(name);
    if (it == bound.end()) continue;
    RC_ASSERT(w.state == core::WorkloadState::kRunning);
    const int64_t charge = w.pod_sets[0].Charge().gpu_milli();
    // Promise 1: charged by the units it holds. Promise 2: never less while it waited.
    RC_ASSERT(charge == asks[name].gpus * node_unit.at(it->second.first).first);
    RC_ASSERT(waiting_charge.at(name) >= charge);
    held += charge;
  }
  RC_ASSERT(held <= limit * 1000);
  RC_TAG(bound.empty() ? "none bound" : "some bound");
}

// The promises of docs/sharing.md, "A share of memory alone", on random clusters: nodes of GPUs
// of four memories (each its own model), shares of memory alone of any size, some naming a
// model, built, scheduled by the real engine, bound where it said and built again.
RC_GTEST_PROP(MemoryShareProperty, ChargedNoLessWhileWaitingThanOnceBoundAndNeverOverAGpu, ()) {
  static constexpr int64_t kMemories[] = {24576, 40960, 81920, 143360};
  auto model = [](int64_t memory) { return "GPU-" + std::to_string(memory / 1024) + "GB"; };
  ClusterObjects in;
  std::map<std::string, std::vector<int64_t>> gpu_memory;  // per node, per GPU
  const int nodes = *rc::gen::inRange(1, 5);
  for (int n = 0; n < nodes; ++n) {
    const int64_t memory =
        *rc::gen::elementOf(std::vector<int64_t>(std::begin(kMemories), std::end(kMemories)));
    const int gpus = *rc::gen::inRange(1, 4);
    const std::string name = "n" + std::to_string(n);
    in.nodes.push_back(ModelNode(name, gpus, model(memory), memory));
    gpu_memory[name].assign(static_cast<size_t>(gpus), memory);
  }
  struct Ask {
    int64_t memory;
    std::string model;  // empty: any
  };
  std::map<std::string, Ask> asks;
  const int pods = *rc::gen::inRange(1, 12);
  for (int i = 0; i < pods; ++i) {
    Ask a{*rc::gen::inRange<int64_t>(1, 150'000), ""};
    if (*rc::gen::inRange(0, 3) == 0)
      a.model = model(
          *rc::gen::elementOf(std::vector<int64_t>(std::begin(kMemories), std::end(kMemories))));
    const std::string name = "s" + std::to_string(i);
    Json extra = Json::object();
    if (!a.model.empty())
      extra = {{"metadata", {{"annotations", {{"chamber.io/gpu-models", a.model}}}}}};
    in.pods.push_back(MemoryShare(name, std::to_string(a.memory), extra));
    asks[name] = a;
  }
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 4);
  LimitedQueue(in, limit);

  BuiltSnapshot b = BuildSnapshot(in, Opts());
  std::map<std::string, int64_t> waiting_charge;
  for (const core::Workload& w : b.snapshot.workloads) {
    const std::string name = w.name.substr(3);
    const Ask& a = asks.at(name);
    // Promise 3: invalid exactly when no GPU it may go on has the memory.
    int64_t smallest = 0;
    for (const auto& [node, memories] : gpu_memory)
      for (int64_t m : memories)
        if (m >= a.memory && (a.model.empty() || a.model == model(m)) &&
            (smallest == 0 || m < smallest))
          smallest = m;
    RC_ASSERT(w.pod_sets[0].invalid_reason.empty() == (smallest > 0));
    if (smallest > 0) {
      waiting_charge[name] = w.pod_sets[0].request.gpu_milli();
      RC_ASSERT(waiting_charge[name] == gpu_share::MemoryShareMilli(a.memory, smallest));
    }
  }

  // Bind what the engine placed, as chamberd does, and build again.
  const auto bound = BindAsPlaced(
      b, core::Engine().Schedule(b.snapshot), in,
      [&](const std::string& name, const std::string& node, const core::PodPlacement& pl) {
        Json extra = {{"metadata", {{"uid", "uid-ml-" + name}}}};
        if (!asks[name].model.empty())
          extra["metadata"]["annotations"]["chamber.io/gpu-models"] = asks[name].model;
        return MemoryShare(name, std::to_string(asks[name].memory),
                           BoundTo(node, std::to_string(std::countr_zero(pl.gpu_mask)), extra));
      });
  b = BuildSnapshot(in, Opts());
  std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>> on_gpu;  // milli, memory
  int64_t held = 0;
  for (const core::Workload& w : b.snapshot.workloads) {
    const std::string name = w.name.substr(3);
    auto it = bound.find(name);
    if (it == bound.end()) continue;
    RC_ASSERT(w.state == core::WorkloadState::kRunning);
    const auto& [node, pl] = it->second;
    RC_ASSERT(std::popcount(pl.gpu_mask) == 1);
    const int gpu = std::countr_zero(pl.gpu_mask);
    const int64_t memory = gpu_memory.at(node).at(static_cast<size_t>(gpu));
    const int64_t charge = w.pod_sets[0].request.gpu_milli();
    // Promise 1: charged by its own GPU. Promise 2: never less while it waited.
    RC_ASSERT(charge == gpu_share::MemoryShareMilli(asks[name].memory, memory));
    RC_ASSERT(waiting_charge.at(name) >= charge);
    auto& [milli, mem] = on_gpu[{node, gpu}];
    milli += charge;
    mem += asks[name].memory;
    RC_ASSERT(milli <= 1000);
    RC_ASSERT(mem <= memory);
    held += charge;
  }
  RC_ASSERT(held <= limit * 1000);
  RC_TAG(bound.empty() ? "none bound" : "some bound");
}

// A pod asking for a MIG device (the device plugin's mixed strategy) is not bound to a node
// chamberd cannot tell has one free: it waits, naming the resource; a Job's pods alike.
// A pod asking for `requests` (resource -> quantity) and nothing else, in queue q.
std::shared_ptr<const kube::Pod> PodRequesting(const std::string& name, Json requests,
                                               Json extra = {}) {
  Json j = {
      {"metadata", {{"labels", {{"chamber.io/queue", "q"}}}}},
      {"spec",
       {{"containers",
         {{{"name", "main"}, {"image", "infer"}, {"resources", {{"requests", requests}}}}}}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return Pod("ml", name, 0, j);
}

// MIG devices of the device plugin's mixed strategy (docs/sharing.md, "MIG devices"): a node's
// nvidia.com/mig-<profile> allocatable, less what other schedulers' pods hold, counted per
// profile; the snapshot's profiles in name order, each charged its slices; a pod asking for
// devices of one profile is bound to a node with them free, no GPU index named.
TEST(SnapshotBuilderTest, MigDevicesAreCountedPerNodeAndProfile) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 2,
                      {{"status",
                        {{"allocatable",
                          {{"nvidia.com/mig-3g.40gb", "1"}, {"nvidia.com/mig-1g.10gb", "7"}}}}}}),
              GpuNode("n2", 1)};
  in.pods = {
      PodRequesting("mig", {{"cpu", "1"}, {"nvidia.com/mig-1g.10gb", "2"}}),
      PodRequesting("theirs", {{"nvidia.com/mig-1g.10gb", "3"}},
                    {{"spec", {{"schedulerName", "default-scheduler"}, {"nodeName", "n1"}}}}),
      PodRequesting("both", {{"nvidia.com/mig-1g.10gb", "1"}, {"nvidia.com/gpu", "1"}}),
      PodRequesting("two", {{"nvidia.com/mig-1g.10gb", "1"}, {"nvidia.com/mig-3g.40gb", "1"}}),
      PodRequesting("odd", {{"nvidia.com/mig-big", "1"}}),
      PodRequesting("too-many", {{"nvidia.com/mig-3g.40gb", "2"}})};
  in.queues = {QueueNamed("q", 4)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.mig_profiles.size(), 2u);
  EXPECT_EQ(b.snapshot.mig_profiles[0].name, "1g.10gb");
  EXPECT_EQ(b.snapshot.mig_profiles[0].milli, 142);
  EXPECT_EQ(b.snapshot.mig_profiles[1].name, "3g.40gb");
  EXPECT_EQ(b.snapshot.mig_profiles[1].milli, 428);
  // n1: 7 devices of 1g.10gb less the 3 another scheduler's pod holds; its GPUs are its own.
  EXPECT_EQ(b.snapshot.nodes[0].mig_devices[0], 4);
  EXPECT_EQ(b.snapshot.nodes[0].mig_devices[1], 1);
  EXPECT_EQ(b.snapshot.nodes[0].gpus.size(), 2u);
  EXPECT_EQ(b.snapshot.nodes[0].mig_model, "H100") << "its GPUs in MIG mode: the product label";
  EXPECT_EQ(b.snapshot.nodes[1].mig_devices, (std::array<uint8_t, core::kMaxMigProfiles>{}));
  EXPECT_TRUE(b.snapshot.nodes[1].mig_model.empty()) << "no MIG devices";

  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  std::map<std::string, std::string> pending;
  for (const core::PendingDecision& p : r.pending)
    pending[b.snapshot.workloads[p.workload.index()].name] = p.message();
  ASSERT_EQ(r.binds.size(), 1u);
  const core::Workload& mig = b.snapshot.workloads[r.binds[0].workload.index()];
  EXPECT_EQ(mig.name, "ml/mig");
  EXPECT_EQ(mig.pod_sets[0].mig, (core::MigAsk{0, 2, 142}));
  EXPECT_EQ(mig.TotalRequest().gpu_milli(), 284);
  EXPECT_EQ(r.binds[0].pods[0].placement.node.value, 0);
  EXPECT_EQ(r.binds[0].pods[0].placement.gpu_mask, 0u);
  EXPECT_EQ(pending["ml/both"],
            "pod set both: requests nvidia.com/mig-1g.10gb: 1 and nvidia.com/gpu: 1; a pod asks "
            "for MIG devices, whole GPUs or a share of one");
  EXPECT_EQ(pending["ml/two"],
            "pod set two: requests nvidia.com/mig-1g.10gb and nvidia.com/mig-3g.40gb: 1; a pod "
            "asks for MIG devices of one profile");
  EXPECT_EQ(pending["ml/odd"],
            "pod set odd: requests nvidia.com/mig-big: 1, which names no MIG profile "
            "(<slices>g.<memory>gb)");
  EXPECT_EQ(pending["ml/too-many"],
            "no node fits a pod of 2 x MIG 3g.40gb: 1 node no MIG devices of the profile, 1 node "
            "too few free MIG devices of the profile");
}

// A bound MIG pod of chamberd's holds its devices: the next build counts them, and a pod that
// would take more devices than are left waits.
TEST(SnapshotBuilderTest, ABoundMigPodHoldsItsDevices) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 0, {{"status", {{"allocatable", {{"nvidia.com/mig-2g.20gb", "3"}}}}}})};
  in.pods = {PodRequesting("running", {{"nvidia.com/mig-2g.20gb", "2"}},
                           {{"spec", {{"nodeName", "n1"}}},
                            {"metadata", {{"annotations", {{"chamber.io/gpu-indices", ""}}}}}}),
             PodRequesting("waiting", {{"nvidia.com/mig-2g.20gb", "2"}}),
             PodRequesting("fits", {{"nvidia.com/mig-2g.20gb", "1"}})};
  in.queues = {QueueNamed("q", 4)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.problems.empty()) << b.problems.front();
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  EXPECT_TRUE(r.issues.empty());
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[r.binds[0].workload.index()].name, "ml/fits");
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(
      r.pending[0].message(),
      "no node fits a pod of 2 x MIG 2g.20gb: 1 node too few free MIG devices of the profile");
}

// A node whose device plugin divides its GPUs, as GPU feature discovery labels it (replicas of
// each GPU, a sharing strategy, MIG devices under the single strategy), advertises parts of GPUs
// as nvidia.com/gpu: no share of a GPU goes there, and a waiting share says why. Pods of whole
// GPUs still go there.
TEST(SnapshotBuilderTest, NoShareGoesToANodeWhoseDevicePluginDividesItsGpus) {
  auto labelled = [](const Json& labels) {
    Json node = {{"metadata", {{"labels", labels}}}};
    return GpuNode("n1", 8, node);
  };
  auto divides = [&](const Json& labels) {
    ClusterObjects in;
    in.nodes = {labelled(labels)};
    BuiltSnapshot b = BuildSnapshot(in, Opts());
    EXPECT_EQ(b.snapshot.nodes.size(), 1u);
    return !b.snapshot.nodes.empty() && b.snapshot.nodes[0].device_plugin_shares;
  };
  EXPECT_FALSE(divides(Json::object()));
  EXPECT_TRUE(divides({{"nvidia.com/gpu.replicas", "4"}}));
  EXPECT_FALSE(divides({{"nvidia.com/gpu.replicas", "1"}}));
  EXPECT_TRUE(divides({{"nvidia.com/gpu.sharing-strategy", "time-slicing"}}));
  EXPECT_TRUE(divides({{"nvidia.com/gpu.sharing-strategy", "mps"}}));
  EXPECT_FALSE(divides({{"nvidia.com/gpu.sharing-strategy", "none"}}));
  EXPECT_TRUE(divides({{"nvidia.com/mig.strategy", "single"},
                       {"nvidia.com/gpu.product", "A100-SXM4-40GB-MIG-1g.5gb"}}));
  EXPECT_FALSE(divides(
      {{"nvidia.com/mig.strategy", "single"}, {"nvidia.com/gpu.product", "A100-SXM4-40GB"}}))
      << "the single strategy with MIG off advertises whole GPUs";
  EXPECT_FALSE(divides(
      {{"nvidia.com/mig.strategy", "mixed"}, {"nvidia.com/gpu.product", "A100-SXM4-40GB"}}));

  // A half share and a whole GPU pod on a time-sliced node alone: the whole GPU is bound, the
  // share waits and names the node's device plugin.
  ClusterObjects in;
  in.nodes = {labelled({{"nvidia.com/gpu.replicas", "4"}})};
  const Json share = {
      {"metadata",
       {{"labels", {{"chamber.io/queue", "q"}}},
        {"annotations",
         {{"chamber.io/gpu-fraction", "0.5"}, {"chamber.io/gpu-env", "downward-api"}}}}}};
  in.pods = {Pod("ml", "half", 0, share),
             Pod("ml", "whole", 1, {{"metadata", {{"labels", {{"chamber.io/queue", "q"}}}}}})};
  in.queues = {QueueNamed("q", 8)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[r.binds[0].workload.index()].name, "ml/whole");
  ASSERT_EQ(r.pending.size(), 1u);
  EXPECT_EQ(r.pending[0].reason, core::PendingReason::kNoNodeFits);
  EXPECT_NE(r.pending[0].message().find("1 node GPUs divided by the device plugin"),
            std::string::npos)
      << r.pending[0].message();
}

// Bound shares hold the GPU their chamber.io/gpu-indices names, beside each other; a pod holding
// GPUs whole never gets a GPU that holds shares; a bound share whose annotations no longer read
// is taken to hold its GPU whole.
TEST(SnapshotBuilderTest, BoundSharesHoldTheirGpuBesideEachOtherNotBesideWholePods) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 4)};
  auto on = [](const char* fraction, const char* gpus) {
    Json j = {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Running"}}}};
    if (fraction != nullptr) j["metadata"]["annotations"]["chamber.io/gpu-fraction"] = fraction;
    if (gpus != nullptr) j["metadata"]["annotations"]["chamber.io/gpu-indices"] = gpus;
    return j;
  };
  Json waiting = {
      {"metadata",
       {{"annotations",
         {{"chamber.io/gpu-fraction", "0.125"}, {"chamber.io/gpu-env", "downward-api"}}},
        {"labels", {{"chamber.io/queue", "q"}}}}}};
  in.pods = {Pod("ml", "a", 0, on("0.5", "0")),
             Pod("ml", "b", 0, on("0.25", "0")),
             Pod("ml", "c", 0, on("0.125", nullptr)),
             Pod("ml", "d", 1, on(nullptr, nullptr)),
             Pod("ml", "e", 1, on(nullptr, "0")),
             Pod("ml", "f", 0, on("2", "3")),
             Pod("ml", "g", 0, waiting)};
  in.queues = {QueueNamed("q", 4)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  std::map<std::string, uint64_t> mask;
  for (const core::Workload& w : b.snapshot.workloads)
    if (!w.placements.empty()) mask[w.name] = w.placements[0].gpu_mask;
  EXPECT_EQ(mask["ml/a"], 0b0001u);
  EXPECT_EQ(mask["ml/b"], 0b0001u);
  EXPECT_EQ(mask["ml/c"], 0b0001u) << "a share without its index goes beside the shares";
  EXPECT_EQ(mask["ml/d"], 0b0010u) << "a whole GPU never holds shares";
  EXPECT_EQ(mask["ml/e"], 0b0100u);
  EXPECT_EQ(mask["ml/f"], 0b1000u);
  ASSERT_EQ(b.problems.size(), 2u);
  EXPECT_EQ(b.problems[0],
            "pod ml/f: annotation chamber.io/gpu-fraction: \"2\" is not a fraction of one GPU (use "
            "forms like 0.5, 0.25 or 250m; at most 3 decimals); taken as holding one GPU whole");
  EXPECT_EQ(b.problems[1],
            "pod ml/e: annotation chamber.io/gpu-indices=0 does not match its 1 GPUs on node n1; "
            "given free GPU slots instead");
  // The engine takes these claims as they are (no snapshot issue) and puts the waiting share in
  // the last eighth of GPU 0.
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  EXPECT_TRUE(r.issues.empty()) << r.issues.front().message;
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods[0].placement.gpu_mask, 0b0001u);
}

// A bare pod's share being deleted (a victim in its grace period) still holds its share, and
// only that: it is a releasing workload, not a GPU held outside the engine, which would close
// the GPU to the shares beside it. Another scheduler's pod holds what its resources ask for,
// whatever Chamber's annotations on it say.
TEST(SnapshotBuilderTest, ABareShareBeingDeletedReleasesItsShareOnly) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 2)};
  auto on = [](const char* gpus, bool deleting) {
    Json j = {{"metadata",
               {{"annotations",
                 {{"chamber.io/gpu-fraction", "0.25"}, {"chamber.io/gpu-indices", gpus}}}}},
              {"spec", {{"nodeName", "n1"}}},
              {"status", {{"phase", "Running"}}}};
    if (deleting) j["metadata"]["deletionTimestamp"] = "2026-11-30T10:05:00Z";
    return j;
  };
  Json foreign = on("1", false);
  foreign["spec"]["schedulerName"] = "default-scheduler";
  foreign["metadata"]["annotations"].erase("chamber.io/gpu-indices");
  in.pods = {Pod("ml", "leaving", 0, on("0", true)), Pod("ml", "staying", 0, on("0", false)),
             Pod("ml", "theirs", 0, foreign)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.problems.empty()) << b.problems.front();
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  std::map<std::string, const core::Workload*> ws;
  for (const core::Workload& w : b.snapshot.workloads) ws[w.name] = &w;
  ASSERT_TRUE(ws.contains("ml/leaving"));
  EXPECT_EQ(ws["ml/leaving"]->state, core::WorkloadState::kPreempting);
  EXPECT_EQ(ws["ml/leaving"]->placements.at(0).gpu_mask, 0b01u);
  EXPECT_EQ(ws["ml/staying"]->state, core::WorkloadState::kRunning);
  EXPECT_EQ(ws["ml/staying"]->placements.at(0).gpu_mask, 0b01u);
  EXPECT_EQ(b.snapshot.nodes[0].external_gpu_mask, 0u)
      << "no GPU is held whole outside the engine: the other scheduler's pod asks for none";
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  for (const core::SnapshotIssue& i : r.issues) ADD_FAILURE() << i.object << ": " << i.message;
  EXPECT_TRUE(r.preemptions.empty()) << "the share beside a leaving one is not on a failed GPU";
}

// The device plugin, not chamberd, picks the GPUs of a pod asking nvidia.com/gpu: where the
// node's agent reports which it picked (pod-resources), the pod holds those, and no share is
// placed on them. A report that does not match the pod's request is not taken; a share the
// report shows beside a GPU held whole is reported.
TEST(SnapshotBuilderTest, TheDevicePluginsAssignmentWinsOverTheAnnotation) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 4)};
  auto on = [](const char* gpus, const char* fraction = nullptr) {
    Json j = {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Running"}}}};
    if (gpus != nullptr) j["metadata"]["annotations"]["chamber.io/gpu-indices"] = gpus;
    if (fraction != nullptr) j["metadata"]["annotations"]["chamber.io/gpu-fraction"] = fraction;
    return j;
  };
  Json theirs = on(nullptr);
  theirs["spec"]["schedulerName"] = "default-scheduler";
  Json waiting = {{"metadata",
                   {{"annotations",
                     {{"chamber.io/gpu-fraction", "0.5"}, {"chamber.io/gpu-env", "downward-api"}}},
                    {"labels", {{"chamber.io/queue", "q"}}}}}};
  in.pods = {Pod("ml", "w", 1, on("0")), Pod("ml", "theirs", 1, theirs),
             Pod("ml", "new", 0, waiting)};
  in.queues = {QueueNamed("q", 4)};
  auto masks = [](const BuiltSnapshot& b) {
    std::map<std::string, uint64_t> m;
    for (const core::Workload& w : b.snapshot.workloads)
      if (!w.placements.empty()) m[w.name] = w.placements[0].gpu_mask;
    return m;
  };
  // Without a report: as annotated, and the other scheduler's pod on the lowest free GPU.
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_EQ(masks(b)["ml/w"], 0b0001u);
  EXPECT_EQ(b.snapshot.nodes[0].external_gpu_mask, 0b0010u);
  // The agent says the device plugin gave w GPU 2, and the other pod GPU 3.
  const DeviceAssignments devices = {{"n1", std::make_shared<const NodeDevices>(NodeDevices{
                                                {"ml/w", 0b0100}, {"ml/theirs", 0b1000}})}};
  BuildOptions o = Opts();
  o.devices = &devices;
  b = BuildSnapshot(in, o);
  EXPECT_EQ(masks(b)["ml/w"], 0b0100u);
  EXPECT_EQ(b.snapshot.nodes[0].external_gpu_mask, 0b1000u);
  EXPECT_TRUE(b.problems.empty()) << b.problems.front();
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods[0].placement.gpu_mask & 0b1100u, 0u) << "never on a GPU held whole";

  // A report that does not match the request (a stale one, two GPUs for a pod of one) is not
  // taken; a share already bound on a GPU the report gives another pod whole is reported.
  const DeviceAssignments stale = {{"n1", std::make_shared<const NodeDevices>(NodeDevices{
                                              {"ml/w", 0b0110}, {"ml/theirs", 0b0001}})}};
  in.pods.push_back(Pod("ml", "s", 0, on("0", "0.25")));
  o.devices = &stale;
  b = BuildSnapshot(in, o);
  EXPECT_EQ(masks(b)["ml/w"], 0b0010u) << "its annotation's GPU 0 holds a share: a free one";
  EXPECT_EQ(masks(b)["ml/s"], 0b0001u);
  ASSERT_EQ(b.problems.size(), 2u);
  EXPECT_EQ(b.problems[0],
            "pod ml/s: its share of GPU 0 on node n1 is beside pod ml/theirs, which holds that GPU "
            "whole");
  EXPECT_EQ(b.problems[1],
            "pod ml/w: annotation chamber.io/gpu-indices=0 does not match its 1 GPUs on node n1; "
            "given free GPU slots instead");
}

TEST(SnapshotBuilderTest, PodGroupsQueuesAndPriorities) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.namespaces = {std::make_shared<const kube::Namespace>(
      kube::Namespace::FromJson(
          {{"metadata", {{"name", "research"}, {"labels", {{"chamber.io/queue", "lab"}}}}}})
          .value())};
  in.priority_classes = {std::make_shared<const kube::PriorityClass>(
      kube::PriorityClass::FromJson({{"metadata", {{"name", "prod"}}}, {"value", 500}}).value())};
  Json member = {
      {"metadata", {{"labels", {{"chamber.io/pod-group", "g"}, {"chamber.io/min-member", "2"}}}}}};
  in.pods = {Pod("research", "g-0", 1, member), Pod("research", "g-1", 1, member),
             Pod("research", "g-2", 1, member),
             Pod("research", "solo", 1,
                 {{"metadata", {{"labels", {{"chamber.io/queue", "other"}}}}},
                  {"spec", {{"priority", nullptr}, {"priorityClassName", "prod"}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  const core::Workload& g = b.snapshot.workloads[0];
  EXPECT_EQ(g.name, "research/g");
  EXPECT_EQ(g.queue, "lab") << "the namespace's default queue";
  EXPECT_EQ(g.min_member, 2);
  EXPECT_EQ(g.TotalPods(), 3);
  EXPECT_EQ(b.sources[0].kind, WorkloadSource::Kind::kPodGroup);
  EXPECT_EQ(b.sources[0].name(), "g");
  EXPECT_EQ(b.sources[0].namespace_name(), "research");
  EXPECT_EQ(b.sources[0].suspendable_uid(), "");
  EXPECT_EQ(b.sources[0].Involved()["metadata"]["name"], "g-0") << "its first pod";
  EXPECT_EQ(b.sources[1].kind, WorkloadSource::Kind::kPod);
  EXPECT_EQ(b.sources[1].name(), "solo");
  EXPECT_EQ(b.sources[1].Involved()["kind"], "Pod");
  EXPECT_EQ(b.sources[1].Involved()["metadata"]["uid"], b.sources[1].pods[0][0].uid());
  // A bare pod is named as its workload; a group of pods is not, whatever the name.
  EXPECT_TRUE(b.sources[1].IsPodNamed(b.snapshot.workloads[1].name));
  EXPECT_TRUE(b.sources[1].IsPodNamed(b.sources[1].pods[0][0].Key()));
  for (const char* other : {"research/sol", "researc/solo", "researchXsolo", "solo", ""})
    EXPECT_FALSE(b.sources[1].IsPodNamed(other)) << other;
  EXPECT_FALSE(b.sources[0].IsPodNamed("research/g-0"));
  const core::Workload& solo = b.snapshot.workloads[1];
  EXPECT_EQ(solo.queue, "other");
  EXPECT_EQ(solo.priority, 500) << "from its PriorityClass";
  EXPECT_TRUE(solo.reserved());
}

// An object of the upstream gang API (scheduling.k8s.io `version`), created at 09:30, with
// `spec` and `extra` merged over it.
std::shared_ptr<const kube::Object> SchedulingObject(const std::string& version,
                                                     const std::string& kind, const std::string& ns,
                                                     const std::string& name, Json spec,
                                                     const Json& extra) {
  Json j = {{"apiVersion", "scheduling.k8s.io/" + version},
            {"kind", kind},
            {"metadata",
             {{"name", name},
              {"namespace", ns},
              {"uid", "uid-" + kind + "-" + name},
              {"creationTimestamp", "2026-11-30T09:30:00Z"}}},
            {"spec", std::move(spec)}};
  if (!extra.is_null()) j.merge_patch(extra);
  return std::make_shared<const kube::Object>(kube::Object::FromJson(j).value());
}

std::shared_ptr<const kube::Object> PodGroupObject(const std::string& ns, const std::string& name,
                                                   Json policy, Json extra = {}) {
  return SchedulingObject("v1beta1", "PodGroup", ns, name,
                          {{"schedulingPolicy", std::move(policy)}}, extra);
}

Json InGroup(const std::string& group) {
  return {{"spec", {{"schedulingGroup", {{"podGroupName", group}}}}}};
}

// Pods that name an upstream PodGroup (spec.schedulingGroup) with a gang policy are one
// workload, all or nothing above its minCount, with the PodGroup's queue and priority; a basic
// group's pods are each their own; pods whose PodGroup does not exist wait for it and say so.
TEST(SnapshotBuilderTest, PodsOfAnUpstreamPodGroupFollowItsPolicy) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pod_groups = {
      PodGroupObject("ml", "trainers", {{"gang", {{"minCount", 3}}}},
                     {{"metadata", {{"labels", {{"chamber.io/queue", "research"}}}}},
                      {"spec", {{"priorityClassName", "train"}, {"priority", 70}}}}),
      PodGroupObject("ml", "notebooks", {{"basic", Json::object()}},
                     {{"metadata", {{"labels", {{"chamber.io/queue", "interactive"}}}}}}),
      // No class: the API server's priority 0 is not the group's own.
      PodGroupObject("ml", "classless", {{"gang", {{"minCount", 1}}}},
                     {{"spec", {{"priority", 0}}}})};
  in.pods = {Pod("ml", "t-0", 2, InGroup("trainers")),
             Pod("ml", "t-1", 2, InGroup("trainers")),
             Pod("ml", "t-2", 2, InGroup("trainers")),
             Pod("ml", "t-3", 2, InGroup("trainers")),
             Pod("ml", "nb-0", 1, InGroup("notebooks")),
             Pod("ml", "nb-1", 1,
                 {{"metadata", {{"labels", {{"chamber.io/queue", "own"}}}}},
                  {"spec", {{"schedulingGroup", {{"podGroupName", "notebooks"}}}}}}),
             Pod("ml", "lost-0", 1, InGroup("absent")),
             Pod("ml", "solo-0", 1, InGroup("classless"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  // Groups by name, then single pods.
  ASSERT_EQ(b.snapshot.workloads.size(), 4u);
  const core::Workload& classless = b.snapshot.workloads[0];
  EXPECT_EQ(classless.name, "ml/classless");
  EXPECT_EQ(classless.priority, 10) << "its pod's";
  const core::Workload& gang = b.snapshot.workloads[1];
  EXPECT_EQ(gang.name, "ml/trainers");
  EXPECT_EQ(gang.TotalPods(), 4);
  EXPECT_EQ(gang.min_member, 3) << "the PodGroup's gang minCount";
  EXPECT_EQ(gang.queue, "research") << "the PodGroup's label";
  EXPECT_EQ(gang.priority, 70) << "its PriorityClass's, not its pods' 10";
  EXPECT_EQ(gang.submit_time, core::Time(UnixMs("2026-11-30T09:30:00Z"))) << "the PodGroup's";
  EXPECT_EQ(b.sources[1].kind, WorkloadSource::Kind::kPodGroup);
  EXPECT_EQ(b.sources[1].name(), "trainers");
  EXPECT_EQ(b.sources[1].pod_group, in.pod_groups[0]);
  EXPECT_EQ(b.snapshot.workloads[2].name, "ml/nb-0") << "a basic group's pods are their own";
  EXPECT_EQ(b.snapshot.workloads[3].name, "ml/nb-1");
  EXPECT_EQ(b.snapshot.workloads[2].min_member, 0);
  EXPECT_EQ(b.snapshot.workloads[2].queue, "interactive") << "the basic PodGroup's queue";
  EXPECT_EQ(b.snapshot.workloads[3].queue, "own") << "a pod's own queue comes first";
  EXPECT_EQ(b.sources[2].kind, WorkloadSource::Kind::kPod);
  EXPECT_EQ(b.sources[2].pod_group, nullptr);
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0],
            "pod ml/lost-0: spec.schedulingGroup.podGroupName: PodGroup ml/absent does not exist, "
            "or does not read; the pod waits for it");
}

// A gang with fewer pods than its minCount waits for the rest and holds nothing; once bound,
// its pods run as one workload, and a pod added later joins it.
TEST(SnapshotBuilderTest, AnUpstreamGangShortOfPodsWaitsAndARunningOneIsJoined) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pod_groups = {PodGroupObject("ml", "g", {{"gang", {{"minCount", 3}}}})};
  in.pods = {Pod("ml", "g-0", 1, InGroup("g")), Pod("ml", "g-1", 1, InGroup("g"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].awaited_pods, 1);
  EXPECT_EQ(b.incomplete_gangs, 1);

  Json bound = InGroup("g");
  bound["spec"]["nodeName"] = "n1";
  bound["status"] = {{"phase", "Running"}, {"startTime", "2026-11-30T10:05:00Z"}};
  in.pods = {Pod("ml", "g-0", 1, bound), Pod("ml", "g-1", 1, bound), Pod("ml", "g-2", 1, bound),
             Pod("ml", "g-3", 1, InGroup("g"))};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/g");
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kRunning);
  EXPECT_EQ(b.snapshot.workloads[0].TotalPods(), 3);
  EXPECT_EQ(b.snapshot.workloads[1].name, "ml/g+pending");
  EXPECT_EQ(b.snapshot.workloads[1].min_member, 1) << "joins the running gang pod by pod";
}

// A Job whose pods name an upstream gang PodGroup starts with its minCount rather than all of
// its parallelism; chamber.io/min-member still overrides both.
TEST(SnapshotBuilderTest, AJobsUpstreamPodGroupSetsItsMinimum) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pod_groups = {PodGroupObject("ml", "train-pg", {{"gang", {{"minCount", 2}}}})};
  in.jobs = {JobObj("ml", "train", 4, 1, {{"spec", {{"template", InGroup("train-pg")}}}})};
  for (int i = 0; i < 4; ++i) {
    Json pod = OwnedBy("train");
    pod.merge_patch(InGroup("train-pg"));
    in.pods.push_back(Pod("ml", "train-" + std::to_string(i), 1, pod));
  }
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/train");
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 2);
  EXPECT_EQ(b.sources[0].kind, WorkloadSource::Kind::kJob);
  // Its PodGroup's conditions say how the gang fares.
  ASSERT_NE(b.sources[0].pod_group, nullptr);
  EXPECT_EQ(b.sources[0].pod_group->metadata.name, "train-pg");

  in.jobs = {JobObj("ml", "train", 4, 1,
                    {{"metadata", {{"annotations", {{"chamber.io/min-member", "3"}}}}},
                     {"spec", {{"template", InGroup("train-pg")}}}})};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 3);
}

// A Job's own spec.scheduling (Kubernetes 1.37, WorkloadWithJob): the Job controller makes a
// PodGroup of that policy and names it on each pod it creates, not on the template. The Job
// stays the workload and its policy sets the gang's minimum: a gang's minCount, or 1 for basic;
// without one, every pod (the PodGroup the controller makes by default is basic, which is not
// the Job's owner asking for it).
TEST(SnapshotBuilderTest, AJobsOwnSchedulingPolicySetsItsMinimum) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  // The PodGroup the Job controller made, with its controller reference to the Job.
  in.pod_groups = {PodGroupObject("ml", "train-pg-x7k2p", {{"gang", {{"minCount", 3}}}})};
  auto job = [&](const Json& policy) {
    Json extra = Json::object();
    if (!policy.is_null()) extra = {{"spec", {{"scheduling", {{"schedulingPolicy", policy}}}}}};
    return JobObj("ml", "train", 4, 1, extra);
  };
  for (int i = 0; i < 4; ++i) {
    Json pod = OwnedBy("train");
    pod.merge_patch(InGroup("train-pg-x7k2p"));
    in.pods.push_back(Pod("ml", "train-" + std::to_string(i), 1, pod));
  }
  auto built = [&](const Json& policy) {
    in.jobs = {job(policy)};
    return BuildSnapshot(in, Opts());
  };
  BuiltSnapshot b = built({{"gang", {{"minCount", 3}}}});
  ASSERT_EQ(b.snapshot.workloads.size(), 1u) << "one Job, not a PodGroup's workload beside it";
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/train");
  EXPECT_EQ(b.sources[0].kind, WorkloadSource::Kind::kJob);
  EXPECT_EQ(b.snapshot.workloads[0].TotalPods(), 4);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 3);
  EXPECT_TRUE(b.problems.empty());
  // The PodGroup its pods name carries the gang's conditions, as the template's would.
  ASSERT_NE(b.sources[0].pod_group, nullptr);
  EXPECT_EQ(b.sources[0].pod_group->metadata.name, "train-pg-x7k2p");

  b = built({{"basic", Json::object()}});
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 1) << "basic: each pod may start on its own";

  b = built(Json());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 0) << "no policy of its own: all its pods";
  b = built({{"gang", Json::object()}});
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 0) << "a gang without minCount: its parallelism";
  EXPECT_TRUE(b.problems.empty());

  // The minimum in effect: with room for 3 of the 4 pods, a gang of minCount 3 starts; the
  // default gang of all 4 does not.
  auto binds = [&](const Json& policy) {
    in.nodes = {GpuNode("n1", 3)};
    core::Snapshot s = built(policy).snapshot;
    s.queues = {QueueNamed("team-a", 8)};
    const core::CycleResult r = core::Engine().Schedule(s);
    return r.binds.empty() ? size_t{0} : r.binds[0].pods.size();
  };
  EXPECT_EQ(binds({{"gang", {{"minCount", 3}}}}), 3u);
  EXPECT_EQ(binds(Json()), 0u);
  in.nodes = {GpuNode("n1", 8)};

  // chamber.io/min-member on the Job still overrides it.
  in.jobs = {
      JobObj("ml", "train", 4, 1,
             {{"metadata", {{"annotations", {{"chamber.io/min-member", "2"}}}}},
              {"spec", {{"scheduling", {{"schedulingPolicy", {{"basic", Json::object()}}}}}}}})};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 2);

  // The basic PodGroup the controller makes for a Job without a policy carries no gang's
  // conditions (kube-scheduler writes them on gang PodGroups only).
  in.pod_groups = {PodGroupObject("ml", "train-pg-x7k2p", {{"basic", Json::object()}})};
  b = built(Json());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 0);
  EXPECT_EQ(b.sources[0].pod_group, nullptr);
  in.pod_groups = {PodGroupObject("ml", "train-pg-x7k2p", {{"gang", {{"minCount", 3}}}})};

  // One that does not read (the API server validates it, so only a stale or foreign object):
  // a problem naming the Job and the field, and the Job is one gang of all its pods.
  b = built({{"gang", {{"minCount", 0}}}});
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 0);
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0],
            "job ml/train: spec.scheduling.schedulingPolicy.gang.minCount: must be at least 1; "
            "the Job is scheduled as one gang of all its pods");
  b = built({{"gang", {{"minCount", 2}}}, {"basic", Json::object()}});
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0],
            "job ml/train: spec.scheduling.schedulingPolicy: must set exactly one of basic and "
            "gang; the Job is scheduled as one gang of all its pods");
}

std::shared_ptr<const kube::Object> WorkloadObject(const std::string& ns, const std::string& name,
                                                   Json pod_groups, Json extra = {}) {
  return SchedulingObject("v1alpha1", "Workload", ns, name, {{"podGroups", std::move(pod_groups)}},
                          extra);
}

Json InWorkload(const std::string& workload, const std::string& group,
                const std::string& replica = "") {
  Json ref = {{"name", workload}, {"podGroup", group}};
  if (!replica.empty()) ref["podGroupReplicaKey"] = replica;
  return {{"spec", {{"workloadRef", std::move(ref)}}}};
}

// Kubernetes 1.35's gang API: a pod names a pod group of a v1alpha1 Workload in
// spec.workloadRef. A gang group's pods of one replica key are one workload, all or nothing
// above its minCount, with the Workload's queue; each replica is a gang of its own; a basic
// group's pods are each their own; a pod whose Workload, or whose group in it, does not exist
// waits and says which; a Workload that does not read is a problem naming the field. A Job
// whose template names a gang group starts at its minCount. A Workload has no status: no
// workload carries it for conditions.
TEST(SnapshotBuilderTest, PodsOfAWorkloadsGroupsFollowTheirPolicyPerReplica) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pod_groups = {
      WorkloadObject("ml", "llm",
                     {{{"name", "workers"}, {"policy", {{"gang", {{"minCount", 2}}}}}},
                      {{"name", "notebooks"}, {"policy", {{"basic", Json::object()}}}}},
                     {{"metadata", {{"labels", {{"chamber.io/queue", "research"}}}}}}),
      WorkloadObject(
          "ml", "bad",
          {{{"name", "g"}, {"policy", {{"gang", {{"minCount", 2}}}, {"basic", Json::object()}}}}})};
  in.pods = {Pod("ml", "w-a-0", 1, InWorkload("llm", "workers", "a")),
             Pod("ml", "w-a-1", 1, InWorkload("llm", "workers", "a")),
             Pod("ml", "w-b-0", 1, InWorkload("llm", "workers", "b")),
             Pod("ml", "w-b-1", 1, InWorkload("llm", "workers", "b")),
             Pod("ml", "w-b-2", 1, InWorkload("llm", "workers", "b")),
             Pod("ml", "nb-0", 1, InWorkload("llm", "notebooks")),
             Pod("ml", "lost-0", 1, InWorkload("absent", "workers")),
             Pod("ml", "stray-0", 1, InWorkload("llm", "ps")),
             Pod("ml", "bad-0", 1, InWorkload("bad", "g"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 3u);
  const core::Workload& a = b.snapshot.workloads[0];
  EXPECT_EQ(a.name, "ml/llm:workers:a");
  EXPECT_EQ(a.TotalPods(), 2);
  EXPECT_EQ(a.min_member, 2) << "the group's gang minCount";
  EXPECT_EQ(a.queue, "research") << "the Workload's label";
  EXPECT_EQ(a.submit_time, core::Time(UnixMs("2026-11-30T09:30:00Z"))) << "the Workload's";
  EXPECT_EQ(b.sources[0].kind, WorkloadSource::Kind::kPodGroup);
  EXPECT_EQ(b.sources[0].pod_group, nullptr) << "a Workload has no status to write";
  const core::Workload& replica_b = b.snapshot.workloads[1];
  EXPECT_EQ(replica_b.name, "ml/llm:workers:b") << "each replica key is a gang of its own";
  EXPECT_EQ(replica_b.TotalPods(), 3);
  EXPECT_EQ(replica_b.min_member, 2);
  EXPECT_EQ(b.snapshot.workloads[2].name, "ml/nb-0") << "a basic group's pods are their own";
  EXPECT_EQ(b.snapshot.workloads[2].queue, "research");
  EXPECT_EQ(b.snapshot.workloads[2].min_member, 0);
  ASSERT_EQ(b.problems.size(), 4u);
  EXPECT_EQ(b.problems[0],
            "workload ml/bad: spec.podGroups[0].policy: must set exactly one of basic and gang; "
            "its pods wait");
  EXPECT_EQ(b.problems[1],
            "pod ml/bad-0: spec.workloadRef: Workload ml/bad does not exist, or does not read; "
            "the pod waits for it");
  EXPECT_EQ(b.problems[2],
            "pod ml/lost-0: spec.workloadRef: Workload ml/absent does not exist, or does not "
            "read; the pod waits for it");
  EXPECT_EQ(b.problems[3],
            "pod ml/stray-0: spec.workloadRef.podGroup: Workload ml/llm has no pod group \"ps\"; "
            "the pod waits until it has");

  // A Job whose template names the gang group: its minimum is the group's minCount.
  in.pods.clear();
  in.jobs = {JobObj("ml", "train", 4, 1, {{"spec", {{"template", InWorkload("llm", "workers")}}}})};
  for (int i = 0; i < 4; ++i) {
    Json pod = OwnedBy("train");
    pod.merge_patch(InWorkload("llm", "workers"));
    in.pods.push_back(Pod("ml", "train-" + std::to_string(i), 1, pod));
  }
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/train");
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 2);
  EXPECT_EQ(b.sources[0].pod_group, nullptr);
}

// A PodGroup that does not read is a problem naming the object and the field; its pods wait.
TEST(SnapshotBuilderTest, AnUpstreamPodGroupThatDoesNotReadIsAProblem) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pod_groups = {
      PodGroupObject("ml", "both", {{"gang", {{"minCount", 2}}}, {"basic", Json::object()}}),
      PodGroupObject("ml", "zero", {{"gang", {{"minCount", 0}}}}),
      PodGroupObject("ml", "text", {{"gang", {{"minCount", "2"}}}})};
  in.pods = {Pod("ml", "a", 1, InGroup("both"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.problems.size(), 4u);
  EXPECT_EQ(b.problems[0],
            "podgroup ml/both: spec.schedulingPolicy: must set exactly one of basic and gang; its "
            "pods wait");
  EXPECT_EQ(b.problems[1],
            "podgroup ml/zero: spec.schedulingPolicy.gang.minCount: must be at least 1; its pods "
            "wait");
  EXPECT_EQ(b.problems[2],
            "podgroup ml/text: spec.schedulingPolicy.gang.minCount: must be an integer; its pods "
            "wait");
}

// A Job's pods whose Job is not (yet) in the view are not scheduled as pods of their own: they
// wait for the Job, which carries the queue and the gang. Pods bound already still hold their
// GPUs.
TEST(SnapshotBuilderTest, PodsOfAJobNotInTheViewWaitForIt) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  for (int i = 0; i < 2; ++i)
    in.pods.push_back(Pod("ml", "train-" + std::to_string(i), 2, OwnedBy("train")));
  Json bound = OwnedBy("train");
  bound["spec"]["nodeName"] = "n1";
  in.pods.push_back(Pod("ml", "train-2", 2, bound));
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty()) << b.snapshot.workloads[0].name;
  // Its Job seen, the same pods are one workload of the Job's queue.
  in.jobs = {JobObj("ml", "train", 3, 2)};
  b = BuildSnapshot(in, Opts());
  ASSERT_FALSE(b.snapshot.workloads.empty());
  for (const core::Workload& w : b.snapshot.workloads) {
    EXPECT_EQ(w.name.rfind("ml/train", 0), 0u) << w.name;
    EXPECT_EQ(w.queue, "team-a") << w.name;
  }
}

TEST(SnapshotBuilderTest, AJobIsOursWhenItsPodsNameChamberThoughItsTemplateDoesNot) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  const Json default_template = {
      {"spec", {{"template", {{"spec", {{"schedulerName", "default-scheduler"}}}}}}}};
  // The admission webhook set the scheduler on the pods of "opted", not on its template.
  in.jobs = {JobObj("ml", "opted", 2, 1, default_template),
             JobObj("ml", "other", 2, 1, default_template)};
  for (int i = 0; i < 2; ++i) {
    in.pods.push_back(Pod("ml", "opted-" + std::to_string(i), 1, OwnedBy("opted")));
    Json foreign = OwnedBy("other");
    foreign["spec"]["schedulerName"] = "default-scheduler";
    in.pods.push_back(Pod("ml", "other-" + std::to_string(i), 1, foreign));
  }
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/opted");
  EXPECT_EQ(b.snapshot.workloads[0].pod_sets[0].count, 2);
  // Suspended by Chamber, its pods gone: still Chamber's, to be resumed.
  in.jobs = {JobObj(
      "ml", "opted", 2, 1,
      Json{
          {"metadata", {{"annotations", {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"}}}}},
          {"spec",
           {{"suspend", true}, {"template", {{"spec", {{"schedulerName", "default-scheduler"}}}}}}},
          {"status", kSuspendSeen["status"]}})};
  in.pods.clear();
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kSuspended);
}

// A Job Chamber suspended to roll back a failed gang bind is Chamber's to resume, as a preempted
// one is; one its owner suspended is left alone.
TEST(SnapshotBuilderTest, AJobSuspendedForARollbackIsChambersToResume) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.jobs = {JobObj("ml", "rolled", 2, 1,
                    {{"metadata",
                      {{"annotations", {{"chamber.io/rolled-back-at", "2026-11-30T10:00:00Z"}}}}},
                     {"spec", {{"suspend", true}}},
                     {"status", kSuspendSeen["status"]}}),
             JobObj("ml", "paused", 2, 1, {{"spec", {{"suspend", true}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.name, "ml/rolled");
  EXPECT_EQ(w.state, core::WorkloadState::kSuspended);
  EXPECT_EQ(w.TotalPods(), 2);
  EXPECT_TRUE(w.recent_preemptions.empty()) << "a rollback is not a preemption";
}

// A Job Chamber suspended is resumed only once the Job controller has acted on the suspension
// (its Suspended condition): resumed before, the controller could still be stopping its pods and
// count them failed. Until then it is still being preempted and holds nothing.
TEST(SnapshotBuilderTest, ASuspendedJobIsResumedOnlyOnceItsControllerHasSeenTheSuspension) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  const Json ours = {
      {"metadata", {{"annotations", {{"chamber.io/rolled-back-at", "2026-11-30T10:00:00Z"}}}}},
      {"spec", {{"suspend", true}}}};
  in.jobs = {JobObj("ml", "rolled", 2, 1, ours)};
  in.queues = {QueueNamed("team-a", 8)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kPreempting);
  EXPECT_TRUE(b.snapshot.workloads[0].placements.empty());
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  EXPECT_TRUE(r.resumes.empty()) << "resumed before the Job controller saw the suspension";
  EXPECT_TRUE(r.binds.empty());
  // A Suspended condition left False by an earlier resume is not the controller's answer either.
  Json resumed_before = ours;
  resumed_before["status"] = {{"conditions", {{{"type", "Suspended"}, {"status", "False"}}}}};
  in.jobs = {JobObj("ml", "rolled", 2, 1, resumed_before)};
  b = BuildSnapshot(in, Opts());
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kPreempting);
  Json seen = ours;
  seen.update(kSuspendSeen);
  in.jobs = {JobObj("ml", "rolled", 2, 1, seen)};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kSuspended);
  r = core::Engine().Schedule(b.snapshot);
  EXPECT_EQ(r.resumes.size(), 1u);
}

TEST(SnapshotBuilderTest, SuspendedJobsAndAssumedBinds) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.jobs = {JobObj("ml", "paused-by-us", 2, 1,
                    {{"metadata",
                      {{"annotations",
                        {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"},
                         {"chamber.io/preemptions", "1796032800"},
                         {"chamber.io/preemption-count", "3"},
                         {"chamber.io/gpu-hours-lost", "12.5000"}}}}},
                     {"spec", {{"suspend", true}}},
                     {"status", kSuspendSeen["status"]}}),
             JobObj("ml", "paused-by-owner", 2, 1, {{"spec", {{"suspend", true}}}}),
             JobObj("ml", "fresh", 1, 2)};
  in.pods = {Pod("ml", "fresh-0", 2, OwnedBy("fresh"))};
  AssumedBinds assumed = {{"uid-ml-fresh-0", {"ml/fresh-0", "n1", {0, 1}, 1'900'000'000'000}}};
  BuildOptions o = Opts();
  o.assumed = &assumed;
  BuiltSnapshot b = BuildSnapshot(in, o);
  ASSERT_EQ(b.snapshot.workloads.size(), 2u) << "the owner's own pause is left alone";
  const core::Workload& fresh = b.snapshot.workloads[0];
  EXPECT_EQ(fresh.name, "ml/fresh");
  EXPECT_EQ(fresh.state, core::WorkloadState::kRunning) << "bound as far as we know";
  ASSERT_EQ(fresh.placements.size(), 1u);
  EXPECT_EQ(fresh.placements[0].gpu_mask, 0b11u);
  const core::Workload& paused = b.snapshot.workloads[1];
  EXPECT_EQ(paused.state, core::WorkloadState::kSuspended);
  EXPECT_EQ(paused.TotalPods(), 2);
  ASSERT_EQ(paused.recent_preemptions.size(), 1u);
  EXPECT_EQ(paused.recent_preemptions[0].count(), 1'796'032'800'000);
  EXPECT_EQ(b.sources[1].stored_preemptions, 3);
  EXPECT_DOUBLE_EQ(b.sources[1].stored_gpu_hours_lost, 12.5);
  EXPECT_EQ(b.sources[0].stored_preemptions, 0);
}

TEST(SnapshotBuilderTest, BadLostWorkAnnotationsAreProblemsAndIgnored) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.jobs = {JobObj(
      "ml", "j", 1, 1,
      {{"metadata",
        {{"annotations",
          {{"chamber.io/preemption-count", "-1"}, {"chamber.io/gpu-hours-lost", "lots"}}}}}})};
  in.pods = {Pod("ml", "j-0", 1, OwnedBy("j"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.sources.size(), 1u);
  EXPECT_EQ(b.sources[0].stored_preemptions, 0);
  EXPECT_EQ(b.sources[0].stored_gpu_hours_lost, 0.0);
  ASSERT_EQ(b.problems.size(), 2u) << ::testing::PrintToString(b.problems);
  EXPECT_NE(b.problems[0].find("job ml/j: chamber.io/preemption-count"), std::string::npos)
      << b.problems[0];
  EXPECT_NE(b.problems[1].find("chamber.io/gpu-hours-lost: \"lots\""), std::string::npos)
      << b.problems[1];
}

// Once the informer shows a pod bound, its own node and annotation count and the build reports
// the assumption as shown; a pod still pending is taken as bound where the assumption says.
TEST(SnapshotBuilderTest, AnAssumptionYieldsToThePodsOwnBind) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pods = {Pod("ml", "shown", 1,
                 {{"metadata", {{"annotations", {{"chamber.io/gpu-indices", "4"}}}}},
                  {"spec", {{"nodeName", "n1"}}},
                  {"status", {{"phase", "Running"}}}}),
             Pod("ml", "waiting", 1)};
  AssumedBinds assumed = {{"uid-ml-shown", {"ml/shown", "n1", {0}, 1'900'000'000'000}},
                          {"uid-ml-waiting", {"ml/waiting", "n1", {2}, 1'900'000'000'000}},
                          {"uid-gone", {"ml/gone", "n1", {3}, 1'900'000'000'000}}};
  BuildOptions o = Opts();
  o.assumed = &assumed;
  BuiltSnapshot b = BuildSnapshot(in, o);
  EXPECT_EQ(b.assumptions_shown, std::vector<std::string>{"uid-ml-shown"});
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  for (const core::Workload& w : b.snapshot.workloads) {
    EXPECT_EQ(w.state, core::WorkloadState::kRunning) << w.name;
    ASSERT_EQ(w.placements.size(), 1u) << w.name;
    EXPECT_EQ(w.placements[0].gpu_mask, w.name == "ml/shown" ? 1u << 4 : 1u << 2) << w.name;
  }
}

// Created on its node (no PodScheduled condition) with no start its kubelet reported, or one
// that does not read: it holds the node from its creation, not from each cycle's `now`, which
// would make a long-running pod look new (the cheapest victim) and change it every cycle.
TEST(SnapshotBuilderTest, ABoundPodWithoutAReadableStartTimeStartsAtItsCreation) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pods = {
      Pod("ml", "odd", 1,
          {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Running"}, {"startTime", 5}}}}),
      Pod("ml", "fresh", 1, {{"spec", {{"nodeName", "n1"}}}, {"status", {{"phase", "Running"}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  for (const core::Workload& w : b.snapshot.workloads) {
    EXPECT_EQ(w.state, core::WorkloadState::kRunning) << w.name;
    EXPECT_EQ(w.start_time, core::Time(1'796'032'800'000)) << w.name;  // 2026-11-30T10:00:00Z
    EXPECT_NE(w.start_time, Opts().now) << w.name;
  }
}

TEST(SnapshotBuilderTest, PodsOfTheSameTolerationsShareOneList) {
  const Json defaults = {{"spec",
                          {{"tolerations",
                            {{{"key", "node.kubernetes.io/not-ready"},
                              {"operator", "Exists"},
                              {"effect", "NoExecute"},
                              {"tolerationSeconds", 300}},
                             {{"key", "dedicated"}, {"operator", "Equal"}, {"value", "ml"}}}}}}};
  Json other = defaults;
  other["spec"]["tolerations"][1]["value"] = "infer";
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.pods = {Pod("ml", "a", 1, defaults), Pod("ml", "b", 1, defaults), Pod("ml", "c", 1, other)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 3u);
  const core::PodSet& a = b.snapshot.workloads[0].pod_sets.at(0);
  const core::PodSet& same = b.snapshot.workloads[1].pod_sets.at(0);
  const core::PodSet& c = b.snapshot.workloads[2].pod_sets.at(0);
  ASSERT_EQ(a.tolerations.size(), 2u);
  EXPECT_EQ(a.tolerations[0].key, "node.kubernetes.io/not-ready");
  EXPECT_EQ(a.tolerations[0].op, core::Toleration::Operator::kExists);
  EXPECT_EQ(a.tolerations[0].effect, core::TaintEffect::kNoExecute);
  EXPECT_EQ(a.tolerations[1].op, core::Toleration::Operator::kEqual);
  EXPECT_EQ(a.tolerations[1].value, "ml");
  EXPECT_FALSE(a.tolerations[1].effect.has_value());
  EXPECT_EQ(a.tolerations.get(), same.tolerations.get());
  EXPECT_NE(a.tolerations.get(), c.tolerations.get());
  EXPECT_EQ(c.tolerations[1].value, "infer");
}

// --- JobSets (workload_kinds.h) ---

// A JobSet with a leader (1 Job of 1 pod, 1 GPU) and workers (`workers` Jobs of 2 pods, 4 GPUs
// each), as its controller and the API server return it.
Json JobSetJson(const std::string& ns, const std::string& name, int workers, Json extra = {}) {
  auto job_template = [&](int pods, int gpus) {
    Json tmpl = PodJson(ns, "", gpus);
    tmpl["metadata"] = Json::object();
    tmpl["spec"].erase("priority");
    tmpl["spec"]["priorityClassName"] = "high";
    return Json{{"spec", {{"parallelism", pods}, {"completions", pods}, {"template", tmpl}}}};
  };
  Json j = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
            {"kind", "JobSet"},
            {"metadata",
             {{"name", name},
              {"namespace", ns},
              {"uid", "uid-jobset-" + name},
              {"resourceVersion", "5"},
              {"labels", {{"chamber.io/queue", "team-b"}}},
              {"creationTimestamp", "2026-11-30T08:00:00Z"}}},
            {"spec",
             {{"replicatedJobs",
               {{{"name", "leader"}, {"replicas", 1}, {"template", job_template(1, 1)}},
                {{"name", "workers"}, {"replicas", workers}, {"template", job_template(2, 4)}}}}}},
            {"status", Json::object()}};
  if (!extra.is_null()) j.merge_patch(extra);
  return j;
}

std::shared_ptr<const kube::Object> JobSetObj(const std::string& ns, const std::string& name,
                                              int workers, Json extra = {}) {
  return std::make_shared<const kube::Object>(
      kube::Object::FromJson(JobSetJson(ns, name, workers, std::move(extra))).value());
}

// A Job the JobSet controller made: "<jobset>-<replicated job>-<index>".
std::shared_ptr<const kube::Job> ChildJob(const std::string& ns, const std::string& jobset,
                                          const std::string& rj, int index, int pods, int gpus) {
  const std::string name = jobset + "-" + rj + "-" + std::to_string(index);
  Json owner = {{"metadata",
                 {{"ownerReferences",
                   {{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                     {"kind", "JobSet"},
                     {"name", jobset},
                     {"uid", "uid-jobset-" + jobset},
                     {"controller", true}}}}}}};
  return JobObj(ns, name, pods, gpus, owner);
}

// The JobSet's Jobs and, for the first `pods_made` of them per Job, their pods.
void AddChildren(ClusterObjects* in, const std::string& ns, const std::string& jobset, int workers,
                 bool all_pods = true) {
  in->jobs.push_back(ChildJob(ns, jobset, "leader", 0, 1, 1));
  in->pods.push_back(Pod(ns, jobset + "-leader-0-0", 1, OwnedBy(jobset + "-leader-0")));
  for (int w = 0; w < workers; ++w) {
    const std::string job = jobset + "-workers-" + std::to_string(w);
    in->jobs.push_back(ChildJob(ns, jobset, "workers", w, 2, 4));
    for (int p = 0; p < (all_pods || w == 0 ? 2 : 1); ++p)
      in->pods.push_back(Pod(ns, job + "-" + std::to_string(p), 4, OwnedBy(job)));
  }
}

TEST(WorkloadKindsTest, AJobSetsGangAndSuspendFieldComeFromItsSpec) {
  const WorkloadKind* k = FindWorkloadKind("jobset.x-k8s.io/v1alpha2", "JobSet");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(FindWorkloadKind("jobset.x-k8s.io/v1", "JobSet"), k) << "any version of the group";
  EXPECT_EQ(FindWorkloadKind("batch/v1", "Job"), nullptr);
  EXPECT_EQ(FindWorkloadKind("v1", "JobSet"), nullptr);
  EXPECT_EQ(k->SuspendPatch(true), (Json{{"spec", {{"suspend", true}}}}));
  EXPECT_EQ(k->LowerKind(), "jobset");

  Result<KindSpec> spec = k->read(JobSetJson("ml", "js", 3));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_FALSE(spec->suspended);
  EXPECT_FALSE(spec->finished);
  ASSERT_EQ(spec->pod_sets.size(), 2u);
  EXPECT_EQ(spec->pod_sets[0].name, "leader");
  EXPECT_EQ(spec->pod_sets[0].count, 1);
  EXPECT_EQ(spec->pod_sets[1].count, 6) << "3 Jobs of 2 pods";
  EXPECT_EQ(spec->Pods(), 7);

  // Jobs that succeeded need no pods; completions below parallelism cap a Job's pods; a
  // finished JobSet waits for nothing.
  spec = k->read(JobSetJson(
      "ml", "js", 3,
      {{"spec", {{"startupPolicy", {{"startupPolicyOrder", "InOrder"}}}}},
       {"status", {{"replicatedJobsStatus", {{{"name", "workers"}, {"succeeded", 2}}}}}}}));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->in_order);
  EXPECT_EQ(spec->pod_sets[1].count, 2);
  Json capped = JobSetJson("ml", "js", 1);
  capped["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"] = 1;
  EXPECT_EQ(k->read(capped)->pod_sets[1].count, 1);
  spec = k->read(
      JobSetJson("ml", "js", 1,
                 {{"status", {{"conditions", {{{"type", "Completed"}, {"status", "True"}}}}}}}));
  EXPECT_TRUE(spec->finished);

  // Errors name the object and the field.
  Json bad = JobSetJson("ml", "js", 1);
  bad["spec"]["replicatedJobs"][1]["replicas"] = "two";
  EXPECT_EQ(k->read(bad).status().message(),
            "jobset ml/js: spec.replicatedJobs[1].replicas: must be an integer");
  bad = JobSetJson("ml", "js", 1);
  bad["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = -1;
  EXPECT_EQ(k->read(bad).status().message(),
            "jobset ml/js: spec.replicatedJobs[0].template.spec.parallelism: -1 is out of range");
  bad = JobSetJson("ml", "js", 1);
  bad["spec"]["replicatedJobs"] = Json::array();
  EXPECT_EQ(k->read(bad).status().message(), "jobset ml/js: spec.replicatedJobs: is empty");
  bad = JobSetJson("ml", "js", 1);
  bad["spec"]["suspend"] = "yes";
  EXPECT_EQ(k->read(bad).status().message(), "jobset ml/js: spec.suspend: must be true or false");
}

TEST(SnapshotBuilderTest, AJobSetIsOneGangOfAllItsJobsPods) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8), GpuNode("n2", 8)};
  in.priority_classes = {std::make_shared<const kube::PriorityClass>(
      kube::PriorityClass::FromJson({{"metadata", {{"name", "high"}}}, {"value", 100}}).value())};
  in.owners = {JobSetObj("ml", "js", 2)};
  AddChildren(&in, "ml", "js", 2);
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u) << "its Jobs are not workloads of their own";
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.name, "ml/js");
  EXPECT_EQ(w.queue, "team-b") << "the JobSet's label";
  EXPECT_EQ(w.state, core::WorkloadState::kPending);
  EXPECT_EQ(w.awaited_pods, 0);
  EXPECT_EQ(w.TotalPods(), 5);
  ASSERT_EQ(w.pod_sets.size(), 2u) << "one set per shape";
  EXPECT_EQ(w.submit_time.count(), UnixMs("2026-11-30T08:00:00Z"));
  const WorkloadSource& src = b.sources[0];
  EXPECT_EQ(src.kind, WorkloadSource::Kind::kOwner);
  EXPECT_TRUE(src.Suspendable());
  EXPECT_EQ(src.SuspendableType().plural, "jobsets");
  EXPECT_EQ(src.suspendable_uid(), "uid-jobset-js");
  EXPECT_EQ(src.suspendable_resource_version(), "5");
  EXPECT_EQ(src.SuspendPatch(false), (Json{{"spec", {{"suspend", false}}}}));
  EXPECT_EQ(src.Involved(),
            (Json{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                  {"kind", "JobSet"},
                  {"metadata", {{"name", "js"}, {"namespace", "ml"}, {"uid", "uid-jobset-js"}}}}));
  EXPECT_EQ(src.PodKeys().size(), 5u);

  // All or nothing: its 17 GPUs do not fit two nodes' 16, so nothing is bound; on three they
  // are bound together.
  auto schedule = [&](const BuiltSnapshot& built) {
    core::Snapshot s = built.snapshot;
    s.queues = {QueueNamed("team-b", 24)};
    return core::Engine().Schedule(s);
  };
  core::CycleResult r = schedule(b);
  EXPECT_TRUE(r.binds.empty());
  ASSERT_EQ(r.pending.size(), 1u);
  in.nodes.push_back(GpuNode("n3", 8));
  r = schedule(BuildSnapshot(in, Opts()));
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods.size(), 5u);
}

// A top-level object whose every pod template names one upstream gang PodGroup: the PodGroup's
// minCount is the gang's minimum in place of the kind's own (all of a JobSet's pods), and the
// PodGroup carries the gang's conditions; chamber.io/min-member still overrides it. Templates
// naming it only in part, a basic PodGroup, or the PodGroups a controller names on the pods of
// the object's parts (the Job controller's, one per child Job) leave the kind's gang as it is.
TEST(SnapshotBuilderTest, AnOwnersUpstreamPodGroupSetsItsMinimum) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8), GpuNode("n2", 8)};
  in.pod_groups = {PodGroupObject("ml", "js-pg", {{"gang", {{"minCount", 3}}}}),
                   PodGroupObject("ml", "js-basic", {{"basic", Json::object()}}),
                   PodGroupObject("ml", "js-workers-0-pg", {{"gang", {{"minCount", 1}}}})};
  auto jobset = [](const std::vector<std::string>& groups, Json extra = {}) {
    Json j = JobSetJson("ml", "js", 2, std::move(extra));
    for (size_t i = 0; i < groups.size(); ++i)
      if (!groups[i].empty())
        j["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]["schedulingGroup"] =
            {{"podGroupName", groups[i]}};
    return std::make_shared<const kube::Object>(kube::Object::FromJson(j).value());
  };
  AddChildren(&in, "ml", "js", 2);
  auto built = [&](std::shared_ptr<const kube::Object> owner) {
    in.owners = {std::move(owner)};
    BuiltSnapshot b = BuildSnapshot(in, Opts());
    EXPECT_EQ(b.snapshot.workloads.size(), 1u);
    EXPECT_EQ(b.snapshot.workloads[0].TotalPods(), 5);
    return b;
  };
  BuiltSnapshot b = built(jobset({"js-pg", "js-pg"}));
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 3) << "the PodGroup's minCount";
  ASSERT_NE(b.sources[0].pod_group, nullptr);
  EXPECT_EQ(b.sources[0].pod_group->metadata.name, "js-pg");

  b = built(jobset({"js-pg", "js-pg"},
                   {{"metadata", {{"annotations", {{"chamber.io/min-member", "4"}}}}}}));
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 4) << "chamber.io/min-member over the PodGroup";

  for (const std::vector<std::string>& groups :
       {std::vector<std::string>{"js-pg", ""}, {"js-basic", "js-basic"}, {"js-pg", "js-basic"}}) {
    b = built(jobset(groups));
    EXPECT_EQ(b.snapshot.workloads[0].min_member, 0) << groups[0] << "," << groups[1];
    EXPECT_EQ(b.sources[0].pod_group, nullptr) << groups[0] << "," << groups[1];
  }

  // The Job controller's PodGroup of a child Job, named on its pods only.
  for (auto& pod : in.pods)
    if (pod->metadata.name.rfind("js-workers-0-", 0) == 0) {
      Json extra = OwnedBy("js-workers-0");
      extra.merge_patch(InGroup("js-workers-0-pg"));
      pod = Pod("ml", pod->metadata.name, 4, extra);
    }
  b = built(jobset({}));
  EXPECT_EQ(b.snapshot.workloads[0].min_member, 0) << "the JobSet's gang: all its pods";
  EXPECT_EQ(b.sources[0].pod_group, nullptr);
}

TEST(SnapshotBuilderTest, AJobSetShortOfPodsWaitsForThemAndItsPriorityComesFromItsTemplate) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.priority_classes = {std::make_shared<const kube::PriorityClass>(
      kube::PriorityClass::FromJson({{"metadata", {{"name", "high"}}}, {"value", 100}}).value())};
  in.owners = {JobSetObj("ml", "js", 3)};
  AddChildren(&in, "ml", "js", 3, /*all_pods=*/false);  // 1 + 2 + 1 + 1 of 7 pods
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].awaited_pods, 2);
  EXPECT_EQ(b.incomplete_gangs, 1);

  // Started in order (the leader first), the gang is the pods that exist.
  in.owners = {JobSetObj("ml", "js", 3,
                         {{"spec", {{"startupPolicy", {{"startupPolicyOrder", "InOrder"}}}}}})};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].awaited_pods, 0);
  EXPECT_EQ(b.snapshot.workloads[0].TotalPods(), 5);

  // Suspended by Chamber, it has no pods: its sets and priority come from its templates.
  in.pods.clear();
  JobsStopped(&in);
  in.owners = {JobSetObj(
      "ml", "js", 3,
      {{"metadata", {{"annotations", {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"}}}}},
       {"spec", {{"suspend", true}}}})};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.state, core::WorkloadState::kSuspended);
  EXPECT_EQ(w.priority, 100) << "the templates' PriorityClass";
  ASSERT_EQ(w.pod_sets.size(), 2u);
  EXPECT_EQ(w.pod_sets[0].name, "js/leader");
  EXPECT_EQ(w.pod_sets[0].count, 1);
  EXPECT_EQ(w.pod_sets[1].name, "js/workers");
  EXPECT_EQ(w.pod_sets[1].count, 6);
  EXPECT_EQ(w.pod_sets[1].request.whole_gpus(), 4);

  // Paused by its owner, or finished: not Chamber's to run.
  in.owners = {JobSetObj("ml", "js", 3, {{"spec", {{"suspend", true}}}})};
  EXPECT_TRUE(BuildSnapshot(in, Opts()).snapshot.workloads.empty());
  in.owners = {JobSetObj(
      "ml", "js", 3, {{"status", {{"conditions", {{{"type", "Failed"}, {"status", "True"}}}}}}})};
  EXPECT_TRUE(BuildSnapshot(in, Opts()).snapshot.workloads.empty());
}

// A gang rolled back a moment ago: chamberd suspended its Job, but the informer still shows it
// running, two members bound and two pending. Taken as suspended (an assumed suspension), it is
// being preempted and holds its bound pods; its pending pods are not placed one by one as if
// it ran. Once the Job shows the suspension, the assumption is reported shown.
TEST(SnapshotBuilderTest, AJobJustSuspendedForARollbackIsNotPlacedPodByPod) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.jobs = {JobObj("ml", "train", 4, 1)};
  for (int i = 0; i < 4; ++i) {
    Json pod = OwnedBy("train");
    if (i < 2) pod["spec"]["nodeName"] = "n1";
    in.pods.push_back(Pod("ml", "train-" + std::to_string(i), 1, pod));
  }
  in.queues = {QueueNamed("team-a", 8)};
  auto schedule = [&](const BuildOptions& o) {
    BuiltSnapshot b = BuildSnapshot(in, o);
    return std::make_pair(b, core::Engine().Schedule(b.snapshot));
  };
  // Without the assumption: running with 2 pods, and the other 2 join it one by one.
  auto [plain, plain_result] = schedule(Opts());
  ASSERT_EQ(plain.snapshot.workloads.size(), 2u);
  EXPECT_EQ(plain.snapshot.workloads[0].state, core::WorkloadState::kRunning);
  ASSERT_EQ(plain_result.binds.size(), 1u);
  EXPECT_EQ(plain_result.binds[0].pods.size(), 2u);

  const AssumedSuspends suspending = {{"uid-job-train", 30'000}};
  BuildOptions o = Opts();
  o.suspending = &suspending;
  auto [held, held_result] = schedule(o);
  ASSERT_EQ(held.snapshot.workloads.size(), 1u);
  EXPECT_EQ(held.snapshot.workloads[0].state, core::WorkloadState::kPreempting);
  EXPECT_EQ(held.snapshot.workloads[0].placements.size(), 2u) << "its bound pods still hold";
  EXPECT_TRUE(held_result.binds.empty()) << "a rolled-back gang placed pod by pod";
  EXPECT_TRUE(held_result.resumes.empty());
  EXPECT_TRUE(held.suspensions_shown.empty());

  // The informer shows the suspension: the Job's own state, and the assumption may go.
  in.jobs = {JobObj(
      "ml", "train", 4, 1,
      {{"metadata", {{"annotations", {{"chamber.io/rolled-back-at", "2026-12-06T04:05:12Z"}}}}},
       {"spec", {{"suspend", true}}}})};
  auto [shown, shown_result] = schedule(o);
  ASSERT_EQ(shown.suspensions_shown.size(), 1u);
  EXPECT_EQ(shown.suspensions_shown[0], "uid-job-train");
  ASSERT_EQ(shown.snapshot.workloads.size(), 1u);
  EXPECT_EQ(shown.snapshot.workloads[0].state, core::WorkloadState::kPreempting);
  EXPECT_TRUE(shown_result.binds.empty());
}

// A JobSet Chamber suspended is resumed only once the Job controller has acted on the
// suspension of each of its Jobs that has not finished: its controller suspends it by suspending
// them, and a Job resumed before its controller stopped it could count its pods failed.
TEST(SnapshotBuilderTest, ASuspendedJobSetIsResumedOnlyOnceEachOfItsJobsIsStopped) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8), GpuNode("n2", 8), GpuNode("n3", 8)};
  in.queues = {QueueNamed("team-b", 24)};
  in.owners = {JobSetObj(
      "ml", "js", 2,
      {{"metadata", {{"annotations", {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"}}}}},
       {"spec", {{"suspend", true}}}})};
  AddChildren(&in, "ml", "js", 2);
  in.pods.clear();  // the pods are gone
  auto state = [&] {
    BuiltSnapshot b = BuildSnapshot(in, Opts());
    EXPECT_EQ(b.snapshot.workloads.size(), 1u);
    if (b.snapshot.workloads.empty()) return core::WorkloadState::kRunning;
    EXPECT_TRUE(b.snapshot.workloads[0].placements.empty());
    return b.snapshot.workloads[0].state;
  };
  // The JobSet controller has not suspended the Jobs yet.
  EXPECT_EQ(state(), core::WorkloadState::kPreempting);
  EXPECT_TRUE(core::Engine().Schedule(BuildSnapshot(in, Opts()).snapshot).resumes.empty());
  // It has, and the Job controller has stopped two of the three.
  for (size_t i = 0; i < 2; ++i) in.jobs[i] = WithStatus(in.jobs[i], kSuspendSeen["status"]);
  EXPECT_EQ(state(), core::WorkloadState::kPreempting) << "one Job is still being stopped";
  // The third finished before the suspension: nothing to stop there.
  in.jobs[2] =
      WithStatus(in.jobs[2], {{"conditions", {{{"type", "Complete"}, {"status", "True"}}}}});
  EXPECT_EQ(state(), core::WorkloadState::kSuspended);
  EXPECT_EQ(core::Engine().Schedule(BuildSnapshot(in, Opts()).snapshot).resumes.size(), 1u);
  // Its Jobs gone (a kind whose controller deletes them), nothing is being stopped either.
  in.jobs.clear();
  EXPECT_EQ(state(), core::WorkloadState::kSuspended);
}

TEST(SnapshotBuilderTest, PodsOfAJobSetNotInTheViewWaitAndABadOneIsAProblem) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  AddChildren(&in, "ml", "js", 1);  // its Jobs and pods, not the JobSet
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty())
      << "neither its Jobs nor its pods are scheduled alone, without the JobSet's gang";

  Json bad = JobSetJson("ml", "js", 1);
  bad["spec"]["replicatedJobs"][1]["replicas"] = "two";
  in.owners = {std::make_shared<const kube::Object>(kube::Object::FromJson(bad).value())};
  b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0], "jobset ml/js: spec.replicatedJobs[1].replicas: must be an integer");
}

TEST(SnapshotBuilderTest, ARunningJobSetIsOneWorkloadAndItsPreemptionHistoryIsRead) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8), GpuNode("n2", 8)};
  in.owners = {JobSetObj("ml", "js", 1,
                         {{"metadata",
                           {{"annotations",
                             {{"chamber.io/preemptions", "1796032800"},
                              {"chamber.io/preemption-count", "2"},
                              {"chamber.io/gpu-hours-lost", "1.5"}}}}}})};
  AddChildren(&in, "ml", "js", 1);
  for (auto& p : in.pods) {
    Json j = p->ToJson();
    j["spec"]["nodeName"] = p->metadata.name.find("leader") != std::string::npos ? "n2" : "n1";
    j["status"] = {{"phase", "Running"}, {"startTime", "2026-11-30T11:00:00Z"}};
    p = std::make_shared<const kube::Pod>(kube::Pod::FromJson(j).value());
  }
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.state, core::WorkloadState::kRunning);
  EXPECT_EQ(w.placements.size(), 3u);
  ASSERT_EQ(w.recent_preemptions.size(), 1u);
  EXPECT_EQ(b.sources[0].stored_preemptions, 2);
  EXPECT_DOUBLE_EQ(b.sources[0].stored_gpu_hours_lost, 1.5);
  int held = 0;
  for (const core::PodPlacement& p : w.placements) held += std::popcount(p.gpu_mask);
  EXPECT_EQ(held, 9) << "1 + 4 + 4 GPUs held";
}

// --- Kubeflow training jobs and Ray (workload_kinds.h) ---

Json OwnedByKind(const std::string& api_version, const std::string& kind, const std::string& name,
                 const std::string& uid) {
  return {{"metadata",
           {{"ownerReferences",
             {{{"apiVersion", api_version},
               {"kind", kind},
               {"name", name},
               {"uid", uid},
               {"controller", true}}}}}}};
}

std::shared_ptr<const kube::Object> ObjectOf(Json j) {
  return std::make_shared<const kube::Object>(kube::Object::FromJson(std::move(j)).value());
}

Json PodTemplate(int gpus) {
  Json t = PodJson("", "", gpus);
  t["metadata"] = Json::object();
  t["spec"].erase("priority");
  return t;
}

Json PyTorchJobJson(const std::string& name, int workers, Json extra = {}) {
  Json j = {{"apiVersion", "kubeflow.org/v1"},
            {"kind", "PyTorchJob"},
            {"metadata",
             {{"name", name},
              {"namespace", "ml"},
              {"uid", "uid-ptj-" + name},
              {"resourceVersion", "4"},
              {"labels", {{"chamber.io/queue", "team-a"}}},
              {"creationTimestamp", "2026-11-30T08:00:00Z"}}},
            {"spec",
             {{"pytorchReplicaSpecs",
               {{"Master", {{"replicas", 1}, {"template", PodTemplate(2)}}},
                {"Worker", {{"replicas", workers}, {"template", PodTemplate(2)}}}}}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return j;
}

Json RayClusterSpec(int workers, int min_workers) {
  return {{"headGroupSpec", {{"template", PodTemplate(0)}}},
          {"workerGroupSpecs",
           {{{"groupName", "gpu"},
             {"replicas", workers},
             {"minReplicas", min_workers},
             {"maxReplicas", 8},
             {"template", PodTemplate(4)}}}}};
}

TEST(WorkloadKindsTest, TrainingJobsAndRayReadTheirGangsFromTheirSpecs) {
  const WorkloadKind* ptj = FindWorkloadKind("kubeflow.org/v1", "PyTorchJob");
  ASSERT_NE(ptj, nullptr);
  EXPECT_EQ(ptj->SuspendPatch(true), (Json{{"spec", {{"runPolicy", {{"suspend", true}}}}}}));
  for (const char* kind : {"TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "MXJob", "JAXJob"})
    EXPECT_NE(FindWorkloadKind("kubeflow.org/v1", kind), nullptr) << kind;
  Result<KindSpec> spec = ptj->read(PyTorchJobJson(
      "p", 3,
      {{"spec", {{"runPolicy", {{"suspend", true}, {"schedulingPolicy", {{"minAvailable", 2}}}}}}},
       {"status", {{"replicaStatuses", {{"Worker", {{"succeeded", 1}}}}}}}}));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->suspended);
  EXPECT_EQ(spec->Pods(), 3) << "Master 1 and the 2 Workers that have not succeeded";
  EXPECT_EQ(spec->min_pods, 2);
  Json bad = PyTorchJobJson("p", 3);
  bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -2;
  EXPECT_EQ(ptj->read(bad).status().message(),
            "pytorchjob ml/p: spec.pytorchReplicaSpecs.Worker.replicas: -2 is out of range");
  spec = ptj->read(PyTorchJobJson(
      "p", 1, {{"status", {{"conditions", {{{"type", "Succeeded"}, {"status", "True"}}}}}}}));
  EXPECT_TRUE(spec->finished);
  // Elastic: it starts with its Master and minReplicas Workers; minAvailable, when set, decides.
  const Json elastic = {{"spec", {{"elasticPolicy", {{"minReplicas", 2}, {"maxReplicas", 6}}}}}};
  spec = ptj->read(PyTorchJobJson("p", 4, elastic));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->Pods(), 5);
  EXPECT_EQ(spec->min_pods, 3) << "the Master and 2 of the 4 Workers";
  Json given = PyTorchJobJson("p", 4, elastic);
  given["spec"]["runPolicy"] = {{"schedulingPolicy", {{"minAvailable", 5}}}};
  EXPECT_EQ(ptj->read(given)->min_pods, 5);
  EXPECT_EQ(ptj->read(PyTorchJobJson("p", 2, elastic))->min_pods, 0)
      << "minReplicas at its Workers: all of them";
  Json inverted = PyTorchJobJson("p", 4, elastic);
  inverted["spec"]["elasticPolicy"]["maxReplicas"] = 1;
  EXPECT_EQ(ptj->read(inverted).status().message(),
            "pytorchjob ml/p: spec.elasticPolicy.minReplicas: 2 is more than maxReplicas 1");
  Json text = PyTorchJobJson("p", 4, elastic);
  text["spec"]["elasticPolicy"]["minReplicas"] = "2";
  EXPECT_EQ(ptj->read(text).status().message(),
            "pytorchjob ml/p: spec.elasticPolicy.minReplicas: must be an integer");

  const WorkloadKind* rc = FindWorkloadKind("ray.io/v1", "RayCluster");
  ASSERT_NE(rc, nullptr);
  Json cluster = {{"apiVersion", "ray.io/v1"},
                  {"kind", "RayCluster"},
                  {"metadata", {{"name", "c"}, {"namespace", "ml"}}},
                  {"spec", RayClusterSpec(3, 2)}};
  cluster["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 2;
  spec = rc->read(cluster);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->Pods(), 7) << "the head and 3 replicas of 2 hosts";
  EXPECT_EQ(spec->min_pods, 5) << "the head and 2 replicas of 2 hosts";
  cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 20;
  EXPECT_EQ(rc->read(cluster)->Pods(), 17) << "replicas are held to maxReplicas";
  cluster["spec"]["workerGroupSpecs"][0]["minReplicas"] = 9;
  EXPECT_EQ(rc->read(cluster).status().message(),
            "raycluster ml/c: spec.workerGroupSpecs[0].minReplicas: 9 is above maxReplicas 8");

  const WorkloadKind* rj = FindWorkloadKind("ray.io/v1", "RayJob");
  ASSERT_NE(rj, nullptr);
  Json job = {{"apiVersion", "ray.io/v1"},
              {"kind", "RayJob"},
              {"metadata", {{"name", "j"}, {"namespace", "ml"}}},
              {"spec", {{"rayClusterSpec", RayClusterSpec(2, 2)}}},
              {"status", {{"jobDeploymentStatus", "Running"}}}};
  spec = rj->read(job);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->Pods(), 3);
  EXPECT_FALSE(spec->finished);
  job["status"]["jobDeploymentStatus"] = "Complete";
  EXPECT_TRUE(rj->read(job)->finished);
  job["spec"]["rayClusterSpec"]["headGroupSpec"].erase("template");
  EXPECT_EQ(rj->read(job).status().message(),
            "rayjob ml/j: spec.rayClusterSpec.headGroupSpec.template: is missing");
}

TEST(SnapshotBuilderTest, APyTorchJobIsOneGangOfThePodsItOwns) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  Json job = PyTorchJobJson("p", 2);
  // A custom resource keeps its templates as written: without metadata, say.
  job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].erase("metadata");
  in.owners = {ObjectOf(job)};
  for (const std::string pod : {"p-master-0", "p-worker-0", "p-worker-1"})
    in.pods.push_back(
        Pod("ml", pod, 2, OwnedByKind("kubeflow.org/v1", "PyTorchJob", "p", "uid-ptj-p")));
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/p");
  EXPECT_EQ(b.snapshot.workloads[0].queue, "team-a");
  EXPECT_EQ(b.snapshot.workloads[0].TotalPods(), 3);
  EXPECT_EQ(b.snapshot.workloads[0].awaited_pods, 0);
  EXPECT_TRUE(b.problems.empty()) << b.problems.front();
  EXPECT_EQ(b.sources[0].SuspendableType().plural, "pytorchjobs");
  EXPECT_EQ(b.sources[0].SuspendPatch(false),
            (Json{{"spec", {{"runPolicy", {{"suspend", false}}}}}}));

  // One Worker short: the others wait for it.
  in.pods.pop_back();
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].awaited_pods, 1);
  // Without the PyTorchJob in view, its pods wait.
  in.owners.clear();
  EXPECT_TRUE(BuildSnapshot(in, Opts()).snapshot.workloads.empty());
}

TEST(SnapshotBuilderTest, ARayJobIsOneGangOfItsClusterAndItsSubmitterJoinsIt) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8), GpuNode("n2", 8)};
  Json rayjob = {{"apiVersion", "ray.io/v1"},
                 {"kind", "RayJob"},
                 {"metadata",
                  {{"name", "rj"},
                   {"namespace", "ml"},
                   {"uid", "uid-rj"},
                   {"resourceVersion", "9"},
                   {"labels", {{"chamber.io/queue", "team-a"}}},
                   {"creationTimestamp", "2026-11-30T08:00:00Z"}}},
                 {"spec", {{"rayClusterSpec", RayClusterSpec(3, 1)}}},
                 {"status", {{"jobDeploymentStatus", "Initializing"}}}};
  Json cluster = {{"apiVersion", "ray.io/v1"},
                  {"kind", "RayCluster"},
                  {"metadata",
                   {{"name", "rj-abc"},
                    {"namespace", "ml"},
                    {"uid", "uid-rc"},
                    {"creationTimestamp", "2026-11-30T08:00:01Z"}}},
                  {"spec", RayClusterSpec(3, 1)}};
  cluster.merge_patch(OwnedByKind("ray.io/v1", "RayJob", "rj", "uid-rj"));
  in.owners = {ObjectOf(rayjob), ObjectOf(cluster)};
  Json by_cluster = OwnedByKind("ray.io/v1", "RayCluster", "rj-abc", "uid-rc");
  // The API server's default tolerations, which the templates lack.
  by_cluster["spec"] = {{"tolerations",
                         {{{"key", "node.kubernetes.io/not-ready"},
                           {"operator", "Exists"},
                           {"effect", "NoExecute"},
                           {"tolerationSeconds", 300}}}}};
  in.pods = {Pod("ml", "rj-abc-head", 0, by_cluster), Pod("ml", "rj-abc-gpu-0", 4, by_cluster)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u) << "the RayCluster is part of the RayJob";
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.name, "ml/rj");
  EXPECT_EQ(w.queue, "team-a");
  EXPECT_EQ(w.min_member, 2) << "the head and the minimum worker start together";
  EXPECT_EQ(w.TotalPods(), 2);
  EXPECT_EQ(w.awaited_pods, 0) << "the head and one worker are the minimum, and exist";
  ASSERT_EQ(w.pod_sets.size(), 2u);
  EXPECT_EQ(w.pod_sets[0].request.whole_gpus(), 0)
      << "the head's set comes first, as the spec lists it: the engine's minimum is the first pods";
  EXPECT_EQ(b.sources[0].pods[0][0].name(), "rj-abc-head");
  EXPECT_EQ(b.sources[0].SuspendableType().plural, "rayjobs");
  EXPECT_FALSE(b.sources[0].Suspendable())
      << "KubeRay suspends no RayJob without shutdownAfterJobFinishes: evicted instead";
  rayjob["spec"]["shutdownAfterJobFinishes"] = true;
  in.owners = {ObjectOf(rayjob), ObjectOf(cluster)};
  EXPECT_TRUE(BuildSnapshot(in, Opts()).sources[0].Suspendable());

  // Placed, the cluster runs; the submitter's Job, once its pod exists, joins it.
  std::vector<std::shared_ptr<const kube::Pod>> placed;
  for (const auto& p : in.pods) {
    Json j = p->ToJson();
    j["spec"]["nodeName"] = "n1";
    j["status"] = {{"phase", "Running"}, {"startTime", "2026-11-30T11:00:00Z"}};
    placed.push_back(std::make_shared<const kube::Pod>(kube::Pod::FromJson(j).value()));
  }
  in.pods = placed;
  Json submitter_owner = {{"metadata",
                           {{"ownerReferences",
                             {{{"apiVersion", "ray.io/v1"},
                               {"kind", "RayJob"},
                               {"name", "rj"},
                               {"uid", "uid-rj"},
                               {"controller", true}}}}}}};
  in.jobs = {JobObj("ml", "rj-submit", 1, 0, submitter_owner)};
  in.pods.push_back(Pod("ml", "rj-submit-x", 0, OwnedBy("rj-submit")));
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ml/rj");
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kRunning);
  EXPECT_EQ(b.snapshot.workloads[1].name, "ml/rj+pending");
  EXPECT_EQ(b.snapshot.workloads[1].TotalPods(), 1);

  // The RayJob not in view: its cluster's pods and its submitter wait.
  in.owners = {ObjectOf(cluster)};
  b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty()) << "nothing of a RayJob not in view is scheduled";
  int held = 0;  // its bound pods still hold their GPUs, outside the engine's workloads
  for (const core::Node& n : b.snapshot.nodes) held += std::popcount(n.external_gpu_mask);
  EXPECT_EQ(held, 4);
}

// A suspended Job has no pods: its pod set is read from its template, whose limits stand for
// missing requests as the API server makes them stand on its pods (not on templates).
TEST(SnapshotBuilderTest, ATemplateGivingOnlyLimitsAsksForThem) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  auto suspended_job = [](Json resources) {
    Json containers = {{{"name", "main"}, {"image", "trainer"}, {"resources", resources}}};
    return JobObj(
        "ml", "train", 2, 0,
        {{"metadata", {{"annotations", {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"}}}}},
         {"spec", {{"suspend", true}, {"template", {{"spec", {{"containers", containers}}}}}}},
         {"status", kSuspendSeen["status"]}});
  };
  in.jobs = {suspended_job({{"limits", {{"nvidia.com/gpu", "4"}, {"cpu", "3"}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kSuspended);
  ASSERT_EQ(b.snapshot.workloads[0].pod_sets.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].pod_sets[0].request.whole_gpus(), 4);
  EXPECT_EQ(b.snapshot.workloads[0].pod_sets[0].request.cpu_milli(), 3000);
  // A request given wins over its limit; a resource with a limit alone still counts.
  in.jobs = {suspended_job(
      {{"requests", {{"cpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "2"}, {"cpu", "3"}}}})};
  b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].pod_sets[0].request.whole_gpus(), 2);
  EXPECT_EQ(b.snapshot.workloads[0].pod_sets[0].request.cpu_milli(), 1000);
}

// --- TrainJobs (Kubeflow Trainer v2) ---

// A TrainJob on the ClusterTrainingRuntime torch-distributed, as the API server returns it.
Json TrainJobJson(const std::string& name, Json extra = {}) {
  Json j = {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
            {"kind", "TrainJob"},
            {"metadata",
             {{"name", name},
              {"namespace", "ml"},
              {"uid", "uid-trainjob-" + name},
              {"resourceVersion", "7"},
              {"labels", {{"chamber.io/queue", "team-a"}}},
              {"creationTimestamp", "2026-11-30T07:00:00Z"}}},
            {"spec",
             {{"runtimeRef",
               {{"apiGroup", "trainer.kubeflow.org"},
                {"kind", "ClusterTrainingRuntime"},
                {"name", "torch-distributed"}}},
              {"trainer", {{"numNodes", 2}}},
              {"suspend", false}}},
            {"status", Json::object()}};
  if (!extra.is_null()) j.merge_patch(extra);
  return j;
}

// The JobSet the Trainer makes for TrainJob `name`: of its name, owned by it, labelled as the
// TrainJob's spec.labels say (none here), with `workers` Jobs of 2 workers and a leader.
std::shared_ptr<const kube::Object> TrainJobSet(const std::string& name, int workers,
                                                Json extra = {}) {
  Json js = JobSetJson(
      "ml", name, workers,
      OwnedByKind("trainer.kubeflow.org/v1alpha1", "TrainJob", name, "uid-trainjob-" + name));
  js["metadata"].erase("labels");
  if (!extra.is_null()) js.merge_patch(extra);
  return ObjectOf(js);
}

// An object whose kind is not a string (no API server returns one, but the build must not
// throw on it): it names no kind Chamber schedules, and its pods wait.
TEST(SnapshotBuilderTest, AnObjectWhoseKindIsNoStringIsNoKindWeSchedule) {
  Json object = TrainJobJson("llm");
  object["kind"] = {{"runPolicy", Json::object()}};
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  in.owners = {ObjectOf(object)};
  in.pods = {
      Pod("ml", "p", 1,
          OwnedByKind("trainer.kubeflow.org/v1alpha1", "TrainJob", "llm", "uid-trainjob-llm"))};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0], "kind trainer.kubeflow.org/v1alpha1  is not one Chamber schedules");
}

TEST(WorkloadKindsTest, ATrainJobIsSuspendedThroughItsSpecAndItsGangIsItsJobSets) {
  const WorkloadKind* k = FindWorkloadKind("trainer.kubeflow.org/v1alpha1", "TrainJob");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->type.plural, "trainjobs");
  EXPECT_EQ(k->SuspendPatch(true), (Json{{"spec", {{"suspend", true}}}}));
  EXPECT_EQ(k->LowerKind(), "trainjob");

  Result<KindSpec> spec = k->read(TrainJobJson("llm"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_FALSE(spec->suspended);
  EXPECT_FALSE(spec->finished);
  EXPECT_TRUE(spec->suspendable);
  EXPECT_TRUE(spec->gang_from_part);
  EXPECT_TRUE(spec->pod_sets.empty()) << "its pods come from the runtime, through its JobSet";
  EXPECT_EQ(spec->part_of,
            "its JobSet, which the Trainer makes from ClusterTrainingRuntime torch-distributed");

  spec = k->read(TrainJobJson("llm", {{"spec", {{"suspend", true}}}}));
  EXPECT_TRUE(spec->suspended);
  for (const char* type : {"Complete", "Failed"}) {
    spec = k->read(TrainJobJson(
        "llm", {{"status", {{"conditions", {{{"type", type}, {"status", "True"}}}}}}}));
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_TRUE(spec->finished) << type;
  }
  spec = k->read(TrainJobJson(
      "llm", {{"status", {{"conditions", {{{"type", "Suspended"}, {"status", "True"}}}}}}}));
  EXPECT_FALSE(spec->finished);
  // A namespaced runtime; no kind: the CRD's default.
  spec = k->read(TrainJobJson(
      "llm", {{"spec", {{"runtimeRef", {{"kind", "TrainingRuntime"}, {"name", "mine"}}}}}}));
  EXPECT_EQ(spec->part_of, "its JobSet, which the Trainer makes from TrainingRuntime mine");
  spec = k->read(TrainJobJson("llm", {{"spec", {{"runtimeRef", {{"kind", nullptr}}}}}}));
  EXPECT_EQ(spec->part_of,
            "its JobSet, which the Trainer makes from ClusterTrainingRuntime torch-distributed");

  // Errors name the object and the field.
  auto error = [&](Json extra) { return k->read(TrainJobJson("llm", extra)).status().message(); };
  EXPECT_EQ(error({{"spec", {{"suspend", "yes"}}}}),
            "trainjob ml/llm: spec.suspend: must be true or false");
  EXPECT_EQ(error({{"spec", {{"runtimeRef", nullptr}}}}),
            "trainjob ml/llm: spec.runtimeRef: is missing");
  EXPECT_EQ(error({{"spec", {{"runtimeRef", {{"name", 5}}}}}}),
            "trainjob ml/llm: spec.runtimeRef.name: must be a string");
  EXPECT_EQ(error({{"spec", {{"trainer", {{"numNodes", "two"}}}}}}),
            "trainjob ml/llm: spec.trainer.numNodes: must be an integer");
  EXPECT_EQ(error({{"spec", {{"trainer", {{"numNodes", -1}}}}}}),
            "trainjob ml/llm: spec.trainer.numNodes: -1 is out of range");
  EXPECT_EQ(error({{"status", {{"conditions", "done"}}}}),
            "trainjob ml/llm: status.conditions: must be a list");
  EXPECT_EQ(k->read(Json::array()).status().message(), "trainjob /: (object): must be an object");
}

TEST(SnapshotBuilderTest, ATrainJobIsOneGangOfItsJobSetsPods) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8), GpuNode("n2", 8)};
  in.priority_classes = {std::make_shared<const kube::PriorityClass>(
      kube::PriorityClass::FromJson({{"metadata", {{"name", "high"}}}, {"value", 100}}).value())};
  in.owners = {ObjectOf(TrainJobJson("llm")), TrainJobSet("llm", 2)};
  AddChildren(&in, "ml", "llm", 2);  // Pod -> Job -> JobSet -> TrainJob
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u) << "its JobSet and Jobs are parts of it";
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.name, "ml/llm");
  EXPECT_EQ(w.queue, "team-a") << "the TrainJob's label";
  EXPECT_EQ(w.state, core::WorkloadState::kPending);
  EXPECT_EQ(w.awaited_pods, 0);
  EXPECT_EQ(w.TotalPods(), 5);
  EXPECT_EQ(w.priority, 10) << "the pods' priority";
  EXPECT_EQ(w.submit_time.count(), UnixMs("2026-11-30T07:00:00Z")) << "the TrainJob's";
  const WorkloadSource& src = b.sources[0];
  EXPECT_EQ(src.kind, WorkloadSource::Kind::kOwner);
  EXPECT_TRUE(src.Suspendable());
  EXPECT_EQ(src.SuspendableType().plural, "trainjobs");
  EXPECT_EQ(src.suspendable_uid(), "uid-trainjob-llm");
  EXPECT_EQ(src.suspendable_resource_version(), "7");
  EXPECT_EQ(
      src.Involved(),
      (Json{{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
            {"kind", "TrainJob"},
            {"metadata", {{"name", "llm"}, {"namespace", "ml"}, {"uid", "uid-trainjob-llm"}}}}));
  ASSERT_NE(src.part, nullptr) << "the JobSet, suspended with it";
  EXPECT_EQ(src.part->metadata.uid, "uid-jobset-llm");
  ASSERT_NE(src.part_kind, nullptr);
  EXPECT_EQ(src.part_kind->type.plural, "jobsets");
  EXPECT_EQ(src.PodKeys().size(), 5u);

  // All or nothing: its 17 GPUs do not fit two nodes' 16.
  core::Snapshot s = b.snapshot;
  s.queues = {QueueNamed("team-a", 24)};
  core::CycleResult r = core::Engine().Schedule(s);
  EXPECT_TRUE(r.binds.empty());
  ASSERT_EQ(r.pending.size(), 1u);

  // Short of pods, it waits for them: the JobSet's spec says how many.
  ClusterObjects short_of = in;
  short_of.pods.pop_back();
  b = BuildSnapshot(short_of, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].awaited_pods, 1);

  // Before the Trainer has made the JobSet it has no pods and holds nothing; being queued, it
  // says what it waits for.
  ClusterObjects alone;
  alone.nodes = in.nodes;
  alone.owners = {ObjectOf(TrainJobJson("llm"))};
  b = BuildSnapshot(alone, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0],
            "trainjob ml/llm: waits for its JobSet, which the Trainer makes from "
            "ClusterTrainingRuntime torch-distributed; it has no pods yet");
  Json unqueued = TrainJobJson("llm");
  unqueued["metadata"].erase("labels");
  alone.owners = {ObjectOf(unqueued)};
  EXPECT_TRUE(BuildSnapshot(alone, Opts()).problems.empty()) << "not Chamber's: not its concern";

  // The TrainJob not in view: its JobSet's pods wait, the JobSet is not a workload alone.
  ClusterObjects orphan = in;
  orphan.owners = {TrainJobSet("llm", 2)};
  EXPECT_TRUE(BuildSnapshot(orphan, Opts()).snapshot.workloads.empty());

  // Suspended by Chamber (the Trainer suspends the JobSet, the JobSet controller its Jobs), it
  // has no pods: its sets and priority come from the JobSet's templates.
  ClusterObjects suspended = in;
  suspended.pods.clear();
  JobsStopped(&suspended);
  suspended.owners = {
      ObjectOf(TrainJobJson(
          "llm",
          {{"metadata", {{"annotations", {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"}}}}},
           {"spec", {{"suspend", true}}}})),
      TrainJobSet("llm", 2, {{"spec", {{"suspend", true}}}})};
  b = BuildSnapshot(suspended, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  const core::Workload& sw = b.snapshot.workloads[0];
  EXPECT_EQ(sw.state, core::WorkloadState::kSuspended);
  EXPECT_EQ(sw.priority, 100) << "the templates' PriorityClass";
  ASSERT_EQ(sw.pod_sets.size(), 2u);
  EXPECT_EQ(sw.pod_sets[0].name, "llm/leader");
  EXPECT_EQ(sw.pod_sets[0].count, 1);
  EXPECT_EQ(sw.pod_sets[1].name, "llm/workers");
  EXPECT_EQ(sw.pod_sets[1].count, 4);
  EXPECT_EQ(sw.pod_sets[1].request.whole_gpus(), 4);
  // Resumed by Chamber, the JobSet still suspended a moment: the TrainJob's flag decides.
  suspended.owners[0] = ObjectOf(TrainJobJson("llm"));
  suspended.pods = in.pods;
  b = BuildSnapshot(suspended, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].state, core::WorkloadState::kPending);

  // Paused by its owner, or finished (the TrainJob's condition, or its JobSet's before the
  // Trainer copies it): not Chamber's to run.
  ClusterObjects other = in;
  other.owners = {ObjectOf(TrainJobJson("llm", {{"spec", {{"suspend", true}}}})),
                  TrainJobSet("llm", 2, {{"spec", {{"suspend", true}}}})};
  EXPECT_TRUE(BuildSnapshot(other, Opts()).snapshot.workloads.empty());
  other.owners = {
      ObjectOf(TrainJobJson(
          "llm", {{"status", {{"conditions", {{{"type", "Complete"}, {"status", "True"}}}}}}})),
      TrainJobSet("llm", 2)};
  EXPECT_TRUE(BuildSnapshot(other, Opts()).snapshot.workloads.empty());
  other.owners = {
      ObjectOf(TrainJobJson("llm")),
      TrainJobSet("llm", 2,
                  {{"status", {{"conditions", {{{"type", "Completed"}, {"status", "True"}}}}}}})};
  EXPECT_TRUE(BuildSnapshot(other, Opts()).snapshot.workloads.empty());

  // A JobSet or TrainJob that does not read: its pods wait, and the problem names the field.
  Json bad = JobSetJson(
      "ml", "llm", 2,
      OwnedByKind("trainer.kubeflow.org/v1alpha1", "TrainJob", "llm", "uid-trainjob-llm"));
  bad["spec"]["replicatedJobs"][1]["replicas"] = "two";
  other.owners = {ObjectOf(TrainJobJson("llm")), ObjectOf(bad)};
  b = BuildSnapshot(other, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0],
            "trainjob ml/llm: jobset ml/llm: spec.replicatedJobs[1].replicas: must be an integer");
  other.owners = {ObjectOf(TrainJobJson("llm", {{"spec", {{"trainer", {{"numNodes", "two"}}}}}})),
                  TrainJobSet("llm", 2)};
  b = BuildSnapshot(other, Opts());
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0], "trainjob ml/llm: spec.trainer.numNodes: must be an integer");
}

TEST(SnapshotBuilderTest, ServingReplicasUpToTheirReservedCountRunReserved) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  auto replica = [](const std::string& name, const std::string& created, bool bound,
                    const std::string& reserved = "2") {
    Json extra = OwnedByKind("apps/v1", "ReplicaSet", "web-7d9", "uid-rs");
    extra["metadata"]["creationTimestamp"] = created;
    extra["metadata"]["annotations"] = {{"chamber.io/reserved-replicas", reserved}};
    if (bound) {
      extra["spec"] = {{"nodeName", "n1"}};
      extra["status"] = {{"phase", "Running"}, {"startTime", created}};
    }
    return Pod("ml", name, 1, extra);
  };
  // Bound replicas are reserved first, then the oldest: c (bound) and a (oldest pending).
  in.pods = {replica("web-a", "2026-11-30T10:00:00Z", false),
             replica("web-b", "2026-11-30T10:05:00Z", false),
             replica("web-c", "2026-11-30T10:10:00Z", true)};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 3u) << "each replica is a workload of its own";
  std::map<std::string, int32_t> priority;
  for (const core::Workload& w : b.snapshot.workloads) priority[w.name] = w.priority;
  EXPECT_EQ(priority["ml/web-c"], core::kReservedPriority);
  EXPECT_EQ(priority["ml/web-a"], core::kReservedPriority);
  EXPECT_EQ(priority["ml/web-b"], 10) << "above the reserved count: its own priority";

  // A cached build follows the replicas as they change: web-c gone, web-b is reserved now.
  BuildCache cache;
  BuildOptions o = Opts();
  o.cache = &cache;
  (void)BuildSnapshot(in, o);
  in.pods.pop_back();
  b = BuildSnapshot(in, o);
  for (const core::Workload& w : b.snapshot.workloads)
    EXPECT_EQ(w.priority, core::kReservedPriority) << w.name;

  // A bad count reserves none and says so.
  in.pods = {replica("web-a", "2026-11-30T10:00:00Z", false, "two")};
  b = BuildSnapshot(in, Opts());
  EXPECT_EQ(b.snapshot.workloads[0].priority, 10);
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0],
            "pod ml/web-a: chamber.io/reserved-replicas: \"two\" is not an integer; no replica is "
            "reserved");
}

// The examples under deploy/examples/ read as their comments and docs/workloads/ say.
TEST(WorkloadKindsTest, TheExamplesReadAsTheirDocsSay) {
  auto read_all = [](const std::string& file) {
    const std::string path = std::string(CHAMBER_EXAMPLES_DIR) + "/" + file;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    Result<std::vector<Json>> docs = ManifestToJson(text.str(), path);
    EXPECT_TRUE(docs.ok()) << path << ": " << docs.status().ToString();
    return docs.ok() ? *docs : std::vector<Json>{};
  };
  auto read = [&](const std::string& file) {
    const std::vector<Json> docs = read_all(file);
    EXPECT_EQ(docs.size(), 1u) << file;
    return !docs.empty() ? docs.front() : Json::object();
  };
  auto spec_of = [](const Json& object) {
    const WorkloadKind* kind =
        FindWorkloadKind(object.value("apiVersion", ""), object.value("kind", ""));
    EXPECT_NE(kind, nullptr) << object.dump();
    return kind == nullptr ? Result<KindSpec>(Status::NotFound("no kind")) : kind->read(object);
  };
  Result<KindSpec> jobset = spec_of(read("jobset.yaml"));
  ASSERT_TRUE(jobset.ok()) << jobset.status().ToString();
  EXPECT_EQ(jobset->Pods(), 9) << "a coordinator and 4 Jobs of 2 workers";
  Result<KindSpec> pytorch = spec_of(read("pytorchjob.yaml"));
  ASSERT_TRUE(pytorch.ok()) << pytorch.status().ToString();
  EXPECT_EQ(pytorch->Pods(), 4);
  Result<KindSpec> ray = spec_of(read("rayjob.yaml"));
  ASSERT_TRUE(ray.ok()) << ray.status().ToString();
  EXPECT_EQ(ray->Pods(), 4) << "the head and 3 workers";
  EXPECT_EQ(ray->min_pods, 3) << "the head and minReplicas 2";
  EXPECT_TRUE(ray->suspendable);
  Result<KindSpec> lws = spec_of(read("leaderworkerset.yaml"));
  ASSERT_TRUE(lws.ok()) << lws.status().ToString();
  EXPECT_EQ(lws->groups, 3);
  EXPECT_EQ(lws->Pods(), 4) << "per group: a leader and 3 workers";
  // The upstream PodGroup: a gang of at least 4, in team-a; its pod names it.
  const std::vector<Json> podgroup = read_all("podgroup.yaml");
  ASSERT_EQ(podgroup.size(), 2u);
  Result<UpstreamPodGroup> pg = ReadPodGroup(podgroup[0]);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  EXPECT_TRUE(pg->gang);
  EXPECT_EQ(pg->min_count, 4);
  EXPECT_EQ(podgroup[0]["metadata"]["labels"]["chamber.io/queue"], "team-a");
  Result<kube::Pod> member = kube::Pod::FromJson(podgroup[1]);
  ASSERT_TRUE(member.ok()) << member.status().ToString();
  EXPECT_EQ(member->pod_group_name, podgroup[0]["metadata"]["name"]);
  // A TrainJob and its runtime: the gang is the JobSet the Trainer builds from the runtime's
  // template, the trainer step (by its ancestor label) with numNodes pods of resourcesPerNode.
  const std::vector<Json> train = read_all("trainjob.yaml");
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(train[0].value("kind", ""), "ClusterTrainingRuntime");
  Result<KindSpec> trainjob = spec_of(train[1]);
  ASSERT_TRUE(trainjob.ok()) << trainjob.status().ToString();
  EXPECT_TRUE(trainjob->gang_from_part);
  EXPECT_EQ(trainjob->part_of,
            "its JobSet, which the Trainer makes from ClusterTrainingRuntime torch-chamber");
  EXPECT_EQ(train[1]["spec"]["runtimeRef"]["name"], train[0]["metadata"]["name"]);
  Json made = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
               {"kind", "JobSet"},
               {"metadata", {{"name", "llama-finetune"}, {"namespace", "ml"}}},
               {"spec", train[0]["spec"]["template"]["spec"]}};
  const Json& trainer = train[1]["spec"]["trainer"];
  for (Json& rj : made["spec"]["replicatedJobs"]) {
    if (rj.value("/template/metadata/labels"_json_pointer, Json::object())
            .value("trainer.kubeflow.org/trainjob-ancestor-step", "") != "trainer")
      continue;
    rj["replicas"] = 1;
    rj["template"]["spec"]["parallelism"] = trainer["numNodes"];
    rj["template"]["spec"]["completions"] = trainer["numNodes"];
    for (Json& c : rj["template"]["spec"]["template"]["spec"]["containers"])
      if (c["name"] == "node") c["resources"] = trainer["resourcesPerNode"];
  }
  Result<KindSpec> made_spec = spec_of(made);
  ASSERT_TRUE(made_spec.ok()) << made_spec.status().ToString();
  EXPECT_EQ(made_spec->Pods(), 4) << "numNodes 4";
  // Suspended by Chamber, its pod sets are the JobSet's templates: 4 pods of 8 GPUs.
  Json preempted = train[1];
  preempted["metadata"]["uid"] = "uid-trainjob";
  preempted["spec"]["suspend"] = true;
  preempted["metadata"]["annotations"][keys::kPreemptedAt] = "2026-11-30T10:00:00Z";
  made["metadata"]["uid"] = "uid-jobset";
  made.merge_patch(
      OwnedByKind("trainer.kubeflow.org/v1alpha1", "TrainJob", "llama-finetune", "uid-trainjob"));
  ClusterObjects objects;
  objects.owners = {ObjectOf(preempted), ObjectOf(made)};
  const BuiltSnapshot built = BuildSnapshot(objects, Opts());
  ASSERT_EQ(built.snapshot.workloads.size(), 1u) << ::testing::PrintToString(built.problems);
  ASSERT_EQ(built.snapshot.workloads[0].pod_sets.size(), 1u);
  EXPECT_EQ(built.snapshot.workloads[0].pod_sets[0].count, 4);
  EXPECT_EQ(built.snapshot.workloads[0].pod_sets[0].request.whole_gpus(), 8);
  EXPECT_EQ(built.snapshot.workloads[0].queue, "team-a");
  EXPECT_EQ(built.snapshot.workloads[0].checkpoint_grace_seconds, 120);
  const Json serving = read("serving-deployment.yaml");
  EXPECT_EQ(
      serving["spec"]["template"]["metadata"]["annotations"].value(keys::kReservedReplicas, ""),
      "2");
  // Shares: a notebook of half a GPU and 20 GiB, a Job of quarters; neither asks nvidia.com/gpu.
  const std::vector<Json> shares = read_all("gpu-share.yaml");
  ASSERT_EQ(shares.size(), 2u);
  Result<kube::Pod> notebook = kube::Pod::FromJson(shares[0]);
  ASSERT_TRUE(notebook.ok()) << notebook.status().ToString();
  Result<gpu_share::Ask> half =
      gpu_share::ReadAsk(notebook->metadata.annotations, notebook->Request("nvidia.com/gpu"));
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_EQ(half->gpu_milli, 500);
  EXPECT_EQ(half->gpu_memory_mib, 20480);
  Result<kube::Job> sweep = kube::Job::FromJson(shares[1]);
  ASSERT_TRUE(sweep.ok()) << sweep.status().ToString();
  Result<gpu_share::Ask> quarter =
      gpu_share::ReadAsk(shares[1]["spec"]["template"]["metadata"]["annotations"]
                             .get<std::map<std::string, std::string>>(),
                         0);
  ASSERT_TRUE(quarter.ok()) << quarter.status().ToString();
  EXPECT_EQ(quarter->gpu_milli, 250);
}

TEST(SnapshotBuilderTest, EachGroupOfALeaderWorkerSetIsAGangOfItsOwn) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 8)};
  Json lws = {{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
              {"kind", "LeaderWorkerSet"},
              {"metadata",
               {{"name", "llm"},
                {"namespace", "ml"},
                {"uid", "uid-lws"},
                {"labels", {{"chamber.io/queue", "team-a"}}},
                {"annotations", {{"chamber.io/reserved-replicas", "1"}}},
                {"creationTimestamp", "2026-11-30T08:00:00Z"}}},
              {"spec",
               {{"replicas", 2},
                {"leaderWorkerTemplate", {{"size", 3}, {"workerTemplate", PodTemplate(2)}}}}}};
  const WorkloadKind* kind = FindWorkloadKind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet");
  ASSERT_NE(kind, nullptr);
  Result<KindSpec> spec = kind->read(lws);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->groups, 2);
  EXPECT_EQ(spec->Pods(), 3) << "per group: the leader and 2 workers";
  EXPECT_FALSE(spec->suspendable);
  in.owners = {ObjectOf(lws)};
  // Group 0 whole; group 1 short of a worker. Their controllers are StatefulSets (and a
  // worker's StatefulSet is owned by its leader pod): the labels say which group.
  auto pod = [](const std::string& name, const std::string& group) {
    Json extra = OwnedByKind("apps/v1", "StatefulSet", "sts", "uid-sts-" + group);
    extra["metadata"]["labels"] = {{"leaderworkerset.sigs.k8s.io/name", "llm"},
                                   {"leaderworkerset.sigs.k8s.io/group-index", group}};
    return Pod("ml", name, 2, extra);
  };
  in.pods = {pod("llm-0", "0"), pod("llm-0-1", "0"), pod("llm-0-2", "0"), pod("llm-1", "1"),
             pod("llm-1-1", "1")};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 2u) << "one gang per group, none for the object";
  const core::Workload& g0 = b.snapshot.workloads[0];
  const core::Workload& g1 = b.snapshot.workloads[1];
  EXPECT_EQ(g0.name, "ml/llm-0");
  EXPECT_EQ(g0.queue, "team-a");
  EXPECT_EQ(g0.TotalPods(), 3);
  EXPECT_EQ(g0.awaited_pods, 0);
  EXPECT_EQ(g0.priority, core::kReservedPriority) << "group 0 is below reserved-replicas 1";
  EXPECT_EQ(g1.name, "ml/llm-1");
  EXPECT_EQ(g1.awaited_pods, 1);
  EXPECT_EQ(g1.priority, 10);
  EXPECT_FALSE(b.sources[0].Suspendable()) << "a group is evicted, not suspended";

  // Without the LeaderWorkerSet in view, its pods wait.
  in.owners.clear();
  EXPECT_TRUE(BuildSnapshot(in, Opts()).snapshot.workloads.empty());
}

TEST(SnapshotBuilderTest, IndexLists) {
  EXPECT_EQ(ParseIndexList("0, 3,5").value(), (std::vector<int>{0, 3, 5}));
  EXPECT_TRUE(ParseIndexList("").value().empty());
  EXPECT_EQ(ParseIndexList("1,1").status().message(), "GPU index 1 appears twice");
  EXPECT_EQ(ParseIndexList("64").status().message(), "\"64\" is not a GPU index (0 to 63)");
  EXPECT_EQ(ParseIndexList("-1").status().message(), "\"-1\" is not a GPU index (0 to 63)");
  EXPECT_EQ(FormatIndexList(MaskToIndices(0b1010'0001)), "0,5,7");
}

// --- Reservation pods (docs/sharing.md, "Reservation pods") ---

// A reservation pod of chamberd's in namespace "chamber" on node n1, as the API server holds it.
std::shared_ptr<const kube::Pod> ReservationPodOn(const std::string& name, Json extra = {}) {
  Json j = PodJson("chamber", name, 1,
                   {{"metadata", {{"labels", {{"chamber.io/gpu-reservation", "true"}}}}},
                    {"spec", {{"nodeName", "n1"}, {"schedulerName", "default-scheduler"}}},
                    {"status", {{"phase", "Running"}}}});
  j["spec"]["containers"][0]["resources"]["requests"] = {
      {"cpu", "1m"}, {"memory", "8Mi"}, {"nvidia.com/gpu", "1"}};
  if (!extra.is_null()) j.merge_patch(extra);
  return std::make_shared<const kube::Pod>(kube::Pod::FromJson(j).value());
}

// A waiting half-GPU share of queue q, given its GPU's environment by the webhook.
std::shared_ptr<const kube::Pod> HalfShare(const std::string& name, Json extra = {}) {
  Json j = {{"metadata",
             {{"annotations",
               {{"chamber.io/gpu-fraction", "0.5"}, {"chamber.io/gpu-env", "downward-api"}}},
              {"labels", {{"chamber.io/queue", "q"}}}}}};
  if (!extra.is_null()) j.merge_patch(extra);
  return Pod("ml", name, 0, j);
}

// The same share, bound to GPU 1 of node n1 and running.
std::shared_ptr<const kube::Pod> HalfShareOnGpu1(const std::string& name) {
  return HalfShare(name, {{"metadata", {{"annotations", {{"chamber.io/gpu-indices", "1"}}}}},
                          {"spec", {{"nodeName", "n1"}}},
                          {"status", {{"phase", "Running"}}}});
}

TEST(SnapshotBuilderTest, AReservationPodsReportedGpuIsReservedNotHeld) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 4)};
  in.pods = {ReservationPodOn("gpu-reservation-a"),
             ReservationPodOn("gpu-reservation-b"),  // not reported yet
             ReservationPodOn("gpu-reservation-c",
                              {{"metadata", {{"deletionTimestamp", "2026-11-30T10:00:05Z"}}}}),
             ReservationPodOn("gpu-reservation-d", {{"status", {{"phase", "Failed"}}}})};
  in.queues = {QueueNamed("q", 4)};
  const DeviceAssignments devices = {
      {"n1", std::make_shared<const NodeDevices>(NodeDevices{
                 {"chamber/gpu-reservation-a", 0b0100}, {"chamber/gpu-reservation-c", 0b0001}})}};
  BuildOptions o = Opts();
  o.devices = &devices;
  o.reservation_namespace = "chamber";
  BuiltSnapshot b = BuildSnapshot(in, o);
  const core::Node& n = b.snapshot.nodes[0];
  EXPECT_EQ(n.reserved_gpu_mask, 0b0100u) << "a: reported and live; c is being deleted";
  EXPECT_EQ(n.external_gpu_mask, 0u) << "to the engine a reserved GPU without shares is free";
  EXPECT_EQ(n.max_pods, 110 - 3) << "the live ones' pod slots";
  EXPECT_TRUE(b.snapshot.workloads.empty());
  ASSERT_EQ(b.reservations.size(), 4u);
  EXPECT_EQ(b.reservations[0].key, "chamber/gpu-reservation-a");
  EXPECT_EQ(b.reservations[0].gpu, 2);
  EXPECT_EQ(b.reservations[1].gpu, -1);
  EXPECT_TRUE(b.reservations[2].deleting);
  EXPECT_EQ(b.reservations[2].gpu, 0);
  EXPECT_TRUE(b.reservations[3].failed);
  EXPECT_EQ(b.reservations[0].created_ms, UnixMs("2026-11-30T10:00:00Z"));

  // Without chamberd's namespace they are any other scheduler's pods, holding their GPUs.
  o.reservation_namespace = "";
  b = BuildSnapshot(in, o);
  EXPECT_TRUE(b.reservations.empty());
  EXPECT_EQ(b.snapshot.nodes[0].reserved_gpu_mask, 0u);
  EXPECT_EQ(std::popcount(b.snapshot.nodes[0].external_gpu_mask), 3);
}

// A share is bound only to a GPU a reservation pod holds: the first placement makes one and
// waits; a reservation not reported yet is counted on, not made twice; once reported, the share
// goes on its GPU and is bound, making nothing more.
TEST(SnapshotBuilderTest, AShareWaitsForAReservationPodThenGoesOnItsGpu) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 4), GpuNode("n2", 4)};
  in.pods = {HalfShare("s")};
  in.queues = {QueueNamed("q", 4)};
  auto devices = [](NodeDevices n1) {
    return DeviceAssignments{{"n1", std::make_shared<const NodeDevices>(std::move(n1))}};
  };
  BuildOptions o = Opts();
  o.reservation_namespace = "chamber";
  DeviceAssignments reported = devices({});
  o.devices = &reported;
  std::unordered_map<std::string, int64_t> idle;
  const int64_t now = o.now.count();
  auto plan = [&](const BuiltSnapshot& b, const core::CycleResult& r) {
    return PlanReservations(b, r, reported, now, ReservationOptions{}, idle);
  };

  BuiltSnapshot b = BuildSnapshot(in, o);
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u);
  ASSERT_EQ(r.binds[0].pods[0].placement.node.value, 0) << "n1, the lower node";
  ReservationPlan p = plan(b, r);
  EXPECT_EQ(p.wait[0],
            "its share waits for the device plugin to give a GPU to a reservation pod on node n1");
  EXPECT_EQ(p.create, std::vector<int32_t>{0});
  EXPECT_TRUE(p.remove.empty());

  // Made, and not shown by the informer yet: counted on, not made again.
  p = PlanReservations(b, r, reported, now, ReservationOptions{}, idle, {0});
  EXPECT_FALSE(p.wait[0].empty());
  EXPECT_TRUE(p.create.empty());

  // Shown, not reported yet: counted on.
  in.pods.push_back(ReservationPodOn("gpu-reservation-a"));
  b = BuildSnapshot(in, o);
  r = core::Engine().Schedule(b.snapshot);
  p = plan(b, r);
  EXPECT_FALSE(p.wait[0].empty());
  EXPECT_TRUE(p.create.empty());
  EXPECT_TRUE(p.remove.empty());

  // Reported on GPU 3: the share goes there and is bound.
  reported = devices({{"chamber/gpu-reservation-a", 0b1000}});
  b = BuildSnapshot(in, o);
  r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods[0].placement, (core::PodPlacement{core::NodeId{0}, 0b1000}));
  p = plan(b, r);
  EXPECT_EQ(p.wait[0], "");
  EXPECT_TRUE(p.create.empty());
  EXPECT_TRUE(p.remove.empty());

  // A GPU whose shares were bound without a reservation (before reservations, or while the
  // agent did not report) takes more as before: no reservation can be had for it.
  in.pods = {HalfShare("s"), HalfShareOnGpu1("old")};
  reported = devices({});
  b = BuildSnapshot(in, o);
  r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u);
  EXPECT_EQ(r.binds[0].pods[0].placement, (core::PodPlacement{core::NodeId{0}, 0b0010}));
  p = plan(b, r);
  EXPECT_EQ(p.wait[0], "");
  EXPECT_TRUE(p.create.empty());

  // A node whose agent reports no pod resources binds shares as without reservations.
  reported = {};
  in.pods = {HalfShare("s")};
  b = BuildSnapshot(in, o);
  r = core::Engine().Schedule(b.snapshot);
  p = plan(b, r);
  EXPECT_EQ(p.wait[0], "");
  EXPECT_TRUE(p.create.empty());
}

// A reservation pod outlives the shares on its GPU by the grace; one never reported, or ended,
// goes; and whole-GPU pods wait for idle reservation pods to leave when the device plugin would
// have too few GPUs for them, which are deleted at once, never one a share holds.
TEST(SnapshotBuilderTest, ReservationPodsLeaveWhenIdleOrNeededAndNeverUnderAShare) {
  ClusterObjects in;
  in.nodes = {GpuNode("n1", 4)};
  in.pods = {ReservationPodOn("gpu-reservation-busy"), ReservationPodOn("gpu-reservation-idle"),
             HalfShareOnGpu1("s")};
  in.queues = {QueueNamed("q", 8)};
  const DeviceAssignments devices = {{"n1", std::make_shared<const NodeDevices>(NodeDevices{
                                                {"chamber/gpu-reservation-busy", 0b0010},
                                                {"chamber/gpu-reservation-idle", 0b0100}})}};
  BuildOptions o = Opts();
  o.reservation_namespace = "chamber";
  o.devices = &devices;
  std::unordered_map<std::string, int64_t> idle;
  const ReservationOptions opts;  // a grace of 10 s
  const int64_t t0 = o.now.count();
  BuiltSnapshot b = BuildSnapshot(in, o);
  const core::CycleResult none;
  EXPECT_TRUE(PlanReservations(b, none, devices, t0, opts, idle).remove.empty());
  EXPECT_TRUE(PlanReservations(b, none, devices, t0 + 9'999, opts, idle).remove.empty());
  ReservationPlan p = PlanReservations(b, none, devices, t0 + 10'000, opts, idle);
  ASSERT_EQ(p.remove.size(), 1u);
  EXPECT_EQ(b.reservations[p.remove[0].reservation].key, "chamber/gpu-reservation-idle");
  EXPECT_EQ(p.remove[0].why, "no share has held its GPU for 10 s");
  EXPECT_EQ(p.remove[0].reason, "idle");
  EXPECT_EQ(idle.size(), 1u) << "the busy one is not idle";

  // A whole-GPU pod of 3 on the node: the device plugin has 4 - 2 reserved = 2 to give. The
  // idle reservation goes at once, before its grace; the pod waits.
  idle.clear();
  in.pods.push_back(
      Pod("ml", "whole", 3, {{"metadata", {{"labels", {{"chamber.io/queue", "q"}}}}}}));
  b = BuildSnapshot(in, o);
  core::CycleResult r = core::Engine().Schedule(b.snapshot);
  ASSERT_EQ(r.binds.size(), 1u) << "to the engine the idle reservation's GPU is free";
  p = PlanReservations(b, r, devices, t0, opts, idle);
  EXPECT_EQ(p.wait[0],
            "waits for 1 reservation pod(s) to leave node n1, so that the device plugin has GPUs "
            "to give its pods");
  ASSERT_EQ(p.remove.size(), 1u);
  EXPECT_EQ(b.reservations[p.remove[0].reservation].key, "chamber/gpu-reservation-idle");
  EXPECT_EQ(p.remove[0].why, "no share holds its GPU, and whole-GPU pods need it");
  EXPECT_EQ(p.remove[0].reason, "needed");
  // Being deleted, it still holds its GPU: the pod waits on, and nothing more is deleted.
  in.pods[1] = ReservationPodOn("gpu-reservation-idle",
                                {{"metadata", {{"deletionTimestamp", "2026-11-30T10:00:05Z"}}}});
  b = BuildSnapshot(in, o);
  r = core::Engine().Schedule(b.snapshot);
  p = PlanReservations(b, r, devices, t0, opts, idle);
  EXPECT_FALSE(p.wait[0].empty());
  EXPECT_TRUE(p.remove.empty());
  // Gone: bound.
  in.pods.erase(in.pods.begin() + 1);
  b = BuildSnapshot(in, o);
  r = core::Engine().Schedule(b.snapshot);
  p = PlanReservations(b, r, devices, t0, opts, idle);
  EXPECT_EQ(p.wait[0], "");

  // Never reported in 2 minutes, or ended: deleted.
  in.pods = {ReservationPodOn("gpu-reservation-lost"),
             ReservationPodOn("gpu-reservation-ended", {{"status", {{"phase", "Failed"}}}})};
  b = BuildSnapshot(in, o);
  p = PlanReservations(b, none, devices, UnixMs("2026-11-30T10:02:00Z"), opts, idle);
  ASSERT_EQ(p.remove.size(), 2u);
  EXPECT_EQ(p.remove[0].why,
            "its node's agent has not reported the GPU the device plugin gave it in 120 s");
  EXPECT_EQ(p.remove[1].why, "it ended");
  EXPECT_EQ(p.remove[0].reason, "unreported");
  EXPECT_EQ(p.remove[1].reason, "ended");
  EXPECT_TRUE(idle.empty()) << "entries of pods no longer live are dropped";
}

// /metrics counts reservation pods by state, and what was made and deleted by reason.
TEST(BackendMetricsTest, CountReservationPodsByStateAndDeletionsByReason) {
  KubeBackendStats stats;
  stats.binds = 7;
  stats.rollbacks = 2;
  stats.reservations_made = 5;
  stats.reservations_deleted = {1, 0, 3, 0};  // ended, unreported, idle, needed
  std::vector<GpuReservation> seen(5);
  seen[0].gpu = 1;          // reported
  seen[1].gpu = 2;          // reported
  seen[2].gpu = -1;         // unreported
  seen[3].deleting = true;  // deleting
  seen[4].failed = true;    // ended
  const std::vector<daemon::BackendMetric> metrics = BackendMetrics(stats, seen);
  auto value = [&](const std::string& name, const std::string& label = "") {
    for (const daemon::BackendMetric& m : metrics)
      if (m.name == name && (label.empty() || (!m.labels.empty() && m.labels[0].second == label)))
        return m.value;
    return -1.0;
  };
  EXPECT_EQ(value("chamber_binds_total"), 7);
  EXPECT_EQ(value("chamber_rolled_back_pods_total"), 2);
  EXPECT_EQ(value("chamber_gpu_reservation_pods", "reported"), 2);
  EXPECT_EQ(value("chamber_gpu_reservation_pods", "unreported"), 1);
  EXPECT_EQ(value("chamber_gpu_reservation_pods", "deleting"), 1);
  EXPECT_EQ(value("chamber_gpu_reservation_pods", "ended"), 1);
  EXPECT_EQ(value("chamber_gpu_reservation_pods_created_total"), 5);
  EXPECT_EQ(value("chamber_gpu_reservation_pods_deleted_total", "ended"), 1);
  EXPECT_EQ(value("chamber_gpu_reservation_pods_deleted_total", "idle"), 3);
  EXPECT_EQ(value("chamber_gpu_reservation_pods_deleted_total", "needed"), 0);
  // One family's samples are consecutive (the /metrics writer starts a family at each new name).
  std::set<std::string> done;
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (i > 0 && metrics[i - 1].name != metrics[i].name) done.insert(metrics[i - 1].name);
    EXPECT_FALSE(done.contains(metrics[i].name)) << metrics[i].name << " is split";
  }
}

}  // namespace
}  // namespace chamber::backend
