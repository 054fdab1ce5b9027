// `chamber bench engine` on the smallest fleets: the figures it prints agree with the sizes
// asked for and with each other. Times are only checked for being times, never against limits.
#include <regex>
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
  return testing::RunCli(std::move(args), [](CommandRegistry& r) { RegisterBenchCommand(r); });
}

// 4 nodes of 8 GPUs, 16 pods in workloads of `gang` pods, half of the workloads running.
std::vector<std::string> SmallFleet(int gang, std::vector<std::string> more) {
  std::vector<std::string> args = {"bench",    "engine", "--nodes",     "4",
                                   "--pods",   "16",     "--queues",    "2",
                                   "--cycles", "3",      "--gang-size", std::to_string(gang)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(BenchEngineCommand, JsonCountsMatchTheSizesAskedFor) {
  for (int gang : {1, 2}) {
    SCOPED_TRACE(gang);
    const Output o = RunCli(SmallFleet(gang, {"-o", "json"}));
    ASSERT_EQ(o.code, kExitOk) << o.err;
    const json r = json::parse(o.out);
    EXPECT_EQ(r.at("spec").at("nodes"), 4);
    EXPECT_EQ(r.at("spec").at("gpus_per_node"), 8);
    EXPECT_EQ(r.at("spec").at("pods"), 16);
    EXPECT_EQ(r.at("spec").at("gang_size"), gang);
    EXPECT_EQ(r.at("spec").at("queues"), 2);
    EXPECT_EQ(r.at("cycles"), 3);
    // Half of the 16 / gang workloads run, half wait.
    EXPECT_EQ(r.at("running_pods"), 8);
    EXPECT_EQ(r.at("waiting_pods"), 8);
    const int64_t waiting_workloads = 8 / gang;
    const auto bound = r.at("bound_workloads").get<int64_t>();
    const auto bound_pods = r.at("bound_pods").get<int64_t>();
    // Every waiting workload is bound whole or explained; with 24 GPUs idle most bind.
    EXPECT_EQ(bound_pods, bound * gang);
    EXPECT_EQ(bound + r.at("pending_workloads").get<int64_t>(), waiting_workloads);
    EXPECT_GT(bound, 0);
    EXPECT_LE(r.at("running_pods").get<int64_t>() + bound_pods, 4 * 8);
    EXPECT_EQ(r.at("preemptions"), 0);
    EXPECT_EQ(r.at("engine_stats").at("workloads_considered"), waiting_workloads);

    const json& ms = r.at("cycle_ms");
    const auto min = ms.at("min").get<double>(), p50 = ms.at("p50").get<double>(),
               p95 = ms.at("p95").get<double>(), p99 = ms.at("p99").get<double>(),
               max = ms.at("max").get<double>();
    EXPECT_GT(min, 0);
    EXPECT_LE(min, p50);
    EXPECT_LE(p50, p95);
    EXPECT_LE(p95, p99);
    EXPECT_LE(p99, max);
    EXPECT_GT(r.at("snapshot_build_ms").get<double>(), 0);
    // Of 3 cycles the median rate is that of the median cycle.
    EXPECT_NEAR(r.at("placements_per_second_median").get<double>(),
                static_cast<double>(bound_pods) / p50 * 1e3, 1e-6 * (bound_pods / p50 * 1e3));
    const json& breakdown = r.at("breakdown_ms_p50");
    EXPECT_GT(breakdown.at("cycle_with_nothing_waiting").get<double>(), 0);
    EXPECT_GE(breakdown.at("admission").get<double>(), 0);
  }
}

TEST(BenchEngineCommand, TableReportsTheSameCounts) {
  const Output o = RunCli(SmallFleet(2, {}));
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const Output j = RunCli(SmallFleet(2, {"-o", "json"}));
  ASSERT_EQ(j.code, kExitOk) << j.err;
  const json r = json::parse(j.out);
  std::istringstream lines(o.out);
  std::string first;
  std::getline(lines, first);
  EXPECT_EQ(first,
            "4 nodes x 8 GPUs, 2 queues; 16 pods (8 running, 8 waiting) in workloads of 2 x 1 "
            "GPU; steady; seed 1");
  auto row = [&](const std::string& label) {
    const std::regex re("\n" + label + " +([^\n]*)\n");
    std::smatch m;
    return std::regex_search(o.out, m, re) ? m[1].str() : "missing: " + label;
  };
  EXPECT_EQ(row("cycles"), "3");
  EXPECT_EQ(row("bound"), std::to_string(r.at("bound_pods").get<int64_t>()) + " pods in " +
                              std::to_string(r.at("bound_workloads").get<int64_t>()) +
                              " workloads");
  EXPECT_EQ(row("preemptions"), "0");
  EXPECT_EQ(row("pending"),
            std::to_string(r.at("pending_workloads").get<int64_t>()) + " workloads");
  EXPECT_EQ(row("  workloads considered"), "4");
  EXPECT_EQ(row("  preemption searches / indexed"), "0 / 0");
  std::smatch m;
  const std::string times = row("cycle time p50 / p95 / p99");
  ASSERT_TRUE(std::regex_match(times, m, std::regex(R"(([0-9.]+) / ([0-9.]+) / ([0-9.]+) ms)")))
      << times;
  EXPECT_LE(std::stod(m[1]), std::stod(m[2]));
  EXPECT_LE(std::stod(m[2]), std::stod(m[3]));
  EXPECT_GT(std::stod(row("placements/s \\(median\\)")), 0);
}

TEST(BenchEngineCommand, SmallestFleetPlacesNothing) {
  const Output o = RunCli({"bench", "engine", "--nodes", "1", "--pods", "0", "--queues", "1",
                           "--cycles", "1", "-o", "json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json r = json::parse(o.out);
  EXPECT_EQ(r.at("cycles"), 1);
  EXPECT_EQ(r.at("running_pods"), 0);
  EXPECT_EQ(r.at("waiting_pods"), 0);
  EXPECT_EQ(r.at("bound_pods"), 0);
  EXPECT_EQ(r.at("pending_workloads"), 0);
  EXPECT_EQ(r.at("placements_per_second_median"), 0.0);
  EXPECT_EQ(r.at("engine_stats").at("workloads_considered"), 0);
  // One cycle: every percentile is that cycle.
  const json& ms = r.at("cycle_ms");
  EXPECT_GT(ms.at("p50").get<double>(), 0);
  for (const char* p : {"min", "p95", "p99", "max"}) EXPECT_EQ(ms.at(p), ms.at("p50")) << p;
}

TEST(BenchEngineCommand, SizesOutOfRangeAreErrors) {
  Output o = RunCli({"bench", "engine", "--nodes", "0"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("nodes must be at least 1"), std::string::npos) << o.err;
  o = RunCli({"bench", "engine", "--nodes", "1", "--pods", "0", "--cycles", "0"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("--cycles must be at least 1"), std::string::npos) << o.err;
  o = RunCli({"bench", "engine", "--nodes", "1", "--pods", "0", "--gpus-per-pod", "9"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("GPUs per pod must be between 1 and the GPUs per node"), std::string::npos)
      << o.err;
}

}  // namespace
}  // namespace chamber::cli
