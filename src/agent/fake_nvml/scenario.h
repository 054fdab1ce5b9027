// The fake NVML's scenario (README.md): what the file says, and its parser. Split from
// fake_nvml.cc so that the parser is also built into a libFuzzer harness (fuzz/).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// A device handle: what nvmlDevice_t points at.
struct nvmlDevice_st {
  int index = 0;  // the GPU
  int mig = -1;   // for a MIG device handle: its position in the GPU's MIG devices
};

namespace chamber::fake_nvml {

// A value over time: steps to each point's value at its time.
struct Series {
  std::vector<std::pair<double, double>> points;  // (t, value), sorted by t
  double At(double t) const {
    double v = 0;
    for (const auto& [pt, pv] : points) {
      if (pt > t) break;
      v = pv;
    }
    return v;
  }
};

// The most MIG devices one GPU holds (nvmlDeviceGetMaxMigDeviceCount; 7 on A100 and H100).
constexpr unsigned kMaxMigDevices = 7;

struct FakeMig {
  nvmlDevice_st handle;
  unsigned index = 0;  // the MIG device handle index on the parent
  std::string uuid;
  std::string name;
  unsigned long long memory_total = 0;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
};

// A compute process on a GPU: what nvmlDeviceGetComputeRunningProcesses_v3 and
// nvmlDeviceGetProcessUtilization answer for it.
struct FakeProcess {
  unsigned pid = 0;
  unsigned long long used_memory = 0;  // bytes
  int sm_util = -1;                    // -1: no utilization sample
  int mem_util = 0;
  unsigned gpu_instance_id = 0xFFFFFFFFu;  // a MIG device's ids; none by default
  unsigned compute_instance_id = 0xFFFFFFFFu;
};

struct FakeGpu {
  nvmlDevice_st handle;
  std::vector<FakeMig> migs;
  std::string uuid;
  std::string name;
  unsigned long long memory_total = 0;
  std::string pci_bus_id;
  unsigned pcie_max_width = 16;
  unsigned pcie_max_gen = 5;
  int temperature_slowdown_c = 90;  // -1: not supported
  int temperature_shutdown_c = 95;
  int nvlinks = 0;
  bool gpm = false;
  bool ecc = true;
  bool remap = true;
  int mig_mode = -1;  // -1: not supported
  double lost_at = -1;
  std::map<std::string, Series> metrics;
  std::vector<FakeProcess> processes;
};

struct FakeEvent {
  double t = 0;
  int gpu = 0;
  unsigned xid = 0;
};

struct Scenario {
  std::string driver_version = "550.54.15";
  int cuda_driver_version = 12040;
  std::set<std::string> missing;
  std::vector<FakeGpu> gpus;
  std::vector<FakeEvent> events;
};

// Parses a scenario's JSON text; `source` (the file) starts every error's message. Throws
// std::runtime_error naming the file and field: "s.json: gpus[1].metrics.power_w: expected a
// number or a list of [t, value] pairs".
std::unique_ptr<Scenario> ParseScenario(std::string_view text, const std::string& source);
// Reads and parses the scenario file at `path`.
std::unique_ptr<Scenario> LoadScenario(const std::string& path);

}  // namespace chamber::fake_nvml
