// Runs the chamber-agent binary against the fake NVML (its real dlopen path) and checks what it
// prints, serves and pushes.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/gpu_collector.h"
#include "agent/nvml_library.h"
#include "agent/test/agent_process.h"

namespace {

using json = nlohmann::json;
using chamber::agent::test::AgentProcess;
using chamber::agent::test::Clock;
using chamber::agent::test::ReadFile;
using chamber::agent::test::ServingAgent;
using chamber::agent::test::WriteTemp;

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Example() {
  return ReadFile(std::string(CHAMBER_AGENT_SOURCE_DIR) + "/fake_nvml/examples/hgx-h100x2.json");
}

std::vector<std::string> Args(std::initializer_list<std::string> extra,
                              const std::string& library = CHAMBER_FAKE_NVML) {
  std::vector<std::string> args = {"--nvml-library", library, "--node-name", "node-a"};
  args.insert(args.end(), extra);
  // The host's own kernel log stays out of the tests unless a test names one.
  if (std::find(args.begin(), args.end(), "--kernel-log") == args.end()) {
    args.insert(args.end(), {"--kernel-log", ""});
  }
  // Nor does the host's kubelet (agent_pod_resources_test covers pods on GPUs).
  if (std::find(args.begin(), args.end(), "--pod-resources-socket") == args.end()) {
    args.insert(args.end(), {"--pod-resources-socket", ""});
  }
  return args;
}

json RunOnce(const std::string& scenario, const std::string& tag,
             std::initializer_list<std::string> extra = {},
             const std::string& library = CHAMBER_FAKE_NVML, std::string* stderr_text = nullptr) {
  std::string path = WriteTemp(tag + ".json", scenario);
  std::vector<std::string> args = Args(extra, library);
  args.insert(args.end(), {"--once", "-o", "json"});
  AgentProcess p(args, path, tag);
  EXPECT_EQ(p.Wait(), 0) << p.Stderr();
  if (stderr_text) *stderr_text = p.Stderr();
  return json::parse(p.Stdout());
}

const json* FindIncident(const json& report, const std::string& cause,
                         std::optional<unsigned> xid = std::nullopt) {
  for (const json& i : report["incidents"]) {
    if (i["cause"] == cause && (!xid || i["xid"] == *xid)) return &i;
  }
  return nullptr;
}

TEST(AgentOnceTest, JsonInventoryAndSampleFieldByField) {
  json r = RunOnce(Example(), "once");
  EXPECT_EQ(r["kind"], "chamber.io/agent-report/v1");
  EXPECT_EQ(r["node"], "node-a");
  const json& inv = r["inventory"];
  EXPECT_EQ(inv["nvml"]["loaded"], true);
  EXPECT_EQ(inv["nvml"]["library"], CHAMBER_FAKE_NVML);
  EXPECT_TRUE(inv["nvml"]["error"].is_null());
  EXPECT_EQ(inv["nvml"]["missing_functions"], json::array());
  EXPECT_EQ(inv["nvml"]["xid_events"], true);
  EXPECT_EQ(inv["driver_version"], "550.54.15");
  EXPECT_EQ(inv["cuda_driver_version"], "12.4");
  EXPECT_EQ(inv["gpu_count"], 2);
  const json& g0 = inv["gpus"][0];
  EXPECT_EQ(g0["index"], 0);
  EXPECT_EQ(g0["uuid"], "GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60");
  EXPECT_EQ(g0["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g0["memory_total_bytes"], 81559ULL << 20);
  EXPECT_EQ(g0["pci_bus_id"], "00000000:18:00.0");
  EXPECT_EQ(g0["mig"]["enabled"], false);
  EXPECT_EQ(g0["nvlink"]["links"], 18);
  EXPECT_EQ(g0["nvlink"]["active"].size(), 18u);
  EXPECT_EQ(g0["gpm_supported"], true);
  EXPECT_EQ(g0["features"]["ecc"], true);
  EXPECT_EQ(g0["features"]["recovery_action"], true);
  EXPECT_EQ(g0["features"]["temperature_thresholds"], true);
  EXPECT_EQ(g0["temperature_thresholds"], json::parse(R"({"slowdown_c":90,"shutdown_c":95})"));
  const json& g1 = inv["gpus"][1];
  EXPECT_EQ(g1["pci_bus_id"], "00000000:2A:00.0");
  EXPECT_EQ(g1["mig"]["enabled"], true);
  EXPECT_EQ(g1["mig"]["instances"], 3);
  ASSERT_EQ(g1["mig"]["devices"].size(), 3u);
  EXPECT_EQ(g1["mig"]["devices"][2]["uuid"], "MIG-2e3f4a5b-6c7d-5e8f-a0b1-c2d3e4f5a6b7");
  EXPECT_EQ(g1["mig"]["devices"][2]["profile"], "1g.10gb");
  EXPECT_EQ(g0["mig"]["devices"], json::array());

  EXPECT_EQ(r["labels"]["chamber.io/gpu.count"], "2");
  EXPECT_EQ(r["labels"]["chamber.io/gpu.model"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(r["labels"]["chamber.io/gpu.memory"], "81559");
  EXPECT_EQ(r["labels"]["chamber.io/gpu.driver"], "550.54.15");

  ASSERT_EQ(r["samples"].size(), 2u);
  const json& s = r["samples"][0];
  EXPECT_EQ(s["lost"], false);
  EXPECT_EQ(s["utilization"]["source"], "gpm");
  EXPECT_EQ(s["utilization"]["sm_active_percent"], 63.5);
  EXPECT_EQ(s["utilization"]["tensor_active_percent"], 38.25);
  EXPECT_EQ(s["utilization"]["gpu_percent"], 97);
  EXPECT_EQ(s["utilization"]["memory_percent"], 41);
  EXPECT_EQ(s["memory_used_bytes"], 60000ULL << 20);
  EXPECT_EQ(s["memory_total_bytes"], 81559ULL << 20);
  EXPECT_EQ(s["power_watts"], 612.5);
  EXPECT_EQ(s["temperature_c"], 64);
  EXPECT_EQ(s["clock_event_reasons"]["mask"], 4);
  EXPECT_EQ(s["clock_event_reasons"]["active"], json::array({"sw_power_cap"}));
  EXPECT_EQ(s["ecc"]["volatile_corrected"], 2);
  EXPECT_EQ(s["ecc"]["volatile_uncorrected"], 0);
  EXPECT_EQ(s["ecc"]["aggregate_corrected"], 17);
  EXPECT_EQ(s["remapped_rows"]["corrected"], 1);
  EXPECT_EQ(s["remapped_rows"]["pending"], false);
  EXPECT_EQ(s["pcie"]["replays"], 3);
  EXPECT_EQ(s["pcie"]["width_current"], 16);
  EXPECT_EQ(s["pcie"]["width_max"], 16);
  EXPECT_EQ(s["pcie"]["gen_current"], 5);
  EXPECT_EQ(s["recovery_action"], 0);
  ASSERT_EQ(s["nvlinks"].size(), 18u);
  EXPECT_EQ(s["nvlinks"][17]["active"], true);
  EXPECT_EQ(r["samples"][1]["utilization"]["gpu_percent"], 0);
  EXPECT_EQ(r["samples"][1]["power_watts"], 98.0);

  EXPECT_EQ(r["incidents"], json::array());
  EXPECT_EQ(r["health"]["GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60"], "healthy");
  EXPECT_EQ(r["health"]["GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d"], "healthy");
}

TEST(AgentOnceTest, TextOutputNamesGpus) {
  std::string path = WriteTemp("text.json", Example());
  std::vector<std::string> args = Args({"--once"});
  AgentProcess p(args, path, "text");
  ASSERT_EQ(p.Wait(), 0) << p.Stderr();
  std::string out = p.Stdout();
  EXPECT_NE(out.find("driver 550.54.15  CUDA 12.4  GPUs 2"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU 0  GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60  NVIDIA H100 80GB HBM3"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("util 64% (gpm)"), std::string::npos) << out;
}

TEST(AgentOnceTest, TextOutputListsAnIncidentsEvidence) {
  json scenario = json::parse(Example());
  scenario["gpus"][0]["metrics"]["ecc_volatile_uncorrected"] = 4;
  scenario["gpus"][0]["metrics"]["ecc_aggregate_uncorrected"] = 6;
  std::string path = WriteTemp("text-ecc.json", scenario.dump());
  AgentProcess p(Args({"--once"}), path, "text-ecc");
  ASSERT_EQ(p.Wait(), 0) << p.Stderr();
  const std::string out = p.Stdout();
  EXPECT_NE(out.find("  GPU 0  unhealthy  ecc-uncorrectable: 4 uncorrectable ECC errors since "
                     "the driver loaded\n"
                     "  ecc              ECC double-bit 4 volatile, 6 aggregate; single-bit 2 "
                     "volatile, 17 aggregate\n"
                     "  row_remap        no row remap pending; rows remapped: 0 for double-bit, 1 "
                     "for single-bit errors\n"
                     "  rule             rule ecc-uncorrectable (unhealthy): volatile double-bit "
                     "ECC count > 0\n"),
            std::string::npos)
      << out;
}

// Each GPU's compute processes with their memory, their SM use and the pod each runs in (from
// its cgroup under --host-proc: the kubelet's cgroupfs and systemd layouts).
TEST(AgentOnceTest, GpuProcessesWithTheirMemoryUseAndPod) {
  json scenario = json::parse(Example());
  scenario["gpus"][0]["processes"] = json::parse(R"([
      {"pid": 4242, "used_memory_mib": 30000, "sm_util": 71, "mem_util": 12},
      {"pid": 4343, "used_memory_mib": 2048},
      {"pid": 4444, "used_memory_mib": 512}])");
  const std::string proc = chamber::agent::test::TestPath("agent-host-proc");
  const std::vector<std::pair<std::string, std::string>> cgroups = {
      {"4242", "0::/kubepods/burstable/pod0b5e6a7c-1d2e-4f3a-8b9c-0d1e2f3a4b5c/3f1e2d\n"},
      {"4343",
       "12:memory:/kubepods.slice/kubepods-besteffort.slice/"
       "kubepods-besteffort-pod7c9d8e1f_2a3b_4c5d_8e6f_7a8b9c0d1e2f.slice/"
       "cri-containerd-abc.scope\n0::/\n"},
      {"4444", "0::/system.slice/sshd.service\n"}};
  for (const auto& [pid, text] : cgroups) {
    std::filesystem::create_directories(proc + "/" + pid);
    std::ofstream(proc + "/" + pid + "/cgroup") << text;
  }
  json r = RunOnce(scenario.dump(), "processes", {"--host-proc", proc});
  const json& p = r["samples"][0]["processes"];
  ASSERT_EQ(p.size(), 3u) << r["samples"][0];
  EXPECT_EQ(p[0]["pid"], 4242);
  EXPECT_EQ(p[0]["used_memory_bytes"], 30000ULL << 20);
  EXPECT_EQ(p[0]["sm_percent"], 71);
  EXPECT_EQ(p[0]["memory_percent"], 12);
  EXPECT_TRUE(p[0]["gpu_instance_id"].is_null());
  EXPECT_EQ(p[0]["pod_uid"], "0b5e6a7c-1d2e-4f3a-8b9c-0d1e2f3a4b5c");
  EXPECT_EQ(p[1]["used_memory_bytes"], 2048ULL << 20);
  EXPECT_TRUE(p[1]["sm_percent"].is_null());  // no utilization sample for it
  EXPECT_EQ(p[1]["pod_uid"], "7c9d8e1f-2a3b-4c5d-8e6f-7a8b9c0d1e2f");
  EXPECT_TRUE(p[2]["pod_uid"].is_null());  // not a pod's
  EXPECT_EQ(r["samples"][1]["processes"], json::array());
  // A driver without the _v2 and _v3 entry points cannot list them: null, not an empty list.
  json old =
      RunOnce(scenario.dump(), "processes-old", {"--host-proc", proc}, CHAMBER_FAKE_NVML_OLD);
  EXPECT_TRUE(old["samples"][0]["processes"].is_null()) << old["samples"][0];
}

TEST(AgentOnceTest, BadProcessScenarioNamesTheField) {
  json scenario = json::parse(Example());
  scenario["gpus"][1]["processes"] = json::parse(R"([{"pid": 7, "sm_util": 140}])");
  std::string err;
  RunOnce(scenario.dump(), "processes-bad", {}, CHAMBER_FAKE_NVML, &err);
  EXPECT_NE(err.find("gpus[1].processes[0].sm_util: must be 0..100"), std::string::npos) << err;
}

TEST(AgentOnceTest, OlderDriverMissingFunctionsAreReportedAndTheRestWorks) {
  json scenario = json::parse(Example());
  scenario["missing_functions"] = {"nvmlDeviceGetPowerUsage"};
  json r = RunOnce(scenario.dump(), "old", {}, CHAMBER_FAKE_NVML_OLD);
  const json& missing = r["inventory"]["nvml"]["missing_functions"];
  auto has = [&](const std::string& f) {
    return std::find(missing.begin(), missing.end(), f) != missing.end();
  };
  EXPECT_TRUE(has("nvmlInit_v2 (using nvmlInit)")) << missing;
  EXPECT_TRUE(has("nvmlDeviceGetCount_v2 (using nvmlDeviceGetCount)")) << missing;
  EXPECT_TRUE(has("nvmlDeviceGetMemoryInfo_v2 (using nvmlDeviceGetMemoryInfo)")) << missing;
  EXPECT_TRUE(has("nvmlDeviceGetPciInfo_v3 (using nvmlDeviceGetPciInfo_v2)")) << missing;
  EXPECT_TRUE(
      has("nvmlDeviceGetCurrentClocksEventReasons (using "
          "nvmlDeviceGetCurrentClocksThrottleReasons)"))
      << missing;
  EXPECT_TRUE(has("nvmlEventSetWait_v2 (using nvmlEventSetWait)")) << missing;
  EXPECT_TRUE(has("nvmlGpmMetricsGet")) << missing;
  EXPECT_TRUE(has("nvmlDeviceGetRemappedRows")) << missing;
  EXPECT_TRUE(has("nvmlDeviceGetFieldValues")) << missing;

  const json& g0 = r["inventory"]["gpus"][0];
  EXPECT_EQ(g0["gpm_supported"], false);
  EXPECT_EQ(g0["features"]["power"], false);  // missing in the scenario: FUNCTION_NOT_FOUND
  EXPECT_EQ(g0["features"]["remapped_rows"], false);
  EXPECT_EQ(g0["pci_bus_id"], "00000000:18:00.0");
  EXPECT_EQ(g0["memory_total_bytes"], 81559ULL << 20);
  const json& s = r["samples"][0];
  EXPECT_EQ(s["utilization"]["source"], "coarse");
  EXPECT_EQ(s["utilization"]["gpu_percent"], 97);
  EXPECT_TRUE(s["utilization"]["sm_active_percent"].is_null());
  EXPECT_TRUE(s["power_watts"].is_null());
  EXPECT_EQ(s["temperature_c"], 64);
  EXPECT_EQ(s["memory_used_bytes"], 60000ULL << 20);
  EXPECT_EQ(s["clock_event_reasons"]["mask"], 4);
  EXPECT_TRUE(s["remapped_rows"].is_null());
  EXPECT_TRUE(s["recovery_action"].is_null());
  EXPECT_EQ(r["labels"]["chamber.io/gpu.count"], "2");
  EXPECT_EQ(r["incidents"], json::array());
}

// GPU 1 of the example with two MIG devices, at handle indices 0 and 3.
json TwoMigDevices() {
  json scenario = json::parse(Example());
  scenario["gpus"][1]["mig_devices"] = {{{"uuid", "MIG-4b0e7f5c-1a2d-5e6f-8a9b-0c1d2e3f4a5b"},
                                         {"profile", "3g.40gb"},
                                         {"memory_total_mib", 40192},
                                         {"gpu_instance_id", 2},
                                         {"compute_instance_id", 0}},
                                        {{"index", 3},
                                         {"uuid", "MIG-2e3f4a5b-6c7d-5e8f-a0b1-c2d3e4f5a6b7"},
                                         {"name", "NVIDIA H100 80GB HBM3 MIG 1c.2g.20gb"},
                                         {"memory_total_mib", 19968},
                                         {"gpu_instance_id", 5},
                                         {"compute_instance_id", 1}}};
  return scenario;
}

TEST(AgentOnceTest, MigDevicesAreListedUnderTheirParentGpu) {
  json r = RunOnce(TwoMigDevices().dump(), "mig");
  EXPECT_EQ(r["inventory"]["nvml"]["missing_functions"], json::array());
  const json& g0 = r["inventory"]["gpus"][0];
  EXPECT_EQ(g0["mig"], json({{"enabled", false}, {"instances", 0}, {"devices", json::array()}}));
  const json& mig = r["inventory"]["gpus"][1]["mig"];
  EXPECT_EQ(mig["enabled"], true);
  EXPECT_EQ(mig["instances"], 2);
  ASSERT_EQ(mig["devices"].size(), 2u) << mig;
  EXPECT_EQ(mig["devices"][0], json({{"index", 0},
                                     {"uuid", "MIG-4b0e7f5c-1a2d-5e6f-8a9b-0c1d2e3f4a5b"},
                                     {"name", "NVIDIA H100 80GB HBM3 MIG 3g.40gb"},
                                     {"profile", "3g.40gb"},
                                     {"memory_total_bytes", 40192ULL << 20},
                                     {"gpu_instance_id", 2},
                                     {"compute_instance_id", 0}}));
  EXPECT_EQ(mig["devices"][1], json({{"index", 3},
                                     {"uuid", "MIG-2e3f4a5b-6c7d-5e8f-a0b1-c2d3e4f5a6b7"},
                                     {"name", "NVIDIA H100 80GB HBM3 MIG 1c.2g.20gb"},
                                     {"profile", "1c.2g.20gb"},
                                     {"memory_total_bytes", 19968ULL << 20},
                                     {"gpu_instance_id", 5},
                                     {"compute_instance_id", 1}}));
  // The parent's figures stay the whole GPU's.
  EXPECT_EQ(r["inventory"]["gpus"][1]["memory_total_bytes"], 81559ULL << 20);
  EXPECT_EQ(r["inventory"]["gpu_count"], 2);

  std::string path = WriteTemp("mig-text.json", TwoMigDevices().dump());
  AgentProcess p(Args({"--once"}), path, "mig-text");
  ASSERT_EQ(p.Wait(), 0) << p.Stderr();
  EXPECT_NE(p.Stdout().find("  MIG 3  MIG-2e3f4a5b-6c7d-5e8f-a0b1-c2d3e4f5a6b7  1c.2g.20gb  19968 "
                            "MiB  gi 5  ci 1\n"),
            std::string::npos)
      << p.Stdout();
}

TEST(AgentOnceTest, MigInstanceIdsStayAbsentWithoutTheirFunctions) {
  // A driver without the symbols: named in missing_functions, the ids null, the rest reported.
  json r = RunOnce(TwoMigDevices().dump(), "mig-old", {}, CHAMBER_FAKE_NVML_OLD);
  const json& missing = r["inventory"]["nvml"]["missing_functions"];
  auto has = [&](const std::string& f) {
    return std::find(missing.begin(), missing.end(), f) != missing.end();
  };
  EXPECT_TRUE(has("nvmlDeviceGetGpuInstanceId")) << missing;
  EXPECT_TRUE(has("nvmlDeviceGetComputeInstanceId")) << missing;
  const json& devices = r["inventory"]["gpus"][1]["mig"]["devices"];
  ASSERT_EQ(devices.size(), 2u);
  for (const json& d : devices) {
    EXPECT_TRUE(d["gpu_instance_id"].is_null()) << d;
    EXPECT_TRUE(d["compute_instance_id"].is_null()) << d;
  }
  EXPECT_EQ(devices[1]["uuid"], "MIG-2e3f4a5b-6c7d-5e8f-a0b1-c2d3e4f5a6b7");
  EXPECT_EQ(devices[1]["memory_total_bytes"], 19968ULL << 20);  // through the v1 fallback

  // A symbol that answers NVML_ERROR_FUNCTION_NOT_FOUND: that id null, the other reported.
  json scenario = TwoMigDevices();
  scenario["missing_functions"] = {"nvmlDeviceGetComputeInstanceId"};
  r = RunOnce(scenario.dump(), "mig-noci");
  const json& d1 = r["inventory"]["gpus"][1]["mig"]["devices"][1];
  EXPECT_EQ(d1["gpu_instance_id"], 5);
  EXPECT_TRUE(d1["compute_instance_id"].is_null()) << d1;
}

TEST(AgentOnceTest, BadMigScenarioNamesTheField) {
  json scenario = TwoMigDevices();
  scenario["gpus"][1]["mig_devices"][1]["index"] = 0;
  std::string err;
  json r = RunOnce(scenario.dump(), "mig-dup", {}, CHAMBER_FAKE_NVML, &err);
  EXPECT_EQ(r["inventory"]["nvml"]["loaded"], false);
  EXPECT_NE(err.find("mig-dup.json: gpus[1].mig_devices[1].index: repeats another MIG device's"),
            std::string::npos)
      << err;

  scenario = TwoMigDevices();
  scenario["gpus"][1]["mig_mode"] = 0;
  RunOnce(scenario.dump(), "mig-off", {}, CHAMBER_FAKE_NVML, &err);
  EXPECT_NE(err.find("mig-off.json: gpus[1].mig_devices: MIG devices need \"mig_mode\": 1"),
            std::string::npos)
      << err;
}

// Found by the fake_nvml_scenario fuzz harness: a number too large for JSON's doubles threw
// nlohmann's out_of_range, whose message named neither the file nor the JSON.
TEST(AgentOnceTest, ScenarioNumberTooLargeNamesTheFile) {
  std::string err;
  json r = RunOnce("9e16666666666", "bignum", {}, CHAMBER_FAKE_NVML, &err);
  EXPECT_EQ(r["inventory"]["nvml"]["loaded"], false);
  EXPECT_NE(err.find("bignum.json: invalid JSON: [json.exception.out_of_range.406] number "
                     "overflow parsing '9e16666666666'"),
            std::string::npos)
      << err;
}

// Found by replaying a hand-made input through the fake_nvml_scenario harness (the fuzz runs
// had not reached it): a float in an integer field (1e300 as nvlinks) was cast to int,
// undefined beyond int's range.
TEST(AgentOnceTest, ScenarioFloatInAnIntegerFieldNamesTheField) {
  std::string err;
  json r = RunOnce(R"({"gpus": [{"nvlinks": 1e300}]})", "float-int", {}, CHAMBER_FAKE_NVML, &err);
  EXPECT_EQ(r["inventory"]["nvml"]["loaded"], false);
  EXPECT_NE(err.find("float-int.json: gpus[0].nvlinks: expected an integer"), std::string::npos)
      << err;
}

TEST(AgentOnceTest, NoNvmlSaysSoAndReportsAnEmptyInventory) {
  std::string err;
  json r = RunOnce(Example(), "nonvml", {}, "/nonexistent/libnvidia-ml.so.1", &err);
  EXPECT_EQ(r["inventory"]["nvml"]["loaded"], false);
  EXPECT_NE(r["inventory"]["nvml"]["error"].get<std::string>().find(
                "cannot load NVML library /nonexistent/libnvidia-ml.so.1"),
            std::string::npos);
  EXPECT_EQ(r["inventory"]["gpu_count"], 0);
  EXPECT_EQ(r["samples"], json::array());
  EXPECT_EQ(r["labels"], json({{"chamber.io/gpu.count", "0"}}));
  EXPECT_NE(err.find("no GPUs found: NVML is not available"), std::string::npos) << err;
}

TEST(AgentOnceTest, BadScenarioNamesTheField) {
  json scenario = json::parse(Example());
  scenario["gpus"][1]["metrics"]["power_w"] = "lots";
  std::string err;
  json r = RunOnce(scenario.dump(), "bad", {}, CHAMBER_FAKE_NVML, &err);
  EXPECT_EQ(r["inventory"]["nvml"]["loaded"], false);
  EXPECT_NE(err.find("bad.json: gpus[1].metrics.power_w: expected a number or a list"),
            std::string::npos)
      << err;
  EXPECT_NE(r["inventory"]["nvml"]["error"].get<std::string>().find("nvmlInit failed"),
            std::string::npos);
}

TEST(AgentOnceTest, KernelLogXidFromBeforeStartIsClassified) {
  std::string log = WriteTemp(
      "kmsg.txt",
      "6,1001,5000000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n"
      "4,1002,9000000,-;NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU "
      "has fallen off the bus.\n"
      "4,1003,9100000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, Graphics "
      "Exception\n");
  json r = RunOnce(Example(), "kmsg", {"--kernel-log", log});
  ASSERT_EQ(r["incidents"].size(), 1u) << r["incidents"];
  const json& i = r["incidents"][0];
  EXPECT_EQ(i["xid"], 79);
  EXPECT_EQ(i["severity"], "fatal");
  EXPECT_EQ(i["gpu_index"], 1);
  EXPECT_EQ(i["gpu_uuid"], "GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d");
  EXPECT_EQ(r["health"]["GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d"], "fatal");
  EXPECT_EQ(r["health"]["GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60"], "healthy");
}

TEST(AgentServeTest, Xid79IsAFatalIncidentWithinTwoSeconds) {
  json scenario = json::parse(Example());
  scenario["events"] = {{{"t", 1.0}, {"gpu", 0}, {"xid", 79}}};
  std::string path = WriteTemp("xid79.json", scenario.dump());
  ServingAgent agent(Args({"--interval", "1"}), path, "xid79");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  json r = agent.Report();
  double injected = r["inventory"]["nvml"]["initialized_at"].get<double>() + 1.0;
  const json* incident = nullptr;
  double seen = 0;
  while (UnixNow() < injected + 5) {
    r = agent.Report();
    incident = FindIncident(r, "xid-hardware", 79);
    if (incident) {
      seen = UnixNow();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(incident, nullptr) << agent.process().Stderr();
  json found = *incident;
  double classified = found["opened_at"].get<double>() - injected;
  double visible = seen - injected;
  std::cout << "Xid 79 injected at t=1s: classified fatal after " << classified * 1000
            << " ms, visible on /v1/report after " << visible * 1000 << " ms\n";
  RecordProperty("xid79_classification_ms", static_cast<int>(classified * 1000));
  RecordProperty("xid79_visible_ms", static_cast<int>(visible * 1000));
  EXPECT_EQ(found["severity"], "fatal");
  EXPECT_EQ(found["gpu_index"], 0);
  EXPECT_LT(classified, 2.0);
  EXPECT_LT(visible, 2.0);
  EXPECT_GE(classified, -0.01);  // not before the injection
  EXPECT_EQ(r["health"]["GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60"], "fatal");
  EXPECT_EQ(r["health"]["GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d"], "healthy");

  std::string metrics = agent.Get("/metrics");
  EXPECT_NE(metrics.find("chamber_gpu_xid_events_total{gpu=\"0\",xid=\"79\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("chamber_gpu_health{gpu=\"0\",uuid=\"GPU-3f2a9c1e-0d4b-4c55-9a7e-"
                         "1b2c3d4e5f60\"} 3\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(agent.process().Terminate(), 0) << agent.process().Stderr();
  EXPECT_NE(agent.process().Stderr().find("received SIGTERM, shutting down"), std::string::npos);
}

// Faults from the fake NVML's scenario reach the report with the readings that caused them:
// GPU 0 gets a double-bit ECC burst (counts, a pending remap, then Xid 48) and NVLink replays;
// GPU 1 runs hot, past its slowdown threshold and within 5 C of its shutdown one.
TEST(AgentServeTest, FakeNvmlFaultsCarryTheirEvidence) {
  json scenario = json::parse(Example());
  json& m0 = scenario["gpus"][0]["metrics"];
  m0["ecc_volatile_uncorrected"] = json::array({{0, 0}, {0.3, 4}});
  m0["ecc_aggregate_uncorrected"] = json::array({{0, 0}, {0.3, 4}});
  m0["remap_uncorrected_rows"] = json::array({{0, 0}, {0.3, 1}});
  m0["remap_pending"] = json::array({{0, 0}, {0.3, 1}});
  m0["nvlink_errors"] = json::array({{0, 0}, {0.3, 40}});
  json& m1 = scenario["gpus"][1]["metrics"];
  m1["temperature_c"] = json::array({{0, 33}, {0.3, 93}});
  m1["clock_event_reasons"] = json::array({{0, 0}, {0.3, 0x40}});
  scenario["gpus"][1]["temperature_slowdown_c"] = 88;
  scenario["gpus"][1]["temperature_shutdown_c"] = 96;
  scenario["events"] = {{{"t", 0.8}, {"gpu", 0}, {"xid", 48}}};
  std::string path = WriteTemp("evidence.json", scenario.dump());
  ServingAgent agent(Args({"--interval", "0.1", "--debounce", "2", "--nvlink-error-window", "5"}),
                     path, "evidence");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  json r;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    r = agent.Report();
    if (FindIncident(r, "ecc-uncorrectable") && FindIncident(r, "xid-hardware", 48) &&
        FindIncident(r, "thermal-critical") && FindIncident(r, "nvlink-errors"))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const json ecc = json::parse(R"({"type":"ecc","volatile_single_bit":2,"volatile_double_bit":4,
      "aggregate_single_bit":17,"aggregate_double_bit":4})");
  const json remap = json::parse(
      R"({"type":"row_remap","single_bit_rows":1,"double_bit_rows":1,"pending":true,"failed":false})");

  const json* i = FindIncident(r, "ecc-uncorrectable");
  ASSERT_NE(i, nullptr) << r["incidents"];
  ASSERT_EQ((*i)["evidence"].size(), 3u) << (*i)["evidence"];
  EXPECT_EQ((*i)["evidence"][0], ecc);
  EXPECT_EQ((*i)["evidence"][1], remap);
  EXPECT_EQ((*i)["evidence"][2]["rule"], "ecc-uncorrectable");

  i = FindIncident(r, "xid-hardware", 48);
  ASSERT_NE(i, nullptr) << r["incidents"];
  ASSERT_EQ((*i)["evidence"].size(), 4u) << (*i)["evidence"];
  EXPECT_EQ((*i)["evidence"][0],
            json::parse(R"({"type":"xid","xid":48,"name":"Double-bit ECC error",
                "meaning":"uncorrectable memory error; the GPU needs a reset or the node a reboot",
                "class":"hardware","source":"nvml-event","count":null})"));
  EXPECT_EQ((*i)["evidence"][1], ecc);
  EXPECT_EQ((*i)["evidence"][2], remap);
  EXPECT_EQ((*i)["evidence"][3]["threshold"], "Xid 48 is a hardware Xid, fatal in the Xid table");

  i = FindIncident(r, "nvlink-errors");
  ASSERT_NE(i, nullptr) << r["incidents"];
  EXPECT_EQ((*i)["evidence"][0],
            json::parse(R"({"type":"nvlink","links":[{"link":0,"active":true,"replay_errors":40,
                "recovery_errors":0,"crc_flit_errors":0,"crc_data_errors":0}],"links_down":[]})"));

  i = FindIncident(r, "thermal-critical");
  ASSERT_NE(i, nullptr) << r["incidents"];
  EXPECT_EQ((*i)["gpu_index"], 1);
  EXPECT_EQ((*i)["severity"], "unhealthy");
  EXPECT_EQ((*i)["evidence"][0],
            json::parse(R"({"type":"thermal","temperature_c":93,"slowdown_c":88,"shutdown_c":96,
                "clock_event_reasons":["hw_thermal_slowdown"]})"));
  EXPECT_EQ((*i)["evidence"][1]["threshold"],
            "2 consecutive samples within 5 C of the shutdown temperature");
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentServeTest, SingleXid13DoesNotIsolateButRepeatsDo) {
  json scenario = json::parse(Example());
  scenario["events"] = {{{"t", 0.2}, {"gpu", 0}, {"xid", 13}},
                        {{"t", 0.2}, {"gpu", 1}, {"xid", 13}},
                        {{"t", 0.3}, {"gpu", 1}, {"xid", 31}},
                        {{"t", 0.4}, {"gpu", 1}, {"xid", 13}}};
  std::string path = WriteTemp("xid13.json", scenario.dump());
  ServingAgent agent(Args({"--interval", "0.1", "--app-xid-repeats", "3"}), path, "xid13");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  std::string metrics;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    metrics = agent.Get("/metrics");
    if (metrics.find("chamber_gpu_xid_events_total{gpu=\"1\",xid=\"13\"} 2\n") !=
        std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(metrics.find("chamber_gpu_xid_events_total{gpu=\"0\",xid=\"13\"} 1\n"),
            std::string::npos)
      << metrics;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  json r = agent.Report();
  ASSERT_EQ(r["incidents"].size(), 1u) << r["incidents"];
  EXPECT_EQ(r["incidents"][0]["cause"], "xid-application-repeated");
  EXPECT_EQ(r["incidents"][0]["gpu_index"], 1);
  EXPECT_EQ(r["incidents"][0]["severity"], "unhealthy");
  EXPECT_EQ(r["health"]["GPU-3f2a9c1e-0d4b-4c55-9a7e-1b2c3d4e5f60"], "healthy");
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentServeTest, FlappingNvLinkIsOneIncidentAndPcieGpusAreNotChecked) {
  json scenario = json::parse(Example());
  // Link 0 of GPU 0 errs in bursts: 0.3 s of errors every 0.8 s for 4 s.
  json series = json::array({{0, 0}});
  int count = 0;
  for (int step = 0; step < 40; ++step) {
    double t = 0.5 + step * 0.1;
    if (step % 8 < 3) series.push_back({t, count += 5});
  }
  scenario["gpus"][0]["metrics"]["nvlink_errors"] = series;
  // GPU 1 is a PCIe card whose counters would look bad if it were checked.
  scenario["gpus"][1]["nvlinks"] = 0;
  scenario["gpus"][1]["metrics"]["nvlink_errors"] = json::array({{0, 0}, {0.5, 100}, {1, 900}});
  std::string path = WriteTemp("flap.json", scenario.dump());
  ServingAgent agent(Args({"--interval", "0.05", "--debounce", "3", "--nvlink-error-window", "1",
                           "--clear-after", "5"}),
                     path, "flap");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  std::this_thread::sleep_for(std::chrono::milliseconds(5000));
  json r = agent.Report();
  int nvlink_incidents = 0;
  for (const json& i : r["incidents"]) nvlink_incidents += i["cause"] == "nvlink-errors";
  for (const json& i : r["closed_incidents"]) nvlink_incidents += i["cause"] == "nvlink-errors";
  EXPECT_EQ(nvlink_incidents, 1) << r["incidents"] << r["closed_incidents"];
  const json* i = FindIncident(r, "nvlink-errors");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ((*i)["gpu_index"], 0);
  EXPECT_GT((*i)["occurrences"].get<int>(), 20);
  EXPECT_EQ(r["health"]["GPU-8d7c6b5a-4e3f-4a1b-8c9d-0e1f2a3b4c5d"], "healthy");
  EXPECT_EQ(r["inventory"]["gpus"][1]["features"]["nvlink"], false);
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentServeTest, LostGpuIsFatal) {
  json scenario = json::parse(Example());
  scenario["gpus"][1]["lost_at"] = 0.5;
  std::string path = WriteTemp("lost.json", scenario.dump());
  ServingAgent agent(Args({"--interval", "0.1"}), path, "lost");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  json r;
  const json* i = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline && i == nullptr) {
    r = agent.Report();
    i = FindIncident(r, "gpu-lost");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(i, nullptr);
  EXPECT_EQ((*i)["gpu_index"], 1);
  EXPECT_EQ((*i)["severity"], "fatal");
  EXPECT_EQ(r["samples"][1]["lost"], true);
  EXPECT_NE(agent.Get("/metrics")
                .find("chamber_gpu_lost{gpu=\"1\",uuid=\"GPU-8d7c6b5a-4e3f-"
                      "4a1b-8c9d-0e1f2a3b4c5d\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentServeTest, NoNvmlStillServesHealthzAndMetrics) {
  std::string path = WriteTemp("nonvml-serve.json", Example());
  ServingAgent agent(Args({}, "/nonexistent/libnvidia-ml.so.1"), path, "nonvml-serve");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  int status = 0;
  json health = json::parse(agent.Get("/healthz", &status));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["nvml"], false);
  EXPECT_EQ(health["gpus"], 0);
  EXPECT_NE(health["reason"].get<std::string>().find("no GPUs"), std::string::npos);
  std::string metrics = agent.Get("/metrics");
  EXPECT_NE(metrics.find("chamber_agent_nvml_up 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(agent.Report()["inventory"]["gpu_count"], 0);
  EXPECT_EQ(agent.process().Terminate(), 0);
}

TEST(AgentServeTest, PushesReportsAndSurvivesAnAbsentChamberd) {
  httplib::Server chamberd;
  std::mutex mu;
  std::vector<json> received;
  std::vector<std::string> authorization;
  chamberd.Post("/v1/agent/report", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    received.push_back(json::parse(req.body));
    authorization.push_back(req.get_header_value("Authorization"));
    res.status = 204;
  });
  int port = chamberd.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread server([&] { chamberd.listen_after_bind(); });

  json scenario = json::parse(Example());
  scenario["events"] = {{{"t", 0.5}, {"gpu", 1}, {"xid", 48}}};
  std::string path = WriteTemp("push.json", scenario.dump());
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1/agent/report";
  std::string token = WriteTemp("push-token", "  agent-token-0123456789\n");
  ServingAgent agent(Args({"--interval", "0.1", "--chamberd-url", url, "--push-interval", "0.3",
                           "--token-file", token}),
                     path, "push");
  ASSERT_GT(agent.port(), 0) << agent.process().Stderr();
  bool got_incident = false;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline && !got_incident) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard lock(mu);
    for (const json& r : received) got_incident |= !r["incidents"].empty();
  }
  EXPECT_TRUE(got_incident);
  {
    std::lock_guard lock(mu);
    ASSERT_FALSE(received.empty());
    EXPECT_EQ(received[0]["kind"], "chamber.io/agent-report/v1");
    EXPECT_EQ(received[0]["node"], "node-a");
    EXPECT_EQ(received[0]["inventory"]["gpu_count"], 2);
    EXPECT_EQ(received.back()["incidents"][0]["xid"], 48);
    EXPECT_EQ(authorization[0], "Bearer agent-token-0123456789");
  }
  EXPECT_EQ(agent.process().Terminate(), 0);
  chamberd.stop();
  server.join();

  // chamberd gone: pushes fail, the agent keeps serving and counts the failures.
  ServingAgent lonely(Args({"--interval", "0.1", "--chamberd-url", url, "--push-interval", "0.1"}),
                      path, "push-fail");
  ASSERT_GT(lonely.port(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int status = 0;
  lonely.Get("/healthz", &status);
  EXPECT_EQ(status, 200);
  std::string metrics = lonely.Get("/metrics");
  EXPECT_EQ(metrics.find("chamber_agent_push_total{result=\"failure\"} 0\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("chamber_agent_push_total{result=\"success\"} 0\n"), std::string::npos);
  EXPECT_NE(lonely.process().Stderr().find("retrying in"), std::string::npos);
  EXPECT_EQ(lonely.process().Terminate(), 0);
}

}  // namespace

namespace chamber::agent {
namespace {

TEST(NvmlLibraryTest, LibraryWithoutNvmlIsUnavailable) {
  auto lib = NvmlLibrary::Load("libm.so.6");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(lib.status().message().find("lacks nvmlInit or device enumeration"), std::string::npos)
      << lib.status().message();
}

TEST(NvmlLibraryTest, CollectsFromTheFakeInProcess) {
  std::string path = WriteTemp("inprocess.json", Example());
  setenv("CHAMBER_FAKE_NVML_SCENARIO", path.c_str(), 1);
  auto lib = NvmlLibrary::Load(CHAMBER_FAKE_NVML);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_TRUE((*lib)->MissingFunctions().empty());
  GpuCollector collector(std::move(lib).value());
  Inventory inv = collector.Discover(100);
  ASSERT_EQ(inv.gpus.size(), 2u);
  ASSERT_EQ(inv.gpus[1].mig.size(), 3u);
  const MigInstance& m = inv.gpus[1].mig[0];
  EXPECT_EQ(m.index, 0);
  EXPECT_EQ(m.uuid, "MIG-4b0e7f5c-1a2d-5e6f-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(m.name, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
  EXPECT_EQ(m.profile, "3g.40gb");
  EXPECT_EQ(m.memory_total_bytes, 40192ULL << 20);
  EXPECT_EQ(m.gpu_instance_id, 2u);
  EXPECT_EQ(m.compute_instance_id, 0u);
  EXPECT_TRUE(inv.gpus[0].mig.empty());
  GpuSample s = collector.Sample(0, 101);
  EXPECT_EQ(s.utilization_source, UtilizationSource::kGpm);
  EXPECT_EQ(s.sm_active, 63.5);
  EXPECT_EQ(s.power_watts, 612.5);
  EXPECT_EQ(s.nvlinks.size(), 18u);
  GpuSample out_of_range = collector.Sample(7, 101);
  EXPECT_TRUE(out_of_range.uuid.empty());
  EXPECT_FALSE(out_of_range.power_watts);
  unsetenv("CHAMBER_FAKE_NVML_SCENARIO");
}

}  // namespace
}  // namespace chamber::agent
