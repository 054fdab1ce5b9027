// The fixture of chamberd's end-to-end tests on the control plane: fake GPU nodes and the pod
// lifecycle simulator (src/kubesim) standing in for kubelets, Queues, PriorityClasses and Jobs,
// chamberd replicas started from CHAMBERD_BINARY with their logs in the test's directory, and
// what the tests check about them. A test's SetUp writes `config.yaml` in dir_ for chamberd.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "backend/kube/snapshot_builder.h"
#include "chamberd/test/cluster_fixture.h"
#include "chamberd/test/e2e_support.h"
#include "common/gpu_share_ask.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kubesim/nodes.h"
#include "kubesim/simulator.h"

namespace chamber::chamberd::e2e {

inline const kube::ResourceType kQueueType = backend::kQueues;

class ChamberdCluster : public ClusterTest {
 protected:
  using Json = kube::Json;

  void TearDown() override {
    for (auto& [name, pid] : chamberd_) Stop(pid, SIGKILL);
    if (HasFailure())
      for (const auto& [name, pid] : chamberd_) {
        std::ifstream log(dir_ / (name + ".log"));
        std::cerr << "---- chamberd " << name << " log ----\n" << log.rdbuf() << "\n";
      }
    if (sim_) sim_->Stop();
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    (void)client_->Delete(kube::resources::kPods, ns_, "", now);
    (void)client_->Delete(kube::resources::kNamespaces, "", ns_);
    for (const std::string& q : queues_) (void)client_->Delete(kQueueType, "", q);
    for (const std::string& pc : priority_classes_)
      (void)client_->Delete(kube::resources::kPriorityClasses, "", pc);
    (void)kubesim::DeleteFakeNodes(*client_);
    std::filesystem::remove_all(dir_);
  }

  void Nodes(int count, int gpus, const std::string& prefix = "gpu",
             std::vector<kube::Taint> taints = {}, std::map<std::string, std::string> labels = {},
             std::map<std::string, std::string> resources = {}) {
    kubesim::NodePoolSpec spec;
    spec.resources = std::move(resources);
    spec.count = count;
    spec.gpus = gpus;
    spec.prefix = ns_ + "-" + prefix;
    spec.taints = std::move(taints);
    spec.labels = std::move(labels);
    auto created = kubesim::CreateFakeNodes(*client_, spec);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }

  void StartSim() {
    sim_ = std::make_unique<kubesim::Simulator>(client_.get());
    ASSERT_TRUE(sim_->Start().ok());
  }

  void Queue(const std::string& name, int quota, int limit = -1) {
    Json q = {{"apiVersion", "chamber.io/v1alpha1"},
              {"kind", "Queue"},
              {"metadata", {{"name", name}}},
              {"spec", {{"resources", {{"gpu", {{"quota", quota}, {"limit", limit}}}}}}}};
    (void)client_->Delete(kQueueType, "", name);
    ASSERT_TRUE(Eventually([&] { return client_->Create(kQueueType, "", q).ok(); },
                           std::chrono::seconds(10)));
    queues_.push_back(name);
  }

  void PriorityClass(const std::string& name, int value) {
    Json pc = {{"apiVersion", "scheduling.k8s.io/v1"},
               {"kind", "PriorityClass"},
               {"metadata", {{"name", name}}},
               {"value", value}};
    auto r = client_->Create(kube::resources::kPriorityClasses, "", pc);
    ASSERT_TRUE(r.ok() || kube::IsAlreadyExists(r.status())) << r.status().ToString();
    priority_classes_.push_back(name);
    // The API server's Priority admission plugin reads classes from a cache of its own, which
    // may not hold a new one yet: wait until a pod naming it is admitted (a probe no scheduler
    // takes, deleted at once).
    const Json probe = {{"metadata", {{"name", "pc-probe-" + name}}},
                        {"spec",
                         {{"schedulerName", "chamber-test-none"},
                          {"priorityClassName", name},
                          {"containers", Json::array({{{"name", "main"}, {"image", "pause"}}})}}}};
    ASSERT_TRUE(Eventually(
        [&] {
          if (!client_->Create(kube::resources::kPods, ns_, probe).ok()) return false;
          kube::DeleteOptions now;
          now.grace_period_seconds = 0;
          (void)client_->Delete(kube::resources::kPods, ns_, "pc-probe-" + name, now);
          return true;
        },
        std::chrono::seconds(10)))
        << "PriorityClass " << name << " was never admitted";
  }

  struct JobSpec {
    std::string queue;
    int pods = 1;
    int gpus = 1;
    double seconds = 0;  // 0: runs until deleted
    std::string priority_class;
    Json tolerations;
    std::string grace;      // chamber.io/checkpoint-grace-seconds
    int backoff_limit = 0;  // spec.backoffLimit
    Json scheduling;        // spec.scheduling (Kubernetes 1.37, WorkloadWithJob)
    std::string mig;        // a MIG profile: its pods ask for `gpus` devices of it, no GPU

    JobSpec(std::string q, int n) : queue(std::move(q)), pods(n) {}
    JobSpec& Scheduling(Json v) { return scheduling = std::move(v), *this; }
    JobSpec& Seconds(double v) { return seconds = v, *this; }
    JobSpec& Gpus(int v) { return gpus = v, *this; }
    JobSpec& Priority(std::string v) { return priority_class = std::move(v), *this; }
    JobSpec& Tolerate(Json v) { return tolerations = std::move(v), *this; }
    JobSpec& Grace(std::string v) { return grace = std::move(v), *this; }
    JobSpec& BackoffLimit(int v) { return backoff_limit = v, *this; }
    JobSpec& Mig(std::string profile) { return mig = std::move(profile), *this; }
  };

  void Job(const std::string& name, const JobSpec& s) {
    Json container = {{"name", "main"},
                      {"image", "trainer:latest"},
                      {"resources",
                       {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", s.gpus}}},
                        {"limits", {{"nvidia.com/gpu", s.gpus}}}}}};
    if (!s.mig.empty()) {
      const std::string mig = "nvidia.com/mig-" + s.mig;
      container["resources"] = {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {mig, s.gpus}}},
                                {"limits", {{mig, s.gpus}}}};
    }
    Json pod = {{"schedulerName", "chamber"},
                {"restartPolicy", "Never"},
                {"terminationGracePeriodSeconds", 5},
                {"containers", Json::array({container})}};
    if (!s.priority_class.empty()) pod["priorityClassName"] = s.priority_class;
    if (!s.tolerations.is_null()) pod["tolerations"] = s.tolerations;
    Json annotations = Json::object();
    if (s.seconds > 0) annotations["chamber.io/sim-duration-seconds"] = std::to_string(s.seconds);
    Json job = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata",
                 {{"name", name}, {"namespace", ns_}, {"labels", {{"chamber.io/queue", s.queue}}}}},
                {"spec",
                 {{"parallelism", s.pods},
                  {"completions", s.pods},
                  {"backoffLimit", s.backoff_limit},
                  {"template", {{"metadata", {{"annotations", annotations}}}, {"spec", pod}}}}}};
    if (!s.grace.empty())
      job["metadata"]["annotations"] = {{"chamber.io/checkpoint-grace-seconds", s.grace}};
    if (!s.scheduling.is_null()) job["spec"]["scheduling"] = s.scheduling;
    auto r = client_->Create(kube::resources::kJobs, ns_, job);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // A Queue's status.<field>.gpu; 0 while chamberd has not written it (a status may come
  // without every field).
  static int64_t StatusGpu(const Json& queue, const std::string& field) {
    const Json::json_pointer at("/status/" + field + "/gpu");
    return queue.contains(at) && queue[at].is_number() ? queue[at].get<int64_t>() : 0;
  }

  // Pods of `job` on a node and not being deleted.
  int Bound(const std::string& job) {
    int n = 0;
    for (const kube::Pod& p : JobPods(job))
      if (!p.node_name.empty() && p.metadata.deletion_timestamp.empty() && p.phase != "Failed") ++n;
    return n;
  }

  kube::Job GetJob(const std::string& name) {
    return kube::Job::FromJson(client_->Get(kube::resources::kJobs, ns_, name).value()).value();
  }

  bool Complete(const std::string& job) {
    for (const kube::Condition& c : GetJob(job).conditions)
      if (c.type == "Complete" && c.status == "True") return true;
    return false;
  }

  std::vector<std::string> EventReasons(const std::string& name) {
    std::vector<std::string> out;
    kube::ListOptions o;
    o.field_selector = "involvedObject.name=" + name;
    auto list = client_->List(kube::resources::kEvents, ns_, o);
    if (list.ok())
      for (const Json& e : list->items) out.push_back(e.value("reason", ""));
    return out;
  }

  // No GPU slot of any node is held by two live pods, and every slot exists: a slot held whole
  // holds nothing else, and the shares of one slot (chamber.io/gpu-fraction) add up to at most
  // one GPU. Over the pods of `namespaces` (none: the test's).
  void ExpectNoDoubleBooking(int gpus_per_node, std::vector<std::string> namespaces = {}) {
    if (namespaces.empty()) namespaces.push_back(ns_);
    struct Slot {
      std::string whole;   // the pod holding it whole
      int64_t shared = 0;  // thousandths its shares hold
    };
    std::map<std::pair<std::string, int>, Slot> held;
    for (const std::string& ns : namespaces) {
      auto list = client_->List(kube::resources::kPods, ns);
      ASSERT_TRUE(list.ok());
      for (Json& j : list->items) {
        kube::Pod p = kube::Pod::FromJson(std::move(j)).value();
        if (p.node_name.empty() || p.phase == "Succeeded" || p.phase == "Failed") continue;
        auto it = p.metadata.annotations.find(backend::keys::kGpuIndices);
        ASSERT_NE(it, p.metadata.annotations.end())
            << p.metadata.Key() << " was bound without slots";
        Result<std::vector<int>> slots = backend::ParseIndexList(it->second);
        ASSERT_TRUE(slots.ok()) << p.metadata.Key() << ": " << slots.status().message();
        Result<gpu_share::Ask> ask =
            gpu_share::ReadAsk(p.metadata.annotations, p.Request("nvidia.com/gpu"));
        ASSERT_TRUE(ask.ok()) << p.metadata.Key() << ": " << ask.status().message();
        if (ask->asked()) {
          ASSERT_EQ(slots->size(), 1u) << p.metadata.Key() << " shares more than one GPU";
        }
        for (int g : *slots) {
          EXPECT_LT(g, gpus_per_node) << p.metadata.Key();
          Slot& slot = held[{p.node_name, g}];
          if (ask->asked()) {
            slot.shared += ask->gpu_milli;
            EXPECT_LE(slot.shared, 1000)
                << "GPU " << g << " of " << p.node_name << " is shared beyond its compute ("
                << p.metadata.Key() << ")";
          }
          EXPECT_TRUE(slot.whole.empty() && (ask->asked() || slot.shared == 0))
              << "GPU " << g << " of " << p.node_name << " is held twice (" << p.metadata.Key()
              << (slot.whole.empty() ? "" : ", " + slot.whole) << ")";
          if (!ask->asked()) slot.whole = p.metadata.Key();
        }
      }
    }
  }

  // Without `anonymous`, the API wants tokens.
  pid_t StartChamberd(const std::string& name, std::vector<std::string> extra = {},
                      bool anonymous = true) {
    std::vector<std::string> args = {CHAMBERD_BINARY,
                                     "--kubeconfig",
                                     chamberd_kubeconfig_.empty()
                                         ? std::getenv("CHAMBER_TEST_KUBECONFIG")
                                         : chamberd_kubeconfig_,
                                     "--config",
                                     (dir_ / "config.yaml").string(),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--health-listen",
                                     "127.0.0.1:0",
                                     "--identity",
                                     name,
                                     "--lease-namespace",
                                     ns_,
                                     "--log-level",
                                     "debug"};
    if (anonymous) args.push_back("--anonymous");
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t pid = e2e::SpawnLogged(args, (dir_ / (name + ".log")).string());
    EXPECT_GT(pid, 0);
    chamberd_[name] = pid;
    return pid;
  }

  // The API port a chamberd started with StartChamberd serves on, once its log names it; 0 if
  // it does not within 30 s.
  int ApiPort(const std::string& name) {
    int port = 0;
    Eventually([&] { return (port = LoggedApiPort(name)) > 0; }, std::chrono::seconds(30));
    return port;
  }

  // The API port the log of `name` names last (a restarted replica appends to its log); 0 when
  // none yet.
  int LoggedApiPort(const std::string& name) {
    std::ifstream log(dir_ / (name + ".log"));
    std::string line;
    int port = 0;
    while (std::getline(log, line)) {
      // "serving the API and dashboard on http://127.0.0.1:<port>" (https with TLS).
      if (line.find("serving the API and dashboard on http") != std::string::npos &&
          line.find("://127.0.0.1:") != std::string::npos)
        port = std::stoi(line.substr(line.rfind(':') + 1));
    }
    return port;
  }

  // A pod standing for a replica (no kubelet runs here: nothing starts it).
  void ReplicaPod(const std::string& name) {
    Json pod = {{"metadata", {{"name", name}, {"labels", {{"app", "chamberd"}}}}},
                {"spec",
                 {{"schedulerName", "nobody"},
                  {"containers", {{{"name", "chamberd"}, {"image", "chamberd:test"}}}}}}};
    ASSERT_TRUE(client_->Create(kube::resources::kPods, ns_, pod).ok());
  }

  static void Stop(pid_t& pid, int sig) {
    if (pid <= 0) return;
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }

  std::string LeaseHolder() {
    auto lease = client_->Get(kube::resources::kLeases, ns_, "chamber-scheduler");
    if (!lease.ok()) return "";
    return (*lease)["spec"].value("holderIdentity", "");
  }

  std::unique_ptr<kubesim::Simulator> sim_;
  std::map<std::string, pid_t> chamberd_;
  // The kubeconfig chamberd replicas get; empty: the control plane's own.
  std::string chamberd_kubeconfig_;
  std::vector<std::string> queues_, priority_classes_;
};

}  // namespace chamber::chamberd::e2e
