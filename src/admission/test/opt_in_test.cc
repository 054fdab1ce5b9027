#include "admission/opt_in.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "kube/errors.h"

namespace chamber::admission {
namespace {

// Owners and namespaces held in memory; a name in `failing` answers that HTTP code instead.
class MapSource : public ObjectSource {
 public:
  Result<kube::ObjectMeta> Owner(const std::string& ns, const kube::OwnerReference& ref) override {
    ++reads;
    const std::string key = ref.kind + " " + ns + "/" + ref.name;
    if (auto f = failing.find(key); f != failing.end())
      return kube::ApiErrorStatus("GET " + key, f->second, "");
    auto it = owners.find(key);
    if (it == owners.end()) return kube::ApiErrorStatus("GET " + key, 404, "");
    return it->second;
  }
  Result<kube::ObjectMeta> Namespace(const std::string& name) override {
    ++reads;
    if (auto f = failing.find("namespace " + name); f != failing.end())
      return kube::ApiErrorStatus("GET namespace " + name, f->second, "");
    auto it = namespaces.find(name);
    if (it == namespaces.end()) return kube::ApiErrorStatus("GET namespace " + name, 404, "");
    return it->second;
  }

  void AddOwner(const std::string& kind, const std::string& name,
                std::map<std::string, std::string> labels, const std::string& owner_kind = "",
                const std::string& owner_name = "") {
    kube::ObjectMeta m;
    m.name = name;
    m.namespace_name = "ml";
    m.labels = std::move(labels);
    if (!owner_kind.empty())
      m.owner_references.push_back({"apps/v1", owner_kind, owner_name, "uid-" + owner_name, true});
    owners[kind + " ml/" + name] = m;
  }
  void AddNamespace(const std::string& name, std::map<std::string, std::string> labels) {
    kube::ObjectMeta m;
    m.name = name;
    m.labels = std::move(labels);
    namespaces[name] = m;
  }

  std::map<std::string, kube::ObjectMeta> owners, namespaces;
  std::map<std::string, long> failing;
  int reads = 0;
};

AdmissionRequest PodCreate(Json pod, const std::string& ns = "ml") {
  AdmissionRequest r;
  r.uid = "u1";
  r.kind = {"", "v1", "Pod"};
  r.resource = "pods";
  r.operation = "CREATE";
  r.namespace_name = ns;
  r.object = std::move(pod);
  return r;
}

Json Pod(Json metadata, std::string scheduler = "default-scheduler") {
  Json spec = {{"containers", Json::array({{{"name", "main"}, {"image", "x"}}})}};
  if (!scheduler.empty()) spec["schedulerName"] = scheduler;
  return {{"metadata", std::move(metadata)}, {"spec", spec}};
}

Json OwnedBy(const std::string& kind, const std::string& name, bool controller = true) {
  return Json::array({{{"apiVersion", kind == "Job" ? "batch/v1" : "apps/v1"},
                       {"kind", kind},
                       {"name", name},
                       {"uid", "uid-" + name},
                       {"controller", controller}}});
}

const Json kSetScheduler = {{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", "chamber"}};

TEST(DecidePod, APodWithTheQueueLabelGetsTheSchedulerAndNothingElse) {
  MapSource src;
  auto d = DecidePod(PodCreate(Pod({{"name", "p"}, {"labels", {{"chamber.io/queue", "team-a"}}}})),
                     OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->queue, "team-a");
  EXPECT_EQ(d->source, "the pod");
  EXPECT_EQ(d->patch, Json::array({kSetScheduler}));
  EXPECT_EQ(src.reads, 0);  // its own label decides: nothing read
}

TEST(DecidePod, TheQueueAnnotationOptsInLikeTheLabel) {
  MapSource src;
  auto d = DecidePod(
      PodCreate(Pod({{"name", "p"}, {"annotations", {{"chamber.io/queue", "team-a"}}}}, "")),
      OptInPolicy{}, src);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->patch, Json::array({kSetScheduler}));  // "add" also sets an absent member
}

TEST(DecidePod, PodsNamingChamberOrAnotherSchedulerAreLeftAlone) {
  MapSource src;
  src.AddNamespace("ml", {{"chamber.io/queue", "ns-default"}});
  const Json labels = {{"name", "p"}, {"labels", {{"chamber.io/queue", "team-a"}}}};
  auto ours = DecidePod(PodCreate(Pod(labels, "chamber")), OptInPolicy{}, src);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(ours->outcome, PodOutcome::kAlreadyChamber);
  EXPECT_TRUE(ours->patch.empty());
  auto other = DecidePod(PodCreate(Pod(labels, "volcano")), OptInPolicy{}, src);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->outcome, PodOutcome::kOtherScheduler);
  EXPECT_TRUE(other->patch.empty());
  // A renamed Chamber: "chamber" is then just another scheduler.
  OptInPolicy renamed;
  renamed.scheduler_name = "gpu-sched";
  auto mine = DecidePod(PodCreate(Pod(labels, "chamber")), renamed, src);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->outcome, PodOutcome::kOtherScheduler);
  EXPECT_EQ(src.reads, 0);
}

// docs/sharing.md, "Asking for a share": a share's containers take their GPU and MPS limits from
// the annotations chamberd writes through the binding.
Json FromAnnotation(const std::string& name, const std::string& key) {
  return {{"name", name},
          {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.annotations['" + key + "']"}}}}}};
}

TEST(DecidePod, AShareGetsItsGpusEnvironmentFromTheBindingsAnnotations) {
  MapSource src;
  Json pod = Pod(
      {{"name", "p"},
       {"labels", {{"chamber.io/queue", "team-a"}}},
       {"annotations", {{"chamber.io/gpu-fraction", "0.5"}, {"chamber.io/gpu-memory", "8Gi"}}}});
  pod["spec"]["containers"][0]["env"] = {{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                                         {{"name", "FOO"}, {"value", "1"}}};
  pod["spec"]["initContainers"] = {{{"name", "fetch"}, {"image", "y"}}};
  auto d = DecidePod(PodCreate(pod), OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  const Json out = pod.patch(d->patch);
  EXPECT_EQ(out["spec"]["schedulerName"], "chamber");
  EXPECT_EQ(out["metadata"]["annotations"]["chamber.io/gpu-env"], "downward-api");
  const Json want_main = {
      FromAnnotation("NVIDIA_VISIBLE_DEVICES", "chamber.io/visible-devices"),
      {{"name", "FOO"}, {"value", "1"}},
      FromAnnotation("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                     "chamber.io/mps-active-thread-percentage"),
      FromAnnotation("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "chamber.io/mps-pinned-memory-limit")};
  EXPECT_EQ(out["spec"]["containers"][0]["env"], want_main) << out.dump(1);
  const Json want_init = {
      FromAnnotation("NVIDIA_VISIBLE_DEVICES", "chamber.io/visible-devices"),
      FromAnnotation("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                     "chamber.io/mps-active-thread-percentage"),
      FromAnnotation("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "chamber.io/mps-pinned-memory-limit")};
  EXPECT_EQ(out["spec"]["initContainers"][0]["env"], want_init) << out.dump(1);
  // Asked again (reinvocation), the answer changes nothing more.
  auto again = DecidePod(PodCreate(out), OptInPolicy{}, src);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, PodOutcome::kAlreadyChamber);
  EXPECT_EQ(out.patch(again->patch), out);
}

TEST(DecidePod, AShareNamingChamberGetsItsEnvironmentAndOthersNone) {
  MapSource src;
  Json share =
      Pod({{"name", "p"}, {"annotations", {{"chamber.io/gpu-fraction", "0.25"}}}}, "chamber");
  auto ours = DecidePod(PodCreate(share), OptInPolicy{}, src);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(ours->outcome, PodOutcome::kAlreadyChamber);
  const Json out = share.patch(ours->patch);
  EXPECT_EQ(out["spec"]["containers"][0]["env"],
            Json::array({FromAnnotation("NVIDIA_VISIBLE_DEVICES", "chamber.io/visible-devices"),
                         FromAnnotation("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                                        "chamber.io/mps-active-thread-percentage")}))
      << "no memory asked: no memory limit";
  EXPECT_EQ(out["metadata"]["annotations"]["chamber.io/gpu-env"], "downward-api");
  // Not Chamber's (no queue anywhere, or another scheduler's): left alone, share or not.
  auto plain = DecidePod(PodCreate(Pod(share["metadata"])), OptInPolicy{}, src);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->outcome, PodOutcome::kNotOptedIn);
  EXPECT_TRUE(plain->patch.empty());
  auto other = DecidePod(PodCreate(Pod(share["metadata"], "volcano")), OptInPolicy{}, src);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->patch.empty());
}

TEST(DecidePod, AJobsQueueLabelReachesItsPodsWithTheLabel) {
  MapSource src;
  src.AddOwner("Job", "train", {{"chamber.io/queue", "team-a"}});
  src.AddNamespace("ml", {});
  auto d = DecidePod(PodCreate(Pod({{"generateName", "train-"},
                                    {"labels", {{"batch.kubernetes.io/job-name", "train"}}},
                                    {"ownerReferences", OwnedBy("Job", "train")}})),
                     OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->source, "Job ml/train");
  EXPECT_EQ(
      d->patch,
      Json::array(
          {kSetScheduler,
           {{"op", "add"}, {"path", "/metadata/labels/chamber.io~1queue"}, {"value", "team-a"}}}));
}

TEST(DecidePod, TheWalkGoesUpToTheTopLevelOwner) {
  MapSource src;
  src.AddOwner("ReplicaSet", "web-5f7c9", {}, "Deployment", "web");
  src.AddOwner("Deployment", "web", {{"chamber.io/queue", "serving"}});
  auto d = DecidePod(PodCreate(Pod({{"name", "web-5f7c9-x"},
                                    {"ownerReferences", OwnedBy("ReplicaSet", "web-5f7c9")}})),
                     OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->queue, "serving");
  EXPECT_EQ(d->source, "Deployment ml/web");
  // No labels on the pod: the label map is added whole.
  EXPECT_EQ(d->patch[1], (Json{{"op", "add"},
                               {"path", "/metadata/labels"},
                               {"value", {{"chamber.io/queue", "serving"}}}}));
}

TEST(DecidePod, ATrainJobsQueueReachesItsPodsThroughItsJobSetAndJob) {
  // Kubeflow Trainer v2: Pod -> Job -> JobSet -> TrainJob, the queue on the TrainJob only (its
  // pods come from the runtime's templates, which the webhook never sees).
  MapSource src;
  src.AddOwner("Job", "llm-node-0", {}, "JobSet", "llm");
  src.AddOwner("JobSet", "llm", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}},
               "TrainJob", "llm");
  src.AddOwner("TrainJob", "llm", {{"chamber.io/queue", "team-a"}});
  src.AddNamespace("ml", {});
  auto d = DecidePod(PodCreate(Pod({{"name", "llm-node-0-0-x"},
                                    {"ownerReferences", OwnedBy("Job", "llm-node-0")}})),
                     OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->queue, "team-a");
  EXPECT_EQ(d->source, "TrainJob ml/llm");
  EXPECT_EQ(d->patch[0], kSetScheduler);
}

// A pod of an upstream PodGroup (spec.schedulingGroup) takes the PodGroup's queue before its
// owners'; a PodGroup without one leaves the walk to the owners; one chamberd may not read is a
// warning.
TEST(DecidePod, AnUpstreamPodGroupsQueueReachesItsPods) {
  MapSource src;
  src.AddOwner("PodGroup", "allreduce", {{"chamber.io/queue", "team-a"}});
  src.AddOwner("PodGroup", "plain", {});
  src.AddOwner("Job", "train", {{"chamber.io/queue", "team-b"}});
  src.AddNamespace("ml", {});
  auto pod = [](const std::string& group, Json metadata) {
    Json p = Pod(std::move(metadata));
    p["spec"]["schedulingGroup"] = {{"podGroupName", group}};
    return p;
  };
  auto d = DecidePod(
      PodCreate(pod("allreduce", {{"name", "w-0"}, {"ownerReferences", OwnedBy("Job", "train")}})),
      OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->queue, "team-a") << "the PodGroup's, before the Job's";
  EXPECT_EQ(d->source, "PodGroup ml/allreduce");
  EXPECT_EQ(d->patch[1], (Json{{"op", "add"},
                               {"path", "/metadata/labels"},
                               {"value", {{"chamber.io/queue", "team-a"}}}}));

  d = DecidePod(
      PodCreate(pod("plain", {{"name", "w-1"}, {"ownerReferences", OwnedBy("Job", "train")}})),
      OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->source, "Job ml/train");

  d = DecidePod(PodCreate(pod("absent", {{"name", "w-2"}})), OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kNotOptedIn) << "a missing group is no queue";

  src.failing["PodGroup ml/allreduce"] = 403;
  d = DecidePod(PodCreate(pod("allreduce", {{"name", "w-3"}})), OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kNotOptedIn);
  ASSERT_EQ(d->warnings.size(), 1u);
  EXPECT_EQ(d->warnings[0],
            "chamber: may not read PodGroup ml/allreduce, the pod's group, so its queue label is "
            "not seen");

  src.failing["PodGroup ml/allreduce"] = 503;
  EXPECT_FALSE(DecidePod(PodCreate(pod("allreduce", {{"name", "w-4"}})), OptInPolicy{}, src).ok())
      << "an unreadable group refuses the pod rather than guess";
}

// Kubernetes 1.35: a pod names its group in spec.workloadRef; the Workload's queue reaches it
// before its owners', and a Workload without one leaves the walk to them.
TEST(DecidePod, AWorkloadsQueueReachesThePodsOfItsGroups) {
  MapSource src;
  src.AddOwner("Workload", "llm", {{"chamber.io/queue", "team-a"}});
  src.AddOwner("Workload", "plain", {});
  src.AddOwner("Job", "train", {{"chamber.io/queue", "team-b"}});
  src.AddNamespace("ml", {});
  auto pod = [](const std::string& workload, Json metadata) {
    Json p = Pod(std::move(metadata));
    p["spec"]["workloadRef"] = {
        {"name", workload}, {"podGroup", "workers"}, {"podGroupReplicaKey", "0"}};
    return p;
  };
  auto d = DecidePod(
      PodCreate(pod("llm", {{"name", "w-0"}, {"ownerReferences", OwnedBy("Job", "train")}})),
      OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->queue, "team-a") << "the Workload's, before the Job's";
  EXPECT_EQ(d->source, "Workload ml/llm");

  d = DecidePod(
      PodCreate(pod("plain", {{"name", "w-1"}, {"ownerReferences", OwnedBy("Job", "train")}})),
      OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->source, "Job ml/train");

  src.failing["Workload ml/llm"] = 403;
  d = DecidePod(PodCreate(pod("llm", {{"name", "w-2"}})), OptInPolicy{}, src);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->warnings.size(), 1u);
  EXPECT_EQ(d->warnings[0],
            "chamber: may not read Workload ml/llm, the pod's group, so its queue label is not "
            "seen");
}

TEST(DecidePod, OnlyControllerReferencesAreWalkedAndTheDepthIsBounded) {
  MapSource src;
  src.AddOwner("Job", "train", {{"chamber.io/queue", "team-a"}});
  src.AddNamespace("ml", {});
  auto not_controller = DecidePod(
      PodCreate(Pod({{"name", "p"}, {"ownerReferences", OwnedBy("Job", "train", false)}})),
      OptInPolicy{}, src);
  ASSERT_TRUE(not_controller.ok());
  EXPECT_EQ(not_controller->outcome, PodOutcome::kNotOptedIn);

  src.AddOwner("ReplicaSet", "a", {}, "ReplicaSet", "b");
  src.AddOwner("ReplicaSet", "b", {}, "Deployment", "c");
  src.AddOwner("Deployment", "c", {{"chamber.io/queue", "deep"}});
  OptInPolicy shallow;
  shallow.max_owner_depth = 2;
  const Json pod = Pod({{"name", "p"}, {"ownerReferences", OwnedBy("ReplicaSet", "a")}});
  auto cut = DecidePod(PodCreate(pod), shallow, src);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->outcome, PodOutcome::kNotOptedIn);
  auto deep = DecidePod(PodCreate(pod), OptInPolicy{}, src);
  ASSERT_TRUE(deep.ok());
  EXPECT_EQ(deep->outcome, PodOutcome::kMutate);
}

TEST(DecidePod, DaemonSetPodsAndPlacedPodsAreLeftAlone) {
  MapSource src;
  src.AddNamespace("ml", {{"chamber.io/queue", "ns-default"}});
  auto ds = DecidePod(
      PodCreate(Pod({{"name", "agent-x"}, {"ownerReferences", OwnedBy("DaemonSet", "agent")}})),
      OptInPolicy{}, src);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->outcome, PodOutcome::kPlaced);
  Json placed = Pod({{"name", "p"}, {"labels", {{"chamber.io/queue", "q"}}}});
  placed["spec"]["nodeName"] = "n1";
  auto p = DecidePod(PodCreate(placed), OptInPolicy{}, src);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->outcome, PodOutcome::kPlaced);
  EXPECT_TRUE(p->patch.empty());
  EXPECT_EQ(src.reads, 0);
}

TEST(DecidePod, TheNamespacesDefaultQueueOptsInItsPods) {
  MapSource src;
  src.AddNamespace("ml", {{"chamber.io/queue", "ns-default"}});
  auto d = DecidePod(PodCreate(Pod({{"name", "p"}})), OptInPolicy{}, src);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->outcome, PodOutcome::kMutate);
  EXPECT_EQ(d->source, "namespace ml");
  // The namespace's queue is not copied: the scheduler reads it from the namespace, as it may
  // change.
  EXPECT_EQ(d->patch, Json::array({kSetScheduler}));
}

TEST(DecidePod, AnUnlabelledPodInAPlainNamespaceIsUntouched) {
  MapSource src;
  src.AddNamespace("ml", {{"team", "a"}});
  src.AddOwner("Job", "plain", {{"app", "x"}});
  auto d = DecidePod(PodCreate(Pod({{"name", "p"}, {"ownerReferences", OwnedBy("Job", "plain")}})),
                     OptInPolicy{}, src);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->outcome, PodOutcome::kNotOptedIn);
  EXPECT_TRUE(d->patch.empty());
}

TEST(DecidePod, ExcludedNamespacesAndOtherRequestsAreNotLookedAt) {
  MapSource src;
  src.AddNamespace("kube-system", {{"chamber.io/queue", "q"}});
  const Json labelled = Pod({{"name", "p"}, {"labels", {{"chamber.io/queue", "q"}}}});
  auto sys = DecidePod(PodCreate(labelled, "kube-system"), OptInPolicy{}, src);
  ASSERT_TRUE(sys.ok());
  EXPECT_EQ(sys->outcome, PodOutcome::kExcludedNamespace);
  OptInPolicy own;
  own.excluded_namespaces.insert("chamber-system");
  auto mine = DecidePod(PodCreate(labelled, "chamber-system"), own, src);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->outcome, PodOutcome::kExcludedNamespace);

  AdmissionRequest update = PodCreate(labelled);
  update.operation = "UPDATE";
  auto u = DecidePod(update, OptInPolicy{}, src);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->outcome, PodOutcome::kNotPodCreate);
  AdmissionRequest binding = PodCreate(labelled);
  binding.sub_resource = "binding";
  EXPECT_EQ(DecidePod(binding, OptInPolicy{}, src)->outcome, PodOutcome::kNotPodCreate);
  EXPECT_EQ(src.reads, 0);
}

TEST(DecidePod, UnreadableOwnersRefuseUnlessGoneOrForbidden) {
  MapSource src;
  src.AddNamespace("ml", {});
  const Json pod = Pod({{"name", "p"}, {"ownerReferences", OwnedBy("Job", "train")}});
  // Gone: decided from what remains (the namespace).
  auto gone = DecidePod(PodCreate(pod), OptInPolicy{}, src);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->outcome, PodOutcome::kNotOptedIn);
  // Forbidden: the same, with a warning naming the owner.
  src.failing["Job ml/train"] = 403;
  auto forbidden = DecidePod(PodCreate(pod), OptInPolicy{}, src);
  ASSERT_TRUE(forbidden.ok());
  ASSERT_EQ(forbidden->warnings.size(), 1u);
  EXPECT_NE(forbidden->warnings[0].find("Job ml/train"), std::string::npos);
  // The API server failing: an error naming the owner and the pod.
  src.failing["Job ml/train"] = 503;
  auto failing = DecidePod(PodCreate(pod), OptInPolicy{}, src);
  ASSERT_FALSE(failing.ok());
  EXPECT_NE(failing.status().message().find("reading Job ml/train, owner of Pod ml/p"),
            std::string::npos)
      << failing.status().message();
  src.failing.clear();
  src.failing["namespace ml"] = 500;
  auto ns = DecidePod(PodCreate(Pod({{"name", "p"}})), OptInPolicy{}, src);
  ASSERT_FALSE(ns.ok());
  EXPECT_NE(ns.status().message().find("reading namespace ml"), std::string::npos);
}

TEST(DecidePod, AMalformedPodIsAnErrorNamingTheField) {
  MapSource src;
  Json pod = Pod({{"name", "p"}});
  pod["spec"]["schedulerName"] = 7;
  auto d = DecidePod(PodCreate(pod), OptInPolicy{}, src);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("spec.schedulerName"), std::string::npos)
      << d.status().message();
  auto no_spec = DecidePod(PodCreate({{"metadata", {{"name", "p"}}}}), OptInPolicy{}, src);
  ASSERT_FALSE(no_spec.ok());
  EXPECT_NE(no_spec.status().message().find("spec: missing"), std::string::npos);
}

AdmissionRequest Create(const std::string& group, const std::string& kind, Json object) {
  AdmissionRequest r;
  r.uid = "u2";
  r.kind = {group, "v1", kind};
  r.operation = "CREATE";
  r.namespace_name = "ml";
  r.object = std::move(object);
  return r;
}

Json PodTemplate(Json metadata = nullptr) {
  Json t = {{"spec", {{"containers", Json::array({{{"name", "main"}}})}}}};
  if (!metadata.is_null()) t["metadata"] = std::move(metadata);
  return t;
}

TEST(DecideWorkload, ALabelledJobsTemplateGetsTheLabel) {
  Json job = {{"metadata", {{"name", "train"}, {"labels", {{"chamber.io/queue", "team-a"}}}}},
              {"spec", {{"template", PodTemplate({{"labels", {{"app", "x"}}}})}}}};
  auto d = DecideWorkload(Create("batch", "Job", job), OptInPolicy{});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->mutate);
  EXPECT_EQ(d->patch, Json::array({{{"op", "add"},
                                    {"path", "/spec/template/metadata/labels/chamber.io~1queue"},
                                    {"value", "team-a"}}}));
  // Without template metadata, the metadata is added whole.
  job["spec"]["template"] = PodTemplate();
  auto bare = DecideWorkload(Create("apps", "Deployment", job), OptInPolicy{});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->patch[0]["path"], "/spec/template/metadata");
  EXPECT_EQ(bare->patch[0]["value"], (Json{{"labels", {{"chamber.io/queue", "team-a"}}}}));
}

TEST(DecideWorkload, ACronJobsPodTemplateIsInItsJobTemplate) {
  Json cron = {{"metadata", {{"name", "nightly"}, {"labels", {{"chamber.io/queue", "q"}}}}},
               {"spec", {{"jobTemplate", {{"spec", {{"template", PodTemplate()}}}}}}}};
  auto d = DecideWorkload(Create("batch", "CronJob", cron), OptInPolicy{});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->mutate);
  EXPECT_EQ(d->template_paths, std::vector<std::string>{"/spec/jobTemplate/spec/template"});
}

TEST(DecideWorkload, EveryPodTemplateOfAnMlKindGetsTheLabel) {
  // A JobSet: a Job template per replicated job, each holding a pod template.
  Json jobset = {
      {"metadata", {{"name", "llm"}, {"labels", {{"chamber.io/queue", "q"}}}}},
      {"spec",
       {{"replicatedJobs",
         Json::array({{{"name", "leader"}, {"template", {{"spec", {{"template", PodTemplate()}}}}}},
                      {{"name", "workers"},
                       {"template",
                        {{"spec",
                          {{"template",
                            PodTemplate({{"labels", {{"chamber.io/queue", "own"}}}})}}}}}}})}}}};
  auto js = DecideWorkload(Create("jobset.x-k8s.io", "JobSet", jobset), OptInPolicy{});
  ASSERT_TRUE(js.ok()) << js.status().ToString();
  // The workers' template names its own queue: only the leader's is labelled.
  EXPECT_EQ(js->template_paths,
            std::vector<std::string>{"/spec/replicatedJobs/0/template/spec/template"});
  // A RayCluster: the head group's template and each worker group's.
  Json ray = {
      {"metadata", {{"name", "rc"}, {"labels", {{"chamber.io/queue", "q"}}}}},
      {"spec",
       {{"headGroupSpec", {{"rayStartParams", Json::object()}, {"template", PodTemplate()}}},
        {"workerGroupSpecs", Json::array({{{"groupName", "gpu"}, {"template", PodTemplate()}}})}}}};
  auto rc = DecideWorkload(Create("ray.io", "RayCluster", ray), OptInPolicy{});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->template_paths, (std::vector<std::string>{"/spec/headGroupSpec/template",
                                                          "/spec/workerGroupSpecs/0/template"}));
  EXPECT_EQ(rc->patch.size(), 2u);
  // A PyTorchJob's replica specs, keyed by role.
  Json pytorch = {{"metadata", {{"name", "pt"}, {"labels", {{"chamber.io/queue", "q"}}}}},
                  {"spec",
                   {{"pytorchReplicaSpecs",
                     {{"Master", {{"replicas", 1}, {"template", PodTemplate()}}},
                      {"Worker", {{"replicas", 3}, {"template", PodTemplate()}}}}}}}};
  auto pt = DecideWorkload(Create("kubeflow.org", "PyTorchJob", pytorch), OptInPolicy{});
  ASSERT_TRUE(pt.ok());
  EXPECT_EQ(pt->template_paths,
            (std::vector<std::string>{"/spec/pytorchReplicaSpecs/Master/template",
                                      "/spec/pytorchReplicaSpecs/Worker/template"}));
}

TEST(DecideWorkload, LeavesAloneWhatItShould) {
  const Json labelled = {{"name", "w"}, {"labels", {{"chamber.io/queue", "q"}}}};
  // The template names a queue of its own.
  Json own = {{"metadata", labelled},
              {"spec", {{"template", PodTemplate({{"labels", {{"chamber.io/queue", "z"}}}})}}}};
  EXPECT_FALSE(DecideWorkload(Create("apps", "Deployment", own), OptInPolicy{})->mutate);
  // Not labelled.
  Json plain = {{"metadata", {{"name", "w"}}}, {"spec", {{"template", PodTemplate()}}}};
  EXPECT_FALSE(DecideWorkload(Create("apps", "Deployment", plain), OptInPolicy{})->mutate);
  // Owned by a controller: its owner's template is where the label goes.
  Json owned = {{"metadata", labelled}, {"spec", {{"template", PodTemplate()}}}};
  owned["metadata"]["ownerReferences"] = OwnedBy("Deployment", "web");
  EXPECT_FALSE(DecideWorkload(Create("apps", "ReplicaSet", owned), OptInPolicy{})->mutate);
  // An update would roll a Deployment.
  AdmissionRequest update = Create(
      "apps", "Deployment", {{"metadata", labelled}, {"spec", {{"template", PodTemplate()}}}});
  update.operation = "UPDATE";
  EXPECT_FALSE(DecideWorkload(update, OptInPolicy{})->mutate);
  // spec.template that is no pod template.
  Json other = {{"metadata", labelled}, {"spec", {{"template", {{"kind", "Something"}}}}}};
  EXPECT_FALSE(DecideWorkload(Create("example.com", "Thing", other), OptInPolicy{})->mutate);
  // A kind with no spec.template at all.
  Json none = {{"metadata", labelled}, {"spec", {{"replicatedJobs", Json::array()}}}};
  EXPECT_FALSE(DecideWorkload(Create("jobset.x-k8s.io", "JobSet", none), OptInPolicy{})->mutate);
  // A TrainJob names a runtime, whose templates hold its pods: none of its own (its
  // podSpecOverrides list containers, but are no pod templates).
  Json train = {
      {"metadata", labelled},
      {"spec",
       {{"runtimeRef", {{"name", "torch-distributed"}}},
        {"trainer", {{"numNodes", 2}, {"image", "x"}}},
        {"podSpecOverrides", Json::array({{{"targetJobs", Json::array({{{"name", "node"}}})},
                                           {"containers", Json::array({{{"name", "node"}}})}}})}}}};
  auto tj = DecideWorkload(Create("trainer.kubeflow.org", "TrainJob", train), OptInPolicy{});
  ASSERT_TRUE(tj.ok()) << tj.status().ToString();
  EXPECT_FALSE(tj->mutate);
}

TEST(DecideWorkload, AMalformedTemplateIsAnErrorNamingTheField) {
  Json job = {{"metadata", {{"name", "train"}, {"labels", {{"chamber.io/queue", "q"}}}}},
              {"spec", {{"template", PodTemplate({{"labels", {{"app", 3}}}})}}}};
  auto d = DecideWorkload(Create("batch", "Job", job), OptInPolicy{});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("spec.template.metadata.labels"), std::string::npos)
      << d.status().message();
}

TEST(GuessPlural, FollowsKubernetesGuess) {
  EXPECT_EQ(GuessPlural("Job"), "jobs");
  EXPECT_EQ(GuessPlural("ReplicaSet"), "replicasets");
  EXPECT_EQ(GuessPlural("LeaderWorkerSet"), "leaderworkersets");
  EXPECT_EQ(GuessPlural("RayCluster"), "rayclusters");
  EXPECT_EQ(GuessPlural("TrainJob"), "trainjobs");
  EXPECT_EQ(GuessPlural("Ingress"), "ingresses");
  EXPECT_EQ(GuessPlural("NetworkPolicy"), "networkpolicies");
}

}  // namespace
}  // namespace chamber::admission
