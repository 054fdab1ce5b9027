#include "agent/report.h"

#include <gtest/gtest.h>

#include "agent/gpu_collector.h"
#include "agent/nvml_api.h"

namespace chamber::agent {
namespace {

AgentSnapshot Snapshot() {
  AgentSnapshot snap;
  snap.node = "node-1";
  snap.time = 1700000000;
  snap.inventory.nvml_loaded = true;
  snap.inventory.driver_version = "550.54.15";
  snap.inventory.cuda_driver_version = "12.4";
  snap.inventory.missing_functions = {"nvmlGpmMetricsGet"};
  GpuInfo g;
  g.index = 0;
  g.uuid = "GPU-a";
  g.name = "NVIDIA H100 80GB HBM3";
  g.memory_total_bytes = 85520809984ULL;
  g.pci_bus_id = "00000000:18:00.0";
  g.nvlinks_total = 2;
  g.nvlinks_active = {0, 1};
  snap.inventory.gpus.push_back(g);
  GpuSample s;
  s.index = 0;
  s.uuid = "GPU-a";
  s.utilization_source = UtilizationSource::kGpm;
  s.sm_active = 42.5;
  s.gpu_utilization = 90;
  s.tensor_active = 30;
  s.power_watts = 512.25;
  s.temperature_c = 61;
  s.clock_event_reasons = nvmlClocksEventReasonSwPowerCap | nvmlClocksEventReasonGpuIdle;
  s.remap = RemapSample{1, 2, true, false};
  s.pcie_width_current = 8;
  s.pcie_width_max = 16;
  s.nvlinks = {{0, true, 3, 0, 1, 0}, {1, false, 0, 0, 0, 0}};
  snap.samples.push_back(s);
  GpuIncident i;
  i.id = 7;
  i.gpu_index = 0;
  i.gpu_uuid = "GPU-a";
  i.cause = "xid-hardware";
  i.severity = Severity::kFatal;
  i.xid = 79;
  i.evidence = {XidEvidence{79, "GPU has fallen off the bus", "the GPU is no longer reachable",
                            "hardware", "nvml-event", std::nullopt},
                RuleEvidence{"xid-hardware", "fatal", "a hardware Xid", "Xid 79"}};
  i.opened_at = 1700000000.5;
  snap.open_incidents.push_back(i);
  snap.gpu_severity["GPU-a"] = Severity::kFatal;
  snap.xid_counts[{0, 79}] = 2;
  return snap;
}

TEST(ReportJsonTest, CarriesInventorySamplesAndIncidents) {
  auto j = ReportJson(Snapshot());
  EXPECT_EQ(j["kind"], "chamber.io/agent-report/v1");
  EXPECT_EQ(j["node"], "node-1");
  EXPECT_EQ(j["inventory"]["gpu_count"], 1);
  EXPECT_EQ(j["inventory"]["gpus"][0]["nvlink"]["active"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["inventory"]["nvml"]["missing_functions"][0], "nvmlGpmMetricsGet");
  const auto& s = j["samples"][0];
  EXPECT_EQ(s["utilization"]["source"], "gpm");
  EXPECT_EQ(s["utilization"]["sm_active_percent"], 42.5);
  EXPECT_TRUE(s["memory_used_bytes"].is_null());  // not reported: null, not 0
  EXPECT_EQ(s["clock_event_reasons"]["active"],
            nlohmann::json::array({"gpu_idle", "sw_power_cap"}));
  EXPECT_EQ(s["remapped_rows"]["pending"], true);
  EXPECT_EQ(s["nvlinks"][0]["replay_errors"], 3);
  EXPECT_EQ(j["incidents"][0]["severity"], "fatal");
  EXPECT_EQ(j["incidents"][0]["xid"], 79);
  EXPECT_TRUE(j["incidents"][0]["closed_at"].is_null());
  EXPECT_EQ(j["incidents"][0]["evidence"],
            nlohmann::json::parse(R"([{"type":"xid","xid":79,"name":"GPU has fallen off the bus",
                "meaning":"the GPU is no longer reachable","class":"hardware",
                "source":"nvml-event","count":null},
               {"type":"rule","rule":"xid-hardware","severity":"fatal",
                "condition":"a hardware Xid","threshold":"Xid 79"}])"));
  EXPECT_TRUE(j["inventory"]["gpus"][0]["temperature_thresholds"]["slowdown_c"].is_null());
  EXPECT_EQ(j["health"]["GPU-a"], "fatal");
}

// chamberd writes these to the Node (docs/health.md, "GPU node labels"): the agent itself has no
// Kubernetes write access.
TEST(ReportJsonTest, CarriesTheNodeLabelsForChamberd) {
  AgentSnapshot snap = Snapshot();
  snap.labels = NodeLabels(snap.inventory);
  auto j = ReportJson(snap);
  ASSERT_TRUE(j["labels"].is_object());
  EXPECT_EQ(j["labels"]["chamber.io/gpu.count"], "1");
  EXPECT_EQ(j["labels"]["chamber.io/gpu.driver"], "550.54.15");
  EXPECT_EQ(j["labels"].size(), snap.labels.size());
  for (const auto& [key, value] : snap.labels) EXPECT_EQ(j["labels"][key], value) << key;
}

TEST(RenderMetricsTest, WritesDocumentedFamilies) {
  std::string page = RenderMetrics(Snapshot());
  for (const char* line : {
           "chamber_agent_nvml_up 1\n",
           "chamber_agent_gpus 1\n",
           "chamber_agent_nvml_missing_function{function=\"nvmlGpmMetricsGet\"} 1\n",
           "chamber_gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-a\",source=\"gpm\"} 0.425\n",
           "chamber_gpu_tensor_active_ratio{gpu=\"0\",uuid=\"GPU-a\"} 0.3\n",
           "chamber_gpu_power_watts{gpu=\"0\",uuid=\"GPU-a\"} 512.25\n",
           "chamber_gpu_temperature_celsius{gpu=\"0\",uuid=\"GPU-a\"} 61\n",
           "chamber_gpu_clock_event_active{gpu=\"0\",uuid=\"GPU-a\",reason=\"sw_power_cap\"} 1\n",
           "chamber_gpu_clock_event_active{gpu=\"0\",uuid=\"GPU-a\",reason=\"hw_thermal_slowdown\"}"
           " "
           "0\n",
           "chamber_gpu_row_remap_pending{gpu=\"0\",uuid=\"GPU-a\"} 1\n",
           "chamber_gpu_pcie_link_width{gpu=\"0\",uuid=\"GPU-a\",kind=\"current\"} 8\n",
           "chamber_gpu_nvlink_active{gpu=\"0\",uuid=\"GPU-a\",link=\"1\"} 0\n",
           "chamber_gpu_nvlink_errors_total{gpu=\"0\",uuid=\"GPU-a\",link=\"0\",counter=\"crc_"
           "flit\"} "
           "1\n",
           "chamber_gpu_xid_events_total{gpu=\"0\",xid=\"79\"} 2\n",
           "chamber_gpu_health{gpu=\"0\",uuid=\"GPU-a\"} 3\n",
           "chamber_agent_incidents_open{severity=\"fatal\",cause=\"xid-hardware\"} 1\n",
       }) {
    EXPECT_NE(page.find(line), std::string::npos) << "missing: " << line << "\n" << page;
  }
  // Absent quantities are left out, never written as 0.
  EXPECT_EQ(page.find("chamber_gpu_memory_used_bytes{"), std::string::npos);
}

// A MIG-enabled GPU with two MIG devices; the second's driver answered no instance ids.
AgentSnapshot MigSnapshot() {
  AgentSnapshot snap = Snapshot();
  GpuInfo& g = snap.inventory.gpus[0];
  g.mig_enabled = true;
  MigInstance a;
  a.index = 0;
  a.uuid = "MIG-a";
  a.name = "NVIDIA H100 80GB HBM3 MIG 3g.40gb";
  a.profile = "3g.40gb";
  a.memory_total_bytes = 40192ULL << 20;
  a.gpu_instance_id = 2;
  a.compute_instance_id = 0;
  MigInstance b;
  b.index = 3;
  b.uuid = "MIG-b";
  b.name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb";
  b.profile = "1g.10gb";
  g.mig = {a, b};
  return snap;
}

TEST(ReportJsonTest, ListsMigDevicesUnderTheirGpuAndKeepsTheCount) {
  auto j = ReportJson(MigSnapshot());
  const auto& mig = j["inventory"]["gpus"][0]["mig"];
  EXPECT_EQ(mig["enabled"], true);
  EXPECT_EQ(mig["instances"], 2);
  ASSERT_EQ(mig["devices"].size(), 2u);
  EXPECT_EQ(mig["devices"][0], (nlohmann::json{{"index", 0},
                                               {"uuid", "MIG-a"},
                                               {"name", "NVIDIA H100 80GB HBM3 MIG 3g.40gb"},
                                               {"profile", "3g.40gb"},
                                               {"memory_total_bytes", 40192ULL << 20},
                                               {"gpu_instance_id", 2},
                                               {"compute_instance_id", 0}}));
  EXPECT_EQ(mig["devices"][1]["index"], 3);
  EXPECT_TRUE(mig["devices"][1]["memory_total_bytes"].is_null());
  EXPECT_TRUE(mig["devices"][1]["gpu_instance_id"].is_null());
  EXPECT_TRUE(mig["devices"][1]["compute_instance_id"].is_null());

  // Without MIG: enabled null (not reported), no devices.
  auto plain = ReportJson(Snapshot());
  const auto& none = plain["inventory"]["gpus"][0]["mig"];
  EXPECT_TRUE(none["enabled"].is_null());
  EXPECT_EQ(none["instances"], 0);
  EXPECT_EQ(none["devices"], nlohmann::json::array());
}

TEST(RenderMetricsTest, MigInfoAndMemoryPerMigDevice) {
  std::string page = RenderMetrics(MigSnapshot());
  for (const char* line : {
           "# TYPE chamber_gpu_mig_info gauge\n",
           "chamber_gpu_mig_info{gpu=\"0\",uuid=\"GPU-a\",mig_index=\"0\",mig_uuid=\"MIG-a\","
           "profile=\"3g.40gb\",gpu_instance_id=\"2\",compute_instance_id=\"0\"} 1\n",
           // Ids the driver did not report are left out of the labels.
           "chamber_gpu_mig_info{gpu=\"0\",uuid=\"GPU-a\",mig_index=\"3\",mig_uuid=\"MIG-b\","
           "profile=\"1g.10gb\"} 1\n",
           "chamber_gpu_mig_memory_total_bytes{gpu=\"0\",uuid=\"GPU-a\",mig_uuid=\"MIG-a\"} "
           "42144366592\n",
       }) {
    EXPECT_NE(page.find(line), std::string::npos) << "missing: " << line << "\n" << page;
  }
  EXPECT_EQ(
      page.find("chamber_gpu_mig_memory_total_bytes{gpu=\"0\",uuid=\"GPU-a\",mig_uuid=\"MIG-b\""),
      std::string::npos);
  EXPECT_EQ(RenderMetrics(Snapshot()).find("chamber_gpu_mig_info{"), std::string::npos);
}

TEST(MigProfileTest, IsTheNamePartAfterMig) {
  EXPECT_EQ(MigProfileFromName("NVIDIA H100 80GB HBM3 MIG 1g.10gb"), "1g.10gb");
  EXPECT_EQ(MigProfileFromName("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb"), "1c.3g.20gb");
  EXPECT_EQ(MigProfileFromName("NVIDIA H100 80GB HBM3"), "");
  EXPECT_EQ(MigProfileFromName(""), "");
}

TEST(RenderMetricsTest, NoNvml) {
  AgentSnapshot snap;
  snap.inventory.nvml_error = "cannot load NVML library";
  std::string page = RenderMetrics(snap);
  EXPECT_NE(page.find("chamber_agent_nvml_up 0\n"), std::string::npos);
  EXPECT_NE(page.find("chamber_agent_gpus 0\n"), std::string::npos);
}

}  // namespace
}  // namespace chamber::agent
