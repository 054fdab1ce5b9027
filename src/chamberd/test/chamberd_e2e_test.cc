// chamberd end to end: the real binary against the real control plane (kube-apiserver, etcd and
// kube-controller-manager for the Job controller, from the ctest fixture), with fake GPU nodes
// and the pod lifecycle simulator (src/kubesim) standing in for kubelets: bound pods run for the
// seconds their `chamber.io/sim-duration-seconds` annotation says, then succeed.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "backend/kube/snapshot_builder.h"
#include "backend/kube/workload_kinds.h"
#include "chamberd/test/chamberd_fixture.h"
#include "chamberd/test/cluster_fixture.h"
#include "chamberd/test/e2e_support.h"
#include "common/time.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kubesim/nodes.h"
#include "kubesim/simulator.h"

extern char** environ;

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;
using kube::Json;

using e2e::kQueueType;

class ChamberdE2E : public e2e::ChamberdCluster {
 protected:
  void SetUp() override {
    NewNamespace("e2e-", "chamberd-");
    if (HasFailure()) return;
    std::ofstream(dir_ / "config.yaml")
        << "cyclePeriod: 300ms\n"
           "preemption:\n"
           "  minRuntime: 0s\n"
           "  checkpointGraceSeconds: 1\n"
           "pricing:\n"
           "  currency: EUR\n"
           "  defaultPricePerGpuHour: 4\n"
           "  rules:\n"
           "    - gpuModel: NVIDIA-H100-80GB-HBM3\n"
           "      nodeSelector: {karpenter.sh/capacity-type: spot}\n"
           "      pricePerGpuHour: 1.5\n";
  }

  // Runs the `chamber` CLI; its exit code, and its stdout and stderr together.
  std::pair<int, std::string> RunChamber(std::vector<std::string> args) {
    args.insert(args.begin(), CHAMBER_CLI_BINARY);
    const std::string out = (dir_ / "chamber-cli.out").string();
    std::filesystem::remove(out);
    const pid_t pid = e2e::SpawnLogged(args, out);
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
  }
};

// Stands in for the chart's chamberd Service: forwards each GET to the API of the replica whose
// pod is labelled chamber.io/leader=true (503 when none is, or while set down; 502 when it does
// not answer).
class LeaderService {
 public:
  LeaderService(kube::Client* client, std::string ns, std::function<int(const std::string&)> port)
      : client_(client), ns_(std::move(ns)), port_of_(std::move(port)) {
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (down_) {
        res.status = 503;
        return;
      }
      kube::ListOptions o;
      o.label_selector = "chamber.io/leader=true";
      auto pods = client_->List(kube::resources::kPods, ns_, o);
      if (!pods.ok() || pods->items.empty()) {
        res.status = 503;
        return;
      }
      const int port = port_of_(pods->items.front()["metadata"].value("name", ""));
      httplib::Client to("127.0.0.1", port);
      to.set_connection_timeout(1);
      httplib::Headers headers;
      if (req.has_header("Authorization"))
        headers.emplace("Authorization", req.get_header_value("Authorization"));
      if (port <= 0) {
        res.status = 502;
        return;
      }
      auto answer = to.Get(req.target, headers);
      if (!answer) {
        res.status = 502;
        return;
      }
      res.status = answer->status;
      res.set_content(answer->body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LeaderService() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  void SetDown(bool down) { down_ = down; }

 private:
  kube::Client* client_;
  std::string ns_;
  std::function<int(const std::string&)> port_of_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> down_{false};
};

TEST_F(ChamberdE2E, A16PodGangStartsAllOrNothing) {
  Nodes(2, 8);
  StartSim();
  // Quota for both jobs: the gang is guaranteed work, so its wait is a capacity shortage.
  Queue(ns_ + "-team", 20);
  StartChamberd("solo", {"--no-leader-elect"});
  Job("blocker", JobSpec(ns_ + "-team", 4).Seconds(8));
  ASSERT_TRUE(Eventually([&] { return Bound("blocker") == 4; }, 30s)) << Bound("blocker");
  Job("gang", JobSpec(ns_ + "-team", 16).Seconds(3));

  // 12 GPUs are free, the gang needs 16: none of it starts, and every pod says why.
  std::set<std::string> seen;
  ASSERT_TRUE(Eventually(
      [&] {
        std::vector<kube::Pod> pods = JobPods("gang");
        if (pods.size() != 16) return false;
        for (const kube::Pod& p : pods) {
          bool explained = false;
          for (const kube::Condition& c : p.conditions) {
            if (c.type == "PodScheduled") seen.insert(c.status + " " + c.reason + ": " + c.message);
            explained |= c.type == "PodScheduled" && c.status == "False" &&
                         c.reason == "Unschedulable" && c.message.rfind("NoNodeFits: ", 0) == 0;
          }
          if (!explained) return false;
        }
        return true;
      },
      20s))
      << ::testing::PrintToString(seen);
  EXPECT_EQ(Bound("gang"), 0);
  EXPECT_FALSE(Complete("blocker"));

  // When the blocker finishes, the whole gang starts.
  ASSERT_TRUE(Eventually([&] { return Complete("blocker"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return Bound("gang") == 16; }, 30s)) << Bound("gang");
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Complete("gang"); }, 30s));
  const auto reasons = EventReasons("gang");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Scheduled"), reasons.end());
}

// Serving replicas beside kube-controller-manager's Deployment controller: each replica is a
// workload of its own, so a reserved Job shrinks the Deployment rather than stopping it; the
// replicas `chamber.io/reserved-replicas: "3"` keeps (the oldest bound ones) are never evicted,
// even for reserved work; the controller's replacement waits and says why, and starts once the
// Job is done.
TEST_F(ChamberdE2E, ADeploymentShrinksForAReservedJobKeepsItsReservedReplicasAndGrowsBack) {
  const kube::ResourceType deployments{.group = "apps",
                                       .version = "v1",
                                       .plural = "deployments",
                                       .kind = "Deployment",
                                       .namespaced = true};
  Nodes(1, 8);
  StartSim();
  Queue(ns_ + "-team", 8);
  PriorityClass(ns_ + "-serving", 10);
  PriorityClass(ns_ + "-reserved", 1000);
  Json container = {
      {"name", "server"},
      {"image", "server:latest"},
      {"resources",
       {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 2}}}, {"limits", {{"nvidia.com/gpu", 2}}}}}};
  Json deployment = {{"apiVersion", "apps/v1"},
                     {"kind", "Deployment"},
                     {"metadata", {{"name", "serve"}}},
                     {"spec",
                      {{"replicas", 4},
                       {"selector", {{"matchLabels", {{"app", "serve"}}}}},
                       {"template",
                        {{"metadata",
                          {{"labels", {{"app", "serve"}, {"chamber.io/queue", ns_ + "-team"}}},
                           {"annotations",
                            {{"chamber.io/reserved-replicas", "3"},
                             {"chamber.io/checkpoint-grace-seconds", "1"}}}}},
                         {"spec",
                          {{"schedulerName", "chamber"},
                           {"priorityClassName", ns_ + "-serving"},
                           {"terminationGracePeriodSeconds", 1},
                           {"containers", Json::array({container})}}}}}}}};
  ASSERT_TRUE(client_->Create(deployments, ns_, deployment).ok());
  StartChamberd("solo", {"--no-leader-elect"});
  auto replicas = [&] {
    kube::ListOptions o;
    o.label_selector = "app=serve";
    std::vector<kube::Pod> out;
    if (auto list = client_->List(kube::resources::kPods, ns_, o); list.ok())
      for (Json& j : list->items) {
        kube::Pod p = kube::Pod::FromJson(std::move(j)).value();
        if (p.metadata.deletion_timestamp.empty()) out.push_back(std::move(p));
      }
    return out;
  };
  auto bound = [&] {
    std::set<std::string> uids;
    for (const kube::Pod& p : replicas())
      if (!p.node_name.empty()) uids.insert(p.metadata.uid);
    return uids;
  };
  ASSERT_TRUE(Eventually([&] { return bound().size() == 4; }, 30s)) << bound().size();
  // The reserved three: the oldest bound replicas (by creation, then name).
  std::vector<kube::Pod> before = replicas();
  std::sort(before.begin(), before.end(), [](const kube::Pod& a, const kube::Pod& b) {
    const int64_t x = a.metadata.creation_timestamp.unix_ms(),
                  y = b.metadata.creation_timestamp.unix_ms();
    return x != y ? x < y : a.metadata.Key() < b.metadata.Key();
  });
  ASSERT_EQ(before.size(), 4u);
  std::set<std::string> reserved;
  for (size_t i = 0; i < 3; ++i) reserved.insert(before[i].metadata.uid);

  // A reserved Job of 4 GPUs could only run by evicting a reserved replica: it waits, and the
  // Deployment keeps all four.
  Job("big", JobSpec(ns_ + "-team", 1).Gpus(4).Priority(ns_ + "-reserved"));
  ASSERT_TRUE(Eventually([&] { return JobPods("big").size() == 1; }, 30s));
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<kube::Pod> pods = JobPods("big");
        for (const kube::Condition& c : pods.front().conditions)
          if (c.type == "PodScheduled" && c.status == "False" && !c.reason.empty()) return true;
        return false;
      },
      30s));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Bound("big"), 0);
  EXPECT_EQ(bound().size(), 4u) << "a reserved replica was evicted";
  ASSERT_TRUE(client_->Delete(kube::resources::kJobs, ns_, "big").ok());

  // One of 2 GPUs: the one replica not reserved goes, the Deployment shrinks by one.
  Job("urgent", JobSpec(ns_ + "-team", 1).Gpus(2).Seconds(3).Priority(ns_ + "-reserved"));
  ASSERT_TRUE(Eventually([&] { return Bound("urgent") == 1; }, 30s));
  EXPECT_EQ(bound(), reserved) << "the Deployment shrinks to its reserved replicas, no further";
  ExpectNoDoubleBooking(8);
  // The Deployment controller's replacement waits, and says why.
  ASSERT_TRUE(Eventually(
      [&] {
        int explained = 0;
        for (const kube::Pod& p : replicas())
          for (const kube::Condition& c : p.conditions)
            explained += p.node_name.empty() && c.type == "PodScheduled" && c.status == "False" &&
                         !c.reason.empty() && !c.message.empty();
        return explained == 1;
      },
      30s));

  // The Job done, the Deployment is whole again, its reserved replicas untouched throughout.
  ASSERT_TRUE(Eventually([&] { return Complete("urgent"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return bound().size() == 4; }, 30s)) << bound().size();
  for (const std::string& uid : reserved) EXPECT_TRUE(bound().contains(uid));
  ExpectNoDoubleBooking(8);
}

// The upstream gang API (scheduling.k8s.io/v1beta1 PodGroup, served by the test control plane
// with the GenericWorkload gate on): pods naming a gang PodGroup start all or nothing at its
// minCount and say why while they wait; a basic group's pods start each on their own; a pod
// naming a PodGroup that does not exist waits for it, then starts once it is created.
TEST_F(ChamberdE2E, PodsOfAnUpstreamPodGroupStartAsItsPolicySays) {
  const kube::ResourceType& podgroups = backend::PodGroupTypes().front();
  auto group = [&](const std::string& name, Json policy) {
    Json g = {{"apiVersion", podgroups.ApiVersion()},
              {"kind", "PodGroup"},
              {"metadata", {{"name", name}, {"labels", {{"chamber.io/queue", ns_ + "-team"}}}}},
              {"spec", {{"schedulingPolicy", std::move(policy)}}}};
    auto made = client_->Create(podgroups, ns_, g);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  };
  auto pod = [&](const std::string& name, const std::string& in_group, int gpus) {
    Json requests = {{"cpu", "1"}};
    if (gpus > 0) requests["nvidia.com/gpu"] = gpus;
    Json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec",
               {{"schedulerName", "chamber"},
                {"schedulingGroup", {{"podGroupName", in_group}}},
                {"containers", Json::array({{{"name", "main"},
                                             {"image", "trainer:latest"},
                                             {"resources", {{"requests", requests}}}}})}}}};
    if (gpus > 0) p["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", gpus}};
    auto made = client_->Create(kube::resources::kPods, ns_, p);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_TRUE((*made)["spec"].contains("schedulingGroup"))
        << "the API server dropped spec.schedulingGroup: is GenericWorkload on?";
  };
  auto get = [&](const std::string& name) {
    return kube::Pod::FromJson(client_->Get(kube::resources::kPods, ns_, name).value()).value();
  };
  auto bound = [&](std::initializer_list<const char*> names) {
    int n = 0;
    for (const char* name : names) n += get(name).node_name.empty() ? 0 : 1;
    return n;
  };

  Nodes(1, 4);
  StartSim();
  Queue(ns_ + "-team", 16);
  group("trainers", {{"gang", {{"minCount", 3}}}});
  for (const char* name : {"trainer-0", "trainer-1", "trainer-2"}) pod(name, "trainers", 2);
  pod("orphan", "later", 0);
  StartChamberd("solo", {"--no-leader-elect"});

  // 6 GPUs asked, 4 there: no member starts, and each says the gang does not fit.
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const char* name : {"trainer-0", "trainer-1", "trainer-2"}) {
          bool explained = false;
          for (const kube::Condition& c : get(name).conditions) {
            if (c.type == "PodScheduled") seen = c.status + " " + c.reason + ": " + c.message;
            explained |= c.type == "PodScheduled" && c.status == "False" &&
                         c.reason == "Unschedulable" && c.message.rfind("NoNodeFits: ", 0) == 0;
          }
          if (!explained) return false;
        }
        return true;
      },
      20s))
      << seen;
  EXPECT_EQ(bound({"trainer-0", "trainer-1", "trainer-2"}), 0);
  // The PodGroup says so too, as kube-scheduler would.
  auto condition = [&](const std::string& type = "PodGroupInitiallyScheduled") {
    Result<Json> g = client_->Get(podgroups, ns_, "trainers");
    if (g.ok())
      for (const Json& c : g->value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == type) return c.value("status", "") + " " + c.value("reason", "");
    return std::string();
  };
  EXPECT_TRUE(Eventually([&] { return condition() == "False Unschedulable"; }, 10s)) << condition();

  // A second node: the whole gang starts.
  Nodes(1, 4, "gpu-b");
  ASSERT_TRUE(Eventually([&] { return bound({"trainer-0", "trainer-1", "trainer-2"}) == 3; }, 30s));
  ExpectNoDoubleBooking(4);
  EXPECT_TRUE(Eventually([&] { return condition() == "True Scheduled"; }, 10s)) << condition();

  // A basic group's pods are each their own: two single GPUs left, each taken.
  group("notebooks", {{"basic", Json::object()}});
  pod("notebook-0", "notebooks", 1);
  pod("notebook-1", "notebooks", 1);
  ASSERT_TRUE(Eventually([&] { return bound({"notebook-0", "notebook-1"}) == 2; }, 30s));
  ExpectNoDoubleBooking(4);

  // The pod whose PodGroup did not exist waited all along (it needs no GPU, so only its group
  // held it back), and starts once the group is there.
  EXPECT_EQ(bound({"orphan"}), 0);
  group("later", {{"gang", {{"minCount", 1}}}});
  EXPECT_TRUE(Eventually([&] { return bound({"orphan"}) == 1; }, 30s));

  // A reserved pod needs a whole node: the gang, one victim, is evicted, and its PodGroup says
  // so (DisruptionTarget); PodGroupInitiallyScheduled stays True.
  PriorityClass(ns_ + "-reserved", 1000);
  Json urgent = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "urgent"}, {"labels", {{"chamber.io/queue", ns_ + "-team"}}}}},
      {"spec",
       {{"schedulerName", "chamber"},
        {"priorityClassName", ns_ + "-reserved"},
        {"containers", Json::array({{{"name", "main"},
                                     {"image", "trainer:latest"},
                                     {"resources",
                                      {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 4}}},
                                       {"limits", {{"nvidia.com/gpu", 4}}}}}}})}}}};
  ASSERT_TRUE(client_->Create(kube::resources::kPods, ns_, urgent).ok());
  EXPECT_TRUE(Eventually(
      [&] { return condition("DisruptionTarget") == "True PreemptionByScheduler"; }, 30s))
      << condition("DisruptionTarget");
  EXPECT_TRUE(Eventually([&] { return bound({"urgent"}) == 1; }, 30s));
  EXPECT_EQ(condition(), "True Scheduled");
  ExpectNoDoubleBooking(4);
}

// Kubernetes 1.37 with WorkloadWithJob: the Job controller makes a Workload and a PodGroup for
// each Job, of the Job's spec.scheduling policy (basic when it sets none), and names the
// PodGroup on every pod it creates. The Job stays chamberd's workload, and its own policy sets
// the gang's minimum: a gang of minCount 2 starts 2 of its 3 pods on a node of 2 GPUs and
// completes, its PodGroup saying `PodGroupInitiallyScheduled` and, when a reserved Job suspends
// it, `DisruptionTarget`; a Job that sets no policy is still one gang of all its pods, whatever
// the basic PodGroup its controller made says, and that PodGroup is given no gang's condition.
TEST_F(ChamberdE2E, AJobsOwnSchedulingPolicyIsHonouredBesideThePodGroupItsControllerMakes) {
  const kube::ResourceType& podgroups = backend::PodGroupTypes().front();
  Nodes(1, 2);
  StartSim();
  Queue(ns_ + "-team", 8);
  StartChamberd("solo", {"--no-leader-elect"});
  // The PodGroup the Job controller made for `job`, named on its pods: its policy, or "".
  auto group_of = [&](const std::string& job) {
    for (const kube::Pod& p : JobPods(job)) {
      if (p.pod_group_name.empty()) return std::string();
      Result<Json> g = client_->Get(podgroups, ns_, p.pod_group_name);
      if (!g.ok()) return std::string();
      const Json policy = g->value("/spec/schedulingPolicy"_json_pointer, Json::object());
      return policy.contains("gang") ? "gang " + std::to_string(policy["gang"].value("minCount", 0))
                                     : std::string("basic");
    }
    return std::string();
  };
  // The PodGroupInitiallyScheduled condition of that PodGroup: "<status> <reason>", or "".
  auto scheduled = [&](const std::string& job) {
    for (const kube::Pod& p : JobPods(job)) {
      Result<Json> g = client_->Get(podgroups, ns_, p.pod_group_name);
      if (g.ok())
        for (const Json& c : g->value("/status/conditions"_json_pointer, Json::array()))
          if (c.value("type", "") == "PodGroupInitiallyScheduled")
            return c.value("status", "") + " " + c.value("reason", "");
      break;
    }
    return std::string();
  };

  // No policy of its own: the controller's PodGroup is basic, and the Job is still all or
  // nothing: its 3 GPUs do not fit the node's 2, so none of its pods starts.
  Job("whole", JobSpec(ns_ + "-team", 3).Seconds(3));
  ASSERT_TRUE(Eventually([&] { return group_of("whole") == "basic"; }, 30s))
      << "no PodGroup from the Job controller: is WorkloadWithJob on? " << group_of("whole");
  ASSERT_TRUE(Eventually([&] { return JobPods("whole").size() == 3; }, 30s));
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(Bound("whole"), 0) << "a Job without a policy of its own is one gang of all its pods";
  EXPECT_EQ(scheduled("whole"), "") << "a basic PodGroup carries no gang's condition";
  kube::DeleteOptions with_pods;
  with_pods.propagation_policy = "Background";
  ASSERT_TRUE(client_->Delete(kube::resources::kJobs, ns_, "whole", with_pods).ok());
  ASSERT_TRUE(Eventually([&] { return JobPods("whole").empty(); }, 30s));

  // A gang of minCount 2: two of its three pods start together, the third once one ends.
  PriorityClass(ns_ + "-reserved", 1000);
  Job("gang", JobSpec(ns_ + "-team", 3)
                  .Seconds(15)
                  .Grace("1")
                  .Scheduling({{"schedulingPolicy", {{"gang", {{"minCount", 2}}}}}}));
  ASSERT_TRUE(GetJob("gang").raw.contains("/spec/scheduling"_json_pointer))
      << "the API server dropped spec.scheduling: is WorkloadWithJob on?";
  ASSERT_TRUE(Eventually([&] { return group_of("gang") == "gang 2"; }, 30s)) << group_of("gang");
  ASSERT_TRUE(Eventually([&] { return Bound("gang") == 2; }, 30s));
  ExpectNoDoubleBooking(2);
  // Its PodGroup says the gang is scheduled, as kube-scheduler would have it.
  EXPECT_TRUE(Eventually([&] { return scheduled("gang") == "True Scheduled"; }, 10s))
      << scheduled("gang");
  // A reserved Job takes both GPUs: the gang is suspended, and its PodGroup says why.
  const std::string gang_group = JobPods("gang").front().pod_group_name;
  auto disruption = [&] {
    Result<Json> g = client_->Get(podgroups, ns_, gang_group);
    if (g.ok())
      for (const Json& c : g->value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == "DisruptionTarget")
          return c.value("status", "") + " " + c.value("reason", "");
    return std::string();
  };
  Job("urgent", JobSpec(ns_ + "-team", 2).Seconds(2).Priority(ns_ + "-reserved"));
  ASSERT_TRUE(Eventually([&] { return GetJob("gang").suspend; }, 30s));
  EXPECT_TRUE(Eventually([&] { return disruption() == "True PreemptionByScheduler"; }, 10s))
      << disruption();
  ASSERT_TRUE(Eventually([&] { return Complete("urgent"); }, 30s));
  ExpectNoDoubleBooking(2);
  // Then it resumes and completes.
  ASSERT_TRUE(Eventually([&] { return Complete("gang"); }, 90s));
  ExpectNoDoubleBooking(2);
}

// A gang of bare pods whose bind fails half-way is rolled back without losing a pod: the API
// server refuses the binding of one member (a ValidatingAdmissionPolicy on pods/binding), so the
// members already bound are deleted and recreated, pending, under their own names. Once the
// refusal is lifted the whole gang starts.
TEST_F(ChamberdE2E, AGangOfBarePodsRolledBackKeepsEveryPodPending) {
  Nodes(1, 4);
  const std::string node = ns_ + "-gpu-0";
  PriorityClass(ns_ + "-high", 1000);
  auto pod = [&](const std::string& name) {
    return Json{
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", ns_},
          {"labels", {{"chamber.io/pod-group", "g"}, {"chamber.io/queue", ns_ + "-team"}}}}},
        {"spec",
         {{"schedulerName", "chamber"},
          {"priorityClassName", ns_ + "-high"},
          {"containers", Json::array({{{"name", "main"},
                                       {"image", "trainer:latest"},
                                       {"resources",
                                        {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 1}}},
                                         {"limits", {{"nvidia.com/gpu", 1}}}}}}})}}}};
  };
  // The API server refuses the binding of gang-2.
  e2e::RefusedBindings refused(client_.get(), ns_, "object.metadata.name == 'gang-2'");
  ASSERT_TRUE(refused.InForce(node, 20s)) << refused.last_refusal();

  Queue(ns_ + "-team", 4);
  std::map<std::string, std::string> first_uid;
  for (const std::string name : {"gang-0", "gang-1", "gang-2"}) {
    auto made = client_->Create(kube::resources::kPods, ns_, pod(name));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    first_uid[name] = (*made)["metadata"].value("uid", "");
  }
  // The gang's Events are on its first pod.
  auto rollback_message = [&] {
    auto list = client_->List(kube::resources::kEvents, ns_);
    if (list.ok())
      for (const Json& e : list->items)
        if (e.value("reason", "") == "FailedScheduling" &&
            e.value("message", "").find("rolled back") != std::string::npos)
          return e.value("message", "");
    return std::string();
  };
  const pid_t pid = StartChamberd("solo", {"--no-leader-elect"});
  ASSERT_TRUE(Eventually([&] { return !rollback_message().empty(); }, 30s)) << "no rollback";
  // The gang waits out a backoff before it is tried again, and its pods say why.
  auto scheduled = [&](const std::string& name) {
    Result<Json> p = client_->Get(kube::resources::kPods, ns_, name);
    if (p.ok())
      for (const Json& c : p->value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == "PodScheduled")
          return c.value("reason", "") + ": " + c.value("message", "");
    return std::string();
  };
  EXPECT_TRUE(Eventually([&] { return scheduled("gang-2").starts_with("BindBackoff: "); }, 20s))
      << scheduled("gang-2");
  EXPECT_NE(scheduled("gang-2").find("rolled back ("), std::string::npos) << scheduled("gang-2");
  EXPECT_NE(scheduled("gang-2").find("tried again from"), std::string::npos) << scheduled("gang-2");
  pid_t stopped = pid;
  Stop(stopped, SIGTERM);
  chamberd_.erase("solo");

  // Every member still exists, waits unbound, and the bound ones were recreated.
  auto get = [&](const std::string& name) {
    return kube::Pod::FromJson(client_->Get(kube::resources::kPods, ns_, name).value()).value();
  };
  for (const std::string name : {"gang-0", "gang-1", "gang-2"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(
        Eventually([&] { return client_->Get(kube::resources::kPods, ns_, name).ok(); }, 10s));
    const kube::Pod p = get(name);
    EXPECT_TRUE(p.node_name.empty());
    EXPECT_TRUE(p.metadata.deletion_timestamp.empty());
    EXPECT_EQ(p.metadata.annotations.count(backend::keys::kGpuIndices), 0u);
    EXPECT_EQ(p.metadata.labels.at("chamber.io/pod-group"), "g");
    EXPECT_EQ(p.scheduler_name, "chamber");
    if (name == "gang-2")
      EXPECT_EQ(p.metadata.uid, first_uid[name]);  // refused: never bound, never touched
    else
      EXPECT_NE(p.metadata.uid, first_uid[name]);  // bound, then recreated pending
  }
  const std::string message = rollback_message();
  EXPECT_NE(message.find("gang-2"), std::string::npos) << message;
  EXPECT_NE(message.find("2 bare pod(s) recreated, pending"), std::string::npos) << message;

  // Lifted, the gang starts whole.
  refused.Lift();
  StartChamberd("again", {"--no-leader-elect"});
  // Until the API server drops the policy, a rollback may be deleting and recreating a member:
  // a pod missing for that moment is not bound yet.
  EXPECT_TRUE(Eventually(
      [&] {
        for (const std::string name : {"gang-0", "gang-1", "gang-2"}) {
          Result<Json> got = client_->Get(kube::resources::kPods, ns_, name);
          if (!got.ok() || (*got)["spec"].value("nodeName", "").empty()) return false;
        }
        return true;
      },
      30s));
}

// A team beyond its quota waits behind another team's guaranteed work. That wait is a rule's,
// not a shortage of capacity: its pods say why with the engine's reason, never `Unschedulable`,
// so a cluster autoscaler buys no node for it.
TEST_F(ChamberdE2E, AQuotaWaitIsNotReportedAsUnschedulable) {
  Nodes(1, 8);
  StartSim();
  const std::string owner = ns_ + "-owner", other = ns_ + "-other";
  Queue(owner, 8);
  Queue(other, 0);
  StartChamberd("solo", {"--no-leader-elect"});
  Job("guaranteed", JobSpec(owner, 8));
  ASSERT_TRUE(Eventually([&] { return Bound("guaranteed") == 8; }, 30s)) << Bound("guaranteed");
  Job("borrower", JobSpec(other, 1));
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const kube::Pod& p : JobPods("borrower"))
          for (const kube::Condition& c : p.conditions)
            if (c.type == "PodScheduled" && c.status == "False") {
              seen = c.reason + " / " + c.message;
              return c.reason == "PreemptionNotAllowed" &&
                     c.message.rfind("PreemptionNotAllowed: ", 0) == 0 &&
                     c.message.find("queue " + owner + " holds 8 gpu, quota 8 gpu") !=
                         std::string::npos;
            }
        return false;
      },
      20s))
      << seen;
  EXPECT_EQ(Bound("borrower"), 0);
}

TEST_F(ChamberdE2E, CordonedAndTaintedNodesReceiveNothing) {
  Nodes(1, 4, "open");
  Nodes(1, 4, "cordoned");
  Nodes(1, 4, "tainted", {{"dedicated", "infra", "NoSchedule"}});
  const std::string cordoned = ns_ + "-cordoned-0", tainted = ns_ + "-tainted-0";
  ASSERT_TRUE(
      client_
          ->MergePatch(kube::resources::kNodes, "", cordoned, {{"spec", {{"unschedulable", true}}}})
          .ok());
  StartSim();
  Queue(ns_ + "-team", 12);
  StartChamberd("solo", {"--no-leader-elect"});
  Job("plain", JobSpec(ns_ + "-team", 4));
  ASSERT_TRUE(Eventually([&] { return Bound("plain") == 4; }, 30s));
  for (const kube::Pod& p : JobPods("plain")) EXPECT_EQ(p.node_name, ns_ + "-open-0");

  Job("more", JobSpec(ns_ + "-team", 1));
  Job("tolerant", JobSpec(ns_ + "-team", 4)
                      .Tolerate(Json::array({{{"key", "dedicated"},
                                              {"operator", "Equal"},
                                              {"value", "infra"},
                                              {"effect", "NoSchedule"}}})));
  ASSERT_TRUE(Eventually([&] { return Bound("tolerant") == 4; }, 30s));
  for (const kube::Pod& p : JobPods("tolerant")) EXPECT_EQ(p.node_name, tainted);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Bound("more"), 0) << "only the cordoned node has room, and it takes nothing";
  ExpectNoDoubleBooking(4);

  // Uncordoned, it takes work again.
  ASSERT_TRUE(client_
                  ->MergePatch(kube::resources::kNodes, "", cordoned,
                               {{"spec", {{"unschedulable", false}}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] { return Bound("more") == 1; }, 30s));
  EXPECT_EQ(JobPods("more").at(0).node_name, cordoned);
}

TEST_F(ChamberdE2E, AReservedJobPreemptsAnElasticJobWhichResumesAndCompletes) {
  Nodes(1, 8);
  StartSim();
  PriorityClass("chamber-e2e-elastic", 10);
  PriorityClass("chamber-e2e-reserved", 1000);
  Queue(ns_ + "-team", 8);
  StartChamberd("solo", {"--no-leader-elect"});
  // Long enough that it still runs when the reserved Job's pods appear, however slowly the Job
  // controller creates them on a loaded machine.
  Job("elastic", JobSpec(ns_ + "-team", 8).Seconds(15).Priority("chamber-e2e-elastic").Grace("1"));
  ASSERT_TRUE(Eventually([&] { return Bound("elastic") == 8; }, 30s));
  Job("reserved", JobSpec(ns_ + "-team", 4).Seconds(3).Priority("chamber-e2e-reserved"));

  // The elastic Job is suspended by Chamber, the reserved one runs.
  ASSERT_TRUE(Eventually([&] { return GetJob("elastic").suspend; }, 30s));
  const kube::Job suspended = GetJob("elastic");
  EXPECT_TRUE(suspended.metadata.annotations.count(backend::keys::kPreemptedAt));
  EXPECT_TRUE(suspended.metadata.annotations.count(backend::keys::kPreemptions));
  // Its lost work, for the next leader: one preemption, 8 GPUs for the seconds it ran.
  EXPECT_EQ(suspended.metadata.annotations.at(backend::keys::kPreemptionCount), "1");
  EXPECT_GT(std::stod(suspended.metadata.annotations.at(backend::keys::kGpuHoursLost)), 0.0);
  ASSERT_TRUE(Eventually([&] { return Bound("reserved") == 4; }, 30s));
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Complete("reserved"); }, 30s));

  // Then the elastic Job resumes and completes.
  ASSERT_TRUE(Eventually([&] { return !GetJob("elastic").suspend; }, 30s));
  ASSERT_TRUE(Eventually([&] { return Complete("elastic"); }, 60s));
  const auto reasons = EventReasons("elastic");
  for (const char* want : {"Preempted", "Resumed", "Scheduled"})
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), want), reasons.end()) << want;
}

// MIG devices of the NVIDIA device plugin's mixed strategy (docs/sharing.md, "MIG devices"): a
// node advertising nvidia.com/mig-1g.10gb: 3 takes three pods of one device each and no fourth,
// which waits and says why; the plain 8-GPU node beside it takes none. Each device is charged
// 1/7 of a GPU (0.142) against the queue. A reserved Job asking for two devices suspends the
// elastic one, runs there, and the elastic Job resumes and completes.
// Quotas per GPU model (docs/queues.md, "GPU models"): a team lists H100 (quota 2, limit 2)
// before A100 (quota 4). Its first job of two GPUs runs on the H100 node, within that quota; the
// next one-GPU job would pass it there and goes to the A100 node; the Queue's status gives each
// model's figures. The API server refuses a model list that breaks the rules, naming the field.
TEST_F(ChamberdE2E, QuotasPerGpuModelHoldPerModelAndShowInTheQueuesStatus) {
  Nodes(1, 4, "h100", {}, {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}});
  Nodes(1, 4, "a100", {}, {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}});
  const std::string team = ns_ + "-team";
  Json q = {
      {"apiVersion", "chamber.io/v1alpha1"},
      {"kind", "Queue"},
      {"metadata", {{"name", team}}},
      {"spec",
       {{"resources",
         {{"gpu",
           {{"models", Json::array({{{"name", "NVIDIA-H100-80GB-HBM3"}, {"quota", 2}, {"limit", 2}},
                                    {{"name", "NVIDIA-A100-SXM4-80GB"}, {"quota", 4}}})}}}}}}}};
  (void)client_->Delete(kQueueType, "", team);
  ASSERT_TRUE(Eventually([&] { return client_->Create(kQueueType, "", q).ok(); }, 10s));
  queues_.push_back(team);
  Json bad = q;
  bad["metadata"]["name"] = team + "-bad";
  bad["spec"]["resources"]["gpu"]["models"][0]["limit"] = 1;
  auto refused = client_->Create(kQueueType, "", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("spec.resources.gpu.models[0].limit: Invalid value"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("must not be below quota"), std::string::npos)
      << refused.status().message();
  bad["spec"]["resources"]["gpu"]["models"][0] = {{"name", "NVIDIA-A100-SXM4-80GB"}};
  refused = client_->Create(kQueueType, "", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("spec.resources.gpu.models[1]: Duplicate value"),
            std::string::npos)
      << refused.status().message();

  StartSim();
  StartChamberd("solo", {"--no-leader-elect"});
  Job("h", JobSpec(team, 2));
  ASSERT_TRUE(Eventually([&] { return Bound("h") == 2; }, 30s)) << Bound("h");
  for (const kube::Pod& p : JobPods("h")) EXPECT_EQ(p.node_name, ns_ + "-h100-0");
  Job("more", JobSpec(team, 1));
  ASSERT_TRUE(Eventually([&] { return Bound("more") == 1; }, 30s)) << Bound("more");
  for (const kube::Pod& p : JobPods("more")) EXPECT_EQ(p.node_name, ns_ + "-a100-0");

  Json status;
  ASSERT_TRUE(Eventually(
      [&] {
        auto got = client_->Get(kQueueType, "", team);
        if (!got.ok()) return false;
        status = got->value("status", Json::object());
        return StatusGpu(*got, "allocated") == 3 && status.contains("models");
      },
      20s))
      << status.dump();
  ASSERT_EQ(status["models"].size(), 2u) << status.dump();
  EXPECT_EQ(status["models"][0]["name"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(status["models"][0]["allocated"], 2);
  EXPECT_EQ(status["models"][0]["runningWorkloads"], 1);
  EXPECT_EQ(status["models"][1]["name"], "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(status["models"][1]["allocated"], 1);
  EXPECT_EQ(status["conditions"][0]["status"], "True") << status.dump();

  // Without its list the queue holds its work itself again, and its status lists no models.
  ASSERT_TRUE(client_
                  ->MergePatch(kQueueType, "", team,
                               {{"spec", {{"resources", {{"gpu", {{"models", nullptr}}}}}}}})
                  .ok());
  ASSERT_TRUE(Eventually(
      [&] {
        auto got = client_->Get(kQueueType, "", team);
        if (!got.ok()) return false;
        status = got->value("status", Json::object());
        return !status.contains("models") && StatusGpu(*got, "allocated") == 3;
      },
      20s))
      << status.dump();
}

TEST_F(ChamberdE2E, MigJobsTakeTheDevicesTheirNodeAdvertisesAndAReservedOnePreempts) {
  Nodes(1, 8, "plain");
  // One GPU in MIG mode (GPU feature discovery counts it), three 1g.10gb devices advertised.
  Nodes(1, 0, "mig", {}, {{"nvidia.com/gpu.count", "1"}}, {{"nvidia.com/mig-1g.10gb", "3"}});
  const std::string mig_node = ns_ + "-mig-0";
  StartSim();
  PriorityClass("chamber-e2e-elastic", 10);
  PriorityClass("chamber-e2e-reserved", 1000);
  Queue(ns_ + "-team", 2);
  StartChamberd("solo", {"--no-leader-elect"});
  Job("elastic", JobSpec(ns_ + "-team", 3)
                     .Mig("1g.10gb")
                     .Seconds(15)
                     .Priority("chamber-e2e-elastic")
                     .Grace("1"));
  ASSERT_TRUE(Eventually([&] { return Bound("elastic") == 3; }, 30s)) << Bound("elastic");
  for (const kube::Pod& p : JobPods("elastic")) EXPECT_EQ(p.node_name, mig_node) << p.metadata.name;
  ASSERT_TRUE(Eventually(
      [&] {
        auto q = client_->Get(kQueueType, "", ns_ + "-team");
        return q.ok() && q->value("/status/allocated/gpu"_json_pointer, Json()).dump() == "0.426";
      },
      10s))
      << "three 1g devices are charged 3 x 0.142 GPU";
  // The fleet view counts the node's GPU in MIG mode, its devices held by parts (no agent
  // reports the node: the GPU is named for it, each pod's device counted on it).
  httplib::Client api("127.0.0.1", ApiPort("solo"));
  Json node, gpu;
  ASSERT_TRUE(Eventually(
      [&] {
        auto nodes = api.Get("/api/v1/nodes");
        auto gpus = api.Get("/api/v1/gpus");
        if (!nodes || nodes->status != 200 || !gpus || gpus->status != 200) return false;
        const Json all_nodes = Json::parse(nodes->body), all_gpus = Json::parse(gpus->body);
        for (const Json& n : all_nodes["nodes"])
          if (n["name"] == mig_node) node = n;
        for (const Json& g : all_gpus["gpus"])
          if (g["node"] == mig_node) gpu = g;
        return node.is_object() && node["gpus"]["allocated"] == 0.426;
      },
      20s))
      << node.dump() << gpu.dump();
  EXPECT_EQ(node["gpus"]["capacity"], 1);
  EXPECT_EQ(node["gpus"]["mig"], 1);
  EXPECT_EQ(node["gpus"]["shared"], 0);
  EXPECT_EQ(gpu["uuid"], mig_node + "/mig-gpu0");
  EXPECT_EQ(gpu["mig"], true);
  ASSERT_EQ(gpu["shares"].size(), 3u) << gpu.dump();
  std::set<std::string> holders;
  for (const Json& sh : gpu["shares"]) {
    EXPECT_EQ(sh["mig_profile"], "1g.10gb");
    EXPECT_EQ(sh["gpu_fraction"], 0.142);
    EXPECT_EQ(sh["workload"], ns_ + "/elastic");
    holders.insert(sh["pod"].get<std::string>());
  }
  std::set<std::string> pods;
  for (const kube::Pod& p : JobPods("elastic")) pods.insert(p.metadata.Key());
  EXPECT_EQ(holders, pods);
  // The workload names its MIG devices, and `chamber why` reads them from here.
  Json elastic;
  std::string body;
  ASSERT_TRUE(Eventually(
      [&] {
        auto workloads = api.Get("/api/v1/workloads?queue=" + ns_ + "-team");
        if (!workloads || workloads->status != 200) return false;
        body = workloads->body;
        const Json all = Json::parse(body);
        for (const Json& w : all["workloads"])
          if (w["name"] == ns_ + "/elastic") elastic = w;
        return elastic.is_object();
      },
      10s))
      << body;
  EXPECT_EQ(elastic["gpus"], 0.426) << elastic.dump();
  EXPECT_EQ(elastic["mig_devices"], Json::parse(R"({"1g.10gb": 3})")) << elastic.dump();

  Job("more", JobSpec(ns_ + "-team", 1).Mig("1g.10gb").Seconds(3).Priority("chamber-e2e-elastic"));
  std::string why;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const kube::Pod& p : JobPods("more"))
          for (const kube::Condition& c : p.conditions)
            if (c.type == "PodScheduled") why = c.message;
        return why.find("too few free MIG devices of the profile") != std::string::npos;
      },
      30s))
      << why;
  EXPECT_EQ(Bound("more"), 0);

  Job("reserved",
      JobSpec(ns_ + "-team", 2).Mig("1g.10gb").Seconds(3).Priority("chamber-e2e-reserved"));
  ASSERT_TRUE(Eventually([&] { return GetJob("elastic").suspend; }, 30s));
  ASSERT_TRUE(Eventually([&] { return Bound("reserved") == 2; }, 30s)) << Bound("reserved");
  for (const kube::Pod& p : JobPods("reserved")) {
    if (!p.node_name.empty()) {
      EXPECT_EQ(p.node_name, mig_node) << p.metadata.name;
    }
  }
  ASSERT_TRUE(Eventually([&] { return Complete("reserved"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return !GetJob("elastic").suspend; }, 30s));
  ASSERT_TRUE(Eventually([&] { return Complete("elastic") && Complete("more"); }, 60s));
  // No node ever held more of its devices than it advertises: at most three pods at once.
  const auto reasons = EventReasons("elastic");
  for (const char* want : {"Preempted", "Resumed", "Scheduled"})
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), want), reasons.end()) << want;
}

TEST_F(ChamberdE2E, ATeamBorrowsIdleQuotaAndTheOwnerReclaimsIt) {
  Nodes(1, 8);
  StartSim();
  const std::string a = ns_ + "-a", b = ns_ + "-b";
  Queue(a, 4);
  Queue(b, 4);
  StartChamberd("solo", {"--no-leader-elect"});
  Job("b1", JobSpec(b, 4).Seconds(6));
  Job("b2", JobSpec(b, 4).Seconds(6));
  ASSERT_TRUE(Eventually([&] { return Bound("b1") == 4 && Bound("b2") == 4; }, 30s))
      << "team b borrows team a's idle quota";
  ASSERT_TRUE(Eventually(
      [&] {
        auto q = client_->Get(kQueueType, "", b);
        return q.ok() && StatusGpu(*q, "borrowed") == 4 && StatusGpu(*q, "allocated") == 8;
      },
      10s));
  // The Valid condition's time is when it last changed, not when the status was last written.
  auto valid_since = [&] {
    auto q = client_->Get(kQueueType, "", b);
    if (!q.ok()) return std::string("unreadable");
    const Json status = q->value("status", Json::object());
    for (const Json& c : status.value("conditions", Json::array()))
      if (c.value("type", "") == "Valid" && c.value("status", "") == "True")
        return c.value("lastTransitionTime", std::string("missing"));
    return std::string("no Valid=True condition");
  };
  const std::string since = valid_since();
  ASSERT_TRUE(ParseRfc3339(since).ok()) << since;

  Job("a1", JobSpec(a, 4).Seconds(3));
  // Team a takes its quota back: one of b's Jobs is suspended, a1 runs.
  ASSERT_TRUE(Eventually([&] { return Bound("a1") == 4; }, 30s));
  const bool b1_suspended = GetJob("b1").suspend, b2_suspended = GetJob("b2").suspend;
  EXPECT_NE(b1_suspended, b2_suspended) << "exactly one of team b's Jobs gives way";
  EXPECT_TRUE(Eventually(
      [&] {
        auto q = client_->Get(kQueueType, "", b);
        return q.ok() && StatusGpu(*q, "borrowed") == 0;
      },
      10s));
  EXPECT_EQ(valid_since(), since) << "the status changed, the condition did not";
  ExpectNoDoubleBooking(8);
  ASSERT_TRUE(Eventually([&] { return Complete("a1"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return Complete("b1") && Complete("b2"); }, 60s))
      << "the reclaimed Job resumes once team a is done";
}

// A preemptor waiting for its victims' checkpoint grace is told where it will run: its pods'
// status.nominatedNodeName names the node whose room chamberd holds for it (fairness.md,
// promise 10), as kube-scheduler does for its own preemptors.
TEST_F(ChamberdE2E, APreemptorWaitingForItsVictimsIsNominatedToTheirNode) {
  Nodes(2, 4);
  StartSim();
  const std::string a = ns_ + "-a", b = ns_ + "-b";
  Queue(a, 4);
  Queue(b, 0);
  StartChamberd("solo", {"--no-leader-elect"});
  // b borrows a whole node and half of the other; a then needs a whole node back. Either b job
  // alone frees a node, so the victim is the one that loses less work: b2, with half the GPUs
  // and started two seconds later (pod times have whole seconds, so less would not be certain).
  Job("b1", JobSpec(b, 4).Grace("4"));
  ASSERT_TRUE(Eventually([&] { return Bound("b1") == 4; }, 30s));
  std::this_thread::sleep_for(2s);
  Job("b2", JobSpec(b, 2).Grace("4"));
  ASSERT_TRUE(Eventually([&] { return Bound("b2") == 2; }, 30s));
  std::string b2_node;
  for (const kube::Pod& p : JobPods("b2")) b2_node = p.node_name;
  Job("a1", JobSpec(a, 4).Seconds(2));
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<kube::Pod> pods = JobPods("a1");
        seen.clear();
        int nominated = 0;
        for (const kube::Pod& p : pods) {
          seen += p.metadata.name + "->" + p.nominated_node_name + " ";
          if (p.node_name.empty() && p.nominated_node_name == b2_node) ++nominated;
        }
        return nominated == 4;
      },
      20s))
      << seen << "(b2 on " << b2_node << ")";
  EXPECT_TRUE(GetJob("b2").suspend || Bound("b2") == 2) << "b2 is the victim";
  EXPECT_FALSE(GetJob("b1").suspend);
  ASSERT_TRUE(Eventually([&] { return Bound("a1") == 4; }, 30s));
  for (const kube::Pod& p : JobPods("a1")) EXPECT_EQ(p.node_name, b2_node) << p.metadata.name;
  ExpectNoDoubleBooking(4);
}

TEST_F(ChamberdE2E, TheLeaderIsKilledMidCycleAndNothingIsLostOrBoundTwice) {
  Nodes(16, 8);
  StartSim();
  Queue(ns_ + "-team", 128);
  const std::vector<std::string> le = {"--lease-duration", "3",   "--renew-deadline", "2",
                                       "--retry-period",   "0.5", "--kube-api-qps",   "25",
                                       "--kube-api-burst", "5",   "--writers",        "2"};
  StartChamberd("first", le);
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "first"; }, 20s));
  StartChamberd("second", le);
  for (int j = 0; j < 12; ++j) Job("job-" + std::to_string(j), JobSpec(ns_ + "-team", 10));
  auto bound_total = [&] {
    int n = 0;
    for (int j = 0; j < 12; ++j) n += Bound("job-" + std::to_string(j));
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return bound_total() >= 10; }, 30s));
  const int before = bound_total();
  Stop(chamberd_["first"], SIGKILL);
  EXPECT_LT(before, 120) << "the leader was killed before it finished";

  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "second"; }, 20s));
  ASSERT_TRUE(Eventually([&] { return bound_total() == 120; }, 60s)) << bound_total();
  ExpectNoDoubleBooking(8);
  for (int j = 0; j < 12; ++j) EXPECT_EQ(JobPods("job-" + std::to_string(j)).size(), 10u);
}

// With fairShare.usageHalfLife set, each queue's decayed GPU-hours go to its status, and each
// GPU model's to its entry of status.models[]; the next leader continues from them rather than
// from zero.
TEST_F(ChamberdE2E, DecayedUsageSurvivesALeaderChange) {
  std::ofstream(dir_ / "config.yaml", std::ios::app) << "fairShare: {usageHalfLife: 1h}\n";
  Nodes(1, 8);
  Nodes(1, 8, "h100", {}, {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}});
  StartSim();
  const std::string team = ns_ + "-team", speech = ns_ + "-speech";
  Queue(team, 8);
  Json q = {
      {"apiVersion", "chamber.io/v1alpha1"},
      {"kind", "Queue"},
      {"metadata", {{"name", speech}}},
      {"spec",
       {{"resources",
         {{"gpu",
           {{"models", Json::array({{{"name", "NVIDIA-H100-80GB-HBM3"}, {"quota", 8}}})}}}}}}}};
  (void)client_->Delete(kQueueType, "", speech);
  ASSERT_TRUE(Eventually([&] { return client_->Create(kQueueType, "", q).ok(); }, 10s));
  queues_.push_back(speech);
  const std::vector<std::string> flags = {
      "--lease-duration", "3",   "--renew-deadline",           "2",
      "--retry-period",   "0.5", "--queue-usage-write-period", "1"};
  StartChamberd("first", flags);
  // The H100 queue's Job first, so that the other one takes the plain node.
  Job("asr", JobSpec(speech, 1).Gpus(8));
  ASSERT_TRUE(Eventually([&] { return Bound("asr") == 1; }, 30s));
  Job("train", JobSpec(team, 1).Gpus(8));
  // The queue's figure, or its GPU model's (`model` not empty).
  auto usage = [&](const std::string& queue,
                   const std::string& model = "") -> std::pair<double, std::string> {
    auto got = client_->Get(kQueueType, "", queue);
    if (!got.ok() || !got->contains("status")) return {};
    const Json* holder = &(*got)["status"];
    if (!model.empty()) {
      holder = nullptr;
      const Json& status = (*got)["status"];
      if (status.contains("models") && status["models"].is_array())
        for (const Json& m : status["models"])
          if (m.value("name", "") == model) holder = &m;
      if (holder == nullptr) return {};
    }
    if (!holder->contains("decayedUsage")) return {};
    const Json& u = (*holder)["decayedUsage"];
    return {u.value("gpuHours", 0.0), u.value("time", "")};
  };
  const std::string h100 = "NVIDIA-H100-80GB-HBM3";
  // 8 GPUs for 5 s: 0.011 GPU-hours (a one-hour half-life takes off a thousandth of that).
  std::pair<double, std::string> first, first_model;
  ASSERT_TRUE(Eventually(
      [&] {
        first = usage(team);
        first_model = usage(speech, h100);
        return first.first >= 0.011 && first_model.first >= 0.011;
      },
      40s))
      << first.first << " " << first_model.first;
  EXPECT_LE(first.first, 8.0 * 40 / 3600);
  EXPECT_LE(first_model.first, 8.0 * 80 / 3600);
  Stop(chamberd_["first"], SIGKILL);
  StartChamberd("second", flags);
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "second"; }, 20s));
  // The second leader's first figures carry on from the first's (8 GPUs were held throughout
  // by each queue): a fresh start would write about 0.
  std::pair<double, std::string> second, second_model;
  ASSERT_TRUE(Eventually(
      [&] {
        second = usage(team);
        second_model = usage(speech, h100);
        return second.second > first.second && second_model.second > first_model.second;
      },
      20s));
  EXPECT_GE(second.first, first.first) << first.second << " -> " << second.second;
  EXPECT_GE(second_model.first, first_model.first)
      << first_model.second << " -> " << second_model.second;
  EXPECT_EQ(Bound("train"), 1);
  EXPECT_EQ(Bound("asr"), 1);
}

// The API answers Kubernetes tokens through TokenReview: a service account in an admin group
// may read and cordon, one in no Chamber group and a made-up token may not.
// Also: the fleet's pools and prices come from the config file's `pricing:` section and the
// nodes' labels (SetUp's config: spot H100s 1.5 EUR, everything else 4 EUR per GPU-hour).
TEST_F(ChamberdE2E, ApiTokensAreCheckedThroughTokenReviewAndCostsArePriced) {
  Nodes(1, 8);
  Nodes(2, 8, "spot", {}, {{"karpenter.sh/capacity-type", "spot"}});
  const std::string stranger_name = ns_ + "-stranger";
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kServiceAccounts, ns_,
                           {{"metadata", {{"name", "ops"}, {"namespace", ns_}}}})
                  .ok());
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kServiceAccounts, "default",
                           {{"metadata", {{"name", stranger_name}, {"namespace", "default"}}}})
                  .ok());
  // Service accounts of the test's namespace are admins; those elsewhere are in no group.
  StartChamberd("solo", {"--no-leader-elect", "--admin-group", "system:serviceaccounts:" + ns_},
                false);
  const int port = ApiPort("solo");
  ASSERT_GT(port, 0);
  const std::string ops = client_->CreateToken(ns_, "ops").value();
  const std::string stranger = client_->CreateToken("default", stranger_name).value();
  std::string body;
  auto get = [&](const std::string& token, const std::string& path) {
    httplib::Client http("127.0.0.1", port);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto res = http.Get(path, headers);
    body = res ? res->body : "";
    return res ? res->status : -1;
  };
  ASSERT_TRUE(Eventually([&] { return get(ops, "/api/v1/fleet") == 200; }, 20s))
      << get(ops, "/api/v1/fleet");
  EXPECT_EQ(get("", "/api/v1/fleet"), 401);
  EXPECT_EQ(get("not-a-token", "/api/v1/fleet"), 401);
  EXPECT_EQ(get(stranger, "/api/v1/fleet"), 401) << "authenticated, but in no Chamber group";
  EXPECT_EQ(get("", "/healthz"), 200);
  (void)client_->Delete(kube::resources::kServiceAccounts, "default", stranger_name);

  // 8 on-demand GPUs at 4 and 16 spot GPUs at 1.5: 56 EUR an hour, all of it idle.
  Json cost;
  EXPECT_TRUE(Eventually(
      [&] {
        if (get(ops, "/api/v1/cost") != 200) return false;
        cost = Json::parse(body, nullptr, false);
        return cost.is_object() && cost.value("per_hour", 0.0) == 56.0;
      },
      20s))
      << body;
  EXPECT_EQ(cost.value("currency", ""), "EUR");
  EXPECT_DOUBLE_EQ(cost.value("idle_per_hour", 0.0), 56.0);
  std::map<std::string, std::tuple<std::string, double, double>> pools;
  for (const Json& p : cost.value("pools", Json::array()))
    pools[p.value("name", "")] = {p.value("pricing", ""), p.value("price_per_gpu_hour", 0.0),
                                  p.value("per_hour", 0.0)};
  using Pool = std::tuple<std::string, double, double>;
  EXPECT_EQ(pools.size(), 2u) << cost.dump();
  EXPECT_EQ(pools["NVIDIA-H100-80GB-HBM3/on-demand"], Pool("on-demand", 4.0, 32.0));
  EXPECT_EQ(pools["NVIDIA-H100-80GB-HBM3/spot"], Pool("spot", 1.5, 24.0));
}

// `chamber why` on a pod of the cluster: the CLI asks chamberd, which finds the Job the pod
// belongs to and says why it waits.
TEST_F(ChamberdE2E, ChamberWhyExplainsAPendingPodOfTheCluster) {
  Nodes(1, 8);
  StartSim();
  Queue(ns_ + "-team", 16);
  StartChamberd("solo", {"--no-leader-elect"});
  const int port = ApiPort("solo");
  ASSERT_GT(port, 0);
  const std::string server = "http://127.0.0.1:" + std::to_string(port);
  Job("wide", JobSpec(ns_ + "-team", 12));  // 12 GPUs on one 8-GPU node: it never fits
  // While the Job controller creates its pods the gang waits for them (WaitingForPods); once
  // all 12 exist it waits for room.
  std::string pod;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const kube::Pod& p : JobPods("wide"))
          for (const kube::Condition& c : p.conditions)
            if (c.type == "PodScheduled" && c.status == "False" && c.reason == "Unschedulable")
              pod = p.metadata.name;
        return !pod.empty();
      },
      30s));

  // The API answers from the last cycle's state, which may not have the pod yet.
  int code = -1;
  std::string text;
  Eventually(
      [&] {
        std::tie(code, text) = RunChamber({"why", ns_ + "/" + pod, "--server", server});
        return code == 0 && text.find("NoNodeFits") != std::string::npos;
      },
      10s);
  ASSERT_EQ(code, 0) << text;
  const std::string first = "Pod " + ns_ + "/" + pod + " belongs to workload " + ns_ + "/wide.\n" +
                            ns_ + "/wide is pending in queue " + ns_ +
                            "-team (position 1 of 1): NoNodeFits";
  EXPECT_EQ(text.rfind(first, 0), 0u) << text;
  EXPECT_NE(text.find("It asks for 12 GPUs"), std::string::npos) << text;

  const auto [json_code, json_text] =
      RunChamber({"why", ns_ + "/" + pod, "--server", server, "-o", "json"});
  ASSERT_EQ(json_code, 0) << json_text;
  const Json detail = Json::parse(json_text, nullptr, false);
  ASSERT_TRUE(detail.is_object()) << json_text;
  EXPECT_EQ(detail["workload"].value("name", ""), ns_ + "/wide");
  EXPECT_EQ(detail["workload"].value("state", ""), "pending");
  EXPECT_EQ(detail["workload"].value("gpus", 0), 12);

  const auto [missing_code, missing] =
      RunChamber({"why", ns_ + "/no-such-pod", "--server", server});
  EXPECT_NE(missing_code, 0);
  EXPECT_NE(missing.find("no workload or pod named \"" + ns_ + "/no-such-pod\""), std::string::npos)
      << missing;
}

// Two replicas, each with a history file of its own; the standby copies the leader's history
// through the stand-in for the chart's Service. The leader is killed: the new leader serves
// every point the old one had, and new points after its takeover, with nothing counted twice.
// Then the killed replica restarts on its own file, copies what it missed, and takes over when
// the leader stops: its history holds its own points, the other leader's, and new ones.
TEST_F(ChamberdE2E, HistoryContinuesAcrossALeaderKillAndARestart) {
  Nodes(2, 8);
  const std::vector<std::string> names = {"replica-a", "replica-b"};
  for (const std::string& n : names) ReplicaPod(n);
  LeaderService service(client_.get(), ns_,
                        [this](const std::string& n) { return LoggedApiPort(n); });
  auto flags = [&](const std::string& name) {
    return std::vector<std::string>{"--pod-name",
                                    name,
                                    "--pod-namespace",
                                    ns_,
                                    "--data-dir",
                                    (dir_ / ("data-" + name)).string(),
                                    "--history-step",
                                    "1",
                                    "--history-follow-url",
                                    service.url(),
                                    "--history-follow-period",
                                    "0.3",
                                    "--lease-duration",
                                    "3",
                                    "--renew-deadline",
                                    "2",
                                    "--retry-period",
                                    "0.5"};
  };
  using Series = std::map<int64_t, double>;
  // A series as the API behind the Service serves it; empty when it does not answer.
  auto series = [&](const std::string& metric) {
    httplib::Client http("127.0.0.1", service.port());
    http.set_read_timeout(5);
    auto r = http.Get("/api/v1/history?metric=" + metric +
                      "&scope=cluster&from=0&to=" + std::to_string(std::time(nullptr) + 60));
    Series out;
    if (!r || r->status != 200) return out;
    const Json j = Json::parse(r->body, nullptr, false);
    if (!j.is_object() || j.value("step", 0) != 1) return out;
    for (const Json& p : j["points"]) out[p[0].get<int64_t>()] = p[1].get<double>();
    return out;
  };
  // The points of `a` (all but the last `but_last`, and those older than `before`) missing from
  // `b`, or different there outside [same_from, same_to] (a bucket the leader was filling when
  // it died may hold more samples on its own file than on the copy).
  auto missing = [](const Series& a, const Series& b, size_t but_last, int64_t before,
                    int64_t same_from = 1, int64_t same_to = 0) {
    std::vector<std::string> out;
    size_t i = 0;
    for (const auto& [t, v] : a) {
      if (++i + but_last > a.size() || t >= before) break;
      auto it = b.find(t);
      if (it == b.end())
        out.push_back(std::to_string(t) + " missing");
      else if (it->second != v && (t < same_from || t > same_to))
        out.push_back(std::to_string(t) + ": " + std::to_string(v) + " became " +
                      std::to_string(it->second));
    }
    return out;
  };
  auto unix_now = [] { return static_cast<int64_t>(std::time(nullptr)); };

  StartChamberd("replica-a", flags("replica-a"));
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "replica-a"; }, 30s));
  // A standby is not ready until it has copied the leader's history once: while the Service
  // answers nothing, replica-b says so; then it copies and is ready.
  service.SetDown(true);
  StartChamberd("replica-b", flags("replica-b"));
  auto readyz = [&](const std::string& name) {
    std::ifstream log(dir_ / (name + ".log"));
    std::string line;
    int port = 0;
    const std::string marker = "serving /healthz and /readyz on 127.0.0.1:";
    while (std::getline(log, line))
      if (const size_t at = line.find(marker); at != std::string::npos)
        port = std::stoi(line.substr(at + marker.size()));
    if (port == 0) return std::string("no port yet");
    httplib::Client http("127.0.0.1", port);
    auto r = http.Get("/readyz");
    return r ? std::to_string(r->status) + " " + r->body : std::string("no answer");
  };
  ASSERT_TRUE(Eventually([&] { return readyz("replica-b").rfind("503 ", 0) == 0; }, 20s))
      << readyz("replica-b");
  std::this_thread::sleep_for(1s);  // three failed copies
  EXPECT_EQ(readyz("replica-b"), "503 starting: copying the leader's history\n");
  service.SetDown(false);
  ASSERT_TRUE(Eventually(
      [&] { return readyz("replica-b") == "200 ok: standby: leader is replica-a\n"; }, 10s))
      << readyz("replica-b");
  // Eight seconds of history, the standby following.
  Series s_cap, s_cycle;
  ASSERT_TRUE(Eventually([&] { return (s_cap = series("gpus_capacity")).size() >= 8; }, 60s))
      << s_cap.size();
  s_cycle = series("cycle_ms");
  for (const auto& [t, v] : s_cap) EXPECT_EQ(v, 16) << t;
  std::this_thread::sleep_for(1500ms);  // five copies
  const Series before_kill = series("cycle_ms");
  const int64_t killed_at = unix_now();
  Stop(chamberd_["replica-a"], SIGKILL);

  // replica-b takes over and writes on into its copy.
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "replica-b"; }, 30s));
  Series t_cap;
  ASSERT_TRUE(Eventually(
      [&] {
        t_cap = series("gpus_capacity");
        return !t_cap.empty() && t_cap.rbegin()->first >= killed_at + 3;
      },
      30s));
  const int64_t served_at = unix_now();
  const Series t_cycle = series("cycle_ms");
  // Every point the old leader served is there, as it was (its last one may have grown since).
  EXPECT_EQ(missing(s_cap, t_cap, 1, INT64_MAX), std::vector<std::string>{});
  EXPECT_EQ(missing(s_cycle, t_cycle, 1, INT64_MAX), std::vector<std::string>{});
  // ... and so is every point up to the last copies before the kill.
  EXPECT_EQ(missing(before_kill, t_cycle, 0, killed_at - 3), std::vector<std::string>{});
  // The only gap is the failover's: from the old leader's last copied point to the new one's
  // first; new points follow.
  // (Gaps of a few seconds elsewhere are cycles a loaded machine delayed.)
  int64_t prev = t_cap.begin()->first;
  for (const auto& [t, v] : t_cap) {
    EXPECT_EQ(v, 16) << t;
    if (t - prev > 4) {
      EXPECT_LE(prev, killed_at + 1) << "a gap of " << t - prev << " s at " << prev;
      EXPECT_GE(t, killed_at) << "a gap of " << t - prev << " s at " << prev;
    }
    prev = t;
  }
  EXPECT_GE(t_cap.rbegin()->first, killed_at + 3);
  std::printf("history e2e: kill at %lld, the new leader served new points %lld s later\n",
              static_cast<long long>(killed_at), static_cast<long long>(served_at - killed_at));

  // replica-a restarts on its own file as a standby and copies what it missed; then
  // replica-b stops as the kubelet stops it, and replica-a leads.
  const auto log_size = std::filesystem::file_size(dir_ / "replica-a.log");
  StartChamberd("replica-a", flags("replica-a"));
  auto rounds_since_restart = [&] {
    std::ifstream log(dir_ / "replica-a.log");
    log.seekg(static_cast<std::streamoff>(log_size));
    std::string line;
    int rounds = 0;
    while (std::getline(log, line)) {
      const size_t at = line.find(" rows copied from the leader in ");
      if (at != std::string::npos) rounds = std::stoi(line.substr(at + 32));
    }
    return rounds;
  };
  ASSERT_TRUE(Eventually([&] { return rounds_since_restart() >= 3; }, 30s))
      << rounds_since_restart();
  const Series b_cycle = series("cycle_ms");
  const int64_t stopped_at = unix_now();
  Stop(chamberd_["replica-b"], SIGTERM);
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "replica-a"; }, 30s));
  Series v_cap;
  ASSERT_TRUE(Eventually(
      [&] {
        v_cap = series("gpus_capacity");
        return !v_cap.empty() && v_cap.rbegin()->first >= stopped_at + 2;
      },
      30s));
  const Series v_cycle = series("cycle_ms");
  // Its own points from before the kill, replica-b's while it led, and new ones.
  EXPECT_EQ(missing(s_cycle, v_cycle, 1, INT64_MAX), std::vector<std::string>{});
  EXPECT_EQ(missing(b_cycle, v_cycle, 1, INT64_MAX, killed_at - 3, killed_at + 1),
            std::vector<std::string>{});
  EXPECT_EQ(v_cap.begin()->first, s_cap.begin()->first);
  prev = v_cap.begin()->first;
  for (const auto& [t, v] : v_cap) {
    EXPECT_EQ(v, 16) << t;
    if (t - prev > 4) {
      // The kill's failover, or the stop's (the stopping leader hands the Lease over at once).
      const bool kill_gap = prev <= killed_at + 1 && t >= killed_at;
      const bool stop_gap = prev <= stopped_at + 1 && t >= stopped_at;
      EXPECT_TRUE(kill_gap || stop_gap) << "a gap of " << t - prev << " s at " << prev;
    }
    prev = t;
  }
}

}  // namespace
}  // namespace chamber::chamberd
