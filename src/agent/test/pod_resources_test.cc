// Per-pod attribution: mapping device ids to GPUs, the List call against a fake kubelet serving
// the real gRPC protocol on a unix socket, the wire format, and how reports and /metrics show it.
#include "agent/pod_resources.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/proto/kubelet_podresources_v1.pb.h"
#include "agent/report.h"
#include "agent/test/fake_kubelet.h"
#include "agent/test/test_dir.h"

namespace chamber::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kUuid0 = "GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60";
constexpr const char* kUuid1 = "GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d";

Inventory TwoGpus() {
  Inventory inv;
  inv.nvml_loaded = true;
  GpuInfo g0;
  g0.index = 0;
  g0.uuid = kUuid0;
  GpuInfo g1;
  g1.index = 1;
  g1.uuid = kUuid1;
  inv.gpus = {g0, g1};
  return inv;
}

DeviceAssignment A(std::string resource, std::string id, std::string ns, std::string pod,
                   std::string container) {
  return {std::move(resource), std::move(id), std::move(ns), std::move(pod), std::move(container)};
}

TEST(AttributeTest, MatchesUuidsAndTimeSlicedReplicasAndLeavesUnknownDevicesUnmatched) {
  std::vector<DeviceAssignment> devices = {
      A("nvidia.com/gpu", kUuid0, "team-a", "trainer-0", "main"),
      A("nvidia.com/gpu.shared", std::string(kUuid1) + "::0", "team-b", "notebook-1", "jupyter"),
      A("nvidia.com/gpu.shared", std::string(kUuid1) + "::3", "team-c", "infer-2", "server"),
      A("nvidia.com/mig-1g.10gb", "MIG-5c1e2a3b-0000-4000-8000-000000000001", "team-d", "small",
        "c"),
      A("nvidia.com/gpu", "GPU-not-on-this-node", "team-e", "stale", "c"),
      A("example.com/fpga", kUuid0, "team-f", "fpga", "c"),
  };
  PodAttribution a = Attribute(TwoGpus(), devices);
  EXPECT_EQ(a.state, AttributionState::kAvailable);
  ASSERT_EQ(a.by_gpu.size(), 2u);
  EXPECT_EQ(a.by_gpu.at(kUuid0), std::vector<DeviceAssignment>{devices[0]});
  EXPECT_EQ(a.by_gpu.at(kUuid1), (std::vector<DeviceAssignment>{devices[1], devices[2]}));
  EXPECT_EQ(a.unmatched, (std::vector<DeviceAssignment>{devices[3], devices[4]}));
}

TEST(AttributeTest, IndexDeviceIdsNameGpusByIndex) {
  std::vector<DeviceAssignment> devices = {
      A("nvidia.com/gpu", "1", "ns", "p1", "c"),
      A("nvidia.com/gpu", "0", "ns", "p0", "c"),
      A("nvidia.com/mig-1g.10gb", "0:1", "ns", "mig", "c"),  // MIG under the index strategy
      A("nvidia.com/gpu", "7", "ns", "gone", "c"),
  };
  PodAttribution a = Attribute(TwoGpus(), devices);
  EXPECT_EQ(a.by_gpu.at(kUuid0), std::vector<DeviceAssignment>{devices[1]});
  EXPECT_EQ(a.by_gpu.at(kUuid1), std::vector<DeviceAssignment>{devices[0]});
  EXPECT_EQ(a.unmatched, (std::vector<DeviceAssignment>{devices[2], devices[3]}));
}

constexpr const char* kMig10 = "MIG-5c1e2a3b-0000-4000-8000-000000000001";
constexpr const char* kMig13 = "MIG-5c1e2a3b-0000-4000-8000-000000000003";

// GPU 1 is MIG-enabled with MIG devices at handle indices 0 and 3.
Inventory TwoGpusOneWithMig() {
  Inventory inv = TwoGpus();
  GpuInfo& g1 = inv.gpus[1];
  g1.mig_enabled = true;
  MigInstance m0;
  m0.index = 0;
  m0.uuid = kMig10;
  m0.profile = "3g.40gb";
  MigInstance m3;
  m3.index = 3;
  m3.uuid = kMig13;
  m3.profile = "1g.10gb";
  g1.mig = {m0, m3};
  return inv;
}

TEST(AttributeTest, MigDevicesCountAgainstTheirParentGpu) {
  std::vector<DeviceAssignment> devices = {
      A("nvidia.com/mig-3g.40gb", kMig10, "team-a", "trainer", "main"),
      A("nvidia.com/mig-1g.10gb", std::string(kMig13) + "::2", "team-b", "nb", "jupyter"),
      A("nvidia.com/mig-1g.10gb", "1:3", "team-c", "infer", "server"),  // index strategy
      A("nvidia.com/mig-1g.10gb", "1:1", "team-d", "gap", "c"),         // no MIG device 1 on GPU 1
      A("nvidia.com/mig-1g.10gb", "0:0", "team-d", "nomig", "c"),       // GPU 0 has no MIG
      A("nvidia.com/mig-1g.10gb", "MIG-created-later", "team-e", "new", "c"),
      A("nvidia.com/gpu", kUuid0, "team-f", "whole", "c"),
  };
  PodAttribution a = Attribute(TwoGpusOneWithMig(), devices);
  ASSERT_EQ(a.by_gpu.size(), 2u);
  const std::vector<DeviceAssignment>& on_gpu1 = a.by_gpu.at(kUuid1);
  ASSERT_EQ(on_gpu1.size(), 3u);
  EXPECT_EQ(on_gpu1[0].pod, "trainer");
  EXPECT_EQ(on_gpu1[0].device_id, kMig10);
  EXPECT_EQ(on_gpu1[0].mig_uuid, kMig10);
  EXPECT_EQ(on_gpu1[1].pod, "nb");
  EXPECT_EQ(on_gpu1[1].device_id, std::string(kMig13) + "::2");
  EXPECT_EQ(on_gpu1[1].mig_uuid, kMig13);
  EXPECT_EQ(on_gpu1[2].pod, "infer");
  EXPECT_EQ(on_gpu1[2].device_id, "1:3");
  EXPECT_EQ(on_gpu1[2].mig_uuid, kMig13);
  ASSERT_EQ(a.by_gpu.at(kUuid0).size(), 1u);
  EXPECT_EQ(a.by_gpu.at(kUuid0)[0].pod, "whole");
  EXPECT_EQ(a.by_gpu.at(kUuid0)[0].mig_uuid, "");
  EXPECT_EQ(a.unmatched, (std::vector<DeviceAssignment>{devices[3], devices[4], devices[5]}));
  for (const DeviceAssignment& d : a.unmatched) EXPECT_EQ(d.mig_uuid, "") << d.device_id;
}

TEST(AttributeTest, NoGpuDevicesMeansNoAttribution) {
  PodAttribution a = Attribute(TwoGpus(), {A("cpu.example/core", "3", "ns", "p", "c")});
  EXPECT_EQ(a.state, AttributionState::kAvailable);
  EXPECT_TRUE(a.by_gpu.empty());
  EXPECT_TRUE(a.unmatched.empty());
}

// Protobuf wire encoding, by hand, of what the kubelet sends: the field numbers are those of the
// public k8s.io/kubelet/pkg/apis/podresources/v1 API, including fields our .proto leaves out.
std::string Varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Bytes(int field, const std::string& payload) {
  return Varint(static_cast<std::uint64_t>(field) << 3 | 2) + Varint(payload.size()) + payload;
}
std::string Int(int field, std::uint64_t value) {
  return Varint(static_cast<std::uint64_t>(field) << 3) + Varint(value);
}

TEST(PodResourcesWireTest, DecodesTheKubeletsEncodingAndSkipsFieldsItDoesNotDeclare) {
  std::string topology = Bytes(1, Int(1, 1));  // TopologyInfo{nodes: [NUMANode{ID: 1}]}
  std::string devices = Bytes(1, "nvidia.com/gpu") + Bytes(2, kUuid0) + Bytes(2, kUuid1) +
                        Bytes(3, topology);  // ContainerDevices.topology = 3
  std::string memory = Bytes(1, "hugepages-1Gi") + Int(2, 1u << 30);
  std::string container = Bytes(1, "main") + Bytes(2, devices) +
                          Bytes(3, Varint(4) + Varint(5)) +  // cpu_ids = 3, packed
                          Bytes(4, memory);                  // memory = 4
  std::string pod = Bytes(1, "trainer-0") + Bytes(2, "team-a") + Bytes(3, container);
  std::string wire = Bytes(1, pod);

  v1::ListPodResourcesResponse response;
  ASSERT_TRUE(response.ParseFromString(wire));
  ASSERT_EQ(response.pod_resources_size(), 1);
  const v1::PodResources& p = response.pod_resources(0);
  EXPECT_EQ(p.name(), "trainer-0");
  EXPECT_EQ(p.namespace_(), "team-a");
  ASSERT_EQ(p.containers_size(), 1);
  EXPECT_EQ(p.containers(0).name(), "main");
  ASSERT_EQ(p.containers(0).devices_size(), 1);
  EXPECT_EQ(p.containers(0).devices(0).resource_name(), "nvidia.com/gpu");
  EXPECT_THAT(p.containers(0).devices(0).device_ids(), ::testing::ElementsAre(kUuid0, kUuid1));
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

TEST(ListPodDevicesTest, ReadsEveryAssignmentFromTheKubelet) {
  test::FakeKubelet kubelet(test::TestPath("kubelet-list.sock"));
  std::vector<DeviceAssignment> want = {
      A("nvidia.com/gpu", kUuid0, "team-a", "trainer-0", "main"),
      A("nvidia.com/gpu", kUuid1, "team-a", "trainer-0", "main"),
      A("example.com/nic", "vf-3", "team-a", "trainer-0", "main"),
      A("nvidia.com/gpu", "GPU-x", "team-a", "trainer-0", "sidecar"),
      A("nvidia.com/mig-1g.10gb", "MIG-y", "team-b", "small", "c"),
  };
  kubelet.SetAssignments(want);
  auto got = ListPodDevices(kubelet.socket_path(), 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, want);
  EXPECT_EQ(kubelet.calls(), 1);

  kubelet.SetAssignments({A("nvidia.com/gpu", kUuid1, "team-c", "next", "main")});
  got = ListPodDevices(kubelet.socket_path(), 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got,
            std::vector<DeviceAssignment>{A("nvidia.com/gpu", kUuid1, "team-c", "next", "main")});
}

TEST(ListPodDevicesTest, MissingSocketIsUnavailableAndNamesIt) {
  std::string path = test::TestPath("no-kubelet-here.sock");
  auto start = std::chrono::steady_clock::now();
  auto got = ListPodDevices(path, 2);
  double took = Seconds(std::chrono::steady_clock::now() - start);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("pod-resources socket " + path));
  EXPECT_THAT(got.status().message(), HasSubstr("UNAVAILABLE"));
  EXPECT_LT(took, 2.0);
}

TEST(ListPodDevicesTest, AKubeletThatDoesNotAnswerFailsAtTheDeadline) {
  test::FakeKubelet kubelet(test::TestPath("kubelet-hang.sock"));
  kubelet.SetAssignments({A("nvidia.com/gpu", kUuid0, "ns", "p", "c")});
  kubelet.SetHang(true);
  auto start = std::chrono::steady_clock::now();
  auto got = ListPodDevices(kubelet.socket_path(), 0.3);
  double took = Seconds(std::chrono::steady_clock::now() - start);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 1.5);
  EXPECT_EQ(kubelet.calls(), 1);

  kubelet.SetHang(false);
  got = ListPodDevices(kubelet.socket_path(), 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 1u);
}

AgentSnapshot SnapshotWithPods() {
  AgentSnapshot snap;
  snap.node = "node-a";
  snap.inventory = TwoGpus();
  GpuSample s0;
  s0.index = 0;
  s0.uuid = kUuid0;
  GpuSample s1;
  s1.index = 1;
  s1.uuid = kUuid1;
  snap.samples = {s0, s1};
  snap.pod_attribution = Attribute(
      snap.inventory,
      {A("nvidia.com/gpu.shared", std::string(kUuid0) + "::0", "team-a", "trainer-0", "main"),
       A("nvidia.com/gpu.shared", std::string(kUuid0) + "::1", "team-a", "trainer-0", "main"),
       A("nvidia.com/gpu.shared", std::string(kUuid0) + "::2", "team-b", "nb", "jupyter"),
       A("nvidia.com/mig-1g.10gb", "MIG-abc", "team-c", "small", "c")});
  snap.pod_attribution.updated_at = 1700000000;
  return snap;
}

TEST(PodReportTest, MetricsCarryOneInfoSeriesPerGpuAndContainer) {
  std::string text = RenderMetrics(SnapshotWithPods());
  EXPECT_THAT(text, HasSubstr("# TYPE chamber_gpu_pod_info gauge\n"));
  EXPECT_THAT(text, HasSubstr("chamber_agent_pod_resources_up 1\n"));
  const std::string trainer = std::string("chamber_gpu_pod_info{gpu=\"0\",uuid=\"") + kUuid0 +
                              "\",resource=\"nvidia.com/gpu.shared\",namespace=\"team-a\","
                              "pod=\"trainer-0\",container=\"main\"} 1\n";
  EXPECT_THAT(text, HasSubstr(trainer));
  // Two replicas of one GPU in one container are one series.
  EXPECT_EQ(text.find(trainer), text.rfind(trainer));
  EXPECT_THAT(text, HasSubstr(std::string("chamber_gpu_pod_info{gpu=\"0\",uuid=\"") + kUuid0 +
                              "\",resource=\"nvidia.com/gpu.shared\",namespace=\"team-b\","
                              "pod=\"nb\",container=\"jupyter\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("chamber_gpu_pod_info{uuid=\"MIG-abc\",resource=\"nvidia.com/"
                              "mig-1g.10gb\",namespace=\"team-c\",pod=\"small\",container=\"c\"} "
                              "1\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpu=\"1\",uuid=\"" + std::string(kUuid1) + "\",resource")));
}

TEST(PodReportTest, MetricsSayWhenAttributionIsUnavailableOrOff) {
  AgentSnapshot snap = SnapshotWithPods();
  snap.pod_attribution = PodAttribution{};
  snap.pod_attribution.state = AttributionState::kUnavailable;
  snap.pod_attribution.error = "no kubelet";
  std::string text = RenderMetrics(snap);
  EXPECT_THAT(text, HasSubstr("chamber_agent_pod_resources_up 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("chamber_gpu_pod_info{")));

  snap.pod_attribution.state = AttributionState::kDisabled;
  text = RenderMetrics(snap);
  EXPECT_THAT(text, Not(HasSubstr("\nchamber_agent_pod_resources_up ")));
}

TEST(PodReportTest, JsonNamesThePodsPerGpuSample) {
  nlohmann::json r = ReportJson(SnapshotWithPods());
  const nlohmann::json& pods0 = r["samples"][0]["pods"];
  ASSERT_EQ(pods0.size(), 3u);
  EXPECT_EQ(pods0[0], (nlohmann::json{{"namespace", "team-a"},
                                      {"pod", "trainer-0"},
                                      {"container", "main"},
                                      {"resource", "nvidia.com/gpu.shared"},
                                      {"device_id", std::string(kUuid0) + "::0"},
                                      {"mig_uuid", nullptr}}));
  EXPECT_EQ(pods0[2]["pod"], "nb");
  EXPECT_EQ(r["samples"][1]["pods"], nlohmann::json::array());
  EXPECT_EQ(r["pod_resources"]["state"], "available");
  EXPECT_TRUE(r["pod_resources"]["error"].is_null());
  EXPECT_EQ(r["pod_resources"]["updated_at"], 1700000000.0);
  ASSERT_EQ(r["pod_resources"]["unmatched"].size(), 1u);
  EXPECT_EQ(r["pod_resources"]["unmatched"][0]["device_id"], "MIG-abc");

  AgentSnapshot off = SnapshotWithPods();
  off.pod_attribution = PodAttribution{};
  r = ReportJson(off);
  EXPECT_EQ(r["pod_resources"]["state"], "disabled");
  EXPECT_TRUE(r["pod_resources"]["updated_at"].is_null());
  EXPECT_EQ(r["samples"][0]["pods"], nlohmann::json::array());
}

TEST(PodReportTest, MigDevicesAppearUnderTheirParentGpuWithTheirMigUuid) {
  AgentSnapshot snap = SnapshotWithPods();
  snap.inventory = TwoGpusOneWithMig();
  snap.pod_attribution =
      Attribute(snap.inventory, {A("nvidia.com/mig-3g.40gb", kMig10, "team-a", "trainer", "main"),
                                 A("nvidia.com/mig-1g.10gb", "1:3", "team-c", "infer", "server"),
                                 A("nvidia.com/mig-1g.10gb", "MIG-abc", "team-e", "new", "c")});
  std::string text = RenderMetrics(snap);
  EXPECT_THAT(text, HasSubstr(std::string("chamber_gpu_pod_info{gpu=\"1\",uuid=\"") + kUuid1 +
                              "\",mig_uuid=\"" + kMig10 +
                              "\",resource=\"nvidia.com/mig-3g.40gb\",namespace=\"team-a\","
                              "pod=\"trainer\",container=\"main\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(std::string("chamber_gpu_pod_info{gpu=\"1\",uuid=\"") + kUuid1 +
                              "\",mig_uuid=\"" + kMig13 +
                              "\",resource=\"nvidia.com/mig-1g.10gb\",namespace=\"team-c\","
                              "pod=\"infer\",container=\"server\"} 1\n"));
  // A MIG device the inventory does not list keeps its own id and no parent.
  EXPECT_THAT(text, HasSubstr("chamber_gpu_pod_info{uuid=\"MIG-abc\",resource=\"nvidia.com/"
                              "mig-1g.10gb\",namespace=\"team-e\",pod=\"new\",container=\"c\"} "
                              "1\n"));

  nlohmann::json r = ReportJson(snap);
  EXPECT_EQ(r["samples"][0]["pods"], nlohmann::json::array());
  const nlohmann::json& pods1 = r["samples"][1]["pods"];
  ASSERT_EQ(pods1.size(), 2u);
  EXPECT_EQ(pods1[0]["pod"], "trainer");
  EXPECT_EQ(pods1[0]["mig_uuid"], kMig10);
  EXPECT_EQ(pods1[1]["device_id"], "1:3");
  EXPECT_EQ(pods1[1]["mig_uuid"], kMig13);
  ASSERT_EQ(r["pod_resources"]["unmatched"].size(), 1u);
  EXPECT_EQ(r["pod_resources"]["unmatched"][0]["device_id"], "MIG-abc");
  EXPECT_TRUE(r["pod_resources"]["unmatched"][0]["mig_uuid"].is_null());
}

}  // namespace
}  // namespace chamber::agent
