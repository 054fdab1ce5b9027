// chamberd's health listener (--health-listen) end to end: two replicas of the real binary
// against the test control plane. Both answer /healthz; exactly one, the Lease holder, is
// ready on /readyz while the other names it; when the leader is killed the other becomes ready.
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

#include "controller/queue_resource.h"
#include "controller/test/e2e_support.h"
#include "kube/client.h"

extern char** environ;

namespace chamber::controller {
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
    auto docs = ManifestToJson(text.str(), CHAMBER_QUEUE_CRD).value();
    ASSERT_TRUE(ApplyQueueCrd(*client_, docs.at(0)).ok());
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
    std::vector<std::string> args = {CHAMBERD_BINARY,
                                     "--kubeconfig",
                                     std::getenv("CHAMBER_TEST_KUBECONFIG"),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--health-listen",
                                     "127.0.0.1:0",
                                     "--anonymous",
                                     "--identity",
                                     name,
                                     "--lease-namespace",
                                     ns_,
                                     "--lease-duration",
                                     "3",
                                     "--renew-deadline",
                                     "2",
                                     "--retry-period",
                                     "0.5"};
    const pid_t pid = e2e::SpawnLogged(args, (dir_ / (name + ".log")).string());
    ASSERT_GT(pid, 0);
    pids_[name] = pid;
  }

  void Kill(const std::string& name) {
    pid_t& pid = pids_[name];
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }

  // The health port a replica names in its log once it listens; 0 until then.
  int HealthPort(const std::string& name) {
    std::ifstream log(dir_ / (name + ".log"));
    std::string line;
    const std::string marker = "serving /healthz and /readyz on 127.0.0.1:";
    while (std::getline(log, line)) {
      const size_t at = line.find(marker);
      if (at != std::string::npos) return std::stoi(line.substr(at + marker.size()));
    }
    return 0;
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

TEST_F(ChamberdHealthE2E, EveryReplicaIsLiveOnlyTheLeaderIsReadyAndFailoverMovesReadiness) {
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

  // Exactly one is ready, and it is the Lease holder (it lists the cluster first).
  std::string leader;
  ASSERT_TRUE(Eventually(
      [&] {
        leader = LeaseHolder();
        return !leader.empty() && Get(port[leader], "/readyz").status == 200;
      },
      30s));
  const std::string standby = leader == "replica-a" ? "replica-b" : "replica-a";
  EXPECT_EQ(Get(port[leader], "/readyz").body, "ok\n");
  // The standby names the leader once it has read the Lease (its next attempt, 0.5 s), then
  // stays unready for several probe periods.
  ASSERT_TRUE(Eventually(
      [&] { return Get(port[standby], "/readyz").body == "standby: leader is " + leader + "\n"; },
      5s))
      << Get(port[standby], "/readyz").body;
  for (int i = 0; i < 10; ++i) {
    const Reply r = Get(port[standby], "/readyz");
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.body, "standby: leader is " + leader + "\n");
    EXPECT_EQ(Get(port[standby], "/healthz").status, 200);
    EXPECT_EQ(Get(port[leader], "/readyz").status, 200);
    std::this_thread::sleep_for(200ms);
  }

  // The leader dies without releasing the Lease: after the lease duration (3 s) the standby
  // takes it and becomes ready.
  Kill(leader);
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(Get(port[leader], "/healthz").status, -1);
  ASSERT_TRUE(Eventually([&] { return Get(port[standby], "/readyz").status == 200; }, 30s))
      << Get(port[standby], "/readyz").body;
  EXPECT_EQ(LeaseHolder(), standby);
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 2s);
  EXPECT_EQ(Get(port[standby], "/healthz").status, 200);
}

}  // namespace
}  // namespace chamber::controller
