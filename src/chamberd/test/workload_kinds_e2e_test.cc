// Top-level workload kinds end to end (docs/workloads.md): chamberd beside the real controllers
// of each kind (the JobSet controller, the Kubeflow training operator and the KubeRay operator,
// built from their Go modules by scripts/workload-controllers.sh) and the Job controller of the
// test control plane, with fake GPU nodes and the pod lifecycle simulator standing in for
// kubelets. Each kind is one gang, is preempted by suspending it, and resumes. A TrainJob runs
// beside the Kubeflow Trainer v2 controller and the JobSet controller, which make its JobSet
// and Jobs.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "backend/kube/snapshot_builder.h"
#include "backend/kube/workload_kinds.h"
#include "chamberd/test/chamberd_fixture.h"
#include "chamberd/test/webhook_fixture.h"

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;
using kube::Json;

const kube::ResourceType& KindType(const char* api_version, const char* kind) {
  return backend::FindWorkloadKind(api_version, kind)->type;
}
const kube::ResourceType& JobSets() { return KindType("jobset.x-k8s.io/v1alpha2", "JobSet"); }
const kube::ResourceType& PyTorchJobs() { return KindType("kubeflow.org/v1", "PyTorchJob"); }
const kube::ResourceType& RayClusters() { return KindType("ray.io/v1", "RayCluster"); }
const kube::ResourceType& RayJobs() { return KindType("ray.io/v1", "RayJob"); }
const kube::ResourceType& TrainJobs() {
  return KindType("trainer.kubeflow.org/v1alpha1", "TrainJob");
}
const kube::ResourceType kClusterTrainingRuntimes{.group = "trainer.kubeflow.org",
                                                  .version = "v1alpha1",
                                                  .plural = "clustertrainingruntimes",
                                                  .kind = "ClusterTrainingRuntime",
                                                  .namespaced = false};

// scripts/workload-controllers.sh's bin dir: the controllers and their CRDs.
std::filesystem::path ControllersDir() {
  if (const char* dir = std::getenv("CHAMBER_WORKLOAD_CONTROLLERS_BIN")) return dir;
  const std::string command =
      std::string(CHAMBER_SOURCE_DIR) + "/scripts/workload-controllers.sh bin-dir";
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return {};
  char line[4096] = {};
  const bool read = std::fgets(line, sizeof(line), out) != nullptr;
  pclose(out);
  std::string dir = read ? line : "";
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
  return dir;
}

// A kind's controller beside chamberd: its CRDs are applied once per suite, and it runs for each
// test, its log printed when the test fails.
class ControllerE2E : public e2e::ChamberdCluster {
 protected:
  static void ApplyCrds(const std::vector<std::string>& files) {
    ChamberdCluster::SetUpTestSuite();
    if (HasFatalFailure()) return;
    for (const std::string& file : files) {
      const std::filesystem::path path = ControllersDir() / "crds" / file;
      std::ifstream in(path);
      ASSERT_TRUE(in.good()) << path << " is missing: run scripts/workload-controllers.sh build";
      std::stringstream text;
      text << in.rdbuf();
      auto docs = backend::ManifestToJson(text.str(), path.string());
      ASSERT_TRUE(docs.ok() && !docs->empty()) << docs.status().ToString();
      Status applied = backend::ApplyCrd(*client_, docs->front());
      ASSERT_TRUE(applied.ok()) << applied.ToString();
    }
  }

  // A fresh namespace (on the first call) with chamberd's configuration, and the controller
  // `binary` with `args`.
  void StartController(const std::string& binary, std::vector<std::string> args = {}) {
    if (controllers_.empty()) {
      NewNamespace("e2e-", binary + "-");
      if (HasFailure()) return;
      std::ofstream(dir_ / "config.yaml") << "cyclePeriod: 300ms\n"
                                             "preemption:\n"
                                             "  minRuntime: 0s\n"
                                             "  checkpointGraceSeconds: 1\n";
    }
    const std::filesystem::path log = dir_ / (binary + ".log");
    const std::filesystem::path path = ControllersDir() / binary;
    ASSERT_TRUE(std::filesystem::exists(path))
        << path << " is missing: run scripts/workload-controllers.sh build";
    args.insert(args.begin(),
                {path.string(), "--kubeconfig", std::getenv("CHAMBER_TEST_KUBECONFIG")});
    const pid_t pid = e2e::SpawnLogged(args, log.string());
    ASSERT_GT(pid, 0);
    controllers_.emplace_back(pid, log);
  }

  void TearDown() override {
    BeforeTearDown();
    for (const auto& [pid, log] : controllers_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      if (HasFailure()) {
        std::ifstream in(log);
        std::cerr << "---- " << log.filename() << " ----\n" << in.rdbuf() << "\n";
      }
    }
    ChamberdCluster::TearDown();
  }
  // What a suite deletes while its controller still runs (objects with its finalizers).
  virtual void BeforeTearDown() {}

  Json Get(const kube::ResourceType& type, const std::string& name) {
    auto r = client_->Get(type, ns_, name);
    return r.ok() ? *r : Json::object();
  }

  bool ConditionTrue(const kube::ResourceType& type, const std::string& name,
                     const std::string& condition) {
    for (const Json& c : Get(type, name).value("/status/conditions"_json_pointer, Json::array()))
      if (c.value("type", "") == condition && c.value("status", "") == "True") return true;
    return false;
  }

  // The live pods labelled `selector`: all of them, and those bound.
  std::pair<int, int> PodsLabelled(const std::string& selector) {
    kube::ListOptions o;
    o.label_selector = selector;
    auto list = client_->List(kube::resources::kPods, ns_, o);
    int all = 0, bound = 0;
    if (!list.ok()) return {-1, -1};
    for (Json& j : list->items) {
      kube::Pod p = kube::Pod::FromJson(std::move(j)).value();
      if (!p.metadata.deletion_timestamp.empty() || p.phase == "Failed") continue;
      ++all;
      if (!p.node_name.empty()) ++bound;
    }
    return {all, bound};
  }

  // The PodScheduled=False "reason: message" of each pod labelled `selector` ("" for none).
  std::set<std::string> PendingReasonsOf(const std::string& selector) {
    kube::ListOptions o;
    o.label_selector = selector;
    std::set<std::string> out;
    auto list = client_->List(kube::resources::kPods, ns_, o);
    if (!list.ok()) return out;
    for (const Json& p : list->items) {
      if (!p.value("/spec/nodeName"_json_pointer, std::string()).empty()) continue;
      std::string reason;
      for (const Json& c : p.value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False")
          reason = c.value("reason", "") + ": " + c.value("message", "");
      out.insert(reason);
    }
    return out;
  }

  static Json Annotations(const Json& object) {
    return object.value("/metadata/annotations"_json_pointer, Json::object());
  }

  // A container asking for `gpus`, named `name`.
  static Json Container(const std::string& name, int gpus) {
    return {{"name", name},
            {"image", "trainer:latest"},
            {"resources",
             {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", gpus}}},
              {"limits", {{"nvidia.com/gpu", gpus}}}}}};
  }

  // A pod template Chamber schedules, running `seconds` under the simulator (0: until deleted).
  static Json Template(Json container, double seconds, const std::string& priority_class = "") {
    Json pod = {{"schedulerName", "chamber"},
                {"terminationGracePeriodSeconds", 5},
                {"containers", Json::array({std::move(container)})}};
    if (!priority_class.empty()) pod["priorityClassName"] = priority_class;
    Json annotations = Json::object();
    if (seconds > 0) annotations["chamber.io/sim-duration-seconds"] = std::to_string(seconds);
    return {{"metadata", {{"annotations", annotations}}}, {"spec", pod}};
  }

  Json Metadata(const std::string& name, const std::string& queue) {
    return {{"name", name},
            {"namespace", ns_},
            {"labels", {{"chamber.io/queue", queue}}},
            {"annotations", {{"chamber.io/checkpoint-grace-seconds", "1"}}}};
  }

  void Create(const kube::ResourceType& type, const Json& object) {
    auto r = client_->Create(type, ns_, object);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  struct ReplicatedJob {
    std::string name;
    int replicas = 1;
    int pods = 1;  // per Job
    int gpus = 1;  // per pod
  };

  // A JobSet written out in full (the JobSet webhook, which would default it, does not run
  // here; tools/workloadcontrollers/cmd/jobset-controller/main.go). `pod_group`: the upstream
  // PodGroup every pod template names, if any.
  void JobSet(const std::string& name, const std::string& queue, std::vector<ReplicatedJob> jobs,
              double seconds, const std::string& priority_class = "",
              const std::string& pod_group = "") {
    Create(JobSets(),
           JobSetObject(name, queue, std::move(jobs), seconds, priority_class, pod_group));
  }
  Json JobSetObject(const std::string& name, const std::string& queue,
                    std::vector<ReplicatedJob> jobs, double seconds,
                    const std::string& priority_class = "", const std::string& pod_group = "") {
    Json replicated = Json::array();
    for (const ReplicatedJob& rj : jobs) {
      Json pod = Template(Container("main", rj.gpus), seconds, priority_class);
      pod["spec"]["restartPolicy"] = "Never";
      if (!pod_group.empty()) pod["spec"]["schedulingGroup"] = {{"podGroupName", pod_group}};
      replicated.push_back({{"name", rj.name},
                            {"replicas", rj.replicas},
                            {"template",
                             {{"spec",
                               {{"parallelism", rj.pods},
                                {"completions", rj.pods},
                                {"completionMode", "Indexed"},
                                {"backoffLimit", 0},
                                {"template", pod}}}}}});
    }
    Json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
               {"kind", "JobSet"},
               {"metadata", Metadata(name, queue)},
               {"spec",
                {{"replicatedJobs", replicated},
                 {"successPolicy", {{"operator", "All"}}},
                 {"startupPolicy", {{"startupPolicyOrder", "AnyOrder"}}},
                 {"network", {{"enableDNSHostnames", false}}},
                 {"suspend", false}}}};
    return js;
  }

  // A PyTorchJob of a Master and `workers` Workers, each with `gpus` GPUs, running `seconds`.
  // The container is named `pytorch`, as the operator requires.
  void PyTorchJob(const std::string& name, const std::string& queue, int workers, int gpus,
                  double seconds, const std::string& priority_class = "") {
    const Json tmpl = Template(Container("pytorch", gpus), seconds, priority_class);
    Json job = {
        {"apiVersion", "kubeflow.org/v1"},
        {"kind", "PyTorchJob"},
        {"metadata", Metadata(name, queue)},
        {"spec",
         {{"runPolicy", {{"cleanPodPolicy", "None"}}},
          {"pytorchReplicaSpecs",
           {{"Master", {{"replicas", 1}, {"restartPolicy", "OnFailure"}, {"template", tmpl}}},
            {"Worker",
             {{"replicas", workers}, {"restartPolicy", "OnFailure"}, {"template", tmpl}}}}}}}};
    Create(PyTorchJobs(), job);
  }

  // A RayCluster spec: a head without GPUs and a worker group of `workers` replicas (at least
  // `min`) with `gpus` GPUs each, running until deleted.
  static Json ClusterSpec(int workers, int min, int gpus, const std::string& priority_class) {
    return {{"headGroupSpec",
             {{"rayStartParams", Json::object()},
              {"template", Template(Container("ray-head", 0), 0, priority_class)}}},
            {"workerGroupSpecs",
             {{{"groupName", "gpu"},
               {"replicas", workers},
               {"minReplicas", min},
               {"maxReplicas", workers},
               {"rayStartParams", Json::object()},
               {"template", Template(Container("ray-worker", gpus), 0, priority_class)}}}}};
  }

  // A RayJob whose cluster is ClusterSpec(2, 2, 4, priority_class): a head and 2 workers of 4
  // GPUs, on a Ray that never runs (no submitter comes). It may be suspended: it sets
  // shutdownAfterJobFinishes.
  void RayJob(const std::string& name, const std::string& queue,
              const std::string& priority_class = "") {
    Create(RayJobs(), {{"apiVersion", "ray.io/v1"},
                       {"kind", "RayJob"},
                       {"metadata", Metadata(name, queue)},
                       {"spec",
                        {{"entrypoint", "python /app/tune.py"},
                         {"shutdownAfterJobFinishes", true},
                         {"rayClusterSpec", ClusterSpec(2, 2, 4, priority_class)}}}});
  }
  // The RayCluster KubeRay made for RayJob `name` ("" before it has).
  std::string RayJobCluster(const std::string& name) {
    return Get(RayJobs(), name).value("/status/rayClusterName"_json_pointer, std::string());
  }

  // RayJobs carry KubeRay's finalizer: deleted while the operator still runs.
  void DeleteRayJobs() {
    (void)client_->Delete(RayJobs(), ns_, "");
    Eventually(
        [&] {
          auto list = client_->List(RayJobs(), ns_);
          return list.ok() && list->items.empty();
        },
        15s);
  }

  // Once `pods` pods labelled `selector` exist, each says Unschedulable and, a moment later,
  // none is bound: a gang that does not fit starts no pod.
  void ExpectGangWaitsWhole(const std::string& selector, int pods) {
    ASSERT_TRUE(Eventually([&] { return PodsLabelled(selector).first == pods; }, 60s))
        << "its controllers create its " << pods << " pods";
    ASSERT_TRUE(Eventually(
        [&] {
          const auto reasons = PendingReasonsOf(selector);
          return reasons.size() == 1 && reasons.begin()->starts_with("Unschedulable: ");
        },
        30s))
        << ::testing::PrintToString(PendingReasonsOf(selector));
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(PodsLabelled(selector).second, 0) << "no pod is bound while the rest cannot be";
  }

  // `nodes` 8-GPU nodes, the pod simulator, a queue of `quota` GPUs (`team()`), and chamberd.
  void StartGangCluster(int nodes, int quota) {
    Nodes(nodes, 8);
    StartSim();
    Queue(team(), quota);
    StartChamberd("solo", {"--no-leader-elect"});
  }

  // One 8-GPU node, a queue of 8 (`team()`), an elastic and a reserved PriorityClass, chamberd.
  void StartPreemptionCluster() {
    PriorityClass("chamber-e2e-elastic", 10);
    PriorityClass("chamber-e2e-reserved", 1000);
    StartGangCluster(1, 8);
  }
  std::string team() const { return ns_ + "-team"; }

  // A reserved 4-GPU Job takes the room of the running elastic workload, which `suspended`
  // says Chamber suspended, with its lost work on `object()`; the Job runs and completes.
  void ExpectSuspendedForAReservedJob(const std::function<bool()>& suspended,
                                      const std::function<Json()>& object) {
    Job("reserved", JobSpec(team(), 4).Seconds(3).Priority("chamber-e2e-reserved"));
    ASSERT_TRUE(Eventually(suspended, 30s));
    const Json annotations = Annotations(object());
    EXPECT_TRUE(annotations.contains(backend::keys::kPreemptedAt)) << annotations.dump();
    EXPECT_EQ(annotations.value(backend::keys::kPreemptionCount, ""), "1");
    ASSERT_TRUE(Eventually([&] { return Bound("reserved") == 4; }, 30s));
    ExpectNoDoubleBooking(8);
    ASSERT_TRUE(Eventually([&] { return Complete("reserved"); }, 30s));
  }

  void ExpectPreemptedAndResumedEvents(const std::string& name) {
    const auto reasons = EventReasons(name);
    for (const char* want : {"Preempted", "Resumed"})
      EXPECT_NE(std::find(reasons.begin(), reasons.end(), want), reasons.end()) << want;
  }

  // `replicas` groups of a leader and size - 1 workers with `gpus` GPUs each, serving until
  // deleted. The rollout strategy is written out: no webhook defaults it here.
  void LeaderWorkerSet(const std::string& name, const std::string& queue, int replicas, int size,
                       int gpus, const std::string& priority_class = "") {
    Create(KindType("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
           {{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
            {"kind", "LeaderWorkerSet"},
            {"metadata", Metadata(name, queue)},
            {"spec",
             {{"replicas", replicas},
              {"rolloutStrategy",
               {{"type", "RollingUpdate"},
                {"rollingUpdateConfiguration",
                 {{"maxUnavailable", 1}, {"maxSurge", 0}, {"partition", 0}}}}},
              {"leaderWorkerTemplate",
               {{"size", size},
                {"workerTemplate", Template(Container("server", gpus), 0, priority_class)}}}}}});
  }
  // The bound pods of group `group` of `name`.
  int BoundInGroup(const std::string& name, int group) {
    return PodsLabelled("leaderworkerset.sigs.k8s.io/name=" + name +
                        ",leaderworkerset.sigs.k8s.io/group-index=" + std::to_string(group))
        .second;
  }

  std::vector<std::pair<pid_t, std::filesystem::path>> controllers_;  // and their logs
};

class JobSetE2E : public ControllerE2E {
 protected:
  static void SetUpTestSuite() { ApplyCrds({"jobset.x-k8s.io_jobsets.yaml"}); }
  void SetUp() override { StartController("jobset-controller"); }

  Json GetJobSet(const std::string& name) { return Get(JobSets(), name); }
  bool Suspended(const std::string& name) {
    return GetJobSet(name).value("/spec/suspend"_json_pointer, false);
  }
  bool Condition(const std::string& name, const std::string& type) {
    return ConditionTrue(JobSets(), name, type);
  }
  std::pair<int, int> Pods(const std::string& jobset) {
    return PodsLabelled("jobset.sigs.k8s.io/jobset-name=" + jobset);
  }
};

TEST_F(JobSetE2E, AJobSetStartsAllOrNothingAcrossItsJobsAndCompletes) {
  StartGangCluster(2, 24);
  // A 1-GPU leader and two Jobs of two 4-GPU workers: 17 GPUs, one more than the two nodes.
  JobSet("train", team(), {{"leader", 1, 1, 1}, {"workers", 2, 2, 4}}, 3);
  ExpectGangWaitsWhole("jobset.sigs.k8s.io/jobset-name=train", 5);

  // With a third node the whole gang starts at once, and the JobSet completes.
  Nodes(1, 8, "more");
  ASSERT_TRUE(Eventually(
      [&] { return Pods("train").second == 5 || Condition("train", "Completed"); }, 30s));
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Condition("train", "Completed"); }, 60s));
  EXPECT_FALSE(Suspended("train"));
}

TEST_F(JobSetE2E, AReservedJobSuspendsAJobSetWhichResumesAndCompletes) {
  StartPreemptionCluster();
  JobSet("elastic", team(), {{"workers", 2, 1, 4}}, 15, "chamber-e2e-elastic");
  ASSERT_TRUE(Eventually([&] { return Pods("elastic").second == 2; }, 60s));
  ExpectSuspendedForAReservedJob([&] { return Suspended("elastic"); },
                                 [&] { return GetJobSet("elastic"); });

  // Then the JobSet is resumed, its Jobs' new pods start as one gang, and it completes.
  ASSERT_TRUE(Eventually([&] { return !Suspended("elastic"); }, 30s));
  EXPECT_FALSE(Annotations(GetJobSet("elastic")).contains(backend::keys::kPreemptedAt));
  ASSERT_TRUE(Eventually([&] { return Condition("elastic", "Completed"); }, 90s));
  ExpectPreemptedAndResumedEvents("elastic");
}

// A JobSet whose every pod template names one gang PodGroup (docs/workloads/podgroup.md) starts
// at the PodGroup's minCount, not with all of its pods, and the PodGroup says it is scheduled.
// JobSet v0.8.2's CRD predates spec.schedulingGroup (the API server would prune it from the
// templates), so the test adds the field to the CRD's pod template schema, as a JobSet CRD built
// against Kubernetes 1.36 or later has it, and takes it out again after. The v0.8.2 controller
// drops the field from the Jobs it makes, so the pods do not name the group: chamberd reads it
// from the JobSet's templates. Two Jobs of two 4-GPU pods on one 8-GPU node: all 4 pods never
// fit at once, so only a minimum of 2 lets the JobSet run and complete.
TEST_F(JobSetE2E, AJobSetWhoseTemplatesNameAGangPodGroupStartsAtItsMinCount) {
  const std::string field =
      "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicatedJobs/items/"
      "properties/template/properties/spec/properties/template/properties/spec/properties/"
      "schedulingGroup";
  const std::string crd = "jobsets.jobset.x-k8s.io";
  auto added = client_->JsonPatch(
      backend::kCustomResourceDefinitions, "", crd,
      Json::array(
          {{{"op", "add"},
            {"path", field},
            {"value",
             {{"type", "object"}, {"properties", {{"podGroupName", {{"type", "string"}}}}}}}}}));
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  struct Restore {
    kube::Client* client;
    std::string crd, field;
    ~Restore() {
      (void)client->JsonPatch(backend::kCustomResourceDefinitions, "", crd,
                              Json::array({{{"op", "remove"}, {"path", field}}}));
    }
  } restore{client_.get(), crd, field};

  const kube::ResourceType& podgroups = backend::PodGroupTypes().front();
  Json group = {{"apiVersion", podgroups.ApiVersion()},
                {"kind", "PodGroup"},
                {"metadata", {{"name", "train-pg"}}},
                {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", 2}}}}}}}};
  auto made = client_->Create(podgroups, ns_, group);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  // The API server serves the new schema a moment after the CRD changes: until then it prunes
  // the field. Suspended probes (no Jobs, no pods) tell when it keeps it.
  int probes = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string probe = "probe-" + std::to_string(++probes);
        Json js = JobSetObject(probe, team(), {{"workers", 1, 1, 1}}, 1, "", "train-pg");
        js["spec"]["suspend"] = true;
        Create(JobSets(), js);
        return GetJobSet(probe).contains(
            "/spec/replicatedJobs/0/template/spec/template/spec/schedulingGroup"_json_pointer);
      },
      20s));

  StartGangCluster(1, 24);
  JobSet("train", team(), {{"workers", 2, 2, 4}}, 2, "", "train-pg");
  ASSERT_TRUE(Eventually([&] { return Pods("train").second == 2; }, 60s))
      << "the PodGroup's minimum of 2 starts; all 4 pods would never fit";
  ExpectNoDoubleBooking(8);
  auto scheduled = [&] {
    Result<Json> g = client_->Get(podgroups, ns_, "train-pg");
    if (g.ok())
      for (const Json& c : g->value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == "PodGroupInitiallyScheduled")
          return c.value("status", "") + " " + c.value("reason", "");
    return std::string();
  };
  EXPECT_TRUE(Eventually([&] { return scheduled() == "True Scheduled"; }, 10s)) << scheduled();
  ASSERT_TRUE(Eventually([&] { return Condition("train", "Completed"); }, 60s));
  ExpectNoDoubleBooking(8);
}

// --- Kubeflow training operator ---

class TrainingJobE2E : public ControllerE2E {
 protected:
  static void SetUpTestSuite() { ApplyCrds({"kubeflow.org_pytorchjobs.yaml"}); }
  void SetUp() override { StartController("training-operator", {"--enable-scheme=pytorchjob"}); }

  std::pair<int, int> Pods(const std::string& job) {
    return PodsLabelled("training.kubeflow.org/job-name=" + job);
  }
  bool Suspended(const std::string& job) {
    return Get(PyTorchJobs(), job).value("/spec/runPolicy/suspend"_json_pointer, false);
  }
};

TEST_F(TrainingJobE2E, APyTorchJobStartsAllOrNothingAndSucceeds) {
  StartGangCluster(1, 16);
  // A Master and two Workers of 4 GPUs: 12 GPUs, more than the node's 8.
  PyTorchJob("ddp", team(), 2, 4, 3);
  ExpectGangWaitsWhole("training.kubeflow.org/job-name=ddp", 3);

  Nodes(1, 8, "more");
  ASSERT_TRUE(Eventually(
      [&] { return Pods("ddp").second == 3 || ConditionTrue(PyTorchJobs(), "ddp", "Succeeded"); },
      30s));
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return ConditionTrue(PyTorchJobs(), "ddp", "Succeeded"); }, 60s));
}

// An elastic PyTorchJob (spec.elasticPolicy, Workers only) starts with minReplicas Workers
// together when not all fit, and the rest join as room frees.
TEST_F(TrainingJobE2E, AnElasticPyTorchJobStartsAtItsMinimumAndGrows) {
  StartGangCluster(1, 16);
  const Json tmpl = Template(Container("pytorch", 4), 0);
  Create(
      PyTorchJobs(),
      {{"apiVersion", "kubeflow.org/v1"},
       {"kind", "PyTorchJob"},
       {"metadata", Metadata("elastic", team())},
       {"spec",
        {{"runPolicy", {{"cleanPodPolicy", "None"}}},
         {"elasticPolicy", {{"minReplicas", 2}, {"maxReplicas", 3}, {"rdzvBackend", "c10d"}}},
         {"pytorchReplicaSpecs",
          {{"Worker", {{"replicas", 3}, {"restartPolicy", "OnFailure"}, {"template", tmpl}}}}}}}});
  // Three Workers of 4 GPUs on one 8-GPU node: two start together, the third waits.
  ASSERT_TRUE(Eventually([&] { return Pods("elastic") == std::make_pair(3, 2); }, 60s))
      << Pods("elastic").first << " pods, " << Pods("elastic").second << " bound";
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(Pods("elastic").second, 2);
  ExpectNoDoubleBooking(8);

  // With a second node the third joins.
  Nodes(1, 8, "more");
  ASSERT_TRUE(Eventually([&] { return Pods("elastic").second == 3; }, 30s));
  ExpectNoDoubleBooking(8);
}

TEST_F(TrainingJobE2E, AReservedJobSuspendsAPyTorchJobWhichResumesAndSucceeds) {
  StartPreemptionCluster();
  PyTorchJob("elastic", team(), 1, 4, 15, "chamber-e2e-elastic");
  ASSERT_TRUE(Eventually([&] { return Pods("elastic").second == 2; }, 60s));
  // Suspended through spec.runPolicy.suspend.
  ExpectSuspendedForAReservedJob([&] { return Suspended("elastic"); },
                                 [&] { return Get(PyTorchJobs(), "elastic"); });

  // Resumed: the operator creates its pods again, they start together, and it succeeds.
  ASSERT_TRUE(Eventually([&] { return !Suspended("elastic"); }, 30s));
  ASSERT_TRUE(
      Eventually([&] { return ConditionTrue(PyTorchJobs(), "elastic", "Succeeded"); }, 90s));
  ExpectPreemptedAndResumedEvents("elastic");
}

// --- KubeRay ---

class RayE2E : public ControllerE2E {
 protected:
  static void SetUpTestSuite() { ApplyCrds({"ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml"}); }
  void SetUp() override { StartController("kuberay-operator"); }
  // RayJobs carry KubeRay's finalizer: deleted while the operator still runs.
  void BeforeTearDown() override { DeleteRayJobs(); }
  std::pair<int, int> ClusterPods(const std::string& cluster) {
    return PodsLabelled("ray.io/cluster=" + cluster);
  }
};

TEST_F(RayE2E, ARayClusterStartsItsHeadAndMinimumWorkersTogetherThenGrows) {
  StartGangCluster(1, 16);
  // The head and 3 workers of 4 GPUs, at least 2: the head and 2 workers fit the node's 8 GPUs.
  Create(RayClusters(), {{"apiVersion", "ray.io/v1"},
                         {"kind", "RayCluster"},
                         {"metadata", Metadata("tune", team())},
                         {"spec", ClusterSpec(3, 2, 4, "")}});
  ASSERT_TRUE(Eventually([&] { return ClusterPods("tune") == std::make_pair(4, 3); }, 60s))
      << "the head and the 2 minimum workers start together; the third waits: "
      << ::testing::PrintToString(PendingReasonsOf("ray.io/cluster=tune"));
  ASSERT_TRUE(Eventually(
      [&] {
        const auto reasons = PendingReasonsOf("ray.io/cluster=tune");
        return reasons.size() == 1 && reasons.begin()->starts_with("Unschedulable: ");
      },
      30s));
  ExpectNoDoubleBooking(8);
  // With a second node the third worker joins the running cluster.
  Nodes(1, 8, "more");
  ASSERT_TRUE(Eventually([&] { return ClusterPods("tune").second == 4; }, 30s));
  ExpectNoDoubleBooking(8);
}

TEST_F(RayE2E, AReservedJobSuspendsARayJobWhoseClusterComesBackWhole) {
  StartPreemptionCluster();
  RayJob("sweep", team(), "chamber-e2e-elastic");
  // Its cluster, made by KubeRay and part of the RayJob, starts whole: the head and 2 workers.
  auto cluster = [&] { return RayJobCluster("sweep"); };
  ASSERT_TRUE(Eventually(
      [&] { return !cluster().empty() && ClusterPods(cluster()) == std::make_pair(3, 3); }, 60s));
  const std::string first = cluster();
  // Suspended (KubeRay deletes its cluster) for the reserved Job.
  ExpectSuspendedForAReservedJob(
      [&] { return Get(RayJobs(), "sweep").value("/spec/suspend"_json_pointer, false); },
      [&] { return Get(RayJobs(), "sweep"); });

  // Resumed, it gets a new cluster, whose pods start whole again.
  ASSERT_TRUE(Eventually(
      [&] { return !Get(RayJobs(), "sweep").value("/spec/suspend"_json_pointer, true); }, 30s));
  ASSERT_TRUE(Eventually(
      [&] {
        return !cluster().empty() && cluster() != first &&
               ClusterPods(cluster()) == std::make_pair(3, 3);
      },
      60s));
  ExpectNoDoubleBooking(8);
  ExpectPreemptedAndResumedEvents("sweep");
}

// --- LeaderWorkerSet ---

class LwsE2E : public ControllerE2E {
 protected:
  static void SetUpTestSuite() { ApplyCrds({"leaderworkerset.x-k8s.io_leaderworkersets.yaml"}); }
  void SetUp() override { StartController("lws-controller"); }
};

TEST_F(LwsE2E, EachGroupStartsWholeOrNotAtAll) {
  StartGangCluster(1, 16);
  // Two groups of a leader and a worker of 4 GPUs: one group fits the node, both do not.
  LeaderWorkerSet("llm", team(), 2, 2, 4);
  const std::string selector = "leaderworkerset.sigs.k8s.io/name=llm";
  ASSERT_TRUE(Eventually([&] { return PodsLabelled(selector) == std::make_pair(4, 2); }, 60s))
      << "one group starts whole: " << PodsLabelled(selector).first << " pods, "
      << PodsLabelled(selector).second << " bound";
  const int first = BoundInGroup("llm", 0) == 2 ? 0 : 1;
  EXPECT_EQ(BoundInGroup("llm", first), 2);
  EXPECT_EQ(BoundInGroup("llm", 1 - first), 0) << "the other group starts no pod";
  ASSERT_TRUE(Eventually(
      [&] {
        const auto reasons = PendingReasonsOf(selector);
        return reasons.size() == 1 && reasons.begin()->starts_with("Unschedulable: ");
      },
      30s))
      << ::testing::PrintToString(PendingReasonsOf(selector));
  ExpectNoDoubleBooking(8);

  // With a second node the other group starts, whole.
  Nodes(1, 8, "more");
  ASSERT_TRUE(Eventually([&] { return PodsLabelled(selector).second == 4; }, 30s));
  ExpectNoDoubleBooking(8);
}

// A running group is evicted, whole, for a reserved Job (a LeaderWorkerSet has no suspend
// field); the LWS controller recreates it, and the new group waits, then starts whole once the
// Job is done.
TEST_F(LwsE2E, AReservedJobEvictsAGroupWhichComesBackWhole) {
  StartPreemptionCluster();
  // One group of a leader and a worker of 4 GPUs: the whole 8-GPU node.
  LeaderWorkerSet("llm", team(), 1, 2, 4, "chamber-e2e-elastic");
  const std::string selector = "leaderworkerset.sigs.k8s.io/name=llm";
  ASSERT_TRUE(Eventually([&] { return BoundInGroup("llm", 0) == 2; }, 60s));
  auto uids = [&] {
    std::set<std::string> out;
    kube::ListOptions o;
    o.label_selector = selector;
    if (auto list = client_->List(kube::resources::kPods, ns_, o); list.ok())
      for (const Json& p : list->items)
        if (!p.value("/spec/nodeName"_json_pointer, std::string()).empty())
          out.insert(p.value("/metadata/uid"_json_pointer, std::string()));
    return out;
  };
  const std::set<std::string> first = uids();
  ASSERT_EQ(first.size(), 2u);

  // The reserved Job needs half the node: the group goes, whole (no member keeps running).
  Job("reserved", JobSpec(team(), 4).Seconds(3).Priority("chamber-e2e-reserved"));
  ASSERT_TRUE(Eventually([&] { return Bound("reserved") == 4; }, 30s));
  for (const std::string& uid : uids())
    EXPECT_FALSE(first.contains(uid)) << "a member of the evicted group still runs: " << uid;
  EXPECT_LE(BoundInGroup("llm", 0), 1) << "part of the recreated group started beside the Job";
  ExpectNoDoubleBooking(8);

  // The Job done, the recreated group starts whole, as new pods.
  ASSERT_TRUE(Eventually([&] { return Complete("reserved"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return BoundInGroup("llm", 0) == 2; }, 60s));
  for (const std::string& uid : uids()) EXPECT_FALSE(first.contains(uid));
  ExpectNoDoubleBooking(8);
  const auto reasons = EventReasons("llm-0");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Preempted"), reasons.end())
      << ::testing::PrintToString(reasons);
}

// --- Kubeflow Trainer v2 ---

class TrainJobE2E : public ControllerE2E {
 protected:
  static void SetUpTestSuite() {
    ApplyCrds({"jobset.x-k8s.io_jobsets.yaml", "trainer.kubeflow.org_trainjobs.yaml",
               "trainer.kubeflow.org_trainingruntimes.yaml",
               "trainer.kubeflow.org_clustertrainingruntimes.yaml"});
  }
  void SetUp() override {
    StartController("jobset-controller");
    StartController("trainer-controller");
  }
  void BeforeTearDown() override {
    if (!runtime_.empty()) (void)client_->Delete(kClusterTrainingRuntimes, "", runtime_);
  }

  // A ClusterTrainingRuntime of this test (cluster-scoped: named after the namespace) whose
  // JobSet has a 1-GPU `leader` step unless `leader` is false, and the trainer step `node`
  // (one Job of spec.trainer.numNodes pods, their GPUs from spec.trainer.resourcesPerNode),
  // every pod running `seconds` under the simulator. backoffLimit 0: a pod deleted under a
  // running Job would fail the JobSet, and so the TrainJob. The template is written out as the
  // JobSet webhook, which does not run here, would default it.
  void Runtime(bool leader, double seconds, const std::string& priority_class) {
    runtime_ = ns_ + "-runtime";
    auto step = [&](const std::string& name, Json metadata) {
      Json pod = Template(Container(name, 1), seconds, priority_class);
      pod["spec"]["restartPolicy"] = "Never";
      if (!name_scheduler_) pod["spec"].erase("schedulerName");
      return Json{{"name", name},
                  {"replicas", 1},
                  {"template",
                   {{"metadata", std::move(metadata)},
                    {"spec",
                     {{"parallelism", 1},
                      {"completions", 1},
                      {"completionMode", "Indexed"},
                      {"backoffLimit", 0},
                      {"template", pod}}}}}};
    };
    Json steps = Json::array();
    if (leader) steps.push_back(step("leader", Json::object()));
    steps.push_back(
        step("node", {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}));
    auto r = client_->Create(kClusterTrainingRuntimes, "",
                             {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
                              {"kind", "ClusterTrainingRuntime"},
                              {"metadata", {{"name", runtime_}}},
                              {"spec",
                               {{"mlPolicy", {{"numNodes", 1}}},
                                {"template",
                                 {{"spec",
                                   {{"replicatedJobs", steps},
                                    {"successPolicy", {{"operator", "All"}}},
                                    {"startupPolicy", {{"startupPolicyOrder", "AnyOrder"}}},
                                    {"network", {{"enableDNSHostnames", false}}}}}}}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // A TrainJob on this test's runtime: `nodes` trainer pods of `gpus` GPUs each.
  void TrainJob(const std::string& name, const std::string& queue, int nodes, int gpus) {
    Create(TrainJobs(), {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
                         {"kind", "TrainJob"},
                         {"metadata", Metadata(name, queue)},
                         {"spec",
                          {{"runtimeRef", {{"name", runtime_}}},
                           {"trainer",
                            {{"numNodes", nodes},
                             {"resourcesPerNode", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}});
  }

  Json GetTrainJob(const std::string& name) { return Get(TrainJobs(), name); }
  bool Suspended(const std::string& name) {
    return GetTrainJob(name).value("/spec/suspend"_json_pointer, false);
  }
  bool Condition(const std::string& name, const std::string& type) {
    return ConditionTrue(TrainJobs(), name, type);
  }
  // Its JobSet (of its name).
  bool JobSetSuspended(const std::string& name) {
    return Get(JobSets(), name).value("/spec/suspend"_json_pointer, false);
  }
  std::pair<int, int> Pods(const std::string& name) {
    return PodsLabelled("jobset.sigs.k8s.io/jobset-name=" + name);
  }

  std::string runtime_;
  bool name_scheduler_ = true;  // the runtime's pod templates name chamber as their scheduler
};

TEST_F(TrainJobE2E, ATrainJobStartsAllOrNothingAcrossItsJobSetAndCompletes) {
  StartGangCluster(2, 24);
  // A 1-GPU leader and 2 trainer nodes of 8 GPUs: 17 GPUs, one more than the two nodes.
  Runtime(/*leader=*/true, 3, "");
  TrainJob("train", team(), 2, 8);
  // Its pods exist, each says why it waits, and none starts.
  ExpectGangWaitsWhole("jobset.sigs.k8s.io/jobset-name=train", 3);
  EXPECT_EQ(Get(JobSets(), "train").value("/metadata/ownerReferences/0/kind"_json_pointer, ""),
            "TrainJob");

  // With a third node the whole gang starts at once, and the TrainJob completes.
  Nodes(1, 8, "more");
  ASSERT_TRUE(
      Eventually([&] { return Pods("train").second == 3 || Condition("train", "Complete"); }, 30s));
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Condition("train", "Complete"); }, 60s));
  EXPECT_FALSE(Suspended("train"));
  EXPECT_FALSE(Condition("train", "Failed"));
}

// With chamberd's admission webhook, a TrainJob opts in by its own label alone: neither its
// runtime's pod templates nor its JobSet, Jobs and pods name chamber or carry the label, so each
// pod finds its queue up the controller chain Pod, Job, JobSet, TrainJob. Chamber then starts the
// gang whole, and the TrainJob completes.
class TrainJobWebhookE2E : public e2e::WithWebhook<TrainJobE2E> {};

TEST_F(TrainJobWebhookE2E, ALabelledTrainJobsPodsOptInUpTheChainAndStartWhole) {
  ASSERT_TRUE(pki_.ok());
  SelectNamespace(ns_);
  Nodes(2, 8);
  StartSim();
  Queue(team(), 16);
  const int port = StartWithWebhook("solo");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, team());
  if (HasFailure()) return;
  name_scheduler_ = false;
  Runtime(/*leader=*/false, 3, "");
  TrainJob("train", team(), 2, 8);
  ASSERT_TRUE(
      Eventually([&] { return Pods("train").second == 2 || Condition("train", "Complete"); }, 60s))
      << "pods (all, bound): " << ::testing::PrintToString(Pods("train"));
  kube::ListOptions o;
  o.label_selector = "jobset.sigs.k8s.io/jobset-name=train";
  auto pods = client_->List(kube::resources::kPods, ns_, o);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->items.size(), 2u);
  for (const Json& p : pods->items) {
    EXPECT_EQ(p["spec"].value("schedulerName", ""), "chamber") << p["metadata"]["name"];
    EXPECT_EQ(p["metadata"]["labels"].value("chamber.io/queue", ""), team())
        << p["metadata"]["name"];
  }
  EXPECT_FALSE(
      Get(JobSets(), "train")
          .value("/spec/template/spec/replicatedJobs/0/template/spec/template/spec"_json_pointer,
                 Json::object())
          .contains("schedulerName"))
      << "the JobSet names no scheduler: the pods opted in by the webhook alone";
  auto jobs = client_->List(kube::resources::kJobs, ns_, o);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_FALSE(jobs->items.empty());
  for (const Json& j : jobs->items)
    EXPECT_FALSE(j["metadata"].value("labels", Json::object()).contains("chamber.io/queue"))
        << "Job " << j["metadata"]["name"] << " carries the queue itself";
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Condition("train", "Complete"); }, 60s));
  EXPECT_FALSE(Condition("train", "Failed"));
}

TEST_F(TrainJobE2E, AReservedJobSuspendsATrainJobWhichResumesAndCompletes) {
  StartPreemptionCluster();
  Runtime(/*leader=*/false, 15, "chamber-e2e-elastic");
  TrainJob("elastic", team(), 2, 4);
  ASSERT_TRUE(Eventually([&] { return Pods("elastic").second == 2; }, 60s));
  // Suspended through the TrainJob, which holds the preemption's annotations; its JobSet and
  // Job are suspended too, so no deleted pod counts as a failure (backoffLimit 0).
  ExpectSuspendedForAReservedJob([&] { return Suspended("elastic"); },
                                 [&] { return GetTrainJob("elastic"); });
  EXPECT_FALSE(Annotations(Get(JobSets(), "elastic")).contains(backend::keys::kPreemptedAt))
      << "the annotations are the TrainJob's";

  // Then the TrainJob is resumed (the Trainer resumes its JobSet, the JobSet controller its
  // Job), its new pods start as one gang, and it completes.
  ASSERT_TRUE(Eventually([&] { return !Suspended("elastic"); }, 30s));
  EXPECT_FALSE(Annotations(GetTrainJob("elastic")).contains(backend::keys::kPreemptedAt));
  ASSERT_TRUE(Eventually([&] { return !JobSetSuspended("elastic"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return Condition("elastic", "Complete"); }, 90s))
      << "Failed: " << Condition("elastic", "Failed");
  EXPECT_FALSE(Condition("elastic", "Failed"));
  ExpectPreemptedAndResumedEvents("elastic");
}

// A gang bind that fails half-way rolls a TrainJob back: chamberd suspends the TrainJob (the
// Trainer suspends its JobSet, the JobSet controller its Job), deletes the pod already bound,
// and resumes it once it fits again and its Job is stopped. With the JobSet's `backoffLimit: 0`
// a pod counted as failed would fail the TrainJob: it completes instead, never preempted.
TEST_F(TrainJobE2E, AHalfFailedBindRollsATrainJobBackAndItResumesAndCompletes) {
  StartGangCluster(1, 8);
  // The API server refuses the binding of the second trainer pod (the Job train-node-0's pod of
  // index 1).
  e2e::RefusedBindings refused(client_.get(), ns_,
                               "object.metadata.name.startsWith('train-node-0-1-')");
  ASSERT_TRUE(refused.InForce(ns_ + "-gpu-0", 20s)) << refused.last_refusal();

  Runtime(/*leader=*/false, 3, "");
  TrainJob("train", team(), 2, 4);
  // Rolled back: suspended with chamber.io/rolled-back-at, which its Event names.
  auto rolled_back = [&] {
    kube::ListOptions o;
    o.field_selector = "involvedObject.name=train";
    auto list = client_->List(kube::resources::kEvents, ns_, o);
    if (list.ok())
      for (const Json& e : list->items)
        if (e.value("message", "").find("rolled back") != std::string::npos) return true;
    return Annotations(GetTrainJob("train")).contains(backend::keys::kRolledBackAt);
  };
  ASSERT_TRUE(Eventually(rolled_back, 30s)) << "no rollback";
  ExpectNoDoubleBooking(8);

  // Lifted, it is resumed and runs whole, and completes: no pod was counted as failed.
  refused.Lift();
  ASSERT_TRUE(Eventually([&] { return Condition("train", "Complete"); }, 90s))
      << "Failed: " << Condition("train", "Failed") << "; suspended: " << Suspended("train");
  EXPECT_FALSE(Condition("train", "Failed"));
  const Json annotations = Annotations(GetTrainJob("train"));
  EXPECT_FALSE(annotations.contains(backend::keys::kRolledBackAt)) << annotations.dump();
  EXPECT_FALSE(annotations.contains(backend::keys::kPreemptedAt))
      << "a rollback is not a preemption";
  ExpectNoDoubleBooking(8);
}

// --- All kinds in one cluster ---

class MixedKindsE2E : public ControllerE2E {
 protected:
  static void SetUpTestSuite() {
    ApplyCrds({"jobset.x-k8s.io_jobsets.yaml", "kubeflow.org_pytorchjobs.yaml",
               "ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml",
               "leaderworkerset.x-k8s.io_leaderworkersets.yaml"});
  }
  void SetUp() override {
    StartController("jobset-controller");
    StartController("training-operator", {"--enable-scheme=pytorchjob"});
    StartController("kuberay-operator");
    StartController("lws-controller");
  }
  void BeforeTearDown() override { DeleteRayJobs(); }

  int64_t Allocated(const std::string& queue) {
    auto q = client_->Get(e2e::kQueueType, "", queue);
    return q.ok() ? StatusGpu(*q, "allocated") : -1;
  }
  int64_t Borrowed(const std::string& queue) {
    auto q = client_->Get(e2e::kQueueType, "", queue);
    return q.ok() ? StatusGpu(*q, "borrowed") : -1;
  }
  // Whether every queue of `queues` comes to have `gpus` GPUs allocated within `within`; the
  // message names each queue's allocation when not.
  ::testing::AssertionResult EveryQueueAt(int64_t gpus, const std::vector<std::string>& queues,
                                          std::chrono::seconds within) {
    const bool all = Eventually(
        [&] {
          return std::all_of(queues.begin(), queues.end(),
                             [&](const std::string& q) { return Allocated(q) == gpus; });
        },
        within);
    if (all) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure() << "allocated:";
    for (const std::string& q : queues) failure << " " << q << " " << Allocated(q) << ";";
    return failure;
  }
};

// Four teams of 8 GPUs each on 32: a JobSet, a PyTorchJob, a RayCluster and a LeaderWorkerSet's
// group fill their quotas; a Job over team a's quota waits rather than take what the others use;
// it borrows what team c frees, and team c's RayJob takes it back by preempting that Job alone.
TEST_F(MixedKindsE2E, EveryKindKeepsToItsQueuesQuotaBorrowsAndIsReclaimed) {
  Nodes(4, 8);
  StartSim();
  const std::string a = ns_ + "-a", b = ns_ + "-b", c = ns_ + "-c", d = ns_ + "-d";
  for (const std::string& q : {a, b, c, d}) Queue(q, 8);
  StartChamberd("solo", {"--no-leader-elect"});
  JobSet("train", a, {{"workers", 2, 1, 4}}, 0);
  PyTorchJob("ddp", b, 1, 4, 0);
  Create(RayClusters(), {{"apiVersion", "ray.io/v1"},
                         {"kind", "RayCluster"},
                         {"metadata", Metadata("tune", c)},
                         {"spec", ClusterSpec(2, 2, 4, "")}});
  LeaderWorkerSet("serve", d, 1, 2, 4);
  ASSERT_TRUE(EveryQueueAt(8, {a, b, c, d}, 90s));
  EXPECT_EQ(PodsLabelled("jobset.sigs.k8s.io/jobset-name=train"), std::make_pair(2, 2));
  EXPECT_EQ(PodsLabelled("training.kubeflow.org/job-name=ddp"), std::make_pair(2, 2));
  EXPECT_EQ(PodsLabelled("ray.io/cluster=tune"), std::make_pair(3, 3));
  EXPECT_EQ(BoundInGroup("serve", 0), 2);
  ExpectNoDoubleBooking(8);

  // Over its quota with the cluster full, team a's Job waits: the others run within theirs.
  Job("extra", JobSpec(a, 1).Gpus(4));
  ASSERT_TRUE(Eventually([&] { return JobPods("extra").size() == 1; }, 30s));
  ASSERT_TRUE(Eventually(
      [&] {
        const auto reasons = PendingReasonsOf("batch.kubernetes.io/job-name=extra");
        return reasons.size() == 1 && !reasons.begin()->empty();
      },
      30s));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Bound("extra"), 0);
  EXPECT_EQ(Allocated(b), 8);
  EXPECT_EQ(Allocated(c), 8);

  // Team c's cluster goes: team a borrows its idle quota.
  ASSERT_TRUE(client_->Delete(RayClusters(), ns_, "tune").ok());
  ASSERT_TRUE(Eventually([&] { return Bound("extra") == 1; }, 60s));
  ASSERT_TRUE(Eventually([&] { return Borrowed(a) == 4; }, 30s)) << Borrowed(a);
  ExpectNoDoubleBooking(8);

  // Team c wants its quota back for a RayJob: only the borrowed Job is preempted (the JobSet,
  // within team a's quota, stays), and the RayJob's cluster starts whole.
  RayJob("sweep", c);
  ASSERT_TRUE(Eventually([&] { return GetJob("extra").suspend; }, 60s));
  auto cluster = [&] { return RayJobCluster("sweep"); };
  ASSERT_TRUE(Eventually(
      [&] { return !cluster().empty() && PodsLabelled("ray.io/cluster=" + cluster()).second == 3; },
      60s));
  EXPECT_EQ(PodsLabelled("jobset.sigs.k8s.io/jobset-name=train"), std::make_pair(2, 2));
  EXPECT_FALSE(Get(JobSets(), "train").value("/spec/suspend"_json_pointer, false));
  EXPECT_EQ(PodsLabelled("training.kubeflow.org/job-name=ddp").second, 2);
  EXPECT_EQ(BoundInGroup("serve", 0), 2) << "team d's group is never touched";
  ASSERT_TRUE(EveryQueueAt(8, {a, b, c, d}, 30s));
  ExpectNoDoubleBooking(8);
}

}  // namespace
}  // namespace chamber::chamberd
