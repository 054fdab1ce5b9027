// KubeBackend against the test control plane (the ctest fixture's CHAMBER_TEST_KUBECONFIG).
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "backend/kube/kube_backend.h"
#include "backend/kube/queue_resource.h"
#include "chamberd/test/e2e_support.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kubesim/nodes.h"

namespace chamber::backend {
namespace {

using kube::Json;

// A fresh namespace "kb-<n>" with one fake 8-GPU node "<ns>-0" and a Queue of its name with a
// quota of 8 GPUs; returns the namespace, or "" (after reporting why) when one could not be made.
std::string NamespaceWithANodeAndAQueue(kube::Client& client) {
  const std::string ns = "kb-" + std::to_string(std::random_device{}() % 1000000);
  Status made =
      client.Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", ns}}}}).status();
  kubesim::NodePoolSpec nodes;
  nodes.prefix = ns;
  nodes.gpus = 8;
  if (made.ok()) made = kubesim::CreateFakeNodes(client, nodes).status();
  const Json queue = {{"apiVersion", "chamber.io/v1alpha1"},
                      {"kind", "Queue"},
                      {"metadata", {{"name", ns}}},
                      {"spec", {{"resources", {{"gpu", {{"quota", 8}}}}}}}};
  if (made.ok()) made = client.Create(kQueues, "", queue).status();
  EXPECT_TRUE(made.ok()) << made.ToString();
  return made.ok() ? ns : "";
}

// Bare pods "a" and "b" of pod group "g" (chamber.io/min-member 2), one GPU each, queue `ns`.
void CreateGangOfTwo(kube::Client& client, const std::string& ns) {
  for (const std::string name : {"a", "b"}) {
    const Json container = {{"name", "main"},
                            {"image", "trainer:latest"},
                            {"resources",
                             {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 1}}},
                              {"limits", {{"nvidia.com/gpu", 1}}}}}};
    const Json pod = {
        {"metadata",
         {{"name", name},
          {"labels", {{"chamber.io/pod-group", "g"}, {"chamber.io/queue", ns}}},
          {"annotations", {{"chamber.io/min-member", "2"}}}}},
        {"spec", {{"schedulerName", "chamber"}, {"containers", Json::array({container})}}}};
    ASSERT_TRUE(client.Create(kube::resources::kPods, ns, pod).ok());
  }
}

// Pods of `ns` on a node.
int BoundPods(kube::Client& client, const std::string& ns) {
  int n = 0;
  auto list = client.List(kube::resources::kPods, ns);
  if (list.ok())
    for (const Json& p : list->items) n += !p["spec"].value("nodeName", "").empty();
  return n;
}

// Deletes what NamespaceWithANodeAndAQueue made, and the pods in it.
void DeleteNamespaceNodeAndQueue(kube::Client& client, const std::string& ns) {
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  (void)client.Delete(kube::resources::kPods, ns, "", now);
  (void)client.Delete(kube::resources::kNamespaces, "", ns);
  (void)client.Delete(kQueues, "", ns);
  (void)kubesim::DeleteFakeNodes(client);
}

// Once `backend`'s snapshot holds CreateGangOfTwo's gang: a cycle's decision binding its pods to
// GPUs 0 and 1 of node "<ns>-0".
core::CycleResult BindGangOfTwo(KubeBackend& backend, const std::string& ns) {
  const core::Snapshot* snapshot = nullptr;
  core::CycleResult result;
  const bool seen = chamberd::e2e::Eventually(
      [&] {
        auto s = backend.Refresh();
        snapshot = s.ok() ? *s : nullptr;
        if (snapshot == nullptr) return false;
        for (const core::Workload& w : snapshot->workloads)
          if (w.name == ns + "/g") return true;
        return false;
      },
      std::chrono::seconds(20));
  EXPECT_TRUE(seen) << "the gang never showed in a snapshot";
  if (!seen) return result;
  core::BindDecision bind;
  for (size_t i = 0; i < snapshot->workloads.size(); ++i)
    if (snapshot->workloads[i].name == ns + "/g") bind.workload.value = static_cast<int32_t>(i);
  core::NodeId node;
  for (size_t i = 0; i < snapshot->nodes.size(); ++i)
    if (snapshot->nodes[i].name == ns + "-0") node.value = static_cast<int32_t>(i);
  EXPECT_TRUE(node.valid());
  for (int r = 0; r < 2; ++r) bind.pods.push_back({0, r, {node, uint64_t{1} << r}});
  result.binds.push_back(bind);
  return result;
}

// A leader deposed half-way through a gang's binds writes nothing more: the pod it bound stays
// bound (as after a crash, for the next leader to complete the gang) rather than being deleted,
// which for a Job's pods the Job controller would count as failures.
TEST(KubeBackendOnTheControlPlane, ADeposedLeaderLeavesAHalfBoundGangAsItIs) {
  auto connected = chamberd::e2e::ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  kube::Client& client = **connected;
  const std::string ns = NamespaceWithANodeAndAQueue(client);
  ASSERT_FALSE(ns.empty());
  ASSERT_NO_FATAL_FAILURE(CreateGangOfTwo(client, ns));
  auto bound = [&] { return BoundPods(client, ns); };

  // Leading until the first pod of the gang is bound.
  KubeBackendOptions options;
  options.writers = 1;
  options.write_events = false;
  options.writes_allowed = [&] { return bound() == 0; };
  auto backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const core::CycleResult result = BindGangOfTwo(**backend, ns);
  ASSERT_EQ(result.binds.size(), 1u);
  ASSERT_TRUE((*backend)->Apply(result).ok());

  EXPECT_EQ(bound(), 1) << "the pod bound before leadership was lost was deleted";
  EXPECT_EQ((*backend)->stats().rollbacks, 0);
  auto list = client.List(kube::resources::kPods, ns);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->items.size(), 2u);

  backend->reset();
  DeleteNamespaceNodeAndQueue(client, ns);
}

// On a node that names no GPU UUIDs, the agent's samples of GPUs not in MIG mode go to the node's
// whole GPUs in NVML's order, skipping the GPUs in MIG mode (not among its nvidia.com/gpu); those
// are listed apart with their devices (docs/sharing.md, "MIG GPUs in the fleet view"). Without
// an agent, the node's nvidia.com/gpu.count label says how many it has.
TEST(KubeBackendOnTheControlPlane, AgentSamplesGoToTheWholeGpusAndGpusInMigModeAreListedApart) {
  auto connected = chamberd::e2e::ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  kube::Client& client = **connected;
  const std::string ns = NamespaceWithANodeAndAQueue(client);
  ASSERT_FALSE(ns.empty());
  kubesim::NodePoolSpec mixed;
  mixed.prefix = ns + "-mixed";
  mixed.gpus = 2;
  mixed.labels = {{"nvidia.com/gpu.count", "4"}};
  mixed.resources = {{"nvidia.com/mig-1g.10gb", "7"}, {"nvidia.com/mig-3g.40gb", "2"}};
  ASSERT_TRUE(kubesim::CreateFakeNodes(client, mixed).ok());
  const std::string node = kubesim::FakeNodeName(mixed, 0);

  KubeBackendOptions options;
  options.write_events = false;
  auto backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  // NVML's GPUs 0 and 2 in MIG mode, 1 and 3 not.
  auto sample = [](int index, double utilization, bool mig) {
    AgentGpuSample a;
    a.index = index;
    a.uuid = "GPU-" + std::to_string(index);
    a.sample.utilization = utilization;
    if (mig) a.sample.mig_devices = {{"MIG-" + std::to_string(index), "3g.40gb", 0, ""}};
    return a;
  };
  bool agent = false;
  (*backend)->SetGpuUsageSource([&] {
    AgentGpuUsage usage;
    if (agent)
      usage[node] = std::make_shared<const std::vector<AgentGpuSample>>(std::vector{
          sample(0, 0, true), sample(1, 0.25, false), sample(2, 0, true), sample(3, 0.75, false)});
    return usage;
  });
  size_t n = 0;
  auto observe = [&] {
    daemon::Observation o;
    EXPECT_TRUE(chamberd::e2e::Eventually(
        [&] {
          auto s = (*backend)->Refresh();
          if (!s.ok()) return false;
          for (n = 0; n < (*s)->nodes.size(); ++n)
            if ((*s)->nodes[n].name == node) break;
          if (n == (*s)->nodes.size()) return false;
          o = (*backend)->Observe();
          return true;
        },
        std::chrono::seconds(20)));
    return o;
  };
  // No agent: 4 GPUs less the 2 whole ones, named for the node, their devices not known.
  daemon::Observation o = observe();
  ASSERT_EQ(o.mig_gpus.size(), o.snapshot->nodes.size());
  ASSERT_EQ(o.mig_gpus[n].size(), 2u);
  EXPECT_EQ(o.mig_gpus[n][1].uuid, node + "/mig-gpu1");
  EXPECT_TRUE(o.mig_gpus[n][0].mig && o.mig_gpus[n][0].mig_devices.empty());
  // The agent: whole GPU 0 of the node is NVML's GPU 1, whole GPU 1 NVML's 3.
  agent = true;
  o = observe();
  ASSERT_EQ(o.samples[n].size(), 2u);
  EXPECT_DOUBLE_EQ(o.samples[n][0].utilization, 0.25);
  EXPECT_DOUBLE_EQ(o.samples[n][1].utilization, 0.75);
  ASSERT_EQ(o.mig_gpus[n].size(), 2u);
  EXPECT_EQ(o.mig_gpus[n][0].uuid, "GPU-0");
  EXPECT_EQ(o.mig_gpus[n][1].uuid, "GPU-2");
  EXPECT_EQ(o.mig_gpus[n][1].mig_devices.at(0).uuid, "MIG-2");
  // The 8-GPU node has neither.
  for (size_t m = 0; m < o.snapshot->nodes.size(); ++m)
    if (m != n) {
      EXPECT_TRUE(o.mig_gpus[m].empty()) << o.snapshot->nodes[m].name;
    }

  backend->reset();
  DeleteNamespaceNodeAndQueue(client, ns);
}

// A pod its controller changed after chamberd's snapshot (a label written as it made the pod,
// as a LeaderWorkerSet's controller does) fails the bind's resourceVersion precondition: the
// bind is tried again with the pod's new version, and the gang is not rolled back. A pod whose
// status another replica wrote meanwhile (its PodScheduled condition) is not bound again.
TEST(KubeBackendOnTheControlPlane, APodItsControllerChangedIsBoundWithItsNewVersion) {
  auto connected = chamberd::e2e::ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  kube::Client& client = **connected;
  const std::string ns = NamespaceWithANodeAndAQueue(client);
  ASSERT_FALSE(ns.empty());
  ASSERT_NO_FATAL_FAILURE(CreateGangOfTwo(client, ns));
  KubeBackendOptions options;
  options.writers = 2;
  options.write_events = false;
  auto backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const core::CycleResult result = BindGangOfTwo(**backend, ns);
  ASSERT_EQ(result.binds.size(), 1u);
  auto list = client.List(kube::resources::kPods, ns);
  ASSERT_TRUE(list.ok() && list->items.size() == 2u);
  const std::string first = list->items[0]["metadata"]["name"];
  ASSERT_TRUE(client
                  .MergePatch(kube::resources::kPods, ns, first,
                              {{"metadata", {{"labels", {{"controller-wrote", "this"}}}}}})
                  .ok());
  ASSERT_TRUE((*backend)->Apply(result).ok());
  EXPECT_EQ(BoundPods(client, ns), 2);
  EXPECT_EQ((*backend)->stats().rollbacks, 0);
  EXPECT_EQ((*backend)->stats().changed_pod_rebinds, 1);

  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  (void)client.Delete(kube::resources::kPods, ns, "", now);
  ASSERT_TRUE(chamberd::e2e::Eventually(
      [&] {
        auto l = client.List(kube::resources::kPods, ns);
        return l.ok() && l->items.empty();
      },
      std::chrono::seconds(20)));
  // Now a status write by another replica: not bound again, the gang rolled back.
  ASSERT_NO_FATAL_FAILURE(CreateGangOfTwo(client, ns));
  backend->reset();
  backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const core::CycleResult again = BindGangOfTwo(**backend, ns);
  ASSERT_EQ(again.binds.size(), 1u);
  list = client.List(kube::resources::kPods, ns);
  ASSERT_TRUE(list.ok() && list->items.size() == 2u);
  const std::string second = list->items[1]["metadata"]["name"];
  const Json condition = {{"type", "PodScheduled"},
                          {"status", "False"},
                          {"reason", "Unschedulable"},
                          {"message", "written by another replica"}};
  ASSERT_TRUE(client
                  .MergePatch(kube::resources::kPods, ns, second,
                              {{"status", {{"conditions", Json::array({condition})}}}}, "status")
                  .ok());
  ASSERT_TRUE((*backend)->Apply(again).ok());
  const auto after = client.Get(kube::resources::kPods, ns, second);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["spec"].value("nodeName", ""), "");
  EXPECT_EQ((*backend)->stats().changed_pod_rebinds, 0);
  EXPECT_GE((*backend)->stats().rollbacks, 1);

  backend->reset();
  DeleteNamespaceNodeAndQueue(client, ns);
}

// The leader fence (docs/reliability.md#fencing-a-deposed-leader) reads the Lease from the API
// server's cache, which may show the previous term for a moment after a takeover. A leader's
// bind the fence refuses then is tried again until the Lease shows through: the gang binds
// whole, stamped with the term, and nothing is rolled back. Here the Lease passes from "old" to
// "new" only after the binds began.
TEST(KubeBackendOnTheControlPlane, ABindTheFenceRefusesWhileLeadingIsTriedAgain) {
  auto connected = chamberd::e2e::ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  kube::Client& client = **connected;
  const std::string ns = NamespaceWithANodeAndAQueue(client);
  ASSERT_FALSE(ns.empty());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("chamber-" + ns);
  std::filesystem::create_directories(dir);
  auto fence = chamberd::e2e::ApplyLeaderFence(CHAMBER_CHART, ns, dir);
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  const std::string lease = ns + "/chamber-scheduler";
  Json lease_object = {{"apiVersion", "coordination.k8s.io/v1"},
                       {"kind", "Lease"},
                       {"metadata", {{"name", "chamber-scheduler"}, {"namespace", ns}}},
                       {"spec", {{"holderIdentity", "old"}, {"leaseTransitions", 0}}}};
  auto created = client.Create(kube::resources::kLeases, ns, lease_object);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(chamberd::e2e::WaitForLeaderFence(client, ns, lease, ns + "-0"));
  ASSERT_NO_FATAL_FAILURE(CreateGangOfTwo(client, ns));
  auto bound_in_term = [&](const std::string& term) {
    int n = 0;
    auto list = client.List(kube::resources::kPods, ns);
    if (list.ok())
      for (const Json& p : list->items)
        n += !p["spec"].value("nodeName", "").empty() &&
             p["metadata"]["annotations"].value("chamber.io/leader-term", "") == term;
    return n;
  };

  KubeBackendOptions options;
  options.writers = 2;
  options.write_events = false;
  options.leader_lease = lease;
  options.leader_term = "new/1";
  auto backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const core::CycleResult result = BindGangOfTwo(**backend, ns);
  ASSERT_EQ(result.binds.size(), 1u);
  std::thread apply([&] { EXPECT_TRUE((*backend)->Apply(result).ok()); });
  // Refused while the Lease is old's.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(bound_in_term("new/1"), 0);
  auto current = client.Get(kube::resources::kLeases, ns, "chamber-scheduler");
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  (*current)["spec"]["holderIdentity"] = "new";
  (*current)["spec"]["leaseTransitions"] = 1;
  ASSERT_TRUE(client.Update(kube::resources::kLeases, ns, *current).ok());
  apply.join();
  EXPECT_EQ(bound_in_term("new/1"), 2) << "the refused binds were not tried again";
  EXPECT_EQ((*backend)->stats().rollbacks, 0);
  EXPECT_GE((*backend)->stats().fence_refusals, 2);  // each pod's first try, at least

  backend->reset();
  chamberd::e2e::DeleteLeaderFence(*fence, dir);
  std::filesystem::remove_all(dir);
  DeleteNamespaceNodeAndQueue(client, ns);
}

// A gang whose bind fails half-way is rolled back by deleting the members already bound. A
// delete that fails (here an admission policy refuses it; in the 1,000-fault run, an API
// server outage) leaves the pod bound: it keeps its GPUs in chamberd's books, as an assumed
// bind, until the informer shows it bound or gone, so that the next cycle, with an informer
// that has not seen the bind yet, does not give its GPUs to another pod. Both ways of rolling
// back: a Job (suspended, its bound pod left to the Job controller, whose delete the policy
// refuses as well) and a gang of bare pods (chamberd's delete refused).
TEST(KubeBackendOnTheControlPlane, ARolledBackPodWhoseDeleteFailedKeepsItsGpus) {
  auto connected = chamberd::e2e::ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  kube::Client& client = **connected;
  const std::string ns = NamespaceWithANodeAndAQueue(client);
  ASSERT_FALSE(ns.empty());

  // Bound pods of this namespace labelled `keep` cannot be deleted.
  const kube::ResourceType& policies = chamberd::e2e::kValidatingAdmissionPolicies;
  const kube::ResourceType& bindings = chamberd::e2e::kValidatingAdmissionPolicyBindings;
  const Json policy = {
      {"metadata", {{"name", ns}}},
      {"spec",
       {{"failurePolicy", "Fail"},
        {"matchConstraints",
         {{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns}}}}},
          {"resourceRules",
           {{{"apiGroups", {""}},
             {"apiVersions", {"v1"}},
             {"operations", {"DELETE"}},
             {"resources", {"pods"}}}}}}},
        {"validations",
         {{{"expression",
            "!has(oldObject.spec.nodeName) || !has(oldObject.metadata.labels) || "
            "!('keep' in oldObject.metadata.labels)"},
           {"message", "this test keeps its bound pods"}}}}}}};
  ASSERT_TRUE(client.Create(policies, "", policy).ok());
  const Json binding = {{"metadata", {{"name", ns}}},
                        {"spec", {{"policyName", ns}, {"validationActions", {"Deny"}}}}};
  ASSERT_TRUE(client.Create(bindings, "", binding).ok());
  // Whatever the outcome, the policy goes first: it would keep the namespace's pods forever.
  struct Cleanup {
    std::function<void()> run;
    ~Cleanup() { run(); }
  } cleanup{[&] {
    (void)client.Delete(bindings, "", ns);
    (void)client.Delete(policies, "", ns);
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    (void)client.Delete(kube::resources::kPods, ns, "", now);
    (void)client.Delete(kube::resources::kNamespaces, "", ns);
    (void)client.Delete(kQueues, "", ns);
    (void)kubesim::DeleteFakeNodes(client);
  }};
  const Json container = {
      {"name", "main"},
      {"image", "trainer:latest"},
      {"resources",
       {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 1}}}, {"limits", {{"nvidia.com/gpu", 1}}}}}};
  // The policy is in force once a bound probe pod cannot be deleted. Each try is a new pod: a
  // delete allowed before takes it at once (no grace), and a second delete of a pod on its way
  // out would not be judged again.
  int probes = 0;
  ASSERT_TRUE(chamberd::e2e::Eventually(
      [&] {
        const std::string name = "probe-" + std::to_string(probes++);
        const Json probe = {{"metadata", {{"name", name}, {"labels", {{"keep", "yes"}}}}},
                            {"spec",
                             {{"schedulerName", "nobody"},
                              {"nodeName", ns + "-0"},
                              {"containers", {{{"name", "main"}, {"image", "trainer:latest"}}}}}}};
        if (!client.Create(kube::resources::kPods, ns, probe).ok()) return false;
        kube::DeleteOptions now;
        now.grace_period_seconds = 0;
        return !client.Delete(kube::resources::kPods, ns, name, now).ok();
      },
      std::chrono::seconds(20)))
      << "the admission policy never refused a delete";

  for (const std::string name : {"a", "b"}) {
    const Json pod = {
        {"metadata",
         {{"name", name},
          {"labels", {{"chamber.io/pod-group", "g"}, {"chamber.io/queue", ns}, {"keep", "yes"}}},
          {"annotations", {{"chamber.io/min-member", "2"}}}}},
        {"spec", {{"schedulerName", "chamber"}, {"containers", Json::array({container})}}}};
    ASSERT_TRUE(client.Create(kube::resources::kPods, ns, pod).ok());
  }
  const Json job = {{"metadata", {{"name", "j"}, {"labels", {{"chamber.io/queue", ns}}}}},
                    {"spec",
                     {{"parallelism", 2},
                      {"completions", 2},
                      {"backoffLimit", 0},
                      {"template",
                       {{"metadata", {{"labels", {{"keep", "yes"}}}}},
                        {"spec",
                         {{"schedulerName", "chamber"},
                          {"restartPolicy", "Never"},
                          {"containers", Json::array({container})}}}}}}}};
  ASSERT_TRUE(client.Create(kube::resources::kJobs, ns, job).ok());

  KubeBackendOptions options;
  options.writers = 1;
  options.write_events = false;
  auto backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  // Both gangs whole in one build.
  auto find = [&](const std::string& name) {
    const BuiltSnapshot& built = (*backend)->built();
    for (size_t i = 0; i < built.snapshot.workloads.size(); ++i)
      if (built.snapshot.workloads[i].name == name && built.snapshot.workloads[i].TotalPods() == 2)
        return static_cast<int32_t>(i);
    return -1;
  };
  ASSERT_TRUE(chamberd::e2e::Eventually(
      [&] { return (*backend)->Refresh().ok() && find(ns + "/g") >= 0 && find(ns + "/j") >= 0; },
      std::chrono::seconds(30)));
  const BuiltSnapshot& built = (*backend)->built();
  core::NodeId node;
  for (size_t i = 0; i < built.snapshot.nodes.size(); ++i)
    if (built.snapshot.nodes[i].name == ns + "-0") node.value = static_cast<int32_t>(i);
  ASSERT_TRUE(node.valid());
  // Each gang's second pod is deleted before its bind (the first member's delete is refused
  // once it is bound): the bind of the first goes through, the second's fails.
  core::CycleResult result;
  std::vector<std::string> first;
  int gpu = 0;
  for (const std::string& name : {ns + "/g", ns + "/j"}) {
    core::BindDecision bind;
    bind.workload.value = find(name);
    for (int r = 0; r < 2; ++r) bind.pods.push_back({0, r, {node, uint64_t{1} << gpu++}});
    const WorkloadSource& src = built.sources[bind.workload.index()];
    first.push_back(src.pods[0][0].Key());
    ASSERT_TRUE(client.Delete(kube::resources::kPods, ns, src.pods[0][1].name()).ok());
    result.binds.push_back(bind);
  }
  ASSERT_TRUE((*backend)->Apply(result).ok());

  EXPECT_EQ((*backend)->stats().bind_failures, 2);
  EXPECT_EQ((*backend)->stats().rollbacks, 2);
  EXPECT_GE((*backend)->stats().write_errors, 1) << "the refused delete is counted";
  for (const std::string& key : first) {
    auto pod = client.Get(kube::resources::kPods, ns, key.substr(key.find('/') + 1));
    ASSERT_TRUE(pod.ok()) << key << ": " << pod.status().ToString();
    EXPECT_EQ((*pod)["spec"].value("nodeName", ""), ns + "-0") << key << " is still bound";
  }
  EXPECT_EQ((*backend)->AssumedPods(), first)
      << "a bound pod whose delete failed, or left to the Job controller, lost its assumed bind, "
         "so its GPUs looked free";
  auto job_now = client.Get(kube::resources::kJobs, ns, "j");
  ASSERT_TRUE(job_now.ok());
  EXPECT_TRUE((*job_now)["spec"].value("suspend", false)) << "the Job was suspended first";

  // The next build, whatever the informer has seen by then, holds their GPUs (0 and 2).
  ASSERT_TRUE((*backend)->Refresh().ok());
  uint64_t held = 0;
  for (const core::Workload& w : (*backend)->built().snapshot.workloads)
    for (const core::PodPlacement& p : w.placements)
      if (p.node == node) held |= p.gpu_mask;
  EXPECT_EQ(held, uint64_t{0b101});

  backend->reset();
}

// A workload kind whose CRD is installed after chamberd started is found at the next look (every
// `kind_discovery_every`) and scheduled as one gang from then on, with no restart.
TEST(KubeBackendOnTheControlPlane, AWorkloadKindInstalledLaterIsWatchedWithoutARestart) {
  auto connected = chamberd::e2e::ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  kube::Client& client = **connected;
  // XGBoostJob: no other test installs it. A CRD of the kind's name that keeps what it is given.
  const std::string crd_name = "xgboostjobs.kubeflow.org";
  const Json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", crd_name}}},
      {"spec",
       {{"group", "kubeflow.org"},
        {"scope", "Namespaced"},
        {"names", {{"plural", "xgboostjobs"}, {"singular", "xgboostjob"}, {"kind", "XGBoostJob"}}},
        {"versions",
         {{{"name", "v1"},
           {"served", true},
           {"storage", true},
           {"schema",
            {{"openAPIV3Schema",
              {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}};
  (void)client.Delete(kCustomResourceDefinitions, "", crd_name);
  ASSERT_TRUE(chamberd::e2e::Eventually(
      [&] {
        return kube::IsNotFound(client.Get(kCustomResourceDefinitions, "", crd_name).status());
      },
      std::chrono::seconds(30)));
  const std::string ns = "kb-" + std::to_string(std::random_device{}() % 1000000);
  ASSERT_TRUE(client.Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", ns}}}}).ok());

  KubeBackendOptions options;
  options.write_events = false;
  options.kind_discovery_every = std::chrono::milliseconds(200);
  auto backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();

  ASSERT_TRUE(ApplyCrd(client, crd).ok());
  const Json container = {
      {"name", "xgboost"},
      {"image", "trainer:latest"},
      {"resources",
       {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 1}}}, {"limits", {{"nvidia.com/gpu", 1}}}}}};
  const Json tmpl = {{"spec", {{"schedulerName", "chamber"}, {"containers", {container}}}}};
  const Json job = {{"apiVersion", "kubeflow.org/v1"},
                    {"kind", "XGBoostJob"},
                    {"metadata", {{"name", "xgb"}, {"labels", {{"chamber.io/queue", ns}}}}},
                    {"spec",
                     {{"xgbReplicaSpecs",
                       {{"Master", {{"replicas", 1}, {"template", tmpl}}},
                        {"Worker", {{"replicas", 1}, {"template", tmpl}}}}}}}};
  const kube::ResourceType& type = FindWorkloadKind("kubeflow.org/v1", "XGBoostJob")->type;
  Result<Json> created =
      chamberd::e2e::Eventually([&] { return client.Create(type, ns, job).ok(); },
                                std::chrono::seconds(10))
          ? client.Get(type, ns, "xgb")
          : Result<Json>(Status::Unavailable("not created"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  // Its pods, as the operator would make them.
  for (const std::string name : {"xgb-master-0", "xgb-worker-0"}) {
    Json pod = tmpl;
    pod["metadata"] = {{"name", name},
                       {"ownerReferences",
                        {{{"apiVersion", "kubeflow.org/v1"},
                          {"kind", "XGBoostJob"},
                          {"name", "xgb"},
                          {"uid", (*created)["metadata"]["uid"]},
                          {"controller", true}}}}};
    ASSERT_TRUE(client.Create(kube::resources::kPods, ns, pod).ok());
  }
  // Whether the backend's next build holds the XGBoostJob as one workload of its 2 pods.
  auto one_workload = [&] {
    if (!(*backend)->Refresh().ok()) return false;
    const BuiltSnapshot& built = (*backend)->built();
    for (size_t i = 0; i < built.snapshot.workloads.size(); ++i)
      if (built.snapshot.workloads[i].name == ns + "/xgb")
        return built.sources[i].kind == WorkloadSource::Kind::kOwner &&
               built.snapshot.workloads[i].TotalPods() == 2;
    return false;
  };
  EXPECT_TRUE(chamberd::e2e::Eventually(one_workload, std::chrono::seconds(20)))
      << "the XGBoostJob and its 2 pods are one workload once its CRD is served; problems: "
      << ::testing::PrintToString((*backend)->built().problems) << "; workloads: " << [&] {
           std::string names;
           for (const core::Workload& w : (*backend)->built().snapshot.workloads)
             names += w.name + " ";
           return names;
         }();

  // A new backend (a restart, a new leader) finds it in its first list.
  backend->reset();
  backend = KubeBackend::Create(&client, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  EXPECT_TRUE(chamberd::e2e::Eventually(one_workload, std::chrono::seconds(20)))
      << "listed at the start, it is one workload too; problems: "
      << ::testing::PrintToString((*backend)->built().problems);

  backend->reset();
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  (void)client.Delete(kube::resources::kPods, ns, "", now);
  (void)client.Delete(kube::resources::kNamespaces, "", ns);
  (void)client.Delete(kCustomResourceDefinitions, "", crd_name);
}

}  // namespace
}  // namespace chamber::backend
