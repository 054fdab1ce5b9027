// `chamber health` and `chamber health clear` against a real in-process server over the demo's
// simulated cluster, with chamberd's health controller (no Node writer) behind it.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/test/run_cli.h"
#include "health/health_service.h"

namespace chamber::cli {
namespace {

using nlohmann::json;
constexpr const char* kRead = "cli-read-token-0123456789";
constexpr const char* kAdmin = "cli-admin-token-0123456789";

void Commands(CommandRegistry& r) {
  RegisterHealthCommand(r);
  RegisterConfigCommand(r);
}
testing::Output RunCli(std::vector<std::string> args) {
  return testing::RunCli(std::move(args), Commands);
}

// `time` is the agent's clock: a later report must carry a later one.
json Report(const std::string& node, bool xid79, double time = 100.0) {
  json incidents = json::array();
  if (xid79)
    incidents.push_back({{"id", 1},
                         {"gpu_index", 1},
                         {"gpu_uuid", "GPU-1"},
                         {"cause", "xid-hardware"},
                         {"severity", "fatal"},
                         {"xid", 79},
                         {"message", "Xid 79 (GPU has fallen off the bus)"},
                         {"evidence", json::parse(R"([
                           {"type": "xid", "xid": 79, "name": "GPU has fallen off the bus",
                            "meaning": "the GPU is no longer reachable over PCIe",
                            "class": "hardware", "source": "nvml-event", "count": null},
                           {"type": "rule", "rule": "xid-hardware", "severity": "fatal",
                            "condition": "a hardware Xid; severity from the Xid table",
                            "threshold": "Xid 79 is a hardware Xid, fatal in the Xid table"}])")},
                         {"opened_at", 100.0},
                         {"last_seen", 100.0},
                         {"occurrences", 1}});
  json gpus = json::array(), samples = json::array();
  for (int i = 0; i < 2; ++i) {
    gpus.push_back({{"index", i}, {"uuid", "GPU-" + std::to_string(i)}});
    samples.push_back({{"index", i},
                       {"uuid", "GPU-" + std::to_string(i)},
                       {"lost", false},
                       {"recovery_action", 0}});
  }
  return {{"kind", "chamber.io/agent-report/v1"}, {"node", node},       {"time", time},
          {"inventory", {{"gpus", gpus}}},        {"samples", samples}, {"incidents", incidents}};
}

class HealthCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend::DemoClusterOptions o;
    o.seed = 11;
    o.gpu_mtbf_hours = 0;
    auto backend = std::move(backend::SimulatedBackend::Create(backend::DemoCluster(o))).value();
    backend_ = backend.get();
    daemon_ =
        std::make_unique<daemon::Daemon>(std::move(backend), daemon::DaemonOptions{}, nullptr);
    ASSERT_TRUE(daemon_->Tick().ok());
    health::HealthService::Options ho;
    ho.config.hold_after_faults = 1;  // the first fault holds the node
    health_ = std::make_shared<health::HealthService>(ho, nullptr, nullptr);
    auto tokens = daemon::TokenFileAuthenticator::Parse(
        std::string(kRead) + " read\n" + kAdmin + " admin\n", "t");
    daemon::ServerOptions so;
    so.port = 0;
    so.health = health_;
    server_ = std::make_unique<daemon::ApiServer>(
        *daemon_, std::shared_ptr<daemon::Authenticator>(std::move(tokens).value()), so);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    server_.reset();
    daemon_.reset();
  }
  std::string Server() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  backend::SimulatedBackend* backend_ = nullptr;  // owned by daemon_
  std::unique_ptr<daemon::Daemon> daemon_;
  std::shared_ptr<health::HealthService> health_;
  std::unique_ptr<daemon::ApiServer> server_;
};

TEST_F(HealthCommandTest, ListsFencedNodesAndIncidents) {
  testing::Output o = RunCli({"health", "--server", Server(), "--token", kRead});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("No fenced nodes; 0 stale agents."), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("No incidents."), std::string::npos) << o.out;

  ASSERT_TRUE(health_->PostReport(Report("gpu-7", true).dump(), "test", "").ok());
  ASSERT_TRUE(health_->PostReport(Report("gpu-8", false).dump(), "test", "").ok());
  health_->Step();
  o = RunCli({"health", "--server", Server(), "--token", kRead});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("NODE   FENCED-GPUS  TAINT       STATE"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("gpu-7  1            NoSchedule  held"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("gpu-8"), std::string::npos) << "healthy nodes are not listed\n" << o.out;
  EXPECT_NE(o.out.find("xid-hardware  fatal     79   open   yes"), std::string::npos) << o.out;

  // The open incident's evidence: the Xid and its meaning, the rule, what was done.
  EXPECT_NE(
      o.out.find("\nEVIDENCE OF OPEN INCIDENTS\n"
                 "gpu-7  GPU 1  xid-hardware  fatal\n"
                 "  xid              Xid 79 (GPU has fallen off the bus): the GPU is no longer "
                 "reachable over PCIe\n"
                 "  rule             rule xid-hardware (fatal): Xid 79 is a hardware Xid, "
                 "fatal in the Xid table\n"
                 "  action           GPU fenced, node tainted NoSchedule\n"),
      std::string::npos)
      << o.out;
  // Workloads the scheduler requeued off the GPU join the action.
  health_->RecordRequeued({{"gpu-7", 1, "team-a/train"}});
  o = RunCli({"health", "--server", Server(), "--token", kRead});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("  action           GPU fenced, node tainted NoSchedule, 1 workload "
                       "requeued (team-a/train)\n"),
            std::string::npos)
      << o.out;

  o = RunCli({"health", "-o", "json", "--server", Server(), "--token", kRead});
  ASSERT_EQ(o.code, 0) << o.err;
  const json j = json::parse(o.out);
  EXPECT_EQ(j["controller"]["nodes"][0]["fenced_gpus"][0]["index"], 1);
  EXPECT_EQ(j["controller"]["nodes"][0]["held"], true);
  EXPECT_EQ(j["controller"]["incidents"][0]["evidence"][0]["xid"], 79);
  EXPECT_EQ(j["controller"]["incidents"][0]["evidence"][2]["workloads_requeued"],
            json::array({"team-a/train"}));
}

// Against the demo (no health controller): the simulated fault's evidence, the same kinds.
TEST_F(HealthCommandTest, DemoIncidentsShowTheSimulatedFaultsEvidence) {
  daemon::ServerOptions so;
  so.port = 0;
  auto tokens = daemon::TokenFileAuthenticator::Parse(std::string(kRead) + " read\n", "t");
  daemon::ApiServer demo(*daemon_,
                         std::shared_ptr<daemon::Authenticator>(std::move(tokens).value()), so);
  ASSERT_TRUE(demo.Start().ok());
  ASSERT_TRUE(backend_->FailGpu(0, 3));
  ASSERT_TRUE(daemon_->Tick().ok());
  const daemon::Incident& inc = daemon_->state()->incidents.at(0);
  testing::Output o = RunCli(
      {"health", "--server", "http://127.0.0.1:" + std::to_string(demo.port()), "--token", kRead});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("h100-0  3    GPU-h100-0-3"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(inc.message), std::string::npos) << o.out;
  std::string block =
      "\nEVIDENCE OF OPEN INCIDENTS\nh100-0  GPU 3  " + inc.cause + "  " + inc.severity + "\n";
  for (const Evidence& e : inc.evidence)
    block += fmt::format("  {:<15}  {}\n", EvidenceType(e), EvidenceText(e));
  EXPECT_NE(o.out.find(block), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("  rule             rule " + inc.cause + " ("), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("  action           GPU fenced"), std::string::npos) << o.out;
}

TEST_F(HealthCommandTest, ClearNeedsAnAdminAndAKnownNode) {
  ASSERT_TRUE(health_->PostReport(Report("gpu-7", true).dump(), "test", "").ok());
  ASSERT_TRUE(
      health_->PostReport(Report("gpu-7", false, 101.0).dump(), "test", "").ok());  // healthy again
  health_->Step();
  testing::Output o = RunCli({"health", "clear", "gpu-7", "--server", Server(), "--token", kRead});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("refused the token"), std::string::npos) << o.err;
  o = RunCli({"health", "clear", "nope", "--server", Server(), "--token", kAdmin});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("no agent has reported node \"nope\""), std::string::npos) << o.err;
  o = RunCli({"health", "clear", "gpu-7", "--server", Server(), "--token", kAdmin});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("node gpu-7 cleared"), std::string::npos) << o.out;
  const json view = health_->View();
  EXPECT_EQ(view["nodes"][0]["held"], false);
  EXPECT_TRUE(view["nodes"][0]["fenced_gpus"].empty()) << view.dump();
}

TEST(ConfigCheckTest, ChecksAndPrintsTheHealthSection) {
  const std::string path = ::testing::TempDir() + "/health-config.yaml";
  std::ofstream(path) << "cyclePeriod: 1s\nhealth:\n  probation: 2m\n  holdAfterFaults: 5\n";
  testing::Output o = RunCli({"config", "check", path});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("cyclePeriod: 1s\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("health:\n  enabled: true\n  probation: 2m\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("  holdAfterFaults: 5\n"), std::string::npos) << o.out;
  std::ofstream(path) << "health:\n  probation: soon\n";
  o = RunCli({"config", "check", path});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find(path + ":2:"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("health.probation"), std::string::npos) << o.err;
  std::ofstream(path) << "cyclePeriod: 1s\n";
  o = RunCli({"config", "check", path});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.find("health:"), std::string::npos) << "no section, none printed";
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chamber::cli
