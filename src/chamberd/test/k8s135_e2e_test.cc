// chamberd on Kubernetes 1.35, whose upstream gang API is the first one: Workloads in
// scheduling.k8s.io/v1alpha1, each listing its pod groups, and pods naming one in
// spec.workloadRef (1.36 replaced both with the PodGroup API). The suite's control plane is the
// 1.35 kube-apiserver with GenericWorkload on (scripts/controlplane.sh start --k8s-1.35); no
// controller manager runs there, so the test makes its pods itself, and the simulated kubelets
// run them.
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/kube/workload_kinds.h"
#include "chamberd/test/chamberd_fixture.h"
#include "chamberd/test/cluster_fixture.h"
#include "chamberd/test/e2e_support.h"
#include "chamberd/test/webhook_fixture.h"
#include "kube/client.h"
#include "kube/types.h"

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;
using kube::Json;

class K8s135E2E : public e2e::WithWebhook<e2e::ChamberdCluster> {
 protected:
  void SetUp() override {
    const std::string n = NewNamespace("k135-", "chamberd-k135-");
    if (HasFailure()) return;
    std::ofstream(dir_ / "config.yaml") << "cyclePeriod: 300ms\n";
    queue_ = "k135-q-" + n;
    Queue(queue_, 16);
    SelectNamespace(ns_);
  }

  void Workload(const std::string& name, Json pod_groups) {
    const kube::ResourceType& type = backend::WorkloadV1alpha1Type();
    Json w = {{"apiVersion", type.ApiVersion()},
              {"kind", type.kind},
              {"metadata", {{"name", name}, {"labels", {{"chamber.io/queue", queue_}}}}},
              {"spec", {{"podGroups", std::move(pod_groups)}}}};
    auto made = client_->Create(type, ns_, w);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }

  // A pod of `gpus` GPUs in `group` of Workload `workload` (replica `replica`, unless empty). It
  // names no scheduler and, unless `own_queue`, carries no queue: the webhook opts it in
  // through its Workload.
  void Pod(const std::string& name, const std::string& workload, const std::string& group,
           const std::string& replica, int gpus = 1, bool own_queue = false) {
    Json ref = {{"name", workload}, {"podGroup", group}};
    if (!replica.empty()) ref["podGroupReplicaKey"] = replica;
    Json requests = {{"cpu", "1"}};
    if (gpus > 0) requests["nvidia.com/gpu"] = gpus;
    Json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"labels", Json::object()}}},
              {"spec",
               {{"workloadRef", std::move(ref)},
                {"terminationGracePeriodSeconds", 0},
                {"containers", Json::array({{{"name", "main"},
                                             {"image", "trainer:latest"},
                                             {"resources", {{"requests", requests}}}}})}}}};
    if (gpus > 0) p["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", gpus}};
    if (own_queue) p["metadata"]["labels"]["chamber.io/queue"] = queue_;
    auto made = client_->Create(kube::resources::kPods, ns_, p);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_TRUE((*made)["spec"].contains("workloadRef"))
        << "the API server dropped spec.workloadRef: is GenericWorkload on?";
    EXPECT_EQ((*made)["spec"].value("schedulerName", ""), "chamber") << name;
    EXPECT_EQ((*made)["metadata"]["labels"].value("chamber.io/queue", ""), queue_)
        << name << (own_queue ? ": its own queue" : ": the Workload's queue");
  }

  kube::Pod Get(const std::string& name) {
    return kube::Pod::FromJson(client_->Get(kube::resources::kPods, ns_, name).value()).value();
  }

  int Bound(const std::vector<std::string>& names) {
    int n = 0;
    for (const std::string& name : names) n += Get(name).node_name.empty() ? 0 : 1;
    return n;
  }

  // The pod's PodScheduled condition, "<status> <reason>: <message>".
  std::string Scheduled(const std::string& name) {
    for (const kube::Condition& c : Get(name).conditions)
      if (c.type == "PodScheduled") return c.status + " " + c.reason + ": " + c.message;
    return "";
  }

  std::string queue_;
};

// Each replica of a gang group starts whole or not at all (two replicas of 3 one-GPU pods on
// one node of 4 GPUs: one starts, the other waits saying why, and starts on a second node);
// a basic group's pods start each on their own; a pod whose Workload does not exist yet waits
// for it. Every pod was opted in by the admission webhook through its Workload's queue label.
TEST_F(K8s135E2E, EachReplicaOfAWorkloadsGangGroupStartsWholeAndBasicPodsAlone) {
  const int port = StartWithWebhook("solo", {"--no-leader-elect"});
  ASSERT_GT(port, 0);
  RegisterWebhook(port, queue_);
  if (HasFailure()) return;
  Nodes(1, 4);
  StartSim();
  Workload("llm", {{{"name", "workers"}, {"policy", {{"gang", {{"minCount", 3}}}}}},
                   {{"name", "notebooks"}, {"policy", {{"basic", Json::object()}}}}});
  for (const char* name : {"a-0", "a-1", "a-2"}) Pod(name, "llm", "workers", "a");
  for (const char* name : {"b-0", "b-1", "b-2"}) Pod(name, "llm", "workers", "b");
  Pod("orphan", "later", "workers", "", 0, /*own_queue=*/true);
  if (HasFailure()) return;

  // One replica starts whole; the other holds nothing and each of its pods says why.
  ASSERT_TRUE(Eventually(
      [&] {
        return Bound({"a-0", "a-1", "a-2"}) + Bound({"b-0", "b-1", "b-2"}) == 3;
      },
      30s));
  const bool a_first = Bound({"a-0", "a-1", "a-2"}) == 3;
  const std::vector<std::string> waiting = a_first ? std::vector<std::string>{"b-0", "b-1", "b-2"}
                                                   : std::vector<std::string>{"a-0", "a-1", "a-2"};
  std::string seen;
  EXPECT_TRUE(Eventually(
      [&] {
        for (const std::string& name : waiting) {
          seen = Scheduled(name);
          if (seen.rfind("False Unschedulable: NoNodeFits: ", 0) != 0) return false;
        }
        return true;
      },
      20s))
      << seen;
  EXPECT_EQ(Bound(waiting), 0) << "a replica never starts in part";

  // A second node: the waiting replica starts whole there.
  Nodes(1, 4, "gpu-b");
  ASSERT_TRUE(Eventually([&] { return Bound(waiting) == 3; }, 30s));
  ExpectNoDoubleBooking(4);

  // A basic group's pods are each their own: the two GPUs left, one each.
  Pod("nb-0", "llm", "notebooks", "");
  Pod("nb-1", "llm", "notebooks", "");
  EXPECT_TRUE(Eventually([&] { return Bound({"nb-0", "nb-1"}) == 2; }, 30s));
  ExpectNoDoubleBooking(4);

  // The pod whose Workload did not exist waited all along (it asks for no GPU, so only that
  // held it back) and starts once the Workload is there.
  EXPECT_EQ(Bound({"orphan"}), 0);
  Workload("later", {{{"name", "workers"}, {"policy", {{"gang", {{"minCount", 1}}}}}}});
  EXPECT_TRUE(Eventually([&] { return Bound({"orphan"}) == 1; }, 30s));
}

}  // namespace
}  // namespace chamber::chamberd
