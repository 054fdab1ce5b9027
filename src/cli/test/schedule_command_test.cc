// `chamber schedule --snapshot`: one cycle over a small snapshot file, its decisions checked
// in each output format.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/test/run_cli.h"

namespace chamber::cli {
namespace {

using nlohmann::json;
using testing::Output;

Output RunCli(std::vector<std::string> args) {
  return testing::RunCli(std::move(args), [](CommandRegistry& r) { RegisterScheduleCommand(r); });
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Two 4-GPU nodes and a 2-GPU one. b (quota 4) runs 8 GPUs, 4 of them borrowed from a
// (quota 4), which now asks for 4: the cycle reclaims b/borrowed, whose last checkpoint was 15
// minutes ago (4 GPUs x 15m = 1 GPU-hour lost; b/first has none and would lose 4), and a/train
// waits for it. a/huge asks for 8 GPUs in one pod, more than any node has. c/eval binds on the
// only free GPUs; c/more would take c past its limit of 2.
constexpr const char* kSnapshot = R"(now: 2h
nodes:
  - {name: n, count: 2, gpus: 4}
  - {name: small, gpus: 2}
queues:
  - {name: a, resources: {gpu: {quota: 4}}}
  - {name: b, resources: {gpu: {quota: 4}}}
  - {name: c, resources: {gpu: {quota: 2, limit: 2}}}
workloads:
  - {name: b/first, queue: b, gpu: 4, state: Running, startTime: 1h,
     placements: [{node: n-0, gpus: [0, 1, 2, 3]}]}
  - {name: b/borrowed, queue: b, gpu: 4, state: Running, startTime: 1h,
     lastCheckpointTime: 1h45m, placements: [{node: n-1, gpus: [0, 1, 2, 3]}]}
  - {name: a/train, queue: a, gpu: 4, submitTime: 1h30m}
  - {name: a/huge, queue: a, gpu: 8, submitTime: 1h40m}
  - {name: c/eval, queue: c, gpu: 2, submitTime: 1h50m}
  - {name: c/more, queue: c, gpu: 1, submitTime: 1h55m}
)";

class ScheduleCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snapshot_ = testing::TestPath("snapshot.yaml");
    std::ofstream(snapshot_) << kSnapshot;
  }
  void TearDown() override { std::filesystem::remove(snapshot_); }
  std::string snapshot_;
};

TEST_F(ScheduleCommandTest, TableListsEveryDecisionAndTheQueues) {
  const Output o = RunCli({"schedule", "--snapshot", snapshot_});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const std::vector<std::string> expected = {
      "Cycle at 2h over 3 nodes (10 GPUs), 3 queues, 6 workloads",
      "",
      "DECISION  WORKLOAD                     DETAIL",
      "bind      c/eval                       small[0,1]",
      "preempt   b/borrowed                   Reclaim: reclaimed for a/train: queue a is below "
      "its quota; grace 30s, 1.0 GPU-hours lost",
      "nominate  a/train                      n-1[0,1,2,3]  (held while its victims leave)",
      "pending   a/train                      WaitingForPreemption: preempting 1 workload to "
      "make room (#1 in queue)",
      "                                       victim b/borrowed (Reclaim)",
      "pending   a/huge                       NoNodeFits: no node fits a pod of 8 gpu: 3 nodes "
      "too few GPUs (#2 in queue)",
      "pending   c/more                       OverQueueLimit: queue c: needs 1 gpu; quota 2 gpu, "
      "in use 2 gpu, limit 2 gpu (#1 in queue)",
      "",
      // After the cycle: b's victim no longer counts, a holds none yet, c holds c/eval.
      "QUEUE         GPU USED FAIR SHARE  QUOTA  LIMIT BORROWED  LENT RUNNING PENDING",
      "a                    0        4.0      4      -        0     0       0       2",
      "b                    4        4.0      4      -        0     0       1       0",
      "c                    2        2.0      2      2        0     0       1       1",
  };
  EXPECT_EQ(Lines(o.out), expected) << o.out;
}

// A snapshot of MIG devices: the header counts them, and a MIG pod's placement names its profile.
TEST(ScheduleCommandMigTest, PlacementsNameTheMigProfile) {
  const std::string path = testing::TestPath("mig-snapshot.yaml");
  std::ofstream(path) << R"(now: 2h
nodes:
  - {name: n, gpus: 2, mig: {1g.10gb: 4, 3g.40gb: 1}}
queues:
  - {name: a, resources: {gpu: {quota: 4}}}
workloads:
  - {name: a/server, queue: a, mig: {profile: 3g.40gb}}
  - {name: a/pair, queue: a, mig: {profile: 1g.10gb, devices: 2}, submitTime: 1h}
  - {name: a/whole, queue: a, gpu: 1, submitTime: 1h30m}
)";
  const Output o = RunCli({"schedule", "--snapshot", path});
  std::filesystem::remove(path);
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const std::vector<std::string> lines = Lines(o.out);
  ASSERT_GE(lines.size(), 6u) << o.out;
  EXPECT_EQ(lines[0], "Cycle at 2h over 1 nodes (2 GPUs, 5 MIG devices), 1 queues, 3 workloads");
  EXPECT_EQ(lines[3], "bind      a/server                     n[MIG 3g.40gb]") << o.out;
  EXPECT_EQ(lines[4], "bind      a/pair                       n[2 x MIG 1g.10gb]") << o.out;
  EXPECT_EQ(lines[5], "bind      a/whole                      n[0]") << o.out;
}

TEST_F(ScheduleCommandTest, JsonHasTheSameDecisions) {
  const Output o = RunCli({"schedule", "--snapshot", snapshot_, "-o", "json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json r = json::parse(o.out);
  EXPECT_EQ(r.at("binds"), json::parse(R"([{"workload": "c/eval", "borrowing": false,
      "pods": [{"node": "small", "gpus": [0, 1], "podSet": "main", "replica": 0}]}])"));
  EXPECT_EQ(r.at("resumes"), json::array());
  EXPECT_EQ(r.at("preemptions"), json::parse(R"([{"workload": "b/borrowed", "reason": "Reclaim",
      "preemptor": "a/train", "graceSeconds": 30, "gpuHoursLost": 1.0,
      "message": "reclaimed for a/train: queue a is below its quota"}])"));
  EXPECT_EQ(r.at("nominations"), json::parse(R"([{"workload": "a/train",
      "pods": [{"node": "n-1", "gpus": [0, 1, 2, 3], "podSet": "main", "replica": 0}]}])"));
  const json& pending = r.at("pending");
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0], json::parse(R"j({"workload": "a/train", "reason": "WaitingForPreemption",
      "message": "preempting 1 workload to make room", "queuePosition": 1,
      "details": ["victim b/borrowed (Reclaim)"]})j"));
  EXPECT_EQ(pending[1].at("workload"), "a/huge");
  EXPECT_EQ(pending[1].at("reason"), "NoNodeFits");
  EXPECT_EQ(pending[1].at("queuePosition"), 2);
  EXPECT_EQ(pending[2].at("workload"), "c/more");
  EXPECT_EQ(pending[2].at("reason"), "OverQueueLimit");
  EXPECT_EQ(pending[2].at("message"),
            "queue c: needs 1 gpu; quota 2 gpu, in use 2 gpu, limit 2 gpu");
  EXPECT_EQ(r.at("issues"), json::array());

  const json& queues = r.at("queues");
  ASSERT_EQ(queues.size(), 3u);
  const std::vector<std::string> names = {"a", "b", "c"};
  const std::vector<int> gpus = {0, 4, 2}, running = {0, 1, 1}, waiting = {2, 0, 1};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(queues[i].at("name"), names[i]);
    EXPECT_EQ(queues[i].at("allocated").at("gpu"), gpus[i]);
    EXPECT_EQ(queues[i].at("borrowed").at("gpu"), 0);
    EXPECT_EQ(queues[i].at("runningWorkloads"), running[i]);
    EXPECT_EQ(queues[i].at("pendingWorkloads"), waiting[i]);
  }
  EXPECT_EQ(queues[0].at("fairShare").at("gpu"), 4.0);
  EXPECT_EQ(queues[2].at("fairShare").at("gpu"), 2.0);
}

TEST_F(ScheduleCommandTest, ConfigSetsTheGracePeriod) {
  const std::string config = testing::TestPath("config.yaml");
  std::ofstream(config) << "preemption:\n  checkpointGraceSeconds: 120\n";
  const Output o = RunCli({"schedule", "--snapshot", snapshot_, "--config", config});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_NE(o.out.find("b/borrowed                   Reclaim: reclaimed for a/train: queue a is "
                       "below its quota; grace 120s, 1.0 GPU-hours lost\n"),
            std::string::npos)
      << o.out;
  std::filesystem::remove(config);
}

TEST_F(ScheduleCommandTest, SnapshotErrorsNameTheFileAndField) {
  std::ofstream(snapshot_) << "nodes:\n  - {name: n, gpus: eight}\n";
  const Output o = RunCli({"schedule", "--snapshot", snapshot_});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(
      o.err.find(snapshot_ + ":2:21: field nodes[0].gpus: expected an integer, got \"eight\""),
      std::string::npos)
      << o.err;
  EXPECT_EQ(o.out, "");
}

TEST(ScheduleCommand, SnapshotOrExampleIsRequired) {
  const Output o = RunCli({"schedule"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("give either --example or --snapshot FILE"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace chamber::cli
