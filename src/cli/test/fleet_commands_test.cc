// `chamber status`, `nodes` and `cost` against a real in-process server over the demo's
// simulated cluster; `chamber demo` in-process and as a process stopped with Ctrl-C.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "backend/sim/demo_cluster.h"
#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/test/run_cli.h"
#include "daemon/api_json.h"
#include "daemon/http_server.h"

namespace chamber::cli {
namespace {

using nlohmann::json;
constexpr const char* kToken = "cli-test-token-0123456789";

void Commands(CommandRegistry& r) {
  RegisterDemoCommand(r);
  RegisterStatusCommand(r);
  RegisterNodesCommand(r);
  RegisterCostCommand(r);
}

using testing::Output;
Output RunCli(std::vector<std::string> args) { return testing::RunCli(std::move(args), Commands); }

class FleetCommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::StartDemoApi(backend::DemoClusterOptions{}.load, kToken, &daemon_, &server_);
  }
  static void TearDownTestSuite() {
    server_.reset();
    daemon_.reset();
  }
  static std::string Server() { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  static std::unique_ptr<daemon::Daemon> daemon_;
  static std::unique_ptr<daemon::ApiServer> server_;
};
std::unique_ptr<daemon::Daemon> FleetCommandsTest::daemon_;
std::unique_ptr<daemon::ApiServer> FleetCommandsTest::server_;

TEST_F(FleetCommandsTest, StatusJsonIsTheFleetResource) {
  const Output o = RunCli({"status", "-o", "json", "--server", Server(), "--token", kToken});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(o.out), daemon::FleetJson(*daemon_->state()));
}

TEST_F(FleetCommandsTest, StatusTable) {
  const Output o = RunCli({"status", "--server", Server(), "--token", kToken});
  ASSERT_EQ(o.code, 0) << o.err;
  const json f = daemon::FleetJson(*daemon_->state());
  const json& g = f["summary"]["gpus"];
  EXPECT_NE(o.out.find("264 capacity"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(Number(g["allocated"].get<double>()) + " allocated"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("$682.80/h"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("(demo, simulated time)"), std::string::npos);
  EXPECT_NE(o.out.find("h100  H100-SXM5-80GB  on-demand  128"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("l40s  L40S-48GB       spot       40"), std::string::npos) << o.out;
  // The last hour: preemptions with the GPU-hours they lost, and per pool the p95 wait.
  EXPECT_NE(o.out.find(Number(f["summary"]["preemptions_last_hour"]) + " in the last hour  " +
                       Number(f["summary"]["gpu_hours_lost_last_hour"]) + " GPU-hours lost"),
            std::string::npos)
      << o.out;
  auto fields = [](const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string f; in >> f;) out.push_back(f);
    return out;
  };
  std::istringstream lines(o.out);
  std::map<std::string, std::vector<std::string>> rows;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) rows[line.substr(0, line.find(' '))] = fields(line);
  ASSERT_TRUE(rows.contains("POOL")) << o.out;
  EXPECT_EQ(std::vector<std::string>(rows["POOL"].end() - 2, rows["POOL"].end()),
            (std::vector<std::string>{"WAIT-P95", "PREEMPT-1H"}));
  int started = 0;
  for (const json& p : f["pools"]) {
    const std::vector<std::string>& row = rows[p["name"].get<std::string>()];
    ASSERT_GE(row.size(), 2u) << o.out;
    EXPECT_EQ(std::vector<std::string>(row.end() - 2, row.end()),
              (std::vector<std::string>{
                  p["started_last_hour"].get<int>() > 0 ? DurationText(p["wait_p95_seconds"]) : "-",
                  Number(p["preemptions_last_hour"])}))
        << p;
    started += p["started_last_hour"].get<int>();
  }
  EXPECT_GT(started, 0);
}

TEST_F(FleetCommandsTest, NodesTableAndJson) {
  Output o = RunCli({"nodes", "--server", Server(), "--token", kToken});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 39);  // header and 38 nodes
  EXPECT_EQ(o.out.rfind("NAME", 0), 0u);
  EXPECT_NE(o.out.find("\nh100-0 "), std::string::npos);
  // Each row's GPUs by state, shared GPUs counted by parts: the nodes resource's figures.
  const json nodes = daemon::NodesJson(*daemon_->state())["nodes"];
  std::istringstream lines(o.out);
  std::string line;
  std::getline(lines, line);
  std::vector<std::string> header;
  for (std::istringstream in(line); in >> line;) header.push_back(line);
  EXPECT_EQ(header, (std::vector<std::string>{"NAME", "POOL", "MODEL", "GPUS", "ALLOCATED", "IDLE",
                                              "ALLOC-IDLE", "UNHEALTHY", "SHARED", "MIG", "UTIL",
                                              "STATE"}));
  double shared = 0;
  for (const json& n : nodes) {
    ASSERT_TRUE(std::getline(lines, line));
    std::vector<std::string> fields;
    for (std::istringstream in(line); in >> line;) fields.push_back(line);
    ASSERT_EQ(fields.size(), 12u) << line;
    const json& g = n["gpus"];
    EXPECT_EQ(std::vector<std::string>(fields.begin(), fields.begin() + 10),
              (std::vector<std::string>{n["name"], n["pool"], n["model"], Number(g["capacity"]),
                                        GpuAmount(g["allocated"]), GpuAmount(g["idle"]),
                                        GpuAmount(g["allocated_idle"]), Number(g["unhealthy"]),
                                        Number(g["shared"]), Number(g["mig"])}));
    shared += g["shared"].get<double>();
  }
  EXPECT_GT(shared, 0);  // the notebooks' shares of L40S GPUs
  o = RunCli({"nodes", "-o", "json", "--server", Server(), "--token", kToken});
  ASSERT_EQ(o.code, 0);
  EXPECT_EQ(json::parse(o.out)["nodes"].size(), 38u);
}

TEST_F(FleetCommandsTest, CostTableWithTokenFile) {
  const auto file =
      std::filesystem::temp_directory_path() / ("chamber-cli-token-" + std::to_string(getpid()));
  { std::ofstream(file) << "# the API token\n" << kToken << "\n"; }
  const Output o = RunCli({"cost", "--server", Server(), "--token-file", file.string()});
  std::filesystem::remove(file);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("Now "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" $682.80/h "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("a100  A100-SXM4-80GB  reserved   $1.60"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("llm-training"), std::string::npos);
}

TEST_F(FleetCommandsTest, ErrorsSayWhatToDo) {
  Output o = RunCli({"status", "--server", Server()});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("wants a valid token"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("--token"), std::string::npos);
  o = RunCli({"status", "--server", "http://127.0.0.1:1"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("cannot reach http://127.0.0.1:1"), std::string::npos) << o.err;
  o = RunCli({"status", "-o", "yaml"});
  EXPECT_EQ(o.code, kExitUsage);
}

TEST(DemoCommandTest, RunsForADurationAndKeepsHistoryInTheDataDir) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("chamber-demo-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const Output o = RunCli({"demo", "--port", "0", "--duration", "1", "--speed", "600", "--tick-ms",
                           "100", "--data-dir", dir.string()});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("a simulated cluster of 264 GPUs"), std::string::npos) << o.out;
  // Eight simulated hours in steps of 60 s (100 ms at 600x).
  EXPECT_NE(o.out.find("Simulating the last 8 hours of the cluster... done in "),
            std::string::npos);
  EXPECT_NE(o.out.find(" s (480 cycles)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Listening on 127.0.0.1 only, without authentication"), std::string::npos);
  EXPECT_NE(o.out.find("Dashboard: http://127.0.0.1:"), std::string::npos);
  EXPECT_NE(o.out.find("Ran "), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir / "history.db"));
  std::filesystem::remove_all(dir);
}

TEST(DemoCommandTest, GpusGrowsTheClusterInProportion) {
  const Output o = RunCli({"demo", "--gpus", "4000", "--load", "0.1", "--warmup", "1", "--port",
                           "0", "--duration", "0.2"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("a simulated cluster of 4000 GPUs"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("h100: 242 nodes x 8"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("a100: 182 nodes x 8"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("l40s: 152 nodes x 4"), std::string::npos) << o.out;
  // Above 2,000 GPUs the warm-up runs in longer steps: 60 s rather than 30 s here.
  EXPECT_NE(o.out.find(" s (60 cycles)"), std::string::npos) << o.out;
}

TEST(DemoCommandTest, GpusOutOfRangeIsRefused) {
  for (const char* gpus : {"0", "-5", "19", "50001"}) {
    const Output o = RunCli({"demo", "--gpus", gpus, "--port", "0", "--duration", "0.1"});
    EXPECT_NE(o.code, 0) << gpus;
    EXPECT_NE(o.err.find("--gpus must be 20..50000, got " + std::string(gpus)), std::string::npos)
        << o.err;
    EXPECT_EQ(o.out.find("Dashboard:"), std::string::npos) << o.out;
  }
  const Output o = RunCli({"demo", "--gpus", "many"});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_NE(o.err.find("--gpus"), std::string::npos) << o.err;
}

TEST(DemoCommandTest, ReadsTheEngineConfigurationChamberdReads) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("chamber-demo-config-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.yaml").string(), bad = (dir / "bad.yaml").string();
  std::ofstream(good) << "fairShare: {usageHalfLife: 2h}\npreemption: {reclaim: false}\n";
  std::ofstream(bad) << "fairShare:\n  usageHalfLife: soon\n";
  Output o =
      RunCli({"demo", "--config", good, "--warmup", "0", "--port", "0", "--duration", "0.1"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("Engine configuration: " + good + "\n"), std::string::npos) << o.out;
  // A bad file stops the demo before it serves, naming the file, line and field.
  o = RunCli({"demo", "--config", bad, "--port", "0", "--duration", "0.1"});
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find(bad + ":2:"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("fairShare.usageHalfLife"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("Dashboard:"), std::string::npos) << o.out;
  o = RunCli({"demo", "--config", (dir / "missing.yaml").string(), "--port", "0"});
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("missing.yaml"), std::string::npos) << o.err;
  std::filesystem::remove_all(dir);
}

// The real binary: it serves without a token, and Ctrl-C (SIGINT) stops it cleanly.
TEST(DemoCommandTest, ServesWithoutATokenAndStopsOnCtrlC) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    execl(CHAMBER_BIN, CHAMBER_BIN, "demo", "--port", "0", "--speed", "600", nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string text;
  int port = 0;
  char buf[4096];
  while (port == 0) {
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    const size_t at = text.find("Dashboard: http://127.0.0.1:");
    if (at != std::string::npos && text.find('\n', at) != std::string::npos)
      port = std::stoi(text.substr(at + 28));
  }
  ASSERT_GT(port, 0) << text;
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/api/v1/fleet");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["mode"], "demo");
  EXPECT_EQ(json::parse(r->body)["summary"]["gpus"]["capacity"], 264);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  while (true) {
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_NE(text.find("Stopping."), std::string::npos) << text;
  EXPECT_NE(text.find("(removed at exit)"), std::string::npos);
}

}  // namespace
}  // namespace chamber::cli
