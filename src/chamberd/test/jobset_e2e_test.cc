// JobSets end to end (docs/workloads/jobset.md): chamberd beside the real JobSet controller
// (built from sigs.k8s.io/jobset by scripts/workload-controllers.sh) and the Job controller of
// the test control plane, with fake GPU nodes and the pod lifecycle simulator standing in for
// kubelets. A JobSet is one gang across its Jobs, is preempted by suspending it, and resumes.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "backend/kube/snapshot_builder.h"
#include "backend/kube/workload_kinds.h"
#include "chamberd/test/chamberd_fixture.h"

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;
using kube::Json;

const kube::ResourceType& JobSets() {
  return backend::FindWorkloadKind("jobset.x-k8s.io/v1alpha2", "JobSet")->type;
}

// scripts/workload-controllers.sh's bin dir: the controller and its CRD.
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

class JobSetE2E : public e2e::ChamberdCluster {
 protected:
  static void SetUpTestSuite() {
    ChamberdCluster::SetUpTestSuite();
    if (HasFatalFailure()) return;
    const std::filesystem::path dir = ControllersDir();
    controller_ = dir / "jobset-controller";
    ASSERT_TRUE(std::filesystem::exists(controller_))
        << controller_ << " is missing: run scripts/workload-controllers.sh build";
    const std::filesystem::path crd_file = dir / "crds" / "jobset.x-k8s.io_jobsets.yaml";
    std::ifstream in(crd_file);
    std::stringstream text;
    text << in.rdbuf();
    auto docs = backend::ManifestToJson(text.str(), crd_file.string());
    ASSERT_TRUE(docs.ok() && !docs->empty()) << docs.status().ToString();
    Status applied = backend::ApplyCrd(*client_, docs->front());
    ASSERT_TRUE(applied.ok()) << applied.ToString();
  }

  void SetUp() override {
    NewNamespace("e2e-", "jobset-");
    if (HasFailure()) return;
    std::ofstream(dir_ / "config.yaml") << "cyclePeriod: 300ms\n"
                                           "preemption:\n"
                                           "  minRuntime: 0s\n"
                                           "  checkpointGraceSeconds: 1\n";
    controller_pid_ = e2e::SpawnLogged(
        {controller_.string(), "--kubeconfig", std::getenv("CHAMBER_TEST_KUBECONFIG")},
        (dir_ / "jobset-controller.log").string());
    ASSERT_GT(controller_pid_, 0);
  }

  void TearDown() override {
    if (controller_pid_ > 0) {
      kill(controller_pid_, SIGKILL);
      waitpid(controller_pid_, nullptr, 0);
      if (HasFailure()) {
        std::ifstream log(dir_ / "jobset-controller.log");
        std::cerr << "---- jobset-controller log ----\n" << log.rdbuf() << "\n";
      }
    }
    ChamberdCluster::TearDown();
  }

  struct ReplicatedJob {
    std::string name;
    int replicas = 1;
    int pods = 1;  // per Job
    int gpus = 1;  // per pod
  };

  // A JobSet written out in full (the JobSet webhook, which would default it, does not run
  // here; tools/workloadcontrollers/cmd/jobset-controller/main.go).
  void JobSet(const std::string& name, const std::string& queue, std::vector<ReplicatedJob> jobs,
              double seconds, const std::string& priority_class = "") {
    Json replicated = Json::array();
    for (const ReplicatedJob& rj : jobs) {
      Json container = {
          {"name", "main"},
          {"image", "trainer:latest"},
          {"resources",
           {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", rj.gpus}}},
            {"limits", {{"nvidia.com/gpu", rj.gpus}}}}}};
      Json pod = {{"schedulerName", "chamber"},
                  {"restartPolicy", "Never"},
                  {"terminationGracePeriodSeconds", 5},
                  {"containers", Json::array({container})}};
      if (!priority_class.empty()) pod["priorityClassName"] = priority_class;
      replicated.push_back(
          {{"name", rj.name},
           {"replicas", rj.replicas},
           {"template",
            {{"spec",
              {{"parallelism", rj.pods},
               {"completions", rj.pods},
               {"completionMode", "Indexed"},
               {"backoffLimit", 0},
               {"template",
                {{"metadata",
                  {{"annotations",
                    {{"chamber.io/sim-duration-seconds", std::to_string(seconds)}}}}},
                 {"spec", pod}}}}}}}});
    }
    Json js = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
               {"kind", "JobSet"},
               {"metadata",
                {{"name", name},
                 {"namespace", ns_},
                 {"labels", {{"chamber.io/queue", queue}}},
                 {"annotations", {{"chamber.io/checkpoint-grace-seconds", "1"}}}}},
               {"spec",
                {{"replicatedJobs", replicated},
                 {"successPolicy", {{"operator", "All"}}},
                 {"startupPolicy", {{"startupPolicyOrder", "AnyOrder"}}},
                 {"network", {{"enableDNSHostnames", false}}},
                 {"suspend", false}}}};
    auto r = client_->Create(JobSets(), ns_, js);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  Json GetJobSet(const std::string& name) {
    auto r = client_->Get(JobSets(), ns_, name);
    return r.ok() ? *r : Json::object();
  }

  bool Suspended(const std::string& name) {
    return GetJobSet(name).value("/spec/suspend"_json_pointer, false);
  }

  bool Condition(const std::string& name, const std::string& type) {
    for (const Json& c : GetJobSet(name).value("/status/conditions"_json_pointer, Json::array()))
      if (c.value("type", "") == type && c.value("status", "") == "True") return true;
    return false;
  }

  // The JobSet's live pods: all of them, and those bound.
  std::pair<int, int> Pods(const std::string& jobset) {
    kube::ListOptions o;
    o.label_selector = "jobset.sigs.k8s.io/jobset-name=" + jobset;
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

  // The PodScheduled=False reason of each of the JobSet's pods, once all have one.
  std::set<std::string> PendingReasons(const std::string& jobset) {
    kube::ListOptions o;
    o.label_selector = "jobset.sigs.k8s.io/jobset-name=" + jobset;
    std::set<std::string> out;
    auto list = client_->List(kube::resources::kPods, ns_, o);
    if (!list.ok()) return out;
    for (const Json& p : list->items) {
      std::string reason;
      for (const Json& c : p.value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False")
          reason = c.value("reason", "") + ": " + c.value("message", "");
      out.insert(reason);
    }
    return out;
  }

  inline static std::filesystem::path controller_;
  pid_t controller_pid_ = -1;
};

TEST_F(JobSetE2E, AJobSetStartsAllOrNothingAcrossItsJobsAndCompletes) {
  Nodes(2, 8);
  StartSim();
  Queue(ns_ + "-team", 24);
  StartChamberd("solo", {"--no-leader-elect"});
  // A 1-GPU leader and two Jobs of two 4-GPU workers: 17 GPUs, one more than the two nodes.
  JobSet("train", ns_ + "-team", {{"leader", 1, 1, 1}, {"workers", 2, 2, 4}}, 3);
  ASSERT_TRUE(Eventually([&] { return Pods("train").first == 5; }, 60s))
      << "the JobSet and Job controllers create its 5 pods";
  // None starts: each waits for room and says so.
  ASSERT_TRUE(Eventually(
      [&] {
        const auto reasons = PendingReasons("train");
        return reasons.size() == 1 && reasons.begin()->starts_with("Unschedulable: ");
      },
      30s));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Pods("train").second, 0) << "no pod of the gang is bound while the rest cannot be";

  // With a third node the whole gang starts at once, and the JobSet completes.
  Nodes(1, 8, "more");
  ASSERT_TRUE(Eventually(
      [&] { return Pods("train").second == 5 || Condition("train", "Completed"); }, 30s));
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Condition("train", "Completed"); }, 60s));
  EXPECT_FALSE(Suspended("train"));
}

TEST_F(JobSetE2E, AReservedJobSuspendsAJobSetWhichResumesAndCompletes) {
  Nodes(1, 8);
  StartSim();
  PriorityClass("chamber-e2e-elastic", 10);
  PriorityClass("chamber-e2e-reserved", 1000);
  Queue(ns_ + "-team", 8);
  StartChamberd("solo", {"--no-leader-elect"});
  JobSet("elastic", ns_ + "-team", {{"workers", 2, 1, 4}}, 15, "chamber-e2e-elastic");
  ASSERT_TRUE(Eventually([&] { return Pods("elastic").second == 2; }, 60s));
  Job("reserved", JobSpec(ns_ + "-team", 4).Seconds(3).Priority("chamber-e2e-reserved"));

  // The JobSet is suspended by Chamber, with its lost work recorded; the reserved Job runs.
  ASSERT_TRUE(Eventually([&] { return Suspended("elastic"); }, 30s));
  const Json suspended = GetJobSet("elastic");
  const Json annotations = suspended.value("/metadata/annotations"_json_pointer, Json::object());
  EXPECT_TRUE(annotations.contains(backend::keys::kPreemptedAt)) << annotations.dump();
  EXPECT_EQ(annotations.value(backend::keys::kPreemptionCount, ""), "1");
  ASSERT_TRUE(Eventually([&] { return Bound("reserved") == 4; }, 30s));
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Complete("reserved"); }, 30s));

  // Then the JobSet is resumed, its Jobs' new pods start as one gang, and it completes.
  ASSERT_TRUE(Eventually([&] { return !Suspended("elastic"); }, 30s));
  EXPECT_FALSE(GetJobSet("elastic")
                   .value("/metadata/annotations"_json_pointer, Json::object())
                   .contains(backend::keys::kPreemptedAt));
  ASSERT_TRUE(Eventually([&] { return Condition("elastic", "Completed"); }, 90s));
  const auto reasons = EventReasons("elastic");
  for (const char* want : {"Preempted", "Resumed"})
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), want), reasons.end()) << want;
}

}  // namespace
}  // namespace chamber::chamberd
