// chamberd's health listener (--health-listen) and leader label end to end: two replicas of the
// real binary against the test control plane. Both are live and ready; exactly one pod, the
// Lease holder's, carries chamber.io/leader=true (what the chart's Service selects), and the
// label moves when the leader is killed and when it is stopped.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "chamberd/test/e2e_support.h"
#include "kube/client.h"

extern char** environ;

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using e2e::Eventually;

struct Reply {
  int status = -1;
  std::string body;
};

class ChamberdHealthE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* kubeconfig = std::getenv("CHAMBER_TEST_KUBECONFIG");
    ASSERT_NE(kubeconfig, nullptr) << "run through ctest: the controlplane fixture sets it";
    kube::RestConfig rc = kube::LoadKubeconfig(kubeconfig).value();
    client_ = std::move(kube::Client::Create(rc).value());
    std::ifstream in(CHAMBER_QUEUE_CRD);
    std::stringstream text;
    text << in.rdbuf();
    auto docs = backend::ManifestToJson(text.str(), CHAMBER_QUEUE_CRD).value();
    ASSERT_TRUE(backend::ApplyQueueCrd(*client_, docs.at(0)).ok());
    std::random_device rd;
    ns_ = "health-" + std::to_string(rd() % 1000000);
    dir_ = std::filesystem::temp_directory_path() / ("chamberd-" + ns_);
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(
        client_->Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", ns_}}}}).ok());
  }

  void TearDown() override {
    for (auto& [name, pid] : pids_) Kill(name);
    if (HasFailure())
      for (const auto& [name, pid] : pids_) {
        std::ifstream log(dir_ / (name + ".log"));
        std::cerr << "---- chamberd " << name << " log ----\n" << log.rdbuf() << "\n";
      }
    (void)client_->Delete(kube::resources::kNamespaces, "", ns_);
    std::filesystem::remove_all(dir_);
  }

  void Start(const std::string& name) {
    std::vector<std::string> args = {
        CHAMBERD_BINARY, "--kubeconfig", std::getenv("CHAMBER_TEST_KUBECONFIG"), "--listen",
        "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--anonymous", "--identity", name,
        "--pod-name", name, "--pod-namespace", ns_, "--lease-namespace", ns_,
        // Short, but with room for a loaded machine: a leader
        // whose renewals stall for the renew deadline steps down.
        "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "0.5"};
    const pid_t pid = e2e::SpawnLogged(args, (dir_ / (name + ".log")).string());
    ASSERT_GT(pid, 0);
    pids_[name] = pid;
  }

  // Sends `signal` and waits for the process to end.
  void Kill(const std::string& name, int signal = SIGKILL) {
    pid_t& pid = pids_[name];
    if (pid <= 0) return;
    kill(pid, signal);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }

  // A pod standing for a replica (no kubelet runs here: nothing starts it).
  void CreatePod(const std::string& name) {
    kube::Json pod = {{"metadata", {{"name", name}, {"labels", {{"app", "chamberd"}}}}},
                      {"spec",
                       {{"schedulerName", "nobody"},
                        {"containers", {{{"name", "chamberd"}, {"image", "chamberd:test"}}}}}}};
    ASSERT_TRUE(client_->Create(kube::resources::kPods, ns_, pod).ok());
  }

  // The pod's chamber.io/leader label ("" when absent).
  std::string Label(const std::string& pod) {
    auto p = client_->Get(kube::resources::kPods, ns_, pod);
    if (!p.ok()) return "<" + p.status().message() + ">";
    return (*p)["metadata"].value("labels", kube::Json::object()).value("chamber.io/leader", "");
  }

  // The pods the chart's Service would select.
  std::vector<std::string> LabelledLeaders() {
    kube::ListOptions lo;
    lo.label_selector = "chamber.io/leader=true";
    auto pods = client_->List(kube::resources::kPods, ns_, lo);
    std::vector<std::string> names;
    if (pods.ok())
      for (const kube::Json& p : pods->items) names.push_back(p["metadata"].value("name", ""));
    return names;
  }

  // The health port a replica names in its log once it listens; 0 until then.
  int HealthPort(const std::string& name) {
    std::ifstream log(dir_ / (name + ".log"));
    std::string line;
    const std::string marker = "serving /healthz and /readyz on 127.0.0.1:";
    int port = 0;  // the last one: a restarted replica appends to its log
    while (std::getline(log, line)) {
      const size_t at = line.find(marker);
      if (at != std::string::npos) port = std::stoi(line.substr(at + marker.size()));
    }
    return port;
  }

  static Reply Get(int port, const std::string& path) {
    httplib::Client http("127.0.0.1", port);
    http.set_connection_timeout(1);
    http.set_read_timeout(2);
    auto res = http.Get(path);
    if (!res) return {};
    return {res->status, res->body};
  }

  std::string LeaseHolder() {
    auto lease = client_->Get(kube::resources::kLeases, ns_, "chamber-scheduler");
    if (!lease.ok()) return "";
    return (*lease)["spec"].value("holderIdentity", "");
  }

  std::unique_ptr<kube::Client> client_;
  std::string ns_;
  std::filesystem::path dir_;
  std::map<std::string, pid_t> pids_;
};

TEST_F(ChamberdHealthE2E, EveryReplicaIsReadyTheLeaderLabelsItsPodAndFailoverMovesTheLabel) {
  for (const char* name : {"replica-a", "replica-b"}) CreatePod(name);
  Start("replica-a");
  Start("replica-b");
  std::map<std::string, int> port;
  ASSERT_TRUE(Eventually(
      [&] {
        port["replica-a"] = HealthPort("replica-a");
        port["replica-b"] = HealthPort("replica-b");
        return port["replica-a"] > 0 && port["replica-b"] > 0;
      },
      20s));
  for (const auto& [name, p] : port) {
    ASSERT_TRUE(Eventually([&] { return Get(p, "/healthz").status == 200; }, 10s)) << name;
    EXPECT_EQ(Get(p, "/healthz").body, "ok\n") << name;
  }

  // The Lease holder serves (it lists the cluster first), says so on /readyz and labels its pod;
  // the standby is ready too, names the leader, and its pod says "false".
  std::string leader;
  ASSERT_TRUE(Eventually(
      [&] {
        leader = LeaseHolder();
        return !leader.empty() && Get(port[leader], "/readyz").body == "ok: leader\n" &&
               Label(leader) == "true";
      },
      30s))
      << "leader " << leader << ": " << Get(port[leader], "/readyz").body;
  const std::string standby = leader == "replica-a" ? "replica-b" : "replica-a";
  ASSERT_TRUE(Eventually(
      [&] {
        return Get(port[standby], "/readyz").body == "ok: standby: leader is " + leader + "\n" &&
               Label(standby) == "false";
      },
      5s))
      << Get(port[standby], "/readyz").body << " label " << Label(standby);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Get(port[standby], "/readyz").status, 200);
    EXPECT_EQ(Get(port[leader], "/readyz").status, 200);
    EXPECT_EQ(LabelledLeaders(), std::vector<std::string>{leader});
    std::this_thread::sleep_for(200ms);
  }

  // The leader dies without releasing the Lease or its label: after the lease duration (6 s)
  // the standby takes over, labels its own pod and clears the dead leader's.
  Kill(leader);
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(Get(port[leader], "/healthz").status, -1);
  EXPECT_EQ(Label(leader), "true");
  ASSERT_TRUE(
      Eventually([&] { return LabelledLeaders() == std::vector<std::string>{standby}; }, 30s))
      << Get(port[standby], "/readyz").body;
  EXPECT_EQ(Get(port[standby], "/readyz").body, "ok: leader\n");
  EXPECT_EQ(LeaseHolder(), standby);
  EXPECT_EQ(Label(leader), "false");
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 5s);

  // The dead replica restarts in its pod as a standby. The leader is then stopped the way the
  // kubelet stops it (SIGTERM): it clears its label, then releases the Lease, so the restarted
  // replica takes over at its next attempt instead of after the lease duration.
  Start(leader);
  ASSERT_TRUE(Eventually(
      [&] {
        port[leader] = HealthPort(leader);
        return port[leader] > 0 &&
               Get(port[leader], "/readyz").body == "ok: standby: leader is " + standby + "\n";
      },
      20s));
  EXPECT_EQ(Label(leader), "false");
  Kill(standby, SIGTERM);
  EXPECT_EQ(Label(standby), "false");  // cleared before the process exited
  ASSERT_TRUE(
      Eventually([&] { return LabelledLeaders() == std::vector<std::string>{leader}; }, 20s));
  EXPECT_EQ(LeaseHolder(), leader);
  EXPECT_EQ(Get(port[leader], "/readyz").body, "ok: leader\n");
}

}  // namespace
}  // namespace chamber::chamberd
