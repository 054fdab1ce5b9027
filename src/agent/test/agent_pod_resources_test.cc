// The chamber-agent binary on the fake NVML with a fake kubelet serving the pod-resources API
// on a unix socket: which pod holds which GPU, in --once JSON, /metrics and /v1/report.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/test/agent_process.h"
#include "agent/test/fake_kubelet.h"

namespace chamber::agent {
namespace {

using json = nlohmann::json;
using test::AgentProcess;
using test::Eventually;
using test::FakeKubelet;
using test::ServingAgent;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kUuid0 = "GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60";
constexpr const char* kUuid1 = "GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d";

std::string Scenario(const std::string& tag) {
  return test::WriteTemp(tag + ".json", test::ReadFile(std::string(CHAMBER_AGENT_SOURCE_DIR) +
                                                       "/fake_nvml/examples/hgx-h100x2.json"));
}

std::vector<std::string> Args(const std::string& socket, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--nvml-library",
                                   CHAMBER_FAKE_NVML,
                                   "--node-name",
                                   "node-a",
                                   "--kernel-log",
                                   "",
                                   "--pod-resources-socket",
                                   socket};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string PodInfo(int gpu, const std::string& uuid, const std::string& ns, const std::string& pod,
                    const std::string& container) {
  return "chamber_gpu_pod_info{gpu=\"" + std::to_string(gpu) + "\",uuid=\"" + uuid +
         "\",resource=\"nvidia.com/gpu\",namespace=\"" + ns + "\",pod=\"" + pod +
         "\",container=\"" + container + "\"} 1\n";
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(AgentPodResourcesTest, OnceJsonNamesThePodOfEachGpu) {
  FakeKubelet kubelet(test::TestPath("once.sock"));
  kubelet.SetAssignments({{"nvidia.com/gpu", kUuid1, "team-a", "trainer-0", "main"},
                          {"nvidia.com/mig-1g.10gb", "MIG-0d1e", "team-b", "small", "c"}});
  std::vector<std::string> args = Args(kubelet.socket_path(), {"--once", "-o", "json"});
  AgentProcess p(args, Scenario("once-pods"), "once-pods");
  ASSERT_EQ(p.Wait(), 0) << p.Stderr();
  json r = json::parse(p.Stdout());
  ASSERT_EQ(r["samples"].size(), 2u);
  EXPECT_EQ(r["samples"][0]["uuid"], kUuid0);
  EXPECT_EQ(r["samples"][0]["pods"], json::array());
  EXPECT_EQ(r["samples"][1]["uuid"], kUuid1);
  ASSERT_EQ(r["samples"][1]["pods"].size(), 1u);
  EXPECT_EQ(r["samples"][1]["pods"][0]["namespace"], "team-a");
  EXPECT_EQ(r["samples"][1]["pods"][0]["pod"], "trainer-0");
  EXPECT_EQ(r["samples"][1]["pods"][0]["container"], "main");
  EXPECT_EQ(r["samples"][1]["pods"][0]["device_id"], kUuid1);
  EXPECT_EQ(r["pod_resources"]["state"], "available");
  ASSERT_EQ(r["pod_resources"]["unmatched"].size(), 1u);
  EXPECT_EQ(r["pod_resources"]["unmatched"][0]["device_id"], "MIG-0d1e");
  EXPECT_EQ(kubelet.calls(), 1);
}

// The example's GPU 1 is MIG-enabled; these are two of its MIG devices.
constexpr const char* kMig40 = "MIG-4b0e7f5c-1a2d-5e6f-8a9b-0c1d2e3f4a5b";
constexpr const char* kMig10 = "MIG-2e3f4a5b-6c7d-5e8f-a0b1-c2d3e4f5a6b7";

TEST(AgentPodResourcesTest, MigDevicesAreAttributedToTheirParentGpu) {
  FakeKubelet kubelet(test::TestPath("mig.sock"));
  kubelet.SetAssignments({{"nvidia.com/mig-3g.40gb", kMig40, "team-a", "trainer", "main"},
                          {"nvidia.com/mig-1g.10gb", "1:2", "team-b", "infer", "server"},
                          {"nvidia.com/mig-1g.10gb", "MIG-0d1e", "team-c", "stale", "c"}});
  AgentProcess once(Args(kubelet.socket_path(), {"--once", "-o", "json"}), Scenario("mig-once"),
                    "mig-once");
  ASSERT_EQ(once.Wait(), 0) << once.Stderr();
  json r = json::parse(once.Stdout());
  EXPECT_EQ(r["samples"][0]["pods"], json::array());
  const json& pods = r["samples"][1]["pods"];
  ASSERT_EQ(pods.size(), 2u) << r["samples"][1];
  EXPECT_EQ(pods[0]["pod"], "trainer");
  EXPECT_EQ(pods[0]["device_id"], kMig40);
  EXPECT_EQ(pods[0]["mig_uuid"], kMig40);
  EXPECT_EQ(pods[1]["pod"], "infer");
  EXPECT_EQ(pods[1]["device_id"], "1:2");
  EXPECT_EQ(pods[1]["mig_uuid"], kMig10);
  ASSERT_EQ(r["pod_resources"]["unmatched"].size(), 1u);
  EXPECT_EQ(r["pod_resources"]["unmatched"][0]["device_id"], "MIG-0d1e");

  ServingAgent agent(
      Args(kubelet.socket_path(), {"--interval", "0.1", "--pod-resources-interval", "0.1"}),
      Scenario("mig-serve"), "mig-serve");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  const std::string trainer = std::string("chamber_gpu_pod_info{gpu=\"1\",uuid=\"") + kUuid1 +
                              "\",mig_uuid=\"" + kMig40 +
                              "\",resource=\"nvidia.com/mig-3g.40gb\",namespace=\"team-a\","
                              "pod=\"trainer\",container=\"main\"} 1\n";
  std::string metrics;
  ASSERT_TRUE(Eventually([&] {
    metrics = agent.Get("/metrics");
    return metrics.find(trainer) != std::string::npos;
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr(std::string("chamber_gpu_mig_info{gpu=\"1\",uuid=\"") + kUuid1 +
                                 "\",mig_index=\"0\",mig_uuid=\"" + kMig40 +
                                 "\",profile=\"3g.40gb\",gpu_instance_id=\"2\","
                                 "compute_instance_id=\"0\"} 1\n"));
  EXPECT_THAT(metrics,
              HasSubstr(std::string("chamber_gpu_mig_memory_total_bytes{gpu=\"1\",uuid=\"") +
                        kUuid1 + "\",mig_uuid=\"" + kMig10 + "\"} 10334765056\n"));
  EXPECT_THAT(metrics, HasSubstr("chamber_gpu_pod_info{uuid=\"MIG-0d1e\""));
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentPodResourcesTest, OnceTextNamesThePod) {
  FakeKubelet kubelet(test::TestPath("once-text.sock"));
  kubelet.SetAssignments({{"nvidia.com/gpu", kUuid0, "team-a", "trainer-0", "main"}});
  AgentProcess p(Args(kubelet.socket_path(), {"--once"}), Scenario("once-text"), "once-text");
  ASSERT_EQ(p.Wait(), 0) << p.Stderr();
  EXPECT_THAT(p.Stdout(),
              HasSubstr(std::string(kUuid0) + "  pod team-a/trainer-0  container main"));
}

TEST(AgentPodResourcesTest, ServingAgentPicksUpAPodChange) {
  FakeKubelet kubelet(test::TestPath("change.sock"));
  kubelet.SetAssignments({{"nvidia.com/gpu", kUuid0, "team-a", "trainer-0", "main"}});
  ServingAgent agent(
      Args(kubelet.socket_path(), {"--interval", "0.1", "--pod-resources-interval", "0.1"}),
      Scenario("change"), "change");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  const std::string first = PodInfo(0, kUuid0, "team-a", "trainer-0", "main");
  std::string metrics;
  ASSERT_TRUE(Eventually([&] {
    metrics = agent.Get("/metrics");
    return metrics.find(first) != std::string::npos;
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr("chamber_agent_pod_resources_up 1\n"));

  // trainer-0 ends; two containers of a new pod take GPU 1.
  kubelet.SetAssignments({{"nvidia.com/gpu", kUuid1, "team-b", "eval-7", "main"},
                          {"nvidia.com/gpu", kUuid1, "team-b", "eval-7", "sidecar"}});
  const std::string second = PodInfo(1, kUuid1, "team-b", "eval-7", "main");
  ASSERT_TRUE(Eventually([&] {
    metrics = agent.Get("/metrics");
    return metrics.find(second) != std::string::npos;
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr(PodInfo(1, kUuid1, "team-b", "eval-7", "sidecar")));
  EXPECT_THAT(metrics, Not(HasSubstr("pod=\"trainer-0\"")));
  json r = agent.Report();
  EXPECT_EQ(r["samples"][0]["pods"], json::array());
  ASSERT_EQ(r["samples"][1]["pods"].size(), 2u);
  EXPECT_EQ(r["samples"][1]["pods"][0]["pod"], "eval-7");
  EXPECT_GE(kubelet.calls(), 2);
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentPodResourcesTest, MissingSocketIsUnavailableSaidOnceAndTheAgentKeepsServing) {
  const std::string socket = test::TestPath("absent.sock");
  std::remove(socket.c_str());
  ServingAgent agent(Args(socket, {"--interval", "0.1", "--pod-resources-interval", "0.05"}),
                     Scenario("absent"), "absent");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  json r;
  ASSERT_TRUE(Eventually([&] {
    r = agent.Report();
    return r.is_object() && r["pod_resources"]["state"] == "unavailable" &&
           r["pod_resources"]["error"].is_string() &&
           r["pod_resources"]["error"] != "the kubelet has not been asked yet";
  })) << r.dump();
  EXPECT_THAT(r["pod_resources"]["error"].get<std::string>(),
              HasSubstr("pod-resources socket " + socket));
  EXPECT_TRUE(r["pod_resources"]["updated_at"].is_null());
  // Sampling goes on: the GPUs are there, with no pods.
  ASSERT_EQ(r["samples"].size(), 2u);
  EXPECT_EQ(r["samples"][0]["pods"], json::array());
  EXPECT_EQ(r["samples"][0]["power_watts"], 612.5);
  std::string metrics = agent.Get("/metrics");
  EXPECT_THAT(metrics, HasSubstr("chamber_agent_pod_resources_up 0\n"));
  EXPECT_THAT(metrics, HasSubstr("chamber_gpu_power_watts{gpu=\"0\""));
  EXPECT_THAT(metrics, Not(HasSubstr("chamber_gpu_pod_info{")));

  // Many failed asks later, the log still says it once.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Count(agent.process().Stderr(), "per-pod GPU attribution unavailable"), 1u)
      << agent.process().Stderr();

  // The kubelet comes up: attribution follows without a restart, and that is said once.
  FakeKubelet kubelet(socket);
  kubelet.SetAssignments({{"nvidia.com/gpu", kUuid0, "team-a", "late", "main"}});
  ASSERT_TRUE(Eventually([&] {
    metrics = agent.Get("/metrics");
    return metrics.find(PodInfo(0, kUuid0, "team-a", "late", "main")) != std::string::npos;
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr("chamber_agent_pod_resources_up 1\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Count(agent.process().Stderr(), "per-pod GPU attribution available"), 1u)
      << agent.process().Stderr();
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentPodResourcesTest, AHangingKubeletDoesNotStallSampling) {
  FakeKubelet kubelet(test::TestPath("hang.sock"));
  kubelet.SetAssignments({{"nvidia.com/gpu", kUuid0, "team-a", "trainer-0", "main"}});
  kubelet.SetHang(true);
  const double deadline_s = 2.0;
  ServingAgent agent(
      Args(kubelet.socket_path(), {"--interval", "0.1", "--pod-resources-interval", "0.1",
                                   "--pod-resources-timeout", std::to_string(deadline_s)}),
      Scenario("hang"), "hang");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  ASSERT_TRUE(Eventually([&] { return kubelet.calls() >= 1; }));

  // While List hangs, samples keep their 0.1 s pace: were sampling waiting on List, samples
  // would come one per deadline.
  std::vector<double> times;
  auto until = test::Clock::now() + std::chrono::milliseconds(3000);
  while (test::Clock::now() < until) {
    json r = agent.Report();
    if (r.is_object() && r["samples"].size() == 2) {
      double t = r["samples"][0]["time"].get<double>();
      if (times.empty() || t != times.back()) times.push_back(t);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(times.size(), 10u);
  double widest = 0;
  for (size_t i = 1; i < times.size(); ++i) widest = std::max(widest, times[i] - times[i - 1]);
  EXPECT_LT(widest, 0.75 * deadline_s);

  // Each ask gave up at its deadline, and said so.
  json r = agent.Report();
  EXPECT_EQ(r["pod_resources"]["state"], "unavailable");
  EXPECT_THAT(r["pod_resources"]["error"].get<std::string>(), HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_GE(kubelet.calls(), 2);

  // Shutting down waits at most for the ask in flight.
  auto stop = test::Clock::now();
  EXPECT_EQ(agent.process().Terminate(), 0);
  EXPECT_LT(std::chrono::duration<double>(test::Clock::now() - stop).count(), deadline_s + 1.5);
}

}  // namespace
}  // namespace chamber::agent
