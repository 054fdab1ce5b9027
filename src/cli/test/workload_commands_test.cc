// `chamber queues`, `workloads` and `why` against a real in-process server over the demo's
// simulated cluster, and their text helpers.
#include <algorithm>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "backend/sim/demo_cluster.h"
#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/test/run_cli.h"
#include "cli/workload_text.h"
#include "daemon/api_json.h"
#include "daemon/http_server.h"

namespace chamber::cli {
namespace {

using nlohmann::json;
constexpr const char* kToken = "cli-test-token-0123456789";

void Commands(CommandRegistry& r) {
  RegisterQueuesCommand(r);
  RegisterWorkloadsCommand(r);
  RegisterWhyCommand(r);
}

using testing::Output;
Output RunCli(std::vector<std::string> args) { return testing::RunCli(std::move(args), Commands); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

// The server is not ticking: every answer comes from the same state.
class WorkloadCommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Queues form within the first simulated hours.
    testing::StartDemoApi(6, kToken, &daemon_, &server_);
  }
  static void TearDownTestSuite() {
    server_.reset();
    daemon_.reset();
  }
  static std::string Server() { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  static Output Cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--server", Server(), "--token", kToken});
    return RunCli(std::move(args));
  }
  static json Workloads(daemon::WorkloadFilter f = {}) {
    return daemon::WorkloadsJson(*daemon_->state(), f);
  }

  static std::unique_ptr<daemon::Daemon> daemon_;
  static std::unique_ptr<daemon::ApiServer> server_;
};
std::unique_ptr<daemon::Daemon> WorkloadCommandsTest::daemon_;
std::unique_ptr<daemon::ApiServer> WorkloadCommandsTest::server_;

TEST_F(WorkloadCommandsTest, QueuesTableMatchesTheQueuesResource) {
  const Output o = Cli({"queues"});
  ASSERT_EQ(o.code, 0) << o.err;
  const json queues = daemon::QueuesJson(*daemon_->state())["queues"];
  const std::vector<std::string> lines = Lines(o.out);
  ASSERT_EQ(lines.size(), 5u) << o.out;  // header and the demo's four queues
  EXPECT_EQ(Fields(lines[0]),
            (std::vector<std::string>{"QUEUE", "PARENT", "QUOTA", "LIMIT", "ALLOCATED",
                                      "FAIR-SHARE", "BORROWED", "LENT", "PENDING", "RUNNING",
                                      "WAIT-P50", "WAIT-P95", "PREEMPT-1H", "LOST-GPUH-1H"}));
  const std::vector<std::pair<std::string, std::string>> quotas = {
      {"llm-training", "112"}, {"vision", "64"}, {"recsys", "48"}, {"research", "40"}};
  for (size_t i = 0; i < quotas.size(); ++i) {
    const json& q = queues[i];
    ASSERT_EQ(q["name"], quotas[i].first);
    // Every team started work in the last hour, so each shows its own waits.
    ASSERT_GT(q["started_last_hour"].get<int>(), 0) << q;
    EXPECT_EQ(Fields(lines[i + 1]),
              (std::vector<std::string>{
                  quotas[i].first, "-", quotas[i].second, "-", Number(q["allocated"]),
                  Number(q["fair_share"]), Number(q["borrowed"]), Number(q["lent"]),
                  Number(q["pending_workloads"]), Number(q["running_workloads"]),
                  DurationText(q["wait_p50_seconds"]), DurationText(q["wait_p95_seconds"]),
                  Number(q["preemptions_last_hour"]), Number(q["gpu_hours_lost_last_hour"])}))
        << lines[i + 1];
  }
  // The demo is busy: something is allocated, something waits, and something was preempted.
  double allocated = 0, pending = 0, preempted = 0, lost = 0;
  for (const json& q : queues) {
    allocated += q["allocated"].get<double>();
    pending += q["pending_workloads"].get<double>();
    preempted += q["preemptions_last_hour"].get<double>();
    lost += q["gpu_hours_lost_last_hour"].get<double>();
  }
  EXPECT_GT(allocated, 0);
  EXPECT_GT(pending, 0);
  EXPECT_GT(preempted, 0);
  EXPECT_GT(lost, 0);
}

TEST_F(WorkloadCommandsTest, QueuesJsonIsTheQueuesResource) {
  const Output o = Cli({"queues", "-o", "json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(o.out), daemon::QueuesJson(*daemon_->state()));
}

TEST_F(WorkloadCommandsTest, WorkloadsTableFollowsTheWorkloadsResource) {
  daemon::WorkloadFilter f;
  f.limit = 20;
  const json all = Workloads(f);
  const Output o = Cli({"workloads", "--limit", "20"});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::vector<std::string> lines = Lines(o.out);
  ASSERT_GE(all["total"].get<size_t>(), 20u);
  ASSERT_EQ(lines.size(), all["total"].get<size_t>() > 20 ? 22u : 21u) << o.out;
  EXPECT_EQ(Fields(lines[0]), (std::vector<std::string>{"NAME", "QUEUE", "STATE", "GPUS",
                                                        "PRIORITY", "AGE", "LOST-GPUH", "REASON"}));
  for (size_t i = 0; i < 20; ++i) {
    const json& w = all["workloads"][i];
    const std::vector<std::string> fields = Fields(lines[i + 1]);
    ASSERT_GE(fields.size(), 8u) << lines[i + 1];
    EXPECT_EQ(fields[0], w["name"]);
    EXPECT_EQ(fields[1], w["queue"]);
    EXPECT_EQ(fields[2], w["state"]);
    EXPECT_EQ(fields[3], GpuAmount(w["gpus"]));
    EXPECT_EQ(fields[4], std::to_string(w["priority"].get<int>()));
    // PRIORITY may be two words ("100 (reserved)"): LOST-GPUH is the one before REASON.
    EXPECT_EQ(fields[fields.size() - 2],
              w["preemption_count"].get<int>() > 0 ? Number(w["gpu_hours_lost"]) : "-");
    EXPECT_EQ(fields.back(), w["pending_reason"].is_string()
                                 ? w["pending_reason"].get<std::string>()
                                 : (w["borrowing"].get<bool>() ? "borrowing" : "-"));
  }
  EXPECT_EQ(lines.back(),
            "(20 of " + std::to_string(all["total"].get<size_t>()) + " shown; --limit shows more)");
}

// The demo's notebooks ask for a quarter or a half of a GPU, its inference servers for a MIG
// device charged its compute slices over 7: the table and `why` say 0.25, 0.5, 0.142, 0.285 and
// 0.428, not a rounded figure.
TEST_F(WorkloadCommandsTest, SharesAreShownAsExactGpuEquivalents) {
  daemon::WorkloadFilter f;
  f.limit = 100000;
  const json all = Workloads(f)["workloads"];
  std::set<double> fractions;
  std::string notebook, server;
  for (const json& w : all) {
    const double g = w["gpus"].get<double>();
    // A MIG server names its profile; nothing else has MIG devices.
    EXPECT_EQ(w["mig_devices"].empty(), g != 0.142 && g != 0.285 && g != 0.428) << w.dump();
    if (g >= 1) continue;
    fractions.insert(g);
    if (notebook.empty() && g == 0.25) notebook = w["name"];
    if (server.empty() && g == 0.428) server = w["name"];
  }
  EXPECT_EQ(fractions, (std::set<double>{0.142, 0.25, 0.285, 0.428, 0.5}));
  ASSERT_FALSE(notebook.empty());
  Output o = Cli({"why", notebook});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("It asks for 0.25 GPUs at priority 50"), std::string::npos) << o.out;
  ASSERT_FALSE(server.empty());
  o = Cli({"why", server});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("It asks for 0.428 GPUs as 1 MIG 3g.40gb device at priority"),
            std::string::npos)
      << o.out;
  o = Cli({"workloads", "--limit", "100000"});
  ASSERT_EQ(o.code, 0) << o.err;
  bool found = false;
  for (const std::string& line : Lines(o.out)) {
    const std::vector<std::string> fields = Fields(line);
    if (fields.empty() || fields[0] != notebook) continue;
    found = true;
    EXPECT_EQ(fields[3], "0.25") << line;
  }
  EXPECT_TRUE(found) << notebook;
  EXPECT_EQ(GpuAmount(6.75), "6.75");
  EXPECT_EQ(GpuAmount(8), "8");
  EXPECT_EQ(GpuAmount(0.125), "0.125");
  EXPECT_EQ(GpuAmount(1.5), "1.5");
}

TEST_F(WorkloadCommandsTest, WorkloadsFiltersByQueueAndState) {
  daemon::WorkloadFilter f;
  f.state = "pending";
  f.limit = 1;
  const json first = Workloads(f)["workloads"];
  ASSERT_EQ(first.size(), 1u);
  const std::string queue = first[0]["queue"];
  f.queue = queue;
  f.limit = 1000;
  const json expected = Workloads(f);
  ASSERT_GT(expected["total"].get<size_t>(), 0u);
  Output o = Cli({"workloads", "--queue", queue, "--state", "pending", "-o", "json"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(o.out), expected);
  o = Cli({"workloads", "--queue", queue, "--state", "pending"});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::vector<std::string> lines = Lines(o.out);
  ASSERT_EQ(lines.size(), expected["total"].get<size_t>() + 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> fields = Fields(lines[i]);
    EXPECT_EQ(fields[0], expected["workloads"][i - 1]["name"]);
    EXPECT_EQ(fields[1], queue);
    EXPECT_EQ(fields[2], "pending");
  }
  EXPECT_EQ(Cli({"workloads", "--state", "sleeping"}).code, kExitUsage);
  EXPECT_EQ(Cli({"workloads", "--limit", "0"}).code, kExitUsage);
}

TEST_F(WorkloadCommandsTest, WhyExplainsAPendingWorkload) {
  daemon::WorkloadFilter f;
  f.state = "pending";
  const json pending = Workloads(f)["workloads"];
  auto it = std::find_if(pending.begin(), pending.end(),
                         [](const json& w) { return w["queue_position"].is_number(); });
  ASSERT_NE(it, pending.end());
  const json& w = *it;
  const std::string name = w["name"];
  const json queues = daemon::QueuesJson(*daemon_->state())["queues"];
  const json& q = *std::find_if(queues.begin(), queues.end(),
                                [&](const json& x) { return x["name"] == w["queue"]; });
  const Output o = Cli({"why", name});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string first = name + " is pending in queue " + w["queue"].get<std::string>() +
                            " (position " + std::to_string(w["queue_position"].get<int>()) +
                            " of " + Number(q["pending_workloads"]) +
                            "): " + w["pending_reason"].get<std::string>() + " \u2014 " +
                            w["pending_message"].get<std::string>() + "\n";
  EXPECT_EQ(o.out.rfind(first, 0), 0u) << o.out;
  EXPECT_NE(o.out.find("It asks for " + GpuAmount(w["gpus"]) + " GPU"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Queue " + w["queue"].get<std::string>() + ": quota " + Number(q["quota"]) +
                       " GPUs, limit none, allocated " + Number(q["allocated"])),
            std::string::npos)
      << o.out;
  const json detail =
      daemon::WorkloadDetailJson(*daemon_->state(), *daemon::FindWorkload(*daemon_->state(), name));
  for (const json& d : detail["workload"]["pending_details"])
    EXPECT_NE(o.out.find("\n  " + d.get<std::string>() + "\n"), std::string::npos) << o.out;
  const Output j = Cli({"why", name, "-o", "json"});
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out), detail);
}

TEST_F(WorkloadCommandsTest, WhySaysWhereARunningWorkloadRuns) {
  daemon::WorkloadFilter f;
  f.state = "running";
  f.limit = 1;
  const json w = Workloads(f)["workloads"][0];
  const Output o = Cli({"why", w["name"]});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string first = w["name"].get<std::string>() + " is running in queue " +
                            w["queue"].get<std::string>() + " on " +
                            w["nodes"][0].get<std::string>();
  EXPECT_EQ(o.out.rfind(first, 0), 0u) << o.out;
  EXPECT_NE(o.out.find(" since " + w["started"].get<std::string>()), std::string::npos);
  EXPECT_NE(o.out.find(w["borrowing"].get<bool>() ? ", borrowing beyond its queue's quota."
                                                  : ", within its queue's quota."),
            std::string::npos)
      << o.out;
}

TEST_F(WorkloadCommandsTest, WhyFailsClearlyForAnUnknownName) {
  Output o = Cli({"why", "ml/no-such-job"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("no workload or pod named \"ml/no-such-job\" at " + Server()),
            std::string::npos)
      << o.err;
  EXPECT_TRUE(o.out.empty());
  o = Cli({"why", "a/b/c"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("\"a/b/c\" is not a name like namespace/name"), std::string::npos) << o.err;
  EXPECT_EQ(RunCli({"why"}).code, kExitUsage);
}

// The text helpers, without a server.

json QueueJson(const std::string& name, const std::string& parent, double quota) {
  return {{"name", name},           {"parent", parent.empty() ? json(nullptr) : json(parent)},
          {"quota", quota},         {"limit", nullptr},
          {"allocated", 3},         {"fair_share", 2.5},
          {"borrowed", 1},          {"lent", 0},
          {"pending_workloads", 4}, {"running_workloads", 2},
          {"error", nullptr}};
}

TEST(WorkloadTextTest, QueueTreeIndentsChildrenUnderTheirParent) {
  const json queues = {QueueJson("team-b", "org", 4),   QueueJson("org", "", 16),
                       QueueJson("lost", "missing", 1), QueueJson("team-a", "org", 8),
                       QueueJson("a-1", "team-a", 2),   QueueJson("x", "y", 0),
                       QueueJson("y", "x", 0)};
  EXPECT_EQ(QueueTreeOrder(queues), (std::vector<std::pair<size_t, int>>{
                                        {1, 0}, {0, 1}, {3, 1}, {4, 2}, {2, 0}, {5, 0}, {6, 1}}));
  const auto rows = QueueRows(queues);
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"org", "-", "16", "-", "3", "2.5", "1", "0", "4",
                                               "2", "-", "-", "0", "0"}));
  EXPECT_EQ(rows[1][0], "  team-b");
  EXPECT_EQ(rows[1][1], "org");
  EXPECT_EQ(rows[3][0], "    a-1");
  EXPECT_EQ(rows[4][0], "lost");
}

TEST(WorkloadTextTest, QueueRowsShowTheLastHour) {
  json q = QueueJson("team-a", "", 8);
  q["started_last_hour"] = 3;
  q["wait_p50_seconds"] = 75.4;
  q["wait_p95_seconds"] = 3725;
  q["preemptions_last_hour"] = 2;
  q["gpu_hours_lost_last_hour"] = 4.5;
  const auto rows = QueueRows(json::array({q}));
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].size(), kQueueColumns.size());
  EXPECT_EQ(std::vector<std::string>(rows[0].begin() + 10, rows[0].end()),
            (std::vector<std::string>{"1m15s", "1h02m", "2", "4.5"}));
  // Nothing started in the last hour: no percentile to show, even where the answer has 0.
  q["started_last_hour"] = 0;
  q["wait_p50_seconds"] = 0;
  EXPECT_EQ(QueueRows(json::array({q}))[0][10], "-");
}

json Detail() {
  json w = {{"name", "ml/train-7"},
            {"queue", "research"},
            {"priority", 10},
            {"reserved", false},
            {"state", "pending"},
            {"gpus", 8},
            {"borrowing", false},
            {"pending_reason", "NoNodeFits"},
            {"pending_message", "no node has 8 free H100 GPUs"},
            {"pending_details", {"3 nodes: 4 free GPUs", "2 nodes: cordoned"}},
            {"queue_position", 3},
            {"submitted", "2026-11-30T10:00:00Z"},
            {"started", nullptr},
            {"nodes", json::array()},
            {"pods", {"ml/train-7-0", "ml/train-7-1"}},
            {"preemptions", {"2026-11-30T09:00:00Z"}}};
  return {{"time", "2026-11-30T10:12:30Z"},
          {"workload", w},
          {"pod", "ml/train-7-1"},
          {"queue", QueueJson("research", "", 40)}};
}

TEST(WorkloadTextTest, ExplainsAPendingWorkloadFoundThroughItsPod) {
  json d = Detail();
  d["queue"]["pending_workloads"] = 5;
  EXPECT_EQ(ExplainWorkload(d),
            "Pod ml/train-7-1 belongs to workload ml/train-7.\n"
            "ml/train-7 is pending in queue research (position 3 of 5): NoNodeFits \u2014 no "
            "node has 8 free H100 GPUs\n"
            "  3 nodes: 4 free GPUs\n"
            "  2 nodes: cordoned\n"
            "It asks for 8 GPUs at priority 10 (elastic: may borrow beyond quota and be "
            "preempted); submitted 2026-11-30T10:00:00Z, waiting 12m30s.\n"
            "Preempted 1 time before: 2026-11-30T09:00:00Z.\n"
            "Pods: ml/train-7-0, ml/train-7-1.\n"
            "Queue research: quota 40 GPUs, limit none, allocated 3 (borrowed 1, lent 0), fair "
            "share 2.5; 5 waiting, 2 running.\n");
}

TEST(WorkloadTextTest, ExplainsTheWorkItsPreemptionsLost) {
  json d = Detail();
  json& w = d["workload"];
  w["preemption_count"] = 2;
  w["gpu_hours_lost"] = 4.5;
  w["preemption_history"] = {
      {{"time", "2026-11-30T09:00:00Z"}, {"reason", "Reclaim"}, {"gpu_hours_lost", 4}},
      {{"time", "2026-11-30T09:40:00Z"}, {"reason", "HardwareFault"}, {"gpu_hours_lost", 0.5}}};
  std::string text = ExplainWorkload(d);
  EXPECT_NE(text.find("Preempted 1 time before: 2026-11-30T09:00:00Z.\n"
                      "Its 2 preemptions lost 4.5 GPU-hours of work: 2026-11-30T09:00:00Z Reclaim "
                      "(4 GPU-hours), 2026-11-30T09:40:00Z HardwareFault (0.5 GPU-hours).\n"),
            std::string::npos)
      << text;
  // More preemptions than the history holds: the latest five are named.
  w["preemption_count"] = 12;
  w["gpu_hours_lost"] = 1;
  w["preemption_history"] = json::array();
  for (int i = 0; i < 10; ++i)
    w["preemption_history"].push_back({{"time", "2026-11-30T0" + std::to_string(i) + ":00:00Z"},
                                       {"reason", "Priority"},
                                       {"gpu_hours_lost", 0.1}});
  text = ExplainWorkload(d);
  EXPECT_NE(text.find("Its 12 preemptions lost 1 GPU-hour of work (the latest 5): "
                      "2026-11-30T05:00:00Z Priority (0.1 GPU-hours), "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2026-11-30T09:00:00Z Priority (0.1 GPU-hours).\n"), std::string::npos);
  EXPECT_EQ(text.find("2026-11-30T04:00:00Z"), std::string::npos);
}

TEST(WorkloadTextTest, ExplainsARunningReservedWorkload) {
  json d = Detail();
  d["pod"] = nullptr;
  json& w = d["workload"];
  w["state"] = "running";
  w["priority"] = 100;
  w["reserved"] = true;
  w["gpus"] = 1;
  w["borrowing"] = true;
  w["pending_reason"] = nullptr;
  w["pending_message"] = nullptr;
  w["pending_details"] = json::array();
  w["queue_position"] = nullptr;
  w["started"] = "2026-11-30T09:10:30Z";
  w["nodes"] = {"h100-3", "h100-4"};
  w["pods"] = json::array();
  w["preemptions"] = json::array();
  d["queue"] = nullptr;
  EXPECT_EQ(ExplainWorkload(d),
            "ml/train-7 is running in queue research on h100-3, h100-4 since "
            "2026-11-30T09:10:30Z (1h02m), borrowing beyond its queue's quota.\n"
            "It asks for 1 GPU at priority 100 (reserved: runs within quota, never preempted); "
            "submitted 2026-11-30T10:00:00Z.\n"
            "Queue research is not known to the scheduler.\n");
}

TEST(WorkloadTextTest, ExplainsASuspendedWorkloadNotYetExplained) {
  json d = Detail();
  d["pod"] = nullptr;
  d["workload"]["state"] = "suspended";
  d["workload"]["pending_reason"] = nullptr;
  d["workload"]["queue_position"] = nullptr;
  const std::string text = ExplainWorkload(d);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "ml/train-7 is suspended (preempted, waiting to resume) in queue research; no "
            "scheduling cycle has explained it yet");
}

TEST(WorkloadTextTest, WorkloadRowAgeAndReason) {
  json w = Detail()["workload"];
  EXPECT_EQ(WorkloadRow(w, "2026-11-30T11:02:00Z"),
            (std::vector<std::string>{"ml/train-7", "research", "pending", "8", "10", "1h02m", "-",
                                      "NoNodeFits"}));
  w["pending_reason"] = nullptr;
  w["borrowing"] = true;
  w["reserved"] = true;
  w["priority"] = 100;
  w["preemption_count"] = 2;
  w["gpu_hours_lost"] = 3.5;
  EXPECT_EQ(WorkloadRow(w, "2026-11-30T10:00:45Z"),
            (std::vector<std::string>{"ml/train-7", "research", "pending", "8", "100 (reserved)",
                                      "45s", "3.5", "borrowing"}));
}

TEST(WorkloadTextTest, SecondsBetweenAndUrlEncode) {
  EXPECT_EQ(SecondsBetween("2026-11-30T10:00:00Z", "2026-11-30T10:01:30.500Z"), 90);
  EXPECT_EQ(SecondsBetween("not a time", "2026-11-30T10:01:30Z"), 0);
  EXPECT_EQ(UrlEncode("team a/b~c.d_e-f"), "team%20a%2Fb~c.d_e-f");
}

}  // namespace
}  // namespace chamber::cli
