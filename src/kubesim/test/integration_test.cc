// Fake nodes and the pod lifecycle simulator against a real kube-apiserver, etcd and
// kube-controller-manager (the ctest fixture "controlplane" sets CHAMBER_TEST_KUBECONFIG).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/errors.h"
#include "kube/types.h"
#include "kubesim/nodes.h"
#include "kubesim/simulator.h"

namespace chamber::kubesim {
namespace {

using namespace std::chrono_literals;
using kube::Json;
using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

class KubesimIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* kc = std::getenv("CHAMBER_TEST_KUBECONFIG");
    if (kc == nullptr || *kc == '\0') GTEST_SKIP() << "CHAMBER_TEST_KUBECONFIG is not set";
    Result<kube::RestConfig> cfg = kube::LoadKubeconfig(kc);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    cfg->qps = 0;
    Result<std::unique_ptr<kube::Client>> c = kube::Client::Create(*cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
    std::random_device rd;
    id_ = std::to_string(rd() % 1'000'000);
    ns_ = "kubesim-it-" + id_;
    Result<Json> created = client_->Create(
        kube::resources::kNamespaces, "",
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    pool_.prefix = "ks-" + id_;
    pool_.count = 2;
    pool_.labels["chamber.io/test-pool"] = id_;
    pool_.labels["topology.kubernetes.io/zone"] = "zone-a";
    options_.node_selector = std::string(kFakeNodeSelector) + ",chamber.io/test-pool=" + id_;
    options_.writers = 4;
  }

  void TearDown() override {
    if (sim_) sim_->Stop();
    if (!client_) return;
    (void)client_->Delete(kube::resources::kNamespaces, "", ns_);
    (void)DeleteFakeNodes(*client_, 4, "chamber.io/test-pool=" + id_);
  }

  void StartSimulator(bool create_nodes = true) {
    if (create_nodes) {
      Result<NodeWriteStats> made = CreateFakeNodes(*client_, pool_, 4);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
    }
    sim_ = std::make_unique<Simulator>(client_.get(), options_);
    Status s = sim_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  Json PodObject(const std::string& name, const std::map<std::string, std::string>& annotations) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"annotations", annotations}}},
            {"spec",
             {{"schedulerName", "kubesim-test"},  // no scheduler binds it but the test
              {"restartPolicy", "Never"},
              {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  }

  // Creates a pod and binds it to node `node_index` of the pool.
  void CreateAndBind(const std::string& name,
                     const std::map<std::string, std::string>& annotations = {},
                     int node_index = 0) {
    Result<Json> pod = client_->Create(kube::resources::kPods, ns_, PodObject(name, annotations));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    Status b = client_->Bind(ns_, name, (*pod)["metadata"]["uid"], FakeNodeName(pool_, node_index));
    ASSERT_TRUE(b.ok()) << b.ToString();
  }

  // Polls the pod until `done` holds; returns it (null JSON on timeout or when it is gone and
  // `done` does not accept that).
  Json WaitPod(const std::string& name, const std::function<bool(const Json*)>& done,
               std::chrono::milliseconds timeout) {
    const auto end = SteadyClock::now() + timeout;
    while (true) {
      Result<Json> pod = client_->Get(kube::resources::kPods, ns_, name);
      const Json* p = pod.ok() ? &*pod : nullptr;
      if (!pod.ok() && !kube::IsNotFound(pod.status())) ADD_FAILURE() << pod.status().ToString();
      if (done(p)) return p != nullptr ? *p : Json();
      if (SteadyClock::now() > end) {
        ADD_FAILURE() << "timed out waiting for pod " << name
                      << (p != nullptr ? ": " + p->dump() : std::string(" (gone)"));
        return Json();
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  static std::function<bool(const Json*)> PhaseIs(const std::string& phase) {
    return [phase](const Json* p) {
      return p != nullptr && p->contains("status") && (*p)["status"].value("phase", "") == phase;
    };
  }

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Simulator> sim_;
  std::string id_, ns_;
  NodePoolSpec pool_;
  SimulatorOptions options_;
};

TEST_F(KubesimIntegrationTest, NodesHaveCapacityLabelsAndAreReady) {
  pool_.count = 3;
  pool_.gpus = 8;
  pool_.gpu_model = "NVIDIA-A100-SXM4-80GB";
  pool_.taints.push_back({"dedicated", "ml", "NoSchedule"});
  Result<NodeWriteStats> made = CreateFakeNodes(*client_, pool_, 4);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->created, 3);
  for (int i = 0; i < 3; ++i) {
    Result<Json> raw = client_->Get(kube::resources::kNodes, "", FakeNodeName(pool_, i));
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    Result<kube::Node> node = kube::Node::FromJson(*raw);
    ASSERT_TRUE(node.ok());
    EXPECT_EQ(node->capacity.Get(kGpuResource), 8);
    EXPECT_EQ(node->allocatable.Get(kGpuResource), 8);
    EXPECT_EQ(node->allocatable.Get("pods"), 110);
    EXPECT_EQ(node->metadata.labels.at(kGpuProductLabel), "NVIDIA-A100-SXM4-80GB");
    EXPECT_EQ(node->metadata.labels.at("topology.kubernetes.io/zone"), "zone-a");
    EXPECT_EQ(node->metadata.labels.at(kFakeNodeLabel), "true");
    EXPECT_TRUE(node->Ready());
    ASSERT_EQ(node->taints.size(), 1u);
    EXPECT_EQ(node->taints[0].key, "dedicated");
    EXPECT_EQ((*raw)["status"]["nodeInfo"]["containerRuntimeVersion"], "fake://chamber-kubesim");
  }
  // Idempotent: a second run finds them all.
  Result<NodeWriteStats> again = CreateFakeNodes(*client_, pool_, 4);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->created, 0);
  EXPECT_EQ(again->existing, 3);

  Result<NodeWriteStats> deleted = DeleteFakeNodes(*client_, 4, "chamber.io/test-pool=" + id_);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->deleted, 3);
  EXPECT_TRUE(
      kube::IsNotFound(client_->Get(kube::resources::kNodes, "", FakeNodeName(pool_, 0)).status()));
}

TEST_F(KubesimIntegrationTest, BoundPodRunsThenSucceedsAfterItsDuration) {
  ASSERT_NO_FATAL_FAILURE(StartSimulator());
  // An unbound pod is left alone.
  Result<Json> unbound = client_->Create(kube::resources::kPods, ns_, PodObject("unbound", {}));
  ASSERT_TRUE(unbound.ok()) << unbound.status().ToString();

  ASSERT_NO_FATAL_FAILURE(CreateAndBind("short", {{"chamber.io/sim-duration-seconds", "1.5"}}, 1));
  const auto bound = SteadyClock::now();
  const Json running = WaitPod("short", PhaseIs("Running"), 10s);
  const auto running_at = SteadyClock::now();
  ASSERT_FALSE(running.is_null());
  EXPECT_LT(Seconds(running_at - bound), 3.0);
  const Json& st = running["status"];
  EXPECT_EQ(st["hostIP"], FakeNodeAddress(1));
  EXPECT_FALSE(st.value("podIP", "").empty());
  EXPECT_TRUE(st.contains("startTime"));
  EXPECT_TRUE(st["containerStatuses"][0]["state"].contains("running"));
  int ready = 0;
  for (const Json& c : st["conditions"])
    if (c["status"] == "True" && (c["type"] == "Ready" || c["type"] == "ContainersReady" ||
                                  c["type"] == "Initialized" || c["type"] == "PodScheduled"))
      ++ready;
  EXPECT_EQ(ready, 4);

  const Json done = WaitPod("short", PhaseIs("Succeeded"), 10s);
  const double ran = Seconds(SteadyClock::now() - running_at);
  ASSERT_FALSE(done.is_null());
  EXPECT_GE(ran, 1.2);
  EXPECT_LT(ran, 4.0);
  const Json& term = done["status"]["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(term["exitCode"], 0);
  EXPECT_EQ(term["reason"], "Completed");
  for (const Json& c : done["status"]["conditions"])
    if (c["type"] == "Ready") {
      EXPECT_EQ(c["status"], "False");
    }

  Result<Json> still = client_->Get(kube::resources::kPods, ns_, "unbound");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ((*still)["status"].value("phase", ""), "Pending");
  EXPECT_EQ(sim_->stats().started, 1);
  EXPECT_EQ(sim_->stats().succeeded, 1);
}

TEST_F(KubesimIntegrationTest, NonzeroExitCodeFailsThePod) {
  ASSERT_NO_FATAL_FAILURE(StartSimulator());
  ASSERT_NO_FATAL_FAILURE(CreateAndBind(
      "crash", {{"chamber.io/sim-duration-seconds", "0.2"}, {"chamber.io/sim-exit-code", "3"}}));
  const Json failed = WaitPod("crash", PhaseIs("Failed"), 10s);
  ASSERT_FALSE(failed.is_null());
  const Json& term = failed["status"]["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(term["exitCode"], 3);
  EXPECT_EQ(term["reason"], "Error");
}

TEST_F(KubesimIntegrationTest, BadAnnotationFailsThePodWithTheReason) {
  ASSERT_NO_FATAL_FAILURE(StartSimulator());
  ASSERT_NO_FATAL_FAILURE(CreateAndBind("bad", {{"chamber.io/sim-duration-seconds", "soon"}}));
  const Json failed = WaitPod("bad", PhaseIs("Failed"), 10s);
  ASSERT_FALSE(failed.is_null());
  EXPECT_EQ(failed["status"]["reason"], "InvalidSimulation");
  EXPECT_THAT(failed["status"].value("message", ""),
              HasSubstr("annotation chamber.io/sim-duration-seconds: \"soon\""));
}

TEST_F(KubesimIntegrationTest, DeletedPodIsRemovedWithinTheGraceCap) {
  ASSERT_NO_FATAL_FAILURE(StartSimulator());
  ASSERT_NO_FATAL_FAILURE(CreateAndBind("forever"));
  const Json running = WaitPod("forever", PhaseIs("Running"), 10s);
  ASSERT_FALSE(running.is_null());
  kube::DeleteOptions del;
  del.grace_period_seconds = 30;
  const auto deleted_at = SteadyClock::now();
  ASSERT_TRUE(client_->Delete(kube::resources::kPods, ns_, "forever", del).ok());
  // Bound pods are only marked for deletion by the API server: nobody but a kubelet removes them.
  Result<Json> marked = client_->Get(kube::resources::kPods, ns_, "forever");
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  EXPECT_TRUE((*marked)["metadata"].contains("deletionTimestamp"));
  WaitPod(
      "forever", [](const Json* p) { return p == nullptr; }, 10s);
  const double took = Seconds(SteadyClock::now() - deleted_at);
  EXPECT_GE(took, 1.5);  // the 2 s cap, less the time until the simulator saw the deletion
  EXPECT_LT(took, 6.0);
  // The simulator counts the deletion once the API server has answered it, which may be just
  // after the pod is seen gone.
  const auto counted_by = SteadyClock::now() + 2s;
  while (sim_->stats().deleted == 0 && SteadyClock::now() < counted_by)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(sim_->stats().deleted, 1);
}

TEST_F(KubesimIntegrationTest, JobCompletesThroughTheJobController) {
  ASSERT_NO_FATAL_FAILURE(StartSimulator());
  const Json job = {{"apiVersion", "batch/v1"},
                    {"kind", "Job"},
                    {"metadata", {{"name", "train"}}},
                    {"spec",
                     {{"parallelism", 2},
                      {"completions", 2},
                      {"backoffLimit", 0},
                      {"template",
                       {{"metadata", {{"annotations", {{"chamber.io/sim-duration-seconds", "1"}}}}},
                        {"spec",
                         {{"schedulerName", "kubesim-test"},
                          {"restartPolicy", "Never"},
                          {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}}}}}};
  Result<Json> created = client_->Create(kube::resources::kJobs, ns_, job);
  ASSERT_TRUE(created.ok()) << created.status().ToString();

  // The Job controller creates the pods; this test plays the scheduler.
  int bound = 0;
  const auto end = SteadyClock::now() + 30s;
  std::set<std::string> seen;
  while (bound < 2 && SteadyClock::now() < end) {
    kube::ListOptions opts;
    opts.label_selector = "batch.kubernetes.io/job-name=train";
    Result<kube::ObjectList> pods = client_->List(kube::resources::kPods, ns_, opts);
    ASSERT_TRUE(pods.ok()) << pods.status().ToString();
    for (const Json& p : pods->items) {
      const std::string name = p["metadata"]["name"];
      if (!seen.insert(name).second) continue;
      Status b = client_->Bind(ns_, name, p["metadata"]["uid"], FakeNodeName(pool_, bound % 2));
      ASSERT_TRUE(b.ok()) << b.ToString();
      ++bound;
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(bound, 2) << "the Job controller did not create 2 pods";

  bool complete = false;
  Json last;
  const auto job_end = SteadyClock::now() + 60s;
  while (!complete && SteadyClock::now() < job_end) {
    Result<Json> raw = client_->Get(kube::resources::kJobs, ns_, "train");
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    last = *raw;
    Result<kube::Job> j = kube::Job::FromJson(*raw);
    ASSERT_TRUE(j.ok());
    for (const auto& c : j->conditions)
      if (c.type == "Complete" && c.status == "True") complete = j->succeeded == 2;
    if (!complete) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(complete) << last.dump();
  EXPECT_EQ(last["status"].value("succeeded", 0), 2);
  EXPECT_EQ(last["status"].value("failed", 0), 0);
}

// Throughput: pods already bound when the simulator starts all become Running; the time from
// its start to the last one is the simulator's own rate. Size: CHAMBER_KUBESIM_SCALE_PODS (500).
TEST_F(KubesimIntegrationTest, ManyBoundPodsStart) {
  const char* env = std::getenv("CHAMBER_KUBESIM_SCALE_PODS");
  const int n = env != nullptr ? std::atoi(env) : 500;
  ASSERT_GT(n, 0);
  pool_.count = 10;
  options_.writers = 16;
  Result<NodeWriteStats> made = CreateFakeNodes(*client_, pool_, 4);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::atomic<int> next{0}, errors{0};
  auto bind_worker = [&] {
    for (int i = next++; i < n; i = next++) {
      const std::string name = "p-" + std::to_string(i);
      Result<Json> pod = client_->Create(kube::resources::kPods, ns_, PodObject(name, {}));
      if (!pod.ok() ||
          !client_->Bind(ns_, name, (*pod)["metadata"]["uid"], FakeNodeName(pool_, i % 10)).ok())
        ++errors;
    }
  };
  auto start = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) threads.emplace_back(bind_worker);
  for (auto& t : threads) t.join();
  const double bind_s = Seconds(SteadyClock::now() - start);
  ASSERT_EQ(errors.load(), 0);

  start = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(StartSimulator(false));
  const auto end = SteadyClock::now() + 120s;
  while (sim_->stats().started < n && SteadyClock::now() < end) std::this_thread::sleep_for(10ms);
  const double run_s = Seconds(SteadyClock::now() - start);
  ASSERT_EQ(sim_->stats().started, n);
  kube::ListOptions opts;
  opts.field_selector = "status.phase=Running";
  Result<kube::ObjectList> running = client_->List(kube::resources::kPods, ns_, opts);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(static_cast<int>(running->items.size()), n);
  std::printf(
      "kubesim: %d pods created and bound in %.2fs (%.0f/s); simulator start to all Running "
      "%.2fs (%.0f pods/s), conflicts %lld\n",
      n, bind_s, n / bind_s, run_s, n / run_s, static_cast<long long>(sim_->stats().conflicts));
}

}  // namespace
}  // namespace chamber::kubesim
