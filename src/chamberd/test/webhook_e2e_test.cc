// The admission webhook end to end (docs/admission.md): chamberd serves it, the real
// kube-apiserver calls it through a MutatingWebhookConfiguration shaped like the chart's (an
// entry per opt-in route, failing closed only for opted-in objects), kube-controller-manager
// makes the Jobs' and Deployments' pods, and chamberd schedules the pods that opted in onto fake
// GPU nodes. The configuration selects only this test's namespaces, so that other tests on the
// same control plane never meet it.
#include <httplib.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "backend/kube/workload_kinds.h"
#include "chamberd/test/chamberd_fixture.h"
#include "chamberd/test/webhook_fixture.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;
using e2e::kWebhookConfigs;
using kube::Json;

const kube::ResourceType kDeployments{.group = "apps",
                                      .version = "v1",
                                      .plural = "deployments",
                                      .kind = "Deployment",
                                      .namespaced = true};

class WebhookE2E : public e2e::WithWebhook<e2e::ChamberdCluster> {
 protected:
  void SetUp() override {
    const std::string n = NewNamespace("wh-", "chamberd-webhook-");
    if (HasFailure()) return;
    ASSERT_TRUE(pki_.ok());
    std::ofstream(dir_ / "config.yaml") << "cyclePeriod: 300ms\n"
                                           "preemption:\n"
                                           "  minRuntime: 0s\n"
                                           "  checkpointGraceSeconds: 1\n";
    queue_ = "wh-q-" + n;
    Queue(queue_, 16);
    // The plain namespace and one whose default queue is queue_, both selected by this test's
    // webhook configuration through the label chamber-test/webhook.
    default_ns_ = ns_ + "-dq";
    SelectNamespace(ns_);
    if (HasFailure()) return;
    ASSERT_TRUE(
        client_
            ->Create(
                kube::resources::kNamespaces, "",
                {{"metadata",
                  {{"name", default_ns_},
                   {"labels", {{"chamber-test/webhook", ns_}, {"chamber.io/queue", queue_}}}}}})
            .ok());
    Nodes(2, 8);
    StartSim();
  }

  void TearDown() override {
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    (void)client_->Delete(kube::resources::kPods, default_ns_, "", now);
    (void)client_->Delete(kube::resources::kNamespaces, "", default_ns_);
    WithWebhook::TearDown();
  }

  // A pod asking for one GPU; `scheduler` empty: none named (the API server fills in
  // default-scheduler).
  Json BarePod(const std::string& name, Json labels = Json::object(),
               const std::string& scheduler = "") {
    Json spec = {{"restartPolicy", "Never"},
                 {"terminationGracePeriodSeconds", 0},
                 {"containers",
                  {{{"name", "main"},
                    {"image", "trainer:latest"},
                    {"resources",
                     {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", 1}}},
                      {"limits", {{"nvidia.com/gpu", 1}}}}}}}}};
    if (!scheduler.empty()) spec["schedulerName"] = scheduler;
    return {{"metadata", {{"name", name}, {"labels", labels}}}, {"spec", spec}};
  }

  // A Job that opts in by its label alone: its template names no scheduler. Its pods ask for
  // `gpus` GPUs each and, bound, run `seconds` on the simulated kubelets.
  void LabelledJob(const std::string& name, int pods, int gpus, double seconds,
                   const std::string& priority_class) {
    Json spec = BarePod("unused")["spec"];
    for (Json& c : spec["containers"]) {
      c["resources"]["requests"]["nvidia.com/gpu"] = gpus;
      c["resources"]["limits"]["nvidia.com/gpu"] = gpus;
    }
    spec["priorityClassName"] = priority_class;
    spec["terminationGracePeriodSeconds"] = 1;
    Json job = {
        {"apiVersion", "batch/v1"},
        {"kind", "Job"},
        {"metadata",
         {{"name", name},
          {"labels", {{"chamber.io/queue", queue_}}},
          {"annotations", {{"chamber.io/checkpoint-grace-seconds", "1"}}}}},
        {"spec",
         {{"parallelism", pods},
          {"completions", pods},
          {"backoffLimit", 0},
          {"template",
           {{"metadata",
             {{"annotations", {{"chamber.io/sim-duration-seconds", std::to_string(seconds)}}}}},
            {"spec", spec}}}}}};
    auto r = client_->Create(kube::resources::kJobs, ns_, job);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // A pod asking for `fraction` of one GPU (chamber.io/gpu-fraction) and no nvidia.com/gpu, its
  // container setting NVIDIA_VISIBLE_DEVICES=all as CUDA images do; `pool`: a nodeSelector.
  Json SharePod(const std::string& name, const std::string& fraction, Json labels = Json::object(),
                const std::string& pool = "") {
    Json pod = BarePod(name, std::move(labels));
    for (Json& c : pod["spec"]["containers"]) {
      c["resources"]["requests"].erase("nvidia.com/gpu");
      c["resources"]["limits"].erase("nvidia.com/gpu");
      c["env"] = {{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}};
    }
    pod["metadata"]["annotations"] = {{"chamber.io/gpu-fraction", fraction}};
    if (!pool.empty()) pod["spec"]["nodeSelector"] = {{"chamber-test/pool", pool}};
    return pod;
  }

  // Starts replica "a" with the webhook and `flags`, then has it bind a one-GPU pod "whole" of
  // default_ns_ to the node of `pool`: chamberd's own choice, the lowest free GPU, 0.
  void StartAndBindWhole(const std::string& pool, const std::vector<std::string>& flags) {
    const int port = StartWithWebhook("a", flags);
    ASSERT_GT(port, 0);
    RegisterWebhook(port, queue_);
    if (HasFailure()) return;
    Json whole = BarePod("whole");
    whole["spec"]["nodeSelector"] = {{"chamber-test/pool", pool}};
    ASSERT_TRUE(client_->Create(kube::resources::kPods, default_ns_, whole).ok());
    ASSERT_TRUE(Eventually([&] { return !NodeOf(GetPod(default_ns_, "whole")).empty(); }, 30s));
    EXPECT_EQ(Annotation(GetPod(default_ns_, "whole"), "chamber.io/gpu-indices"), "0")
        << "chamberd's own choice: the lowest free GPU";
  }

  // Posts what `node`'s chamber-agent would report (docs/agent.md) to replica `replica`'s API:
  // `gpus` GPUs named GPU-<ns>-<index>, each sample extended by `extra[index]` (its `pods`,
  // `processes`), each inventory entry by `inventory_extra[index]` (its `mig`), and whether
  // pod-resources was read.
  void PostAgentReport(const std::string& replica, const std::string& node, int gpus,
                       const std::map<int, Json>& extra, bool pod_resources,
                       const std::map<int, Json>& inventory_extra = {}) {
    Json samples = Json::array(), inventory = Json::array();
    for (int g = 0; g < gpus; ++g) {
      const std::string uuid = "GPU-" + ns_ + "-" + std::to_string(g);
      inventory.push_back({{"index", g}, {"uuid", uuid}});
      if (auto e = inventory_extra.find(g); e != inventory_extra.end())
        inventory.back().update(e->second);
      Json sample = {{"index", g}, {"uuid", uuid}, {"lost", false}, {"recovery_action", 0}};
      if (auto e = extra.find(g); e != extra.end()) sample.update(e->second);
      samples.push_back(std::move(sample));
    }
    Json report = {
        {"kind", "chamber.io/agent-report/v1"},
        {"node", node},
        {"time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                     .count()},
        {"inventory", {{"gpus", inventory}}},
        {"samples", samples},
        {"incidents", Json::array()}};
    if (pod_resources)
      report["pod_resources"] = {{"state", "available"},
                                 {"error", nullptr},
                                 {"updated_at", nullptr},
                                 {"unmatched", Json::array()}};
    httplib::Client api("127.0.0.1", ApiPort(replica));
    auto posted = api.Post("/api/v1/agent/reports", report.dump(), "application/json");
    ASSERT_TRUE(posted);
    ASSERT_LT(posted->status, 300) << posted->body;
  }

  // The message of pod `name`'s PodScheduled condition while it says the pod is not scheduled
  // (of reason `reason`, when given); empty when it says nothing of the kind.
  std::string NotScheduledMessage(const std::string& name, const std::string& reason = "") {
    for (const Json& c : GetPod(default_ns_, name)["status"].value("conditions", Json()))
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
          (reason.empty() || c.value("reason", "") == reason))
        return c.value("message", "");
    return "";
  }

  // The value of one sample of replica `replica`'s /metrics (`name{labels}` as written); -1 when
  // it is not there.
  double Metric(const std::string& replica, const std::string& sample) {
    httplib::Client api("127.0.0.1", ApiPort(replica));
    auto r = api.Get("/metrics");
    return r && r->status == 200 ? e2e::MetricSample(r->body, sample) : -1.0;
  }

  // Live pods of `ns` (not being deleted), bound or not, by name.
  std::map<std::string, Json> LivePods(const std::string& ns) {
    std::map<std::string, Json> out;
    auto list = client_->List(kube::resources::kPods, ns);
    if (!list.ok()) return out;
    for (Json& p : list->items) {
      std::string name = p["metadata"].value("name", "");
      if (!p["metadata"].contains("deletionTimestamp") && !name.starts_with("probe-"))
        out[std::move(name)] = std::move(p);
    }
    return out;
  }

  static std::string NodeOf(const Json& pod) { return pod["spec"].value("nodeName", ""); }
  static std::string Annotation(const Json& pod, const std::string& key) {
    const Json& a =
        pod["metadata"].contains("annotations") ? pod["metadata"]["annotations"] : Json();
    return a.is_object() ? a.value(key, "") : "";
  }

  Json GetPod(const std::string& ns, const std::string& name) {
    auto p = client_->Get(kube::resources::kPods, ns, name);
    return p.ok() ? *p : Json();
  }

  std::string queue_, default_ns_;
};

TEST_F(WebhookE2E, OptedInPodsGetChamberAndAreScheduledOthersAreUntouched) {
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;

  // (a) A Job labelled with the queue, its template naming no scheduler.
  Json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata", {{"name", "train"}, {"labels", {{"chamber.io/queue", queue_}}}}},
              {"spec",
               {{"parallelism", 2},
                {"completions", 2},
                {"backoffLimit", 0},
                {"template", {{"spec", BarePod("unused")["spec"]}}}}}};
  auto created = client_->Create(kube::resources::kJobs, ns_, job);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  // The workloads entry copied the label into the template: its pods fall under the
  // fail-closed entry.
  EXPECT_EQ((*created)["spec"]["template"]["metadata"]["labels"].value("chamber.io/queue", ""),
            queue_);
  EXPECT_EQ((*created)["spec"]["template"]["spec"].value("schedulerName", ""), "default-scheduler");
  ASSERT_TRUE(Eventually([&] { return JobPods("train").size() == 2; }, 30s));
  for (const kube::Pod& p : JobPods("train")) EXPECT_EQ(p.scheduler_name, "chamber");
  EXPECT_TRUE(Eventually([&] { return Bound("train") == 2; }, 30s))
      << "chamberd did not bind the Job's pods";

  // (b) A pod in the namespace with a default queue.
  ASSERT_TRUE(client_->Create(kube::resources::kPods, default_ns_, BarePod("dq")).ok());
  EXPECT_EQ(GetPod(default_ns_, "dq")["spec"].value("schedulerName", ""), "chamber");
  EXPECT_TRUE(Eventually(
      [&] { return !GetPod(default_ns_, "dq")["spec"].value("nodeName", "").empty(); }, 30s))
      << "chamberd did not bind the pod of the namespace with a default queue";

  // (c) An unlabelled pod in a plain namespace: untouched, and not scheduled by chamberd.
  ASSERT_TRUE(client_->Create(kube::resources::kPods, ns_, BarePod("plain")).ok());
  const Json plain = GetPod(ns_, "plain");
  EXPECT_EQ(plain["spec"].value("schedulerName", ""), "default-scheduler");
  EXPECT_FALSE(plain["metadata"]["labels"].contains("chamber.io/queue"));
  // A pod naming another scheduler keeps it, labelled or not.
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kPods, ns_,
                           BarePod("other", {{"chamber.io/queue", queue_}}, "volcano"))
                  .ok());
  EXPECT_EQ(GetPod(ns_, "other")["spec"].value("schedulerName", ""), "volcano");
  std::this_thread::sleep_for(2s);  // several cycles: chamberd leaves both alone
  EXPECT_EQ(GetPod(ns_, "plain")["spec"].value("nodeName", ""), "");
  EXPECT_EQ(GetPod(ns_, "other")["spec"].value("nodeName", ""), "");
}

TEST_F(WebhookE2E, AnOwnersQueueIsFoundUpTheControllerChain) {
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  // The queue as an annotation: the workloads entry (selecting labels) does not see the
  // Deployment, and neither does the pods' fail-closed entry. The pods entry walks up from the
  // pod and finds the queue on the ReplicaSet, to which the Deployment controller copies the
  // Deployment's annotations; the pod gets it as its label.
  Json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "serve"}, {"annotations", {{"chamber.io/queue", queue_}}}}},
      {"spec",
       {{"replicas", 2},
        {"selector", {{"matchLabels", {{"app", "serve"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "serve"}}}}},
          {"spec", {{"containers", BarePod("unused")["spec"]["containers"]}}}}}}}};
  auto created = client_->Create(kDeployments, ns_, deployment);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_FALSE((*created)["spec"]["template"]["metadata"]["labels"].contains("chamber.io/queue"));
  std::vector<Json> pods;
  ASSERT_TRUE(Eventually(
      [&] {
        kube::ListOptions o;
        o.label_selector = "app=serve";
        auto list = client_->List(kube::resources::kPods, ns_, o);
        if (!list.ok()) return false;
        pods = list->items;
        return pods.size() == 2;
      },
      30s));
  for (const Json& p : pods) {
    EXPECT_EQ(p["spec"].value("schedulerName", ""), "chamber");
    EXPECT_EQ(p["metadata"]["labels"].value("chamber.io/queue", ""), queue_);
  }
  EXPECT_TRUE(Eventually(
      [&] {
        kube::ListOptions o;
        o.label_selector = "app=serve";
        auto list = client_->List(kube::resources::kPods, ns_, o);
        if (!list.ok()) return false;
        int bound = 0;
        for (const Json& p : list->items) bound += !p["spec"].value("nodeName", "").empty();
        return bound == 2;
      },
      30s))
      << "chamberd did not bind the Deployment's pods";
}

// Pods of an upstream PodGroup (scheduling.k8s.io/v1beta1) opt in through the PodGroup's label:
// the webhook reads the group each pod names, sets the scheduler and the queue label, and
// chamberd starts the gang.
TEST_F(WebhookE2E, AnUpstreamPodGroupsQueueOptsItsPodsIn) {
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  const kube::ResourceType& podgroups = backend::PodGroupTypes().front();
  Json group = {{"apiVersion", podgroups.ApiVersion()},
                {"kind", "PodGroup"},
                {"metadata", {{"name", "allreduce"}, {"labels", {{"chamber.io/queue", queue_}}}}},
                {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", 2}}}}}}}};
  auto made = client_->Create(podgroups, ns_, group);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  for (const char* name : {"allreduce-0", "allreduce-1"}) {
    Json pod = BarePod(name);
    pod["spec"]["schedulingGroup"] = {{"podGroupName", "allreduce"}};
    auto created = client_->Create(kube::resources::kPods, ns_, pod);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    EXPECT_EQ((*created)["spec"].value("schedulerName", ""), "chamber") << name;
    EXPECT_EQ((*created)["metadata"]["labels"].value("chamber.io/queue", ""), queue_) << name;
  }
  EXPECT_TRUE(Eventually(
      [&] {
        for (const char* name : {"allreduce-0", "allreduce-1"})
          if (GetPod(ns_, name)["spec"].value("nodeName", "").empty()) return false;
        return true;
      },
      30s))
      << "chamberd did not start the PodGroup's gang";
}

// A Job opted in by label is Chamber's through preemption: suspended (its pods deleted) it
// stays Chamber's, and resumed, its new pods pass the webhook again and complete.
TEST_F(WebhookE2E, ALabelledJobIsPreemptedResumesAndCompletes) {
  PriorityClass("chamber-wh-elastic", 10);
  PriorityClass("chamber-wh-reserved", 1000);
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  // The queue's quota is the cluster's 16 GPUs; the elastic Job takes them all.
  LabelledJob("elastic", 8, 2, 15, "chamber-wh-elastic");
  ASSERT_TRUE(Eventually([&] { return Bound("elastic") == 8; }, 30s));
  LabelledJob("reserved", 2, 2, 3, "chamber-wh-reserved");
  ASSERT_TRUE(Eventually([&] { return GetJob("elastic").suspend; }, 30s))
      << "the labelled elastic Job was not preempted";
  EXPECT_TRUE(GetJob("elastic").metadata.annotations.count(backend::keys::kPreemptedAt));
  ASSERT_TRUE(Eventually([&] { return Bound("reserved") == 2; }, 30s));
  ASSERT_TRUE(Eventually([&] { return Complete("reserved"); }, 30s));
  ASSERT_TRUE(Eventually([&] { return !GetJob("elastic").suspend; }, 30s))
      << "the suspended labelled Job was not resumed";
  ASSERT_TRUE(Eventually([&] { return Complete("elastic"); }, 60s));
  for (const kube::Pod& p : JobPods("elastic")) EXPECT_EQ(p.scheduler_name, "chamber");
}

// A standby answers as the leader does: admission does not wait for the Lease.
// docs/sharing.md, "Asking for a share": pods asking for half a GPU are opted in and given
// their GPU's environment by the webhook, bound two to a GPU by chamberd, and told which GPU
// (its UUID where the node's agent reported them, else its index); GPUs held whole never hold a
// share. 4 halves and 14 whole GPUs fill the 16 GPUs exactly, so the halves must pair up.
TEST_F(WebhookE2E, HalfGpuSharesLandTwoToAGpuAndAreGivenItNeverBesideAWholeGpu) {
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  // Node 0's GPUs have UUIDs (as the health controller writes them from its agent's reports);
  // node 1's agent has not reported.
  const std::string with_uuids = ns_ + "-gpu-0";
  std::vector<std::string> uuids;
  for (int g = 0; g < 8; ++g) uuids.push_back("GPU-" + ns_ + "-" + std::to_string(g));
  std::string joined;
  for (const std::string& u : uuids) joined += (joined.empty() ? "" : ",") + u;
  ASSERT_TRUE(
      client_
          ->MergePatch(kube::resources::kNodes, "", with_uuids,
                       {{"metadata", {{"annotations", {{"chamber.io/gpu-uuids", joined}}}}}})
          .ok());
  std::this_thread::sleep_for(1s);  // the node informer sees the UUIDs before the pods come

  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(client_
                    ->Create(kube::resources::kPods, default_ns_,
                             SharePod("half-" + std::to_string(i), "0.5"))
                    .ok());
  for (int i = 0; i < 14; ++i)
    ASSERT_TRUE(
        client_->Create(kube::resources::kPods, default_ns_, BarePod("whole-" + std::to_string(i)))
            .ok());
  ASSERT_TRUE(Eventually(
      [&] {
        int bound = 0;
        for (const auto& [name, p] : LivePods(default_ns_)) bound += !NodeOf(p).empty();
        return bound == 18;
      },
      60s))
      << "chamberd did not bind all 18 pods";
  ExpectNoDoubleBooking(8, {default_ns_});

  std::map<std::pair<std::string, std::string>, int> per_gpu;  // (node, index) -> halves
  for (const auto& [name, p] : LivePods(default_ns_)) {
    if (!name.starts_with("half-")) continue;
    SCOPED_TRACE(name);
    EXPECT_EQ(p["spec"].value("schedulerName", ""), "chamber");
    EXPECT_EQ(Annotation(p, "chamber.io/gpu-env"), "downward-api");
    // The webhook replaced the container's own NVIDIA_VISIBLE_DEVICES=all: the kubelet fills
    // it in from the binding's annotation.
    const Json& env = p["spec"]["containers"][0]["env"];
    ASSERT_EQ(env.size(), 2u) << env.dump();
    EXPECT_EQ(env[0]["name"], "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(env[0]["valueFrom"]["fieldRef"]["fieldPath"],
              "metadata.annotations['chamber.io/visible-devices']");
    EXPECT_EQ(env[1]["name"], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    const std::string index = Annotation(p, "chamber.io/gpu-indices");
    ASSERT_FALSE(index.empty());
    EXPECT_EQ(Annotation(p, "chamber.io/visible-devices"),
              NodeOf(p) == with_uuids ? uuids.at(std::stoul(index)) : index);
    EXPECT_EQ(Annotation(p, "chamber.io/mps-active-thread-percentage"), "50");
    ++per_gpu[{NodeOf(p), index}];
  }
  EXPECT_EQ(per_gpu.size(), 2u) << "4 halves on 2 GPUs";
  for (const auto& [gpu, halves] : per_gpu)
    EXPECT_EQ(halves, 2) << gpu.first << " GPU " << gpu.second;
}

// A reclaim preempts only as many shares as the reclaiming share needs: on a node of one GPU
// holding four quarter shares of a queue that borrows, a half share of the GPU's owner takes two
// of them and leaves the other two running.
TEST_F(WebhookE2E, AReclaimPreemptsOnlyAsManySharesAsNeeded) {
  const std::string pool = "pool-" + ns_;
  Nodes(1, 1, "one", {}, {{"chamber-test/pool", pool}});
  const std::string borrower = "wh-b-" + ns_;
  Queue(borrower, 0);
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(client_
                    ->Create(kube::resources::kPods, ns_,
                             SharePod("quarter-" + std::to_string(i), "0.25",
                                      {{"chamber.io/queue", borrower}}, pool))
                    .ok());
  auto bound = [&](const std::string& ns) {
    int n = 0;
    for (const auto& [name, p] : LivePods(ns)) n += !NodeOf(p).empty();
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return bound(ns_) == 4; }, 30s)) << "the quarters did not start";
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kPods, default_ns_,
                           SharePod("owner", "0.5", Json::object(), pool))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return bound(default_ns_) == 1; }, 60s))
      << "the owner's half share was not placed";
  std::this_thread::sleep_for(2s);  // several cycles: no further victim
  EXPECT_EQ(bound(ns_), 2) << "two quarters make the room; the other two keep running";
  EXPECT_EQ(LivePods(ns_).size(), 2u);
  ExpectNoDoubleBooking(1, {ns_, default_ns_});
  const Json owner = LivePods(default_ns_).at("owner");
  EXPECT_EQ(Annotation(owner, "chamber.io/gpu-indices"), "0");
  EXPECT_EQ(Annotation(owner, "chamber.io/visible-devices"), "0") << "no UUIDs reported: the index";
}

// A node whose device plugin time-slices its GPUs advertises 4 replicas of each as
// nvidia.com/gpu (GPU feature discovery labels it so): no share of a GPU goes there, since the
// index or UUID chamberd would give it names no GPU of its own. Half shares take the plain
// node's one GPU, a third waits and says why; a whole-GPU pod still goes to the sliced node.
TEST_F(WebhookE2E, NoShareGoesToATimeSlicedNodeAndWholeGpusStillDo) {
  const std::string pool = "pool-" + ns_;
  Nodes(1, 4, "sliced", {},
        {{"chamber-test/pool", pool},
         {"nvidia.com/gpu.replicas", "4"},
         {"nvidia.com/gpu.sharing-strategy", "time-slicing"}});
  Nodes(1, 1, "plain", {}, {{"chamber-test/pool", pool}});
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(client_
                    ->Create(kube::resources::kPods, default_ns_,
                             SharePod("half-" + std::to_string(i), "0.5", Json::object(), pool))
                    .ok());
  auto bound_halves = [&] {
    std::vector<std::string> nodes;
    for (const auto& [name, p] : LivePods(default_ns_))
      if (name.starts_with("half-") && !NodeOf(p).empty()) nodes.push_back(NodeOf(p));
    return nodes;
  };
  ASSERT_TRUE(Eventually([&] { return bound_halves().size() == 2; }, 30s));
  // The third waits, naming the sliced node's device plugin.
  std::string waiting;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& [name, p] : LivePods(default_ns_)) {
          if (!name.starts_with("half-") || !NodeOf(p).empty()) continue;
          for (const Json& c : p.value("/status/conditions"_json_pointer, Json::array()))
            if (c.value("type", "") == "PodScheduled") waiting = c.value("message", "");
        }
        return waiting.find("GPUs divided by the device plugin") != std::string::npos;
      },
      30s))
      << waiting;
  for (const std::string& node : bound_halves()) EXPECT_EQ(node, ns_ + "-plain-0");
  // A whole GPU: the sliced node has room.
  Json whole = BarePod("whole");
  whole["spec"]["nodeSelector"] = {{"chamber-test/pool", pool}};
  ASSERT_TRUE(client_->Create(kube::resources::kPods, default_ns_, whole).ok());
  auto node_of_whole = [&] {
    const std::map<std::string, Json> pods = LivePods(default_ns_);
    auto it = pods.find("whole");
    return it == pods.end() ? std::string() : NodeOf(it->second);
  };
  ASSERT_TRUE(Eventually([&] { return !node_of_whole().empty(); }, 30s));
  EXPECT_EQ(node_of_whole(), ns_ + "-sliced-0");
  EXPECT_EQ(bound_halves().size(), 2u);
  ExpectNoDoubleBooking(4, {default_ns_});
}

// The device plugin, not chamberd, picks the GPU of a pod asking nvidia.com/gpu. chamberd
// binds a whole-GPU pod to GPU 0 of a 2-GPU node, but the node's agent reports (pod-resources)
// that the device plugin gave it GPU 1: a half share then goes on GPU 0, never on GPU 1, and is
// told GPU 0's UUID, which the health controller wrote from the same report. (Without
// reservation pods: with them, below, the share goes where its reservation pod was given.)
TEST_F(WebhookE2E, AShareNeverGoesOnTheGpuTheDevicePluginGaveAWholeGpuPod) {
  const std::string pool = "pool-" + ns_;
  Nodes(1, 2, "two", {}, {{"chamber-test/pool", pool}});
  const std::string node = ns_ + "-two-0";
  StartAndBindWhole(pool, {"--gpu-reservations=false"});
  if (HasFailure()) return;

  // The node's agent: GPU 1 is the whole pod's, as the kubelet's pod-resources API says.
  const Json holder = {{"namespace", default_ns_},
                       {"pod", "whole"},
                       {"container", "main"},
                       {"resource", "nvidia.com/gpu"},
                       {"device_id", "GPU-" + ns_ + "-1"},
                       {"mig_uuid", nullptr}};
  PostAgentReport("a", node, 2,
                  {{0, {{"pods", Json::array()}}}, {1, {{"pods", Json::array({holder})}}}},
                  /*pod_resources=*/true);
  if (HasFailure()) return;
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = client_->Get(kube::resources::kNodes, "", node);
        return n.ok() &&
               Annotation(*n, "chamber.io/gpu-uuids") == "GPU-" + ns_ + "-0,GPU-" + ns_ + "-1";
      },
      30s))
      << "the health controller did not write the node's GPU UUIDs";

  ASSERT_TRUE(client_
                  ->Create(kube::resources::kPods, default_ns_,
                           SharePod("half", "0.5", Json::object(), pool))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return !NodeOf(GetPod(default_ns_, "half")).empty(); }, 30s));
  const Json half = GetPod(default_ns_, "half");
  EXPECT_EQ(Annotation(half, "chamber.io/gpu-indices"), "0") << "GPU 1 is held whole";
  EXPECT_EQ(Annotation(half, "chamber.io/visible-devices"), "GPU-" + ns_ + "-0");
}

// docs/sharing.md, "Reservation pods": on a node whose agent reports pod resources, a share is
// bound only to a GPU a reservation pod holds. A whole-GPU pod that chamberd put on GPU 0 was
// given GPU 2 by the device plugin. A half share makes chamberd create one reservation pod on
// the node and waits, saying so; the device plugin gives the reservation GPU 3 (not the GPU
// chamberd placed the share on), and the share is bound there with GPU 3's UUID. A second half
// share goes beside it with no new reservation. Once both are gone, the reservation pod is
// deleted after its grace.
TEST_F(WebhookE2E, AShareIsBoundToTheGpuItsReservationPodWasGiven) {
  const std::string pool = "pool-" + ns_;
  Nodes(1, 4, "four", {}, {{"chamber-test/pool", pool}});
  const std::string node = ns_ + "-four-0";
  // chamberd's own namespace, where its reservation pods go.
  const std::string own = ns_ + "-own";
  ASSERT_TRUE(
      client_->Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", own}}}}).ok());
  struct Cleanup {
    kube::Client* client;
    std::string ns;
    ~Cleanup() { (void)client->Delete(kube::resources::kNamespaces, "", ns); }
  } cleanup{client_.get(), own};
  StartAndBindWhole(pool, {"--pod-namespace", own, "--gpu-reservation-grace", "2"});
  if (HasFailure()) return;
  auto holder = [](const std::string& ns, const std::string& pod, const std::string& uuid) {
    return Json{{"namespace", ns},     {"pod", pod},
                {"container", "main"}, {"resource", "nvidia.com/gpu"},
                {"device_id", uuid},   {"mig_uuid", nullptr}};
  };
  auto uuid = [&](int g) { return "GPU-" + ns_ + "-" + std::to_string(g); };
  std::map<int, Json> held = {{0, {{"pods", Json::array()}}},
                              {1, {{"pods", Json::array()}}},
                              {2, {{"pods", Json::array({holder(default_ns_, "whole", uuid(2))})}}},
                              {3, {{"pods", Json::array()}}}};
  PostAgentReport("a", node, 4, held, /*pod_resources=*/true);
  if (HasFailure()) return;

  auto reservations = [&] {
    std::vector<Json> out;
    auto list = client_->List(kube::resources::kPods, own);
    if (list.ok())
      for (Json& p : list->items)
        if (p["metadata"]["labels"].contains("chamber.io/gpu-reservation") &&
            !p["metadata"].contains("deletionTimestamp"))
          out.push_back(std::move(p));
    return out;
  };
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kPods, default_ns_,
                           SharePod("half", "0.5", Json::object(), pool))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return reservations().size() == 1; }, 30s))
      << "chamberd made no reservation pod";
  const Json r = reservations().front();
  EXPECT_EQ(NodeOf(r), node);
  EXPECT_EQ(r["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  const std::string r_name = r["metadata"]["name"];
  EXPECT_TRUE(r_name.starts_with("gpu-reservation-")) << r_name;
  std::string waiting;
  ASSERT_TRUE(Eventually(
      [&] { return !(waiting = NotScheduledMessage("half", "BindBackoff")).empty(); }, 30s))
      << "the share's condition does not say why it waits";
  EXPECT_NE(waiting.find("its share waits for the device plugin to give a GPU to a reservation "
                         "pod on node " +
                         node),
            std::string::npos)
      << waiting;
  EXPECT_TRUE(NodeOf(GetPod(default_ns_, "half")).empty()) << "bound before its reservation";

  // The device plugin gave the reservation GPU 3.
  held[3] = {{"pods", Json::array({holder(own, r_name, uuid(3))})}};
  PostAgentReport("a", node, 4, held, /*pod_resources=*/true);
  if (HasFailure()) return;
  ASSERT_TRUE(Eventually([&] { return !NodeOf(GetPod(default_ns_, "half")).empty(); }, 30s));
  EXPECT_EQ(Annotation(GetPod(default_ns_, "half"), "chamber.io/gpu-indices"), "3");
  EXPECT_EQ(Annotation(GetPod(default_ns_, "half"), "chamber.io/visible-devices"), uuid(3));

  // A second half share sits beside it, on the same reservation.
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kPods, default_ns_,
                           SharePod("half-2", "0.5", Json::object(), pool))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return !NodeOf(GetPod(default_ns_, "half-2")).empty(); }, 30s));
  EXPECT_EQ(Annotation(GetPod(default_ns_, "half-2"), "chamber.io/gpu-indices"), "3");
  std::this_thread::sleep_for(3s);  // past the grace: shares hold it, so it stays
  ASSERT_EQ(reservations().size(), 1u);
  EXPECT_EQ(reservations().front()["metadata"]["name"], r_name);
  EXPECT_EQ(Metric("a", "chamber_gpu_reservation_pods{state=\"reported\"}"), 1);
  EXPECT_EQ(Metric("a", "chamber_gpu_reservation_pods{state=\"unreported\"}"), 0);
  EXPECT_EQ(Metric("a", "chamber_gpu_reservation_pods_created_total"), 1);

  // Both shares gone: the reservation pod follows after its grace.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  for (const char* name : {"half", "half-2"})
    ASSERT_TRUE(client_->Delete(kube::resources::kPods, default_ns_, name, now).ok());
  EXPECT_TRUE(Eventually([&] { return reservations().empty(); }, 30s))
      << "the idle reservation pod was not deleted";
  EXPECT_TRUE(Eventually(
      [&] {
        return Metric("a", "chamber_gpu_reservation_pods_deleted_total{reason=\"idle\"}") == 1;
      },
      10s));
  EXPECT_EQ(Metric("a", "chamber_gpu_reservation_pods_deleted_total{reason=\"needed\"}"), 0);
  EXPECT_EQ(Metric("a", "chamber_gpu_reservation_pods_created_total"), 1);
  EXPECT_EQ(Metric("a", "chamber_binds_total"), 3) << "whole, half and half-2";
}

// docs/sharing.md, "A share of memory alone": on one 80 GiB GPU, a share of 20 GiB alone and one
// of 60 GiB alone hold a quarter and three quarters of it, are bound there with MPS limits of
// 25% and 75% and their memory, and the API charges them so; a third of 1 GiB finds the GPU's
// compute held in full and waits.
TEST_F(WebhookE2E, AShareOfMemoryAloneHoldsItsPartOfTheGpuItLandsOn) {
  const std::string pool = "pool-" + ns_;
  Nodes(1, 1, "mem", {}, {{"chamber-test/pool", pool}, {"nvidia.com/gpu.memory", "81920"}});
  const std::string node = ns_ + "-mem-0";
  const int port = StartWithWebhook("a", {});
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  auto memory_share = [&](const std::string& name, const std::string& memory) {
    Json pod = SharePod(name, "0.5", Json::object(), pool);
    pod["metadata"]["annotations"] = {{"chamber.io/gpu-memory", memory}};
    return pod;
  };
  for (const auto& [name, memory] : {std::pair{"small", "20Gi"}, std::pair{"large", "61440"}}) {
    ASSERT_TRUE(
        client_->Create(kube::resources::kPods, default_ns_, memory_share(name, memory)).ok())
        << name;
    ASSERT_TRUE(Eventually([&] { return NodeOf(GetPod(default_ns_, name)) == node; }, 30s))
        << name << " was not bound";
  }
  const Json small = GetPod(default_ns_, "small"), large = GetPod(default_ns_, "large");
  EXPECT_EQ(Annotation(small, "chamber.io/gpu-indices"), "0");
  EXPECT_EQ(Annotation(large, "chamber.io/gpu-indices"), "0");
  EXPECT_EQ(Annotation(small, "chamber.io/mps-active-thread-percentage"), "25");
  EXPECT_EQ(Annotation(small, "chamber.io/mps-pinned-memory-limit"), "0=20480MB");
  EXPECT_EQ(Annotation(large, "chamber.io/mps-active-thread-percentage"), "75");
  EXPECT_EQ(Annotation(large, "chamber.io/mps-pinned-memory-limit"), "0=61440MB");
  EXPECT_EQ(Annotation(small, "chamber.io/visible-devices"), "0") << "no UUIDs: its index";

  // The GPU's compute is held in full: a share of 1 GiB alone waits, saying why.
  ASSERT_TRUE(
      client_->Create(kube::resources::kPods, default_ns_, memory_share("tiny", "1Gi")).ok());
  std::string why;
  ASSERT_TRUE(Eventually([&] { return !(why = NotScheduledMessage("tiny")).empty(); }, 30s))
      << "the third share's condition does not say why it waits";
  EXPECT_NE(why.find("no node fits a pod of 0.013 gpu"), std::string::npos) << why;
  EXPECT_TRUE(NodeOf(GetPod(default_ns_, "tiny")).empty());

  // The API: the GPU held whole by the two, each share its part.
  httplib::Client api("127.0.0.1", ApiPort("a"));
  Json gpu;
  std::string body;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = api.Get("/api/v1/gpus");
        if (!r || r->status != 200) return false;
        body = r->body;
        const Json all = Json::parse(r->body);
        for (const Json& g : all["gpus"])
          if (g["node"] == node) gpu = g;
        return gpu.is_object() && gpu["shares"].size() == 2;
      },
      30s))
      << body;
  EXPECT_EQ(gpu["allocated"], 1.0);
  std::map<std::string, double> part;
  for (const Json& sh : gpu["shares"]) part[sh["pod"].get<std::string>()] = sh["gpu_fraction"];
  EXPECT_EQ(part[default_ns_ + "/small"], 0.25);
  EXPECT_EQ(part[default_ns_ + "/large"], 0.75);
}

// docs/sharing.md, "Memory a share holds": three quarter shares asking 10 GiB each on one GPU.
// The node's agent measures 12 GiB for "hog", 8 GiB for "calm" and 11 GiB for "quiet", then
// stops reporting "quiet": the API shows hog and quiet over their memory at once; chamberd
// deletes hog after the 3 s grace, with a Warning Event, and neither calm (under its memory) nor
// quiet (no longer measured) is touched.
TEST_F(WebhookE2E, AShareOverItsMemoryIsDeletedAfterTheGraceAndItsNeighbourIsNot) {
  const std::string pool = "pool-" + ns_;
  Nodes(1, 1, "mem", {}, {{"chamber-test/pool", pool}, {"nvidia.com/gpu.memory", "81920"}});
  const std::string node = ns_ + "-mem-0";
  const int port = StartWithWebhook("a", {"--share-memory-grace", "3"});
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  std::map<std::string, std::string> uid;
  for (const char* name : {"hog", "calm", "quiet"}) {
    Json pod = SharePod(name, "0.25", Json::object(), pool);
    pod["metadata"]["annotations"]["chamber.io/gpu-memory"] = "10Gi";
    ASSERT_TRUE(client_->Create(kube::resources::kPods, default_ns_, pod).ok()) << name;
  }
  ASSERT_TRUE(Eventually(
      [&] {
        for (const char* name : {"hog", "calm", "quiet"}) {
          const Json p = GetPod(default_ns_, name);
          if (NodeOf(p) != node || p["status"].value("phase", "") != "Running") return false;
          uid[name] = p["metadata"]["uid"];
        }
        return true;
      },
      30s))
      << "the three shares did not start on the one GPU";
  constexpr int64_t kGiB = int64_t{1} << 30;
  auto process = [&](int pid, int64_t bytes, const std::string& name) {
    return Json{{"pid", pid},
                {"used_memory_bytes", bytes},
                {"sm_percent", nullptr},
                {"memory_percent", nullptr},
                {"gpu_instance_id", nullptr},
                {"compute_instance_id", nullptr},
                {"pod_uid", uid.at(name)}};
  };
  PostAgentReport("a", node, 1,
                  {{0,
                    {{"utilization", {{"source", "coarse"}, {"gpu_percent", 60}}},
                     {"processes",
                      {process(101, 12 * kGiB, "hog"), process(102, 8 * kGiB, "calm"),
                       process(103, 11 * kGiB, "quiet")}}}}},
                  /*pod_resources=*/false);
  if (HasFailure()) return;

  // The API: each share with what it holds, and whether it is over its memory.
  httplib::Client api("127.0.0.1", ApiPort("a"));
  std::map<std::string, Json> shares;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = api.Get("/api/v1/gpus");
        if (!r || r->status != 200) return false;
        shares.clear();
        const Json gpus = Json::parse(r->body);
        for (const Json& g : gpus["gpus"])
          if (g["node"] == node)
            for (const Json& sh : g["shares"])
              if (sh["pod"].is_string()) shares[sh["pod"].get<std::string>()] = sh;
        return shares.size() == 3 &&
               shares.at(default_ns_ + "/hog")["over_memory_since"].is_string();
      },
      30s))
      << Json(shares).dump();
  EXPECT_EQ(shares.at(default_ns_ + "/hog")["memory_used_bytes"], 12 * kGiB);
  EXPECT_EQ(shares.at(default_ns_ + "/hog")["gpu_memory_mib"], 10240);
  EXPECT_EQ(shares.at(default_ns_ + "/calm")["memory_used_bytes"], 8 * kGiB);
  EXPECT_TRUE(shares.at(default_ns_ + "/calm")["over_memory_since"].is_null());
  EXPECT_TRUE(shares.at(default_ns_ + "/quiet")["over_memory_since"].is_string());
  const auto over_seen = std::chrono::steady_clock::now();

  // The agent's next report no longer lists quiet's process: its overrun ends.
  PostAgentReport(
      "a", node, 1,
      {{0,
        {{"utilization", {{"source", "coarse"}, {"gpu_percent", 60}}},
         {"processes", {process(101, 12 * kGiB, "hog"), process(102, 8 * kGiB, "calm")}}}}},
      /*pod_resources=*/false);
  if (HasFailure()) return;

  ASSERT_TRUE(Eventually([&] { return !LivePods(default_ns_).contains("hog"); }, 30s))
      << "chamberd did not delete the share over its memory";
  EXPECT_GE(std::chrono::steady_clock::now() - over_seen, 2s) << "deleted before its grace";
  ASSERT_TRUE(Eventually(
      [&] {
        auto events = client_->List(kube::resources::kEvents, default_ns_);
        if (!events.ok()) return false;
        for (const Json& e : events->items)
          if (e.value("reason", "") == "ShareMemoryExceeded" &&
              e["involvedObject"].value("name", "") == "hog" &&
              e.value("message", "").find("12288 MiB") != std::string::npos)
            return true;
        return false;
      },
      30s))
      << "no ShareMemoryExceeded Event on the deleted pod";
  // Past quiet's grace too: its neighbours run on.
  std::this_thread::sleep_for(4s);
  const std::map<std::string, Json> live = LivePods(default_ns_);
  EXPECT_TRUE(live.contains("calm"));
  EXPECT_TRUE(live.contains("quiet")) << "deleted on a measurement its agent no longer reports";
  EXPECT_EQ(NodeOf(live.at("calm")), node);
}

// A GPU in MIG mode: chamberd's API lists its MIG devices as the node's agent reports them, each
// with the pod the device plugin gave it to (docs/sharing.md, "Seeing shares").
TEST_F(WebhookE2E, AMigGpusDevicesAndTheirPodsShowInTheApi) {
  // The mixed strategy advertises the GPU's MIG devices, not the GPU.
  Nodes(1, 0, "mig", {}, {}, {{"nvidia.com/mig-3g.40gb", "1"}, {"nvidia.com/mig-4g.40gb", "1"}});
  const std::string node = ns_ + "-mig-0";
  ASSERT_GT(StartWithWebhook("a"), 0);
  const Json mig = {{"enabled", true},
                    {"instances", 2},
                    {"devices",
                     {{{"index", 0},
                       {"uuid", "MIG-" + ns_ + "-a"},
                       {"name", "NVIDIA H100 80GB HBM3 MIG 3g.40gb"},
                       {"profile", "3g.40gb"},
                       {"memory_total_bytes", 42144366592},
                       {"gpu_instance_id", 2},
                       {"compute_instance_id", 0}},
                      {{"index", 1},
                       {"uuid", "MIG-" + ns_ + "-b"},
                       {"name", "NVIDIA H100 80GB HBM3 MIG 4g.40gb"},
                       {"profile", "4g.40gb"},
                       {"memory_total_bytes", 42144366592},
                       {"gpu_instance_id", 1},
                       {"compute_instance_id", 0}}}}};
  const Json holder = {{"namespace", default_ns_},
                       {"pod", "infer"},
                       {"container", "main"},
                       {"resource", "nvidia.com/mig-4g.40gb"},
                       {"device_id", "MIG-" + ns_ + "-b"},
                       {"mig_uuid", "MIG-" + ns_ + "-b"}};
  PostAgentReport("a", node, 1, {{0, {{"pods", Json::array({holder})}}}}, /*pod_resources=*/true,
                  {{0, {{"mig", mig}}}});
  if (HasFailure()) return;
  httplib::Client api("127.0.0.1", ApiPort("a"));
  Json gpu, devices;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = api.Get("/api/v1/gpus");
        if (!r || r->status != 200) return false;
        const Json gpus = Json::parse(r->body);
        for (const Json& g : gpus["gpus"])
          if (g["node"] == node) gpu = g;
        devices = gpu.value("mig_devices", Json::array());
        return devices.size() == 2;
      },
      30s))
      << gpu.dump();
  // The node's one GPU is the agent's, in MIG mode.
  EXPECT_EQ(gpu["uuid"], "GPU-" + ns_ + "-0");
  EXPECT_EQ(gpu["mig"], true);
  EXPECT_EQ(devices[0], (Json{{"uuid", "MIG-" + ns_ + "-a"},
                              {"profile", "3g.40gb"},
                              {"memory_total_bytes", 42144366592},
                              {"pod", nullptr}}));
  EXPECT_EQ(devices[1], (Json{{"uuid", "MIG-" + ns_ + "-b"},
                              {"profile", "4g.40gb"},
                              {"memory_total_bytes", 42144366592},
                              {"pod", default_ns_ + "/infer"}}));
}

TEST_F(WebhookE2E, AStandbyReplicaAnswersToo) {
  ASSERT_GT(StartWithWebhook("a"), 0);
  ASSERT_GT(ApiPort("a"), 0);  // "a" leads and serves
  const int standby = StartWithWebhook("b");
  ASSERT_GT(standby, 0);
  RegisterWebhook(standby, queue_);  // waits for a pod mutated through "b"
  if (HasFailure()) return;
  EXPECT_EQ(LeaseHolder(), "a");
  ASSERT_TRUE(client_
                  ->Create(kube::resources::kPods, ns_,
                           BarePod("through-standby", {{"chamber.io/queue", queue_}}))
                  .ok());
  EXPECT_EQ(GetPod(ns_, "through-standby")["spec"].value("schedulerName", ""), "chamber");
  EXPECT_TRUE(Eventually(
      [&] { return !GetPod(ns_, "through-standby")["spec"].value("nodeName", "").empty(); }, 30s))
      << "the leader did not bind the pod the standby admitted";

  // Each replica counts what its own webhook answered, on its health port's /metrics: the pods
  // mutated through "b" (the registration's probe and this one) are b's, none are a's.
  auto metrics = [&](const std::string& name) {
    int port = 0;
    std::ifstream log(dir_ / (name + ".log"));
    const std::string marker = "serving /healthz and /readyz on 127.0.0.1:";
    for (std::string line; std::getline(log, line);)
      if (size_t at = line.find(marker); at != std::string::npos)
        port = std::stoi(line.substr(at + marker.size()));
    httplib::Client http("127.0.0.1", port);
    auto res = http.Get("/metrics");
    return res && res->status == 200 ? res->body : std::string("no /metrics on ") + name;
  };
  auto sample = [](const std::string& text, const std::string& series) -> double {
    const size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
  };
  const std::string mutated =
      R"(chamber_webhook_requests_total{path="/mutate/pods",result="mutated"})";
  const std::string b = metrics("b"), a = metrics("a");
  EXPECT_GE(sample(b, mutated), 2) << b;
  EXPECT_EQ(sample(a, mutated), 0) << a;
  EXPECT_EQ(sample(b, "chamber_replica_leader"), 0) << b;
  EXPECT_EQ(sample(a, "chamber_replica_leader"), 1) << a;
}

TEST_F(WebhookE2E, WithChamberdDownOnlyOptedInObjectsAreRefused) {
  const int port = StartWithWebhook("a");
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  const auto stopping = std::chrono::steady_clock::now();
  Stop(chamberd_["a"], SIGTERM);
  // The API server's kept-alive connections to the webhook do not hold chamberd up.
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 10s);

  // (d) A labelled pod is refused rather than left to another scheduler...
  auto labelled = client_->Create(kube::resources::kPods, ns_,
                                  BarePod("labelled", {{"chamber.io/queue", queue_}}));
  ASSERT_FALSE(labelled.ok()) << "a labelled pod was admitted while chamberd was down: "
                              << labelled.value().dump();
  EXPECT_NE(labelled.status().message().find("pods-opted-in.chamber.io"), std::string::npos)
      << labelled.status().message();
  // ... and so are a pod in the namespace with a default queue and a labelled Job ...
  auto in_default = client_->Create(kube::resources::kPods, default_ns_, BarePod("dq"));
  ASSERT_FALSE(in_default.ok());
  EXPECT_NE(in_default.status().message().find("pods-namespace-queue.chamber.io"),
            std::string::npos)
      << in_default.status().message();
  Json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata", {{"name", "train"}, {"labels", {{"chamber.io/queue", queue_}}}}},
              {"spec", {{"template", {{"spec", BarePod("unused")["spec"]}}}}}};
  auto refused_job = client_->Create(kube::resources::kJobs, ns_, job);
  ASSERT_FALSE(refused_job.ok());
  EXPECT_NE(refused_job.status().message().find("workloads.chamber.io"), std::string::npos)
      << refused_job.status().message();
  // ... while an unlabelled pod in a plain namespace is admitted as it was.
  auto plain = client_->Create(kube::resources::kPods, ns_, BarePod("plain"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)["spec"].value("schedulerName", ""), "default-scheduler");

  // Back up (on a new port: the configuration follows), the labelled pod is admitted and ours.
  const int again = StartWithWebhook("b");
  ASSERT_GT(again, 0);
  Json config = client_->Get(kWebhookConfigs, "", config_name()).value();
  for (Json& w : config["webhooks"]) {
    std::string url = w["clientConfig"]["url"];
    w["clientConfig"]["url"] = "https://127.0.0.1:" + std::to_string(again) +
                               url.substr(url.find('/', std::string("https://").size()));
  }
  ASSERT_TRUE(client_->Update(kWebhookConfigs, "", config).ok());
  EXPECT_TRUE(Eventually(
      [&] {
        auto p = client_->Create(kube::resources::kPods, ns_,
                                 BarePod("labelled", {{"chamber.io/queue", queue_}}));
        return p.ok() && (*p)["spec"].value("schedulerName", "") == "chamber";
      },
      30s, 300ms));
}

}  // namespace
}  // namespace chamber::chamberd
