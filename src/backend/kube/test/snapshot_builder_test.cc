#include "backend/kube/snapshot_builder.h"

#include <gtest/gtest.h>

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

core::Queue QueueNamed(const std::string& name, int64_t gpus) {
  core::Queue q;
  q.name = name;
  q.res(core::Resource::kGpu).quota = gpus;
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
  EXPECT_EQ(src.job_uid(), "uid-job-train");
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
  EXPECT_EQ(b.sources[0].job_uid(), "");
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
      Json{{"metadata", {{"annotations", {{"chamber.io/preempted-at", "2026-11-30T10:00:00Z"}}}}},
           {"spec",
            {{"suspend", true},
             {"template", {{"spec", {{"schedulerName", "default-scheduler"}}}}}}}})};
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
                     {"spec", {{"suspend", true}}}}),
             JobObj("ml", "paused", 2, 1, {{"spec", {{"suspend", true}}}})};
  BuiltSnapshot b = BuildSnapshot(in, Opts());
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  const core::Workload& w = b.snapshot.workloads[0];
  EXPECT_EQ(w.name, "ml/rolled");
  EXPECT_EQ(w.state, core::WorkloadState::kSuspended);
  EXPECT_EQ(w.TotalPods(), 2);
  EXPECT_TRUE(w.recent_preemptions.empty()) << "a rollback is not a preemption";
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
                     {"spec", {{"suspend", true}}}}),
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

TEST(SnapshotBuilderTest, ABoundPodWithoutAReadableStartTimeStartsNow) {
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
    EXPECT_EQ(w.start_time, Opts().now) << w.name;
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

TEST(SnapshotBuilderTest, IndexLists) {
  EXPECT_EQ(ParseIndexList("0, 3,5").value(), (std::vector<int>{0, 3, 5}));
  EXPECT_TRUE(ParseIndexList("").value().empty());
  EXPECT_EQ(ParseIndexList("1,1").status().message(), "GPU index 1 appears twice");
  EXPECT_EQ(ParseIndexList("64").status().message(), "\"64\" is not a GPU index (0 to 63)");
  EXPECT_EQ(ParseIndexList("-1").status().message(), "\"-1\" is not a GPU index (0 to 63)");
  EXPECT_EQ(FormatIndexList(MaskToIndices(0b1010'0001)), "0,5,7");
}

}  // namespace
}  // namespace chamber::backend
