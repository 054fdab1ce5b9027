#include "health/health_service.h"

#include <gtest/gtest.h>

namespace chamber::health {
namespace {

using nlohmann::json;

std::string Report(const std::string& node) {
  return json{{"kind", "chamber.io/agent-report/v1"},
              {"node", node},
              {"time", 1000.0},
              {"inventory", {{"gpus", json::array({{{"index", 0}, {"uuid", "GPU-0"}}})}}},
              {"samples", json::array()},
              {"incidents", json::array()},
              {"labels", {{"chamber.io/gpu.count", "1"}}}}
      .dump();
}

HealthService::Options Options() {
  HealthService::Options o;
  o.clock = [] { return 1000.0; };
  return o;
}

bool Reports(const std::string& metrics, const std::string& result, int n) {
  return metrics.find("chamber_health_reports_total{result=\"" + result + "\"} " +
                      std::to_string(n) + "\n") != std::string::npos;
}

TEST(HealthService, TokenBoundToANodeReportsForThatNodeOnly) {
  HealthService s(Options(), nullptr, nullptr);
  EXPECT_TRUE(s.PostReport(Report("gpu-a"), "agent", "gpu-a").ok());
  Status refused = s.PostReport(Report("gpu-b"), "agent", "gpu-a");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), "token bound to node gpu-a may not report for node gpu-b");
  // Tokens without a node (token file, older clusters) may report for any node.
  EXPECT_TRUE(s.PostReport(Report("gpu-b"), "agent", "").ok());
  const std::string m = s.Metrics();
  EXPECT_TRUE(Reports(m, "accepted", 2)) << m;
  EXPECT_TRUE(Reports(m, "rejected", 1)) << m;
  json nodes = s.View()["nodes"];
  ASSERT_EQ(nodes.size(), 2u) << nodes.dump();  // the refused report changed nothing
}

TEST(HealthService, MalformedReportIsRejectedBeforeTheNodeCheck) {
  HealthService s(Options(), nullptr, nullptr);
  Status bad = s.PostReport(R"({"kind":"chamber.io/agent-report/v1","node":7})", "agent", "n");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Reports(s.Metrics(), "rejected", 1));
}

TEST(HealthService, GpuUsageIsTheLastReportOfEachNodeWhoseAgentIsNotStale) {
  double now = 1000;
  HealthService::Options o;
  o.clock = [&now] { return now; };
  o.config.stale_after_s = 60;
  HealthService s(o, nullptr, nullptr);
  auto report = [](const std::string& node, double util0) {
    json r = json::parse(Report(node));
    auto sample = [](int i, json utilization, bool lost) {
      return json{{"index", i},
                  {"uuid", "GPU-" + std::to_string(i)},
                  {"lost", lost},
                  {"recovery_action", 0},
                  {"utilization", utilization},
                  {"memory_used_bytes", 1000 * (i + 1)}};
    };
    r["samples"] = json::array(
        {sample(0, {{"source", "gpm"}, {"gpu_percent", 100}, {"sm_active_percent", util0}}, false),
         sample(1, {{"source", "coarse"}, {"gpu_percent", 25}, {"sm_active_percent", nullptr}},
                false),
         sample(2, nullptr, false),                                       // no NVML data
         sample(3, {{"source", "coarse"}, {"gpu_percent", 90}}, true)});  // lost: not used
    return r.dump();
  };
  ASSERT_TRUE(s.PostReport(report("gpu-a", 40), "agent", "").ok());
  now = 1030;
  ASSERT_TRUE(s.PostReport(report("gpu-b", 80), "agent", "").ok());
  backend::AgentGpuUsage u = s.GpuUsage();
  ASSERT_EQ(u.size(), 2u);
  const std::vector<backend::AgentGpuSample>& a = *u.at("gpu-a");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].uuid, "GPU-0");
  EXPECT_DOUBLE_EQ(a[0].sample.utilization, 0.4);  // SM activity where the agent has it
  EXPECT_EQ(a[0].sample.memory_used_bytes, 1000);
  EXPECT_EQ(a[1].index, 1);
  EXPECT_DOUBLE_EQ(a[1].sample.utilization, 0.25);
  EXPECT_DOUBLE_EQ(u.at("gpu-b")->at(0).sample.utilization, 0.8);
  now = 1061;  // gpu-a's agent has been silent for 61 s
  u = s.GpuUsage();
  EXPECT_FALSE(u.contains("gpu-a"));
  EXPECT_TRUE(u.contains("gpu-b"));
}

// Which GPUs the device plugin gave which pods whole, from the agents that read pod-resources;
// MIG devices and other resources are not whole GPUs; a node whose agent cannot read
// pod-resources, or has gone stale, says nothing.
TEST(HealthService, DeviceAssignmentsAreTheWholeGpusEachPodHoldsPerNode) {
  double now = 1000;
  HealthService::Options o;
  o.clock = [&now] { return now; };
  o.config.stale_after_s = 60;
  HealthService s(o, nullptr, nullptr);
  auto holder = [](const std::string& pod, const std::string& resource, bool mig) {
    return json{{"namespace", "ml"},   {"pod", pod},
                {"container", "main"}, {"resource", resource},
                {"device_id", "d"},    {"mig_uuid", mig ? json("MIG-1") : json(nullptr)}};
  };
  auto report = [&](const std::string& node, const std::string& state) {
    json r = json::parse(Report(node));
    json samples = json::array();
    for (int i = 0; i < 4; ++i)
      samples.push_back({{"index", i},
                         {"uuid", "GPU-" + std::to_string(i)},
                         {"lost", false},
                         {"recovery_action", 0},
                         {"pods", json::array()}});
    samples[1]["pods"].push_back(holder("train-0", "nvidia.com/gpu", false));
    samples[3]["pods"].push_back(holder("train-0", "nvidia.com/gpu", false));
    samples[2]["pods"].push_back(holder("small", "nvidia.com/mig-1g.10gb", true));
    r["samples"] = samples;
    r["pod_resources"] = {{"state", state},
                          {"error", nullptr},
                          {"updated_at", nullptr},
                          {"unmatched", json::array()}};
    return r.dump();
  };
  ASSERT_TRUE(s.PostReport(report("gpu-a", "available"), "agent", "").ok());
  ASSERT_TRUE(s.PostReport(report("gpu-b", "unavailable"), "agent", "").ok());
  backend::DeviceAssignments d = s.DeviceAssignments();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(*d.at("gpu-a"), (backend::NodeDevices{{"ml/train-0", 0b1010}}));
  now = 1061;
  EXPECT_TRUE(s.DeviceAssignments().empty()) << "gpu-a's agent has been silent for 61 s";
}

// What each pod's processes hold on each GPU, summed per pod, for the shares' memory; processes
// whose memory the driver does not tell count for nothing.
TEST(HealthService, GpuUsageSumsEachPodsProcessesPerGpu) {
  double now = 1000;
  HealthService::Options o;
  o.clock = [&now] { return now; };
  o.config.stale_after_s = 60;
  HealthService s(o, nullptr, nullptr);
  json r = json::parse(Report("gpu-a"));
  auto process = [](int pid, json memory, const std::string& uid) {
    return json{{"pid", pid},
                {"used_memory_bytes", memory},
                {"sm_percent", nullptr},
                {"memory_percent", nullptr},
                {"gpu_instance_id", nullptr},
                {"compute_instance_id", nullptr},
                {"pod_uid", uid}};
  };
  json samples = json::array();
  for (int i = 0; i < 2; ++i)
    samples.push_back({{"index", i},
                       {"uuid", "GPU-" + std::to_string(i)},
                       {"lost", false},
                       {"recovery_action", 0},
                       {"processes", json::array()}});
  samples[0]["processes"] = {process(1, 300, "uid-a"), process(2, 200, "uid-a"),
                             process(3, 50, "uid-b"), process(4, nullptr, "uid-c")};
  samples[1]["processes"] = {process(5, 70, "uid-a")};
  r["samples"] = samples;  // no utilization: the processes alone make a sample
  ASSERT_TRUE(s.PostReport(r.dump(), "agent", "").ok());
  backend::AgentGpuUsage u = s.GpuUsage();
  ASSERT_EQ(u.count("gpu-a"), 1u);
  const std::vector<backend::AgentGpuSample>& gpus = *u.at("gpu-a");
  ASSERT_EQ(gpus.size(), 2u);
  using Memory = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(gpus[0].pod_memory, (Memory{{"uid-a", 500}, {"uid-b", 50}}));
  EXPECT_EQ(gpus[1].pod_memory, (Memory{{"uid-a", 70}}));
  now = 1061;
  EXPECT_TRUE(s.GpuUsage().empty()) << "a stale agent's figures are not used";
}

// A GPU in MIG mode, without utilization (NVML has none there), still gives its MIG devices and
// the pod the device plugin gave each.
TEST(HealthService, GpuUsageListsAMigGpusDevicesAndTheirPods) {
  HealthService::Options o;
  o.clock = [] { return 1000.0; };
  HealthService s(o, nullptr, nullptr);
  json r = json::parse(Report("gpu-m"));
  r["inventory"]["gpus"] = {
      {{"index", 0},
       {"uuid", "GPU-0"},
       {"mig",
        {{"enabled", true},
         {"instances", 2},
         {"devices",
          {{{"index", 0}, {"uuid", "MIG-a"}, {"profile", "3g.40gb"}, {"memory_total_bytes", 1000}},
           {{"index", 1},
            {"uuid", "MIG-b"},
            {"profile", "4g.40gb"},
            {"memory_total_bytes", 2000}}}}}}}};
  r["samples"] = {{{"index", 0},
                   {"uuid", "GPU-0"},
                   {"lost", false},
                   {"recovery_action", 0},
                   {"pods",
                    {{{"namespace", "ml"},
                      {"pod", "infer"},
                      {"container", "main"},
                      {"resource", "nvidia.com/mig-4g.40gb"},
                      {"device_id", "MIG-b"},
                      {"mig_uuid", "MIG-b"}}}}}};
  ASSERT_TRUE(s.PostReport(r.dump(), "agent", "").ok());
  backend::AgentGpuUsage u = s.GpuUsage();
  ASSERT_EQ(u.count("gpu-m"), 1u);
  ASSERT_EQ(u.at("gpu-m")->size(), 1u);
  EXPECT_EQ(u.at("gpu-m")->at(0).sample.mig_devices,
            (std::vector<fleet::MigDeviceInput>{{"MIG-a", "3g.40gb", 1000, ""},
                                                {"MIG-b", "4g.40gb", 2000, "ml/infer"}}));
}

// Reports lost, repeated or out of order: a report that arrives twice, or after a later one from
// its agent, changes nothing; one from an agent whose clock stepped back by more than the
// staleness limit is taken; a lost one is made up by the next (each report is the whole state).
TEST(HealthService, ARepeatedOrOutOfOrderReportChangesNothing) {
  HealthService::Options o = Options();
  o.config.stale_after_s = 60;
  HealthService s(o, nullptr, nullptr);
  auto report = [](double time, double util) {
    json r = json::parse(Report("gpu-a"));
    r["time"] = time;
    r["samples"] = json::array({{{"index", 0},
                                 {"uuid", "GPU-0"},
                                 {"lost", false},
                                 {"recovery_action", 0},
                                 {"utilization", {{"source", "coarse"}, {"gpu_percent", util}}},
                                 {"memory_used_bytes", 1}}});
    return r.dump();
  };
  auto utilization = [&] { return s.GpuUsage().at("gpu-a")->at(0).sample.utilization; };
  ASSERT_TRUE(s.PostReport(report(1010, 40), "agent", "").ok());
  ASSERT_TRUE(s.PostReport(report(1010, 40), "agent", "").ok());  // the same, again
  ASSERT_TRUE(s.PostReport(report(1005, 90), "agent", "").ok());  // an older one, late
  EXPECT_DOUBLE_EQ(utilization(), 0.4);
  std::string m = s.Metrics();
  EXPECT_TRUE(Reports(m, "accepted", 1)) << m;
  EXPECT_TRUE(Reports(m, "superseded", 2)) << m;
  ASSERT_TRUE(s.PostReport(report(1040, 70), "agent", "").ok());  // 1020 and 1030 were lost
  EXPECT_DOUBLE_EQ(utilization(), 0.7);
  ASSERT_TRUE(s.PostReport(report(900, 20), "agent", "").ok());  // the clock stepped back 140 s
  EXPECT_DOUBLE_EQ(utilization(), 0.2);
  m = s.Metrics();
  EXPECT_TRUE(Reports(m, "accepted", 3)) << m;
}

TEST(HealthService, BadUtilizationInAReportNamesTheField) {
  HealthService s(Options(), nullptr, nullptr);
  json r = json::parse(Report("gpu-a"));
  r["samples"] = json::array({{{"index", 0},
                               {"uuid", "GPU-0"},
                               {"lost", false},
                               {"recovery_action", 0},
                               {"utilization", {{"source", "coarse"}, {"gpu_percent", 140}}}}});
  Status bad = s.PostReport(r.dump(), "agent", "");
  EXPECT_EQ(bad.message(),
            "report.samples[0].utilization.gpu_percent: must be a percentage from 0 to 100");
  r["samples"][0]["utilization"] = {{"gpu_percent", "high"}};
  EXPECT_EQ(s.PostReport(r.dump(), "agent", "").message(),
            "report.samples[0].utilization.gpu_percent: expected a number or null");
  r["samples"][0]["utilization"] = 5;
  EXPECT_EQ(s.PostReport(r.dump(), "agent", "").message(),
            "report.samples[0].utilization: expected an object");
  r["samples"][0]["utilization"] = nullptr;
  r["samples"][0]["memory_used_bytes"] = -1;
  EXPECT_EQ(s.PostReport(r.dump(), "agent", "").message(),
            "report.samples[0].memory_used_bytes: must be between 0 and 1125899906842624");
  EXPECT_TRUE(s.GpuUsage().empty());
}

}  // namespace
}  // namespace chamber::health
