// The chart's default install end to end (docs/install.md, "Agents and chamberd"): `helm install`
// with default values on the test control plane, then chamberd and one chamber-agent run as
// their pods would, from the applied StatefulSet's and DaemonSet's arguments and environment,
// with their service accounts' tokens. No kubelet runs here, so the processes stand in for the
// pods: mounts become local paths (the agent's NVML is the fake NVML, its token a pod-bound
// token of its service account), and since there is no cluster DNS, only the host part of the
// Service URLs is pointed at the local chamberd.
//
// Expected: the agents push to the release's chamberd Service (named with a port it has, which
// leads to chamberd's API port), the fleet counts the agent's utilization as used GPUs, and an
// Xid 79 the fake NVML injects fences the GPU.
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <netinet/in.h>

#include "chamberd/test/cluster_fixture.h"
#include "chamberd/test/e2e_support.h"
#include "chamberd/test/health_e2e_support.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kubesim/nodes.h"

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;
using kube::Json;

const kube::ResourceType kStatefulSets{"apps", "v1", "statefulsets", "StatefulSet", true};
const kube::ResourceType kDaemonSets{"apps", "v1", "daemonsets", "DaemonSet", true};
const kube::ResourceType kServices{"", "v1", "services", "Service", true};

// A loopback port nothing listens on now.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// A container's arguments with each one `replace` names replaced.
std::vector<std::string> Args(const Json& container,
                              const std::map<std::string, std::string>& replace) {
  std::vector<std::string> out;
  for (const Json& a : container.value("args", Json::array())) {
    const std::string arg = a.get<std::string>();
    auto it = replace.find(arg);
    out.push_back(it == replace.end() ? arg : it->second);
  }
  return out;
}

// A container's environment as NAME=value, fields of the downward API from `fields`.
std::vector<std::string> Env(const Json& container,
                             const std::map<std::string, std::string>& fields) {
  std::vector<std::string> out;
  for (const Json& e : container.value("env", Json::array())) {
    const std::string name = e.value("name", "");
    if (e.contains("value")) {
      out.push_back(name + "=" + e["value"].get<std::string>());
      continue;
    }
    const std::string path = e["valueFrom"]["fieldRef"].value("fieldPath", "");
    auto it = fields.find(path);
    EXPECT_NE(it, fields.end()) << name << " from " << path;
    if (it != fields.end()) out.push_back(name + "=" + it->second);
  }
  return out;
}

std::string ArgAfter(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) return args[i + 1];
  return "";
}

class ChartE2E : public e2e::ClusterTest {
 protected:
  void SetUp() override {
    // helm creates the namespace; the objects' names hold the chart's name.
    release_ = "chamber-e2e-" + NewNamespace("chart-e2e-", "chamber-", /*create=*/false);
    std::filesystem::create_directories(dir_ / "data");
    std::filesystem::create_directories(dir_ / "pod-resources");
    helm_ = e2e::ControlPlaneEnv("CHAMBER_HELM");
    ASSERT_FALSE(helm_.empty()) << "the control plane's env names no helm (scripts/kube-tools.sh)";
  }

  void TearDown() override {
    for (pid_t& pid : pids_) {
      if (pid <= 0) continue;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (HasFailure())
      for (const char* name : {"helm.log", "chamberd.log", "agent.log"}) {
        std::ifstream log(dir_ / name);
        std::cerr << "---- " << name << " ----\n" << log.rdbuf() << "\n";
      }
    (void)Helm({"uninstall", release_, "-n", ns_, "--wait", "--timeout", "60s"});
    (void)client_->Delete(kube::resources::kNamespaces, "", ns_);
    (void)kubesim::DeleteFakeNodes(*client_);
    std::filesystem::remove_all(dir_);
  }

  // Runs helm against the test control plane; its exit status.
  int Helm(std::vector<std::string> args) {
    args.insert(args.begin(), helm_);
    return e2e::RunLogged(args, (dir_ / "helm.log").string(),
                          {std::string("KUBECONFIG=") + std::getenv("CHAMBER_TEST_KUBECONFIG")});
  }

  Json Get(const kube::ResourceType& type, const std::string& name) {
    auto r = client_->Get(type, ns_, name);
    EXPECT_TRUE(r.ok()) << type.kind << " " << name << ": " << r.status().ToString();
    return r.ok() ? *r : Json::object();
  }

  // A kubeconfig for the test apiserver holding only `token`.
  std::string Kubeconfig(const std::string& token) {
    const kube::RestConfig admin =
        kube::LoadKubeconfig(std::getenv("CHAMBER_TEST_KUBECONFIG")).value();
    const std::string path = (dir_ / "kubeconfig").string();
    std::ofstream(path) << "apiVersion: v1\nkind: Config\n"
                        << "clusters: [{name: test, cluster: {server: \"" << admin.server
                        << "\", certificate-authority-data: \"" << kube::Base64Encode(admin.ca_pem)
                        << "\"}}]\n"
                        << "users: [{name: sa, user: {token: \"" << token << "\"}}]\n"
                        << "contexts: [{name: test, context: {cluster: test, user: sa}}]\n"
                        << "current-context: test\n";
    return path;
  }

  std::string release_, helm_;
  std::vector<pid_t> pids_;
};

TEST_F(ChartE2E, ADefaultInstallsAgentsReportToItsChamberdWhichCountsUseAndFencesXid79) {
  ASSERT_EQ(Helm({"install", release_, CHAMBER_CHART, "-n", ns_, "--create-namespace"}), 0);

  // The agents' URL names this release's chamberd Service and a port it has; that port leads
  // to the port chamberd serves its API on.
  const Json ds = Get(kDaemonSets, release_ + "-agent");
  const Json sts = Get(kStatefulSets, release_);
  ASSERT_TRUE(ds.contains("spec") && sts.contains("spec"));
  const Json& agent_pod = ds["spec"]["template"]["spec"];
  const Json& chamberd_pod = sts["spec"]["template"]["spec"];
  const Json agent_container = agent_pod["containers"][0];
  const Json chamberd_container = chamberd_pod["containers"][0];
  const std::vector<std::string> agent_args = Args(agent_container, {});
  const std::vector<std::string> chamberd_args = Args(chamberd_container, {});
  const std::string url = ArgAfter(agent_args, "--chamberd-url");
  std::smatch m;
  ASSERT_TRUE(
      std::regex_match(url, m, std::regex(R"(http://([^./:]+)\.([^./:]+)\.svc:(\d+)(/.*))")))
      << "--chamberd-url " << url;
  const std::string service = m[1], service_ns = m[2], path = m[4];
  const int service_port = std::stoi(m[3]);
  EXPECT_EQ(service, release_);
  EXPECT_EQ(service_ns, ns_);
  EXPECT_EQ(path, "/api/v1/agent/reports");
  const Json svc = Get(kServices, service);
  std::string target;
  for (const Json& p : svc["spec"].value("ports", Json::array()))
    if (p.value("port", 0) == service_port) target = p.value("targetPort", "");
  ASSERT_EQ(target, "http") << svc.dump();
  int api_port = 0;
  for (const Json& p : chamberd_container["ports"])
    if (p.value("name", "") == target) api_port = p.value("containerPort", 0);
  EXPECT_EQ(api_port, 8080);
  EXPECT_EQ(ArgAfter(chamberd_args, "--listen"), "0.0.0.0:" + std::to_string(api_port));
  // The Service selects chamberd's pods (the leader among them).
  for (const auto& [k, v] : svc["spec"]["selector"].items()) {
    if (k == "chamber.io/leader") continue;
    EXPECT_EQ(sts["spec"]["template"]["metadata"]["labels"].value(k, ""), v) << k;
  }
  // The agent mounts its token, and chamberd takes it for reports.
  EXPECT_EQ(agent_pod.value("automountServiceAccountToken", false), true);
  EXPECT_EQ(agent_pod.value("serviceAccountName", ""), release_ + "-agent");
  EXPECT_EQ(ArgAfter(chamberd_args, "--agent-user"),
            "system:serviceaccount:" + ns_ + ":" + release_ + "-agent");

  // A GPU node, and chamberd as its StatefulSet's first pod would run.
  kubesim::NodePoolSpec spec;
  spec.count = 1;
  spec.gpus = 2;
  spec.prefix = ns_ + "-gpu";
  ASSERT_TRUE(kubesim::CreateFakeNodes(*client_, spec).ok());
  const std::string node = kubesim::FakeNodeName(spec, 0);
  const std::string pod = release_ + "-0";
  ASSERT_TRUE(Eventually([&] { return client_->Get(kube::resources::kPods, ns_, pod).ok(); }, 30s))
      << "the StatefulSet controller made no pod " << pod;
  {
    auto config = client_->Get(kube::resources::kConfigMaps, ns_, release_);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    std::ofstream(dir_ / "chamber.yaml") << (*config)["data"].value("chamber.yaml", "");
  }
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string local = "http://127.0.0.1:" + std::to_string(port);
  std::vector<std::string> args =
      Args(chamberd_container,
           {{"0.0.0.0:8080", "127.0.0.1:" + std::to_string(port)},
            {"0.0.0.0:8081", "127.0.0.1:0"},
            {"/etc/chamber/chamber.yaml", (dir_ / "chamber.yaml").string()},
            {"/var/lib/chamber", (dir_ / "data").string()},
            {"http://" + service + "." + ns_ + ".svc:" + std::to_string(service_port), local}});
  const Result<std::string> chamberd_token = client_->CreateToken(ns_, release_, 3600);
  ASSERT_TRUE(chamberd_token.ok()) << chamberd_token.status().ToString();
  args.insert(args.begin(), {CHAMBERD_BINARY, "--kubeconfig", Kubeconfig(*chamberd_token)});
  pids_.push_back(e2e::SpawnLogged(
      args, (dir_ / "chamberd.log").string(),
      Env(chamberd_container, {{"metadata.namespace", ns_}, {"metadata.name", pod}})));
  ASSERT_GT(pids_.back(), 0);
  const std::string dashboard = client_->CreateToken(ns_, release_ + "-dashboard", 3600).value();
  httplib::Client api("127.0.0.1", port);
  api.set_read_timeout(5);
  const httplib::Headers reader = {{"Authorization", "Bearer " + dashboard}};
  auto fleet = [&]() -> Json {
    auto r = api.Get("/api/v1/fleet", reader);
    if (!r || r->status != 200) return nullptr;
    return Json::parse(r->body, nullptr, false)["summary"]["gpus"];
  };
  ASSERT_TRUE(Eventually([&] { return fleet().is_object(); }, 60s)) << "chamberd never served";
  EXPECT_EQ(fleet().value("used", -1.0), 0.0) << "no agent has reported yet";

  // The agent as the DaemonSet's pod on that node would run: its token is bound to a pod there.
  const double kXidAt = 15;
  const std::string scenario = (dir_ / "scenario.json").string();
  std::ofstream(scenario)
      << e2e::Scenario(Json::array({{{"t", kXidAt}, {"gpu", 0}, {"xid", 79}}})).dump();
  const Result<std::string> agent_token =
      e2e::PodBoundToken(*client_, ns_, release_ + "-agent", "agent-on-gpu-node", node);
  ASSERT_TRUE(agent_token.ok()) << agent_token.status().ToString();
  std::ofstream(dir_ / "agent-token") << *agent_token;
  args = Args(agent_container, {{"0.0.0.0:9401", "127.0.0.1:0"},
                                {"/host/nvml/libnvidia-ml.so.1", CHAMBER_FAKE_NVML},
                                {"/var/lib/kubelet/pod-resources/kubelet.sock",
                                 (dir_ / "pod-resources" / "kubelet.sock").string()},
                                {url, local + path}});
  args.insert(args.begin(), {CHAMBER_AGENT_BINARY, "--token-file", (dir_ / "agent-token").string(),
                             "--port-file", (dir_ / "agent-port").string()});
  std::vector<std::string> env = Env(agent_container, {{"spec.nodeName", node}});
  env.push_back("CHAMBER_FAKE_NVML_SCENARIO=" + scenario);
  pids_.push_back(e2e::SpawnLogged(args, (dir_ / "agent.log").string(), env));
  ASSERT_GT(pids_.back(), 0);

  // Two GPUs at 50%: one GPU used.
  Json gpus;
  ASSERT_TRUE(Eventually(
      [&] {
        gpus = fleet();
        return gpus.is_object() && gpus.value("used", 0.0) > 0;
      },
      30s))
      << gpus.dump();
  EXPECT_DOUBLE_EQ(gpus.value("used", 0.0), 1.0) << gpus.dump();
  EXPECT_EQ(gpus.value("capacity", 0.0), 2.0);

  // The Xid fences the GPU: the node's taint, annotation and condition, and the fleet's count.
  Json n;
  ASSERT_TRUE(Eventually(
      [&] {
        auto got = client_->Get(kube::resources::kNodes, "", node);
        if (!got.ok()) return false;
        n = *got;
        return e2e::Tainted(n);
      },
      std::chrono::milliseconds(static_cast<int64_t>((kXidAt + 30) * 1000))))
      << n.dump();
  EXPECT_EQ(e2e::UnhealthyGpus(n), "0");
  ASSERT_TRUE(Eventually(
      [&] {
        auto got = client_->Get(kube::resources::kNodes, "", node);
        return got.ok() && e2e::Condition(*got).is_object() &&
               e2e::Condition(*got).value("status", "") == "False";
      },
      10s));
  ASSERT_TRUE(Eventually([&] { return fleet().value("unhealthy", 0.0) == 1.0; }, 10s))
      << fleet().dump();
  // The agent's reports were taken, none refused.
  auto metric = [&](const std::string& sample) {
    auto r = api.Get("/metrics", reader);
    return r && r->status == 200 ? e2e::MetricSample(r->body, sample) : -1.0;
  };
  EXPECT_GE(metric("chamber_health_reports_total{result=\"accepted\"}"), 2);
  EXPECT_EQ(metric("chamber_health_reports_total{result=\"rejected\"}"), 0);
}

}  // namespace
}  // namespace chamber::chamberd
