// The health controller end to end: the real control plane (kube-apiserver, etcd and
// kube-controller-manager from the ctest fixture), two fake GPU nodes (src/kubesim) with the pod
// lifecycle simulator, chamberd, and one chamber-agent per node on the fake NVML pushing its
// reports to chamberd with an agent token.
//
//   node X: Xid 79 on the GPU a Job runs on, then a flapping NVLink on its other GPU;
//   node Y: one Xid 13 (an application fault).
//
// Expected: X is tainted, annotated and conditioned within 2 s of the Xid (the latency is
// printed), the Job is preempted with reason HardwareFault and resumes on Y; Y is left alone;
// the flapping NVLink is one incident; once X's faults close, its fences lift after the
// probation (2 s here). chamberd writes the agents' GPU labels (chamber.io/gpu.*) to both Nodes,
// removes a stale one and leaves other labels alone, and writes nothing while nothing changes.
// A service-account token bound to a pod on X (TokenRequest, reviewed by chamberd through
// TokenReview) may post X's reports and is refused (403) for Y's.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "backend/kube/snapshot_builder.h"
#include "chamberd/test/cluster_fixture.h"
#include "chamberd/test/e2e_support.h"
#include "chamberd/test/health_e2e_support.h"
#include "health/health_writer.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kubesim/nodes.h"
#include "kubesim/simulator.h"

extern char** environ;

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Condition;
using e2e::Eventually;
using e2e::Scenario;
using e2e::Tainted;
using e2e::UnhealthyGpus;
using e2e::UnixNow;
using kube::Json;

constexpr char kAgentToken[] = "agent-token-0123456789abcdef";
constexpr char kAdminToken[] = "admin-token-0123456789abcdef";
constexpr char kReadToken[] = "read-token-0123456789abcdef";
constexpr char kAgentAccount[] = "chamber-agent";

pid_t Spawn(std::vector<std::string> args, const std::string& log,
            const std::vector<std::string>& extra_env = {}) {
  const std::string binary = args.front();
  const pid_t pid = e2e::SpawnLogged(std::move(args), log, extra_env);
  EXPECT_GT(pid, 0) << "cannot start " << binary;
  return pid;
}

void Stop(pid_t& pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

class HealthE2E : public e2e::ClusterTest {
 protected:
  void SetUp() override { NewNamespace("health-", "chamber-"); }

  void TearDown() override {
    for (pid_t& pid : pids_) Stop(pid);
    if (HasFailure()) {
      for (const std::string& name : logs_) {
        std::ifstream log(dir_ / name);
        std::cerr << "---- " << name << " ----\n" << log.rdbuf() << "\n";
      }
    }
    if (sim_) sim_->Stop();
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    (void)client_->Delete(kube::resources::kJobs, ns_, "", now);
    (void)client_->Delete(kube::resources::kPods, ns_, "", now);
    (void)client_->Delete(kube::resources::kNamespaces, "", ns_);
    (void)client_->Delete(backend::kQueues, "", queue_);
    (void)kubesim::DeleteFakeNodes(*client_);
    std::filesystem::remove_all(dir_);
  }

  int StartChamberd() {
    std::ofstream(dir_ / "config.yaml") << "cyclePeriod: 200ms\n"
                                           "preemption:\n"
                                           "  minRuntime: 0s\n"
                                           "  checkpointGraceSeconds: 0\n"
                                           "health:\n"
                                           "  probation: 2s\n"
                                           "  staleAfter: 20s\n";
    std::ofstream(dir_ / "tokens") << kAgentToken << " agent node-agents\n"
                                   << kAdminToken << " admin ops\n"
                                   << kReadToken << " read viewer\n";
    logs_.push_back("chamberd.log");
    // Token file first; other tokens go to TokenReview, where the test's service account has
    // the agent role.
    pids_.push_back(
        Spawn({CHAMBERD_BINARY, "--kubeconfig", std::getenv("CHAMBER_TEST_KUBECONFIG"), "--config",
               (dir_ / "config.yaml").string(), "--listen", "127.0.0.1:0", "--no-leader-elect",
               "--token-file", (dir_ / "tokens").string(), "--agent-user",
               "system:serviceaccount:" + ns_ + ":" + kAgentAccount, "--log-level", "debug"},
              (dir_ / "chamberd.log").string()));
    int port = 0;
    EXPECT_TRUE(Eventually(
        [&] {
          std::ifstream log(dir_ / "chamberd.log");
          std::string line;
          while (std::getline(log, line)) {
            if (line.find("serving the API and dashboard on http://127.0.0.1:") !=
                std::string::npos)
              port = std::stoi(line.substr(line.rfind(':') + 1));
          }
          return port > 0;
        },
        30s));
    return port;
  }

  // Starts an agent for `node`; returns its HTTP port.
  int StartAgent(const std::string& node, const Json& scenario, int chamberd_port) {
    const std::string tag = node.substr(node.rfind('-') + 1);
    const std::string scenario_path = (dir_ / ("scenario-" + tag + ".json")).string();
    std::ofstream(scenario_path) << scenario.dump();
    std::ofstream(dir_ / ("token-" + tag)) << kAgentToken << "\n";
    const std::string port_file = (dir_ / ("port-" + tag)).string();
    logs_.push_back("agent-" + tag + ".log");
    pids_.push_back(
        Spawn({CHAMBER_AGENT_BINARY,
               "--node-name",
               node,
               "--nvml-library",
               CHAMBER_FAKE_NVML,
               "--kernel-log",
               "",
               "--listen",
               "127.0.0.1:0",
               "--port-file",
               port_file,
               "--interval",
               "0.1",
               "--chamberd-url",
               "http://127.0.0.1:" + std::to_string(chamberd_port) + "/api/v1/agent/reports",
               "--token-file",
               (dir_ / ("token-" + tag)).string(),
               "--push-interval",
               "1",
               "--boot-grace",
               "0",
               "--debounce",
               "2",
               "--clear-after",
               "2",
               "--nvlink-error-window",
               "1",
               "--xid-clear-after",
               "6"},
              (dir_ / ("agent-" + tag + ".log")).string(),
              {"CHAMBER_FAKE_NVML_SCENARIO=" + scenario_path}));
    int port = 0;
    EXPECT_TRUE(Eventually(
        [&] {
          std::ifstream in(port_file);
          return static_cast<bool>(in >> port) && port > 0;
        },
        10s));
    return port;
  }

  static Json AgentGet(int port, const std::string& path) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get(path);
    if (!r || r->status != 200) return nullptr;
    if (path == "/metrics") return r->body;
    return Json::parse(r->body, nullptr, false);
  }

  Json Node(const std::string& name) {
    auto n = client_->Get(kube::resources::kNodes, "", name);
    return n.ok() ? *n : Json(nullptr);
  }

  static Json Labels(const Json& node) { return node["metadata"].value("labels", Json::object()); }
  static Json AgentLabels(const Json& node) {
    Json out = Json::object();
    const Json labels = Labels(node);
    for (const auto& [k, v] : labels.items())
      if (k.rfind("chamber.io/gpu.", 0) == 0) out[k] = v;
    return out;
  }
  // The value of one sample of chamberd's /metrics; -1 when it is not there.
  static double Metric(httplib::Client& api, const std::string& sample) {
    auto r = api.Get("/metrics",
                     httplib::Headers{{"Authorization", std::string("Bearer ") + kReadToken}});
    return r && r->status == 200 ? e2e::MetricSample(r->body, sample) : -1.0;
  }
  // A token for the test's agent service account bound to a pod on `node`, as the kubelet
  // projects into the agent's pod.
  std::string PodBoundToken(const std::string& node) {
    Json sa = {{"metadata", {{"name", kAgentAccount}}}};
    EXPECT_TRUE(client_->Create(kube::resources::kServiceAccounts, ns_, sa).ok());
    Result<std::string> token = e2e::PodBoundToken(*client_, ns_, kAgentAccount, "agent-x", node);
    EXPECT_TRUE(token.ok()) << token.status().ToString();
    return token.ok() ? *token : "";
  }

  std::string queue_;
  std::unique_ptr<kubesim::Simulator> sim_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
};

TEST_F(HealthE2E, XidFencesRequeuesAndRecoversAfterProbation) {
  kubesim::NodePoolSpec spec;
  spec.count = 2;
  spec.gpus = 2;
  spec.prefix = ns_ + "-gpu";
  spec.labels["chamber.io/gpu.mig"] = "stale";  // an agent label no agent reports any more
  ASSERT_TRUE(kubesim::CreateFakeNodes(*client_, spec).ok());
  sim_ = std::make_unique<kubesim::Simulator>(client_.get());
  ASSERT_TRUE(sim_->Start().ok());
  queue_ = ns_ + "-team";
  Json q = {{"apiVersion", "chamber.io/v1alpha1"},
            {"kind", "Queue"},
            {"metadata", {{"name", queue_}}},
            {"spec", {{"resources", {{"gpu", {{"quota", 4}}}}}}}};
  ASSERT_TRUE(Eventually([&] { return client_->Create(backend::kQueues, "", q).ok(); }, 10s));
  const int port = StartChamberd();
  ASSERT_GT(port, 0);

  // One 1-GPU Job; where it lands decides which GPU fails.
  Json container = {{"name", "main"},
                    {"image", "trainer:latest"},
                    {"resources",
                     {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", 1}}},
                      {"limits", {{"nvidia.com/gpu", 1}}}}}};
  Json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", "train"}, {"namespace", ns_}, {"labels", {{"chamber.io/queue", queue_}}}}},
              {"spec",
               {{"parallelism", 1},
                {"completions", 1},
                {"backoffLimit", 0},
                {"template",
                 {{"spec",
                   {{"schedulerName", "chamber"},
                    {"restartPolicy", "Never"},
                    {"terminationGracePeriodSeconds", 0},
                    {"containers", Json::array({container})}}}}}}}};
  ASSERT_TRUE(client_->Create(kube::resources::kJobs, ns_, job).ok());
  std::string node_x;
  int gpu = -1;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const kube::Pod& p : JobPods("train")) {
          auto a = p.metadata.annotations.find(backend::keys::kGpuIndices);
          if (p.node_name.empty() || a == p.metadata.annotations.end()) continue;
          node_x = p.node_name;
          gpu = backend::ParseIndexList(a->second).value().at(0);
          return true;
        }
        return false;
      },
      30s));
  const std::string node_y =
      kubesim::FakeNodeName(spec, node_x == kubesim::FakeNodeName(spec, 0) ? 1 : 0);
  ASSERT_NE(node_x, node_y);

  // X: Xid 79 on the Job's GPU at 3 s; the other GPU's NVLink counters grow every 1.5 s from
  // 5 s to 9.5 s (bad for 1 s, good for 0.5 s: shorter than --clear-after). Y: one Xid 13.
  const double kXidAt = 3.0;
  Json flapping = Json::array({{0, 0}, {5, 1}, {6.5, 2}, {8, 3}, {9.5, 4}});
  Json x_events = Json::array({{{"t", kXidAt}, {"gpu", gpu}, {"xid", 79}}});
  Json scenario_x = Scenario(x_events, Json(nullptr));
  scenario_x["gpus"][1 - gpu]["metrics"]["nvlink_errors"] = flapping;
  const int agent_x = StartAgent(node_x, scenario_x, port);
  const int agent_y =
      StartAgent(node_y, Scenario(Json::array({{{"t", kXidAt}, {"gpu", 0}, {"xid", 13}}})), port);
  ASSERT_GT(agent_x, 0);
  ASSERT_GT(agent_y, 0);
  Json report;
  ASSERT_TRUE(Eventually(
      [&] {
        report = AgentGet(agent_x, "/v1/report");
        return report.is_object() && report["inventory"]["nvml"]["loaded"] == true;
      },
      10s));
  const double injected = report["inventory"]["nvml"]["initialized_at"].get<double>() + kXidAt;

  // Injection -> taint visible in the API.
  double seen = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        if (!Tainted(Node(node_x))) return false;
        seen = UnixNow();
        return true;
      },
      15s, 10ms));
  const double latency = seen - injected;
  std::printf("health e2e: Xid 79 injection -> taint visible: %.3f s\n", latency);
  RecordProperty("injection_to_taint_seconds", std::to_string(latency));
  EXPECT_LE(latency, 2.0);
  EXPECT_GT(latency, 0.0);
  Json x = Node(node_x);
  const std::vector<int> fenced = backend::ParseIndexList(UnhealthyGpus(x)).value();
  EXPECT_NE(std::find(fenced.begin(), fenced.end(), gpu), fenced.end()) << UnhealthyGpus(x);
  // The fault is on the Node too, for the next leader: this GPU, once, at about the injection.
  Result<health::FaultHistory> history = health::ParseFaultHistory(
      x["metadata"]["annotations"].value(health::kFaultHistoryAnnotation, ""));
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->size(), 1u) << x["metadata"]["annotations"].dump();
  ASSERT_EQ(history->count(gpu), 1u);
  ASSERT_EQ(history->at(gpu).size(), 1u);
  EXPECT_NEAR(history->at(gpu)[0], injected, 3.0);
  // The condition is a second write (the status subresource) right after the taint; the
  // healthy condition from the first reports may still be there when the taint shows.
  ASSERT_TRUE(Eventually(
      [&] {
        Json c = Condition(Node(node_x));
        return c.is_object() && c.value("status", "") == "False";
      },
      5s, 10ms))
      << Condition(Node(node_x)).dump();
  EXPECT_EQ(Condition(Node(node_x))["reason"], "GpuFault");

  // The Job is preempted for the hardware fault and resumes on Y.
  ASSERT_TRUE(Eventually(
      [&] {
        for (const kube::Pod& p : JobPods("train"))
          if (p.node_name == node_y && p.metadata.deletion_timestamp.empty()) return true;
        return false;
      },
      20s));
  kube::ListOptions eo;
  eo.field_selector = "involvedObject.name=train";
  bool hardware_fault = false;
  ASSERT_TRUE(Eventually(
      [&] {
        auto events = client_->List(kube::resources::kEvents, ns_, eo);
        if (!events.ok()) return false;
        for (const Json& e : events->items)
          hardware_fault |= e.value("reason", "") == "Preempted" &&
                            e.value("message", "").find("HardwareFault") != std::string::npos;
        return hardware_fault;
      },
      10s));
  // A GPU that failed under the Job does not count against its preemption budget: a later
  // reclaim may still preempt it (docs/scheduling.md).
  Result<Json> train = client_->Get(kube::resources::kJobs, ns_, "train");
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  const Json annotations = (*train)["metadata"].value("annotations", Json::object());
  EXPECT_FALSE(annotations.contains(backend::keys::kPreemptions)) << annotations.dump();

  // Y: the Xid 13 arrived and isolated nothing.
  ASSERT_TRUE(Eventually(
      [&] {
        Json m = AgentGet(agent_y, "/metrics");
        return m.is_string() &&
               m.get<std::string>().find("chamber_gpu_xid_events_total{gpu=\"0\",xid=\"13\"} 1") !=
                   std::string::npos;
      },
      10s));
  Json y = Node(node_y);
  EXPECT_FALSE(Tainted(y));
  EXPECT_EQ(UnhealthyGpus(y), "");
  ASSERT_TRUE(Eventually([&] { return Condition(Node(node_y)).is_object(); }, 5s));
  EXPECT_EQ(Condition(Node(node_y))["status"], "True");

  // The agents' GPU labels reach both Nodes through chamberd (the fake NVML's two H100s).
  const Json want_labels = {{"chamber.io/gpu.count", "2"},
                            {"chamber.io/gpu.driver", "550.54.15"},
                            {"chamber.io/gpu.memory", "81559"},
                            {"chamber.io/gpu.model", "NVIDIA-H100-80GB-HBM3"}};
  for (const std::string& name : {node_x, node_y}) {
    ASSERT_TRUE(Eventually([&] { return AgentLabels(Node(name)) == want_labels; }, 10s))
        << name << ": " << Labels(Node(name)).dump();
    const Json labels = Labels(Node(name));
    EXPECT_EQ(labels.value("kubernetes.io/hostname", ""), name);  // others left alone
    EXPECT_EQ(labels.value(kubesim::kFakeNodeLabel, ""), "true");
    EXPECT_EQ(labels.value(kubesim::kGpuProductLabel, ""), spec.gpu_model);
  }

  // The API: agent tokens may only post; the controller's view shows the fence.
  httplib::Client api("127.0.0.1", port);
  auto get = [&](const char* token, const std::string& path) {
    return api.Get(path, httplib::Headers{{"Authorization", std::string("Bearer ") + token}});
  };
  EXPECT_EQ(get(kAgentToken, "/api/v1/health")->status, 403);

  // chamberd names the nodes' GPUs by the agents' inventories.
  for (const std::string& name : {node_x, node_y})
    ASSERT_TRUE(Eventually(
        [&] {
          return Node(name)["metadata"]["annotations"].value(backend::keys::kGpuUuids, "") ==
                 "GPU-e2e-0,GPU-e2e-1";
        },
        10s))
        << Node(name)["metadata"].dump();

  // The fleet view's utilization is what the agents measure: 50% in the scenario, on both
  // GPUs of Y and on X's GPU without the fault.
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = get(kReadToken, "/api/v1/gpus");
        if (!r || r->status != 200) return false;
        int measured = 0;
        const Json body = Json::parse(r->body);
        for (const Json& g : body["gpus"]) {
          const std::string node = g.value("node", "");
          if (node == node_y || (node == node_x && g.value("index", -1) == 1 - gpu))
            measured +=
                std::abs(g.value("utilization", -1.0) - 0.5) < 1e-9 &&
                        g.value("uuid", "") == "GPU-e2e-" + std::to_string(g.value("index", -1))
                    ? 1
                    : 0;
        }
        return measured == 3;
      },
      10s))
      << get(kReadToken, "/api/v1/gpus")->body.substr(0, 2000);

  EXPECT_EQ(api.Post("/api/v1/agent/reports",
                     httplib::Headers{{"Authorization", std::string("Bearer ") + kReadToken}},
                     report.dump(), "application/json")
                ->status,
            403);
  auto bad = api.Post("/api/v1/agent/reports",
                      httplib::Headers{{"Authorization", std::string("Bearer ") + kAgentToken}},
                      R"({"kind":"chamber.io/agent-report/v1","node":7})", "application/json");
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("report.node: expected a string"), std::string::npos) << bad->body;
  EXPECT_EQ(Metric(api, "chamber_health_reports_total{result=\"rejected\"}"), 1);

  // A token bound to a pod on X speaks for X only.
  const std::string bound = PodBoundToken(node_x);
  ASSERT_FALSE(bound.empty());
  auto bound_headers = httplib::Headers{{"Authorization", "Bearer " + bound}};
  Json own = AgentGet(agent_x, "/v1/report");
  ASSERT_TRUE(own.is_object());
  auto own_post = api.Post("/api/v1/agent/reports", bound_headers, own.dump(), "application/json");
  ASSERT_TRUE(own_post);
  EXPECT_EQ(own_post->status, 202) << own_post->body;
  Json other = own;
  other["node"] = node_y;
  auto other_post =
      api.Post("/api/v1/agent/reports", bound_headers, other.dump(), "application/json");
  ASSERT_TRUE(other_post);
  EXPECT_EQ(other_post->status, 403) << other_post->body;
  EXPECT_NE(
      other_post->body.find("token bound to node " + node_x + " may not report for node " + node_y),
      std::string::npos)
      << other_post->body;
  EXPECT_EQ(Metric(api, "chamber_health_reports_total{result=\"rejected\"}"), 2);

  auto health = get(kReadToken, "/api/v1/health");
  ASSERT_EQ(health->status, 200) << health->body;
  Json view = Json::parse(health->body)["controller"];
  bool x_listed = false;
  for (const Json& n : view["nodes"])
    if (n["node"] == node_x) x_listed = !n["fenced_gpus"].empty();
  EXPECT_TRUE(x_listed) << view.dump();

  // The Xid 79 incident carries its evidence on the API: the Xid and its meaning, the rule and
  // its threshold, and what was done (fenced, tainted, the Job requeued off the GPU).
  const Json want_xid = Json::parse(R"({"type": "xid", "xid": 79,
      "name": "GPU has fallen off the bus", "meaning": "the GPU is no longer reachable over PCIe",
      "class": "hardware", "source": "nvml-event", "count": null})");
  const Json want_rule = Json::parse(R"({"type": "rule", "rule": "xid-hardware",
      "severity": "fatal", "condition": "a hardware Xid; severity from the Xid table",
      "threshold": "Xid 79 is a hardware Xid, fatal in the Xid table"})");
  const std::string requeued_job = ns_ + "/train";
  Json evidence;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = get(kReadToken, "/api/v1/health");
        if (!r || r->status != 200) return false;
        const Json body = Json::parse(r->body);
        for (const Json& i : body["controller"]["incidents"])
          if (i["node"] == node_x && i["xid"] == 79) evidence = i["evidence"];
        return evidence.is_array() && !evidence.empty() &&
               evidence.back().value("workloads_requeued", Json::array()).size() == 1;
      },
      10s))
      << evidence.dump();
  ASSERT_EQ(evidence.size(), 3u) << evidence.dump();
  EXPECT_EQ(evidence[0], want_xid);
  EXPECT_EQ(evidence[1], want_rule);
  EXPECT_EQ(evidence[2], Json::parse(R"({"type": "action", "gpu_fenced": true,
      "taint": "NoSchedule", "breaker_held": false, "workloads_requeued": [")" +
                                     requeued_job + R"("], "workloads_requeued_count": 1})"));
  // The fleet view's incident for the GPU says the same.
  Json fleet_incident;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = get(kReadToken, "/api/v1/health");
        if (!r || r->status != 200) return false;
        const Json body = Json::parse(r->body);
        for (const Json& i : body["incidents"])
          if (i["node"] == node_x && i["gpu_index"] == gpu) fleet_incident = i;
        return fleet_incident.is_object() && fleet_incident["evidence"].size() == 3 &&
               fleet_incident["evidence"][2]["workloads_requeued_count"] == 1;
      },
      10s))
      << fleet_incident.dump();
  EXPECT_EQ(fleet_incident["cause"], "xid-hardware");
  EXPECT_EQ(fleet_incident["severity"], "fatal");
  EXPECT_EQ(fleet_incident["message"],
            "GPU " + std::to_string(gpu) + " on " + node_x +
                ": Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable over PCIe");
  EXPECT_EQ(fleet_incident["evidence"], evidence);

  // The Events on the node: the fence with the evidence and the taint, then the requeue.
  const std::string fenced_text =
      "fenced: fatal fault; Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable "
      "over PCIe; rule xid-hardware (fatal): Xid 79 is a hardware Xid, fatal in the Xid table; "
      "node tainted NoSchedule";
  const std::string requeued_text = "1 workload requeued off the fenced GPU: " + requeued_job +
                                    "; fault: Xid 79 (GPU has fallen off the bus): the GPU is no "
                                    "longer reachable over PCIe";
  std::string fenced_event, requeued_event;
  kube::ListOptions node_events;
  node_events.field_selector = "involvedObject.name=" + node_x;
  ASSERT_TRUE(Eventually(
      [&] {
        auto events = client_->List(kube::resources::kEvents, "default", node_events);
        if (!events.ok()) return false;
        for (const Json& e : events->items) {
          const std::string reason = e.value("reason", ""), message = e.value("message", "");
          if (reason == "GpuFenced" && message.find(fenced_text) != std::string::npos)
            fenced_event = message;
          if (reason == "GpuWorkloadsRequeued" && message.find(requeued_text) != std::string::npos)
            requeued_event = message;
        }
        return !fenced_event.empty() && !requeued_event.empty();
      },
      10s))
      << "GpuFenced: " << fenced_event << "\nGpuWorkloadsRequeued: " << requeued_event;
  const std::string gpu_name =
      "GPU " + std::to_string(gpu) + " (GPU-e2e-" + std::to_string(gpu) + ")";
  EXPECT_EQ(fenced_event, gpu_name + " " + fenced_text);
  EXPECT_EQ(requeued_event, gpu_name + ": " + requeued_text);
  EXPECT_LE(fenced_event.size(), 1024u);
  std::printf("health e2e: GpuFenced event: %s\n", fenced_event.c_str());

  // Recovery: the Xid closes at ~9 s, the NVLink at ~12.5 s; then 2 s of probation.
  std::vector<std::string> reasons;
  ASSERT_TRUE(Eventually(
      [&] {
        Json n = Node(node_x);
        Json c = Condition(n);
        if (c.is_object()) {
          const std::string r = c.value("reason", "");
          if (reasons.empty() || reasons.back() != r) reasons.push_back(r);
        }
        return !Tainted(n) && UnhealthyGpus(n).empty() && c.is_object() &&
               c.value("status", "") == "True";
      },
      40s, 50ms));
  const double lifted = UnixNow() - injected;
  std::printf("health e2e: fence lifted %.1f s after the injection; condition reasons: ", lifted);
  for (const std::string& r : reasons) std::printf("%s ", r.c_str());
  std::printf("\n");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Probation"), reasons.end());
  EXPECT_GE(lifted, 12.5 - kXidAt + 2.0 - 0.5);  // the NVLink close plus the probation

  // The flapping NVLink was one incident, at the agent and in chamberd.
  Json agent_report = AgentGet(agent_x, "/v1/report");
  int agent_nvlink = 0;
  for (const char* key : {"incidents", "closed_incidents"})
    for (const Json& i : agent_report[key]) agent_nvlink += i["cause"] == "nvlink-errors";
  EXPECT_EQ(agent_nvlink, 1) << agent_report.dump();
  view = Json::parse(get(kReadToken, "/api/v1/health")->body)["controller"];
  int nvlink = 0, xid79 = 0;
  for (const Json& i : view["incidents"]) {
    if (i["node"] != node_x) continue;
    nvlink += i["cause"] == "nvlink-errors";
    xid79 += i["xid"] == 79;
  }
  EXPECT_EQ(nvlink, 1) << view["incidents"].dump();
  EXPECT_EQ(xid79, 1) << view["incidents"].dump();

  // Reports keep arriving, but with nothing to change chamberd writes no Node. (The counters
  // are published when a step has written every node and its Events: the lift's step may
  // still be writing Events when the condition shows, so the count starts a step later.)
  std::this_thread::sleep_for(1500ms);
  const double writes = Metric(api, "chamber_health_node_writes_total{kind=\"node\"}");
  EXPECT_GT(writes, 0);
  std::this_thread::sleep_for(3s);  // three pushes of each agent
  EXPECT_EQ(Metric(api, "chamber_health_node_writes_total{kind=\"node\"}"), writes);
  EXPECT_EQ(AgentLabels(Node(node_x)), want_labels);

  // The operator action answers for known nodes only.
  auto admin = httplib::Headers{{"Authorization", std::string("Bearer ") + kAdminToken}};
  EXPECT_EQ(
      api.Post("/api/v1/health/nodes/" + node_x + "/clear", admin, "", "application/json")->status,
      200);
  EXPECT_EQ(api.Post("/api/v1/health/nodes/nope/clear", admin, "", "application/json")->status,
            404);
}

}  // namespace
}  // namespace chamber::chamberd
