// A fake NVML: a shared library (libnvidia-ml.so.1 in the build tree) exporting the NVML
// functions the agent uses, answering from a scenario file named by CHAMBER_FAKE_NVML_SCENARIO.
// Time in the scenario is seconds since nvmlInit. Format: src/agent/fake_nvml/README.md.
//
// Built twice: as the current driver, and with CHAMBER_FAKE_NVML_OLD_DRIVER as an older one
// that lacks the newer symbols (versioned _v2/_v3 entry points, GPM, clock event reasons,
// remapped rows, field values), so the agent's fallbacks are exercised.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/nvml_api.h"

struct nvmlDevice_st {
  int index = 0;  // the GPU
  int mig = -1;   // for a MIG device handle: its position in the GPU's MIG devices
};
struct nvmlEventSet_st {
  std::set<int> devices;
  size_t next_event = 0;  // index into the scenario's events, in time order
};
struct nvmlGpmSample_st {
  int device = -1;
  double time = 0;
};

namespace {

using json = nlohmann::json;

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

struct State {
  std::mutex mu;
  int init_count = 0;
  std::chrono::steady_clock::time_point start;
  std::unique_ptr<Scenario> scenario;
};

State& S() {
  static State* state = new State();  // never destroyed: the agent may call in during exit
  return *state;
}

// The metric names a GPU's "metrics" object may hold, and their defaults.
const std::map<std::string, double>& MetricDefaults() {
  static const std::map<std::string, double> kDefaults = {
      {"utilization", 0},
      {"memory_utilization", 0},
      {"sm_active", 0},
      {"tensor_active", 0},
      {"memory_used_mib", 0},
      {"power_w", 70},
      {"temperature_c", 35},
      {"clock_event_reasons", 0},
      {"ecc_volatile_corrected", 0},
      {"ecc_volatile_uncorrected", 0},
      {"ecc_aggregate_corrected", 0},
      {"ecc_aggregate_uncorrected", 0},
      {"remap_corrected_rows", 0},
      {"remap_uncorrected_rows", 0},
      {"remap_pending", 0},
      {"remap_failure", 0},
      {"pcie_replays", 0},
      {"pcie_width", -1},  // -1: the maximum
      {"pcie_gen", -1},
      {"nvlink_errors", 0},
      {"nvlink_active_links", -1},  // -1: all links
      {"recovery_action", 0},
  };
  return kDefaults;
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw std::runtime_error(where + ": " + what);
}

// `j` must be an object whose keys are all in `known`; `where` names it, `sep` joins a key to it.
void CheckFields(const json& j, const std::string& where, const std::set<std::string>& known,
                 const char* sep = ".") {
  if (!j.is_object()) Fail(where, "expected an object");
  for (const auto& [key, value] : j.items()) {
    if (!known.count(key)) Fail(where + sep + key, "unknown field");
  }
}

Series ParseSeries(const json& v, const std::string& where) {
  Series s;
  if (v.is_number()) {
    s.points.emplace_back(0, v.get<double>());
    return s;
  }
  if (!v.is_array()) Fail(where, "expected a number or a list of [t, value] pairs");
  for (size_t i = 0; i < v.size(); ++i) {
    const json& p = v[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) {
      Fail(where + "[" + std::to_string(i) + "]", "expected [t, value] with two numbers");
    }
    s.points.emplace_back(p[0].get<double>(), p[1].get<double>());
  }
  std::stable_sort(s.points.begin(), s.points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return s;
}

template <typename T>
T Get(const json& obj, const char* key, T fallback, const std::string& where) {
  if (!obj.contains(key)) return fallback;
  try {
    return obj.at(key).get<T>();
  } catch (const json::exception&) {
    Fail(where + "." + key, "has the wrong type");
  }
}

// "mig_devices": [{"index", "uuid", "profile", "name", "memory_total_mib", "gpu_instance_id",
// "compute_instance_id"}, ...], every field optional; or "mig_instances": n for n defaults.
void ParseMigDevices(const json& g, size_t gpu_index, FakeGpu& gpu, const std::string& where) {
  if (g.contains("mig_instances") && g.contains("mig_devices")) {
    Fail(where + ".mig_instances", "give either mig_instances or mig_devices, not both");
  }
  json list = json::array();
  if (g.contains("mig_devices")) {
    list = g["mig_devices"];
    if (!list.is_array()) Fail(where + ".mig_devices", "expected a list");
  } else {
    int count = Get<int>(g, "mig_instances", 0, where);
    if (count < 0 || count > static_cast<int>(kMaxMigDevices)) {
      Fail(where + ".mig_instances", "must be between 0 and 7");
    }
    for (int m = 0; m < count; ++m) list.push_back(json::object());
  }
  if (!list.empty() && gpu.mig_mode != 1) {
    Fail(where + (g.contains("mig_devices") ? ".mig_devices" : ".mig_instances"),
         "MIG devices need \"mig_mode\": 1");
  }
  if (list.size() > kMaxMigDevices) Fail(where + ".mig_devices", "at most 7 MIG devices");
  static const std::set<std::string> kMigKeys = {"index",
                                                 "uuid",
                                                 "profile",
                                                 "name",
                                                 "memory_total_mib",
                                                 "gpu_instance_id",
                                                 "compute_instance_id"};
  std::set<unsigned> indices;
  for (size_t m = 0; m < list.size(); ++m) {
    std::string at = where + ".mig_devices[" + std::to_string(m) + "]";
    const json& d = list[m];
    CheckFields(d, at, kMigKeys);
    FakeMig mig;
    mig.index = Get<unsigned>(d, "index", static_cast<unsigned>(m), at);
    if (mig.index >= kMaxMigDevices) Fail(at + ".index", "must be below 7");
    if (!indices.insert(mig.index).second) Fail(at + ".index", "repeats another MIG device's");
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "MIG-00000000-0000-0000-%04zu-%012u", gpu_index, mig.index);
    mig.uuid = Get<std::string>(d, "uuid", uuid, at);
    std::string profile = Get<std::string>(d, "profile", "1g.10gb", at);
    mig.name = Get<std::string>(d, "name", gpu.name + " MIG " + profile, at);
    mig.memory_total = Get<unsigned long long>(d, "memory_total_mib", 9984, at) << 20;
    mig.gpu_instance_id = Get<unsigned>(d, "gpu_instance_id", mig.index + 1, at);
    mig.compute_instance_id = Get<unsigned>(d, "compute_instance_id", 0, at);
    gpu.migs.push_back(std::move(mig));
  }
}

std::unique_ptr<Scenario> LoadScenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail(path, "cannot open the scenario file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    Fail(path, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object()) Fail(path, "the scenario must be a JSON object");
  static const std::set<std::string> kTop = {"driver_version", "cuda_driver_version",
                                             "missing_functions", "gpus", "events"};
  CheckFields(doc, path, kTop, ": ");
  auto sc = std::make_unique<Scenario>();
  sc->driver_version = Get<std::string>(doc, "driver_version", sc->driver_version, path);
  sc->cuda_driver_version = Get<int>(doc, "cuda_driver_version", sc->cuda_driver_version, path);
  for (const std::string& f : Get<std::vector<std::string>>(doc, "missing_functions", {}, path)) {
    sc->missing.insert(f);
  }
  json gpus = doc.value("gpus", json::array());
  if (!gpus.is_array()) Fail(path + ": gpus", "expected a list");
  static const std::set<std::string> kGpuKeys = {"uuid",
                                                 "name",
                                                 "memory_total_mib",
                                                 "pci_bus_id",
                                                 "pcie_max_width",
                                                 "pcie_max_gen",
                                                 "temperature_slowdown_c",
                                                 "temperature_shutdown_c",
                                                 "nvlinks",
                                                 "gpm",
                                                 "ecc",
                                                 "remapped_rows",
                                                 "mig_mode",
                                                 "mig_instances",
                                                 "mig_devices",
                                                 "lost_at",
                                                 "metrics"};
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string where = path + ": gpus[" + std::to_string(i) + "]";
    const json& g = gpus[i];
    CheckFields(g, where, kGpuKeys);
    FakeGpu gpu;
    gpu.handle.index = static_cast<int>(i);
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-00000000-0000-0000-0000-%012zu", i);
    gpu.uuid = Get<std::string>(g, "uuid", uuid, where);
    gpu.name = Get<std::string>(g, "name", "NVIDIA H100 80GB HBM3", where);
    gpu.memory_total = Get<unsigned long long>(g, "memory_total_mib", 81559, where) << 20;
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02zX:00.0", 0x18 + i * 0x10);
    gpu.pci_bus_id = Get<std::string>(g, "pci_bus_id", bus, where);
    gpu.pcie_max_width = Get<unsigned>(g, "pcie_max_width", 16, where);
    gpu.pcie_max_gen = Get<unsigned>(g, "pcie_max_gen", 5, where);
    gpu.temperature_slowdown_c = Get<int>(g, "temperature_slowdown_c", 90, where);
    gpu.temperature_shutdown_c = Get<int>(g, "temperature_shutdown_c", 95, where);
    gpu.nvlinks = Get<int>(g, "nvlinks", 0, where);
    if (gpu.nvlinks < 0 || gpu.nvlinks > NVML_NVLINK_MAX_LINKS) {
      Fail(where + ".nvlinks", "must be between 0 and 18");
    }
    gpu.gpm = Get<bool>(g, "gpm", false, where);
    gpu.ecc = Get<bool>(g, "ecc", true, where);
    gpu.remap = Get<bool>(g, "remapped_rows", true, where);
    gpu.mig_mode = Get<int>(g, "mig_mode", -1, where);
    ParseMigDevices(g, i, gpu, where);
    gpu.lost_at = Get<double>(g, "lost_at", -1, where);
    for (const auto& [name, fallback] : MetricDefaults()) {
      gpu.metrics[name].points.emplace_back(0, fallback);
    }
    if (g.contains("metrics")) {
      if (!g["metrics"].is_object()) Fail(where + ".metrics", "expected an object");
      for (const auto& [name, value] : g["metrics"].items()) {
        if (!MetricDefaults().count(name)) Fail(where + ".metrics." + name, "unknown metric");
        gpu.metrics[name] = ParseSeries(value, where + ".metrics." + name);
      }
    }
    sc->gpus.push_back(std::move(gpu));
  }
  // Handles point into the scenario, so they are set once the GPUs stay where they are.
  for (size_t i = 0; i < sc->gpus.size(); ++i) {
    for (size_t m = 0; m < sc->gpus[i].migs.size(); ++m) {
      sc->gpus[i].migs[m].handle = {static_cast<int>(i), static_cast<int>(m)};
    }
  }
  json events = doc.value("events", json::array());
  if (!events.is_array()) Fail(path + ": events", "expected a list");
  for (size_t i = 0; i < events.size(); ++i) {
    std::string where = path + ": events[" + std::to_string(i) + "]";
    const json& e = events[i];
    if (!e.is_object() || !e.contains("xid")) Fail(where, "expected {\"t\", \"gpu\", \"xid\"}");
    FakeEvent ev;
    ev.t = Get<double>(e, "t", 0, where);
    ev.gpu = Get<int>(e, "gpu", 0, where);
    ev.xid = Get<unsigned>(e, "xid", 0, where);
    if (ev.gpu < 0 || static_cast<size_t>(ev.gpu) >= sc->gpus.size()) {
      Fail(where + ".gpu", "no such GPU");
    }
    sc->events.push_back(ev);
  }
  std::stable_sort(sc->events.begin(), sc->events.end(),
                   [](const FakeEvent& a, const FakeEvent& b) { return a.t < b.t; });
  return sc;
}

double Now(const State& st) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - st.start).count();
}

bool Missing(const char* fn) {
  State& st = S();
  return st.scenario && st.scenario->missing.count(fn) > 0;
}

// Resolves a device handle, checking the library state; on success `gpu` is set.
nvmlReturn_t Device(nvmlDevice_t device, FakeGpu*& gpu, double& t) {
  State& st = S();
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || device->index < 0 ||
      static_cast<size_t>(device->index) >= st.scenario->gpus.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  gpu = &st.scenario->gpus[static_cast<size_t>(device->index)];
  if (&gpu->handle != device) return NVML_ERROR_INVALID_ARGUMENT;
  t = Now(st);
  if (gpu->lost_at >= 0 && t >= gpu->lost_at) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

// Resolves a GPU or MIG device handle; on success `gpu` is set, and `mig` for a MIG handle
// (null for a GPU's).
nvmlReturn_t AnyDevice(nvmlDevice_t device, FakeGpu*& gpu, FakeMig*& mig, double& t) {
  State& st = S();
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || device->index < 0 ||
      static_cast<size_t>(device->index) >= st.scenario->gpus.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  gpu = &st.scenario->gpus[static_cast<size_t>(device->index)];
  mig = nullptr;
  if (device->mig >= 0) {
    if (static_cast<size_t>(device->mig) >= gpu->migs.size()) return NVML_ERROR_INVALID_ARGUMENT;
    mig = &gpu->migs[static_cast<size_t>(device->mig)];
    if (&mig->handle != device) return NVML_ERROR_INVALID_ARGUMENT;
  } else if (&gpu->handle != device) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  t = Now(st);
  if (gpu->lost_at >= 0 && t >= gpu->lost_at) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

double Metric(const FakeGpu& gpu, const char* name, double t) { return gpu.metrics.at(name).At(t); }

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t InitImpl() {
  State& st = S();
  std::lock_guard lock(st.mu);
  if (st.init_count++ > 0) return NVML_SUCCESS;
  const char* path = std::getenv("CHAMBER_FAKE_NVML_SCENARIO");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr, "fake-nvml: CHAMBER_FAKE_NVML_SCENARIO is not set\n");
    st.init_count = 0;
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
  try {
    st.scenario = LoadScenario(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake-nvml: %s\n", e.what());
    st.init_count = 0;
    return NVML_ERROR_UNKNOWN;
  }
  st.start = std::chrono::steady_clock::now();
  return NVML_SUCCESS;
}

nvmlReturn_t GetCount(unsigned int* count) {
  State& st = S();
  std::lock_guard lock(st.mu);
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(st.scenario->gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t GetHandle(unsigned int index, nvmlDevice_t* device) {
  State& st = S();
  std::lock_guard lock(st.mu);
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= st.scenario->gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &st.scenario->gpus[index].handle;
  return NVML_SUCCESS;
}

nvmlReturn_t MemoryInfo(nvmlDevice_t device, unsigned long long& total, unsigned long long& used) {
  FakeGpu* g;
  FakeMig* mig;
  double t;
  if (nvmlReturn_t rc = AnyDevice(device, g, mig, t); rc != NVML_SUCCESS) return rc;
  if (mig != nullptr) {  // the scenario's memory metric is the whole GPU's
    total = mig->memory_total;
    used = 0;
    return NVML_SUCCESS;
  }
  total = g->memory_total;
  used = static_cast<unsigned long long>(Metric(*g, "memory_used_mib", t)) << 20;
  return NVML_SUCCESS;
}

nvmlReturn_t PciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FakeGpu* g;
  double t;
  if (nvmlReturn_t rc = Device(device, g, t); rc != NVML_SUCCESS) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", g->pci_bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", g->pci_bus_id.c_str() + 4);
  std::sscanf(g->pci_bus_id.c_str(), "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
  pci->pciDeviceId = 0x233010DE;
  return NVML_SUCCESS;
}

nvmlReturn_t EventWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms, bool v2) {
  if (set == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  State& st = S();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
  for (;;) {
    {
      std::lock_guard lock(st.mu);
      if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
      double t = Now(st);
      const auto& events = st.scenario->events;
      while (set->next_event < events.size() && events[set->next_event].t <= t) {
        const FakeEvent& e = events[set->next_event++];
        if (!set->devices.count(e.gpu)) continue;
        data->device = &st.scenario->gpus[static_cast<size_t>(e.gpu)].handle;
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = e.xid;
        if (v2) {
          data->gpuInstanceId = 0xFFFFFFFF;
          data->computeInstanceId = 0xFFFFFFFF;
        }
        return NVML_SUCCESS;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(2), deadline - now));
  }
}

}  // namespace

#define FAKE_FUNCTION(name) \
  if (Missing(#name)) return NVML_ERROR_FUNCTION_NOT_FOUND

#define FAKE_DEVICE(device)                                         \
  FakeGpu* g;                                                       \
  double t;                                                         \
  if (nvmlReturn_t rc = Device(device, g, t); rc != NVML_SUCCESS) { \
    return rc;                                                      \
  }

// For the functions that also take a MIG device handle: sets `g`, and `mig` for a MIG handle.
#define FAKE_ANY_DEVICE(device)                                             \
  FakeGpu* g;                                                               \
  FakeMig* mig;                                                             \
  double t;                                                                 \
  if (nvmlReturn_t rc = AnyDevice(device, g, mig, t); rc != NVML_SUCCESS) { \
    return rc;                                                              \
  }                                                                         \
  (void)t

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit() { return InitImpl(); }

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
  State& st = S();
  std::lock_guard lock(st.mu);
  if (st.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (--st.init_count == 0) st.scenario.reset();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(
    char* version, unsigned int length) {
  State& st = S();
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  return CopyString(st.scenario->driver_version, version, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  State& st = S();
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = st.scenario->cuda_driver_version;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return GetCount(count);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex(
    unsigned int index, nvmlDevice_t* device) {
  return GetHandle(index, device);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device,
                                                                      char* uuid,
                                                                      unsigned int length) {
  FAKE_ANY_DEVICE(device);
  return CopyString(mig ? mig->uuid : g->uuid, uuid, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device,
                                                                      char* name,
                                                                      unsigned int length) {
  FAKE_ANY_DEVICE(device);
  return CopyString(mig ? mig->name : g->name, name, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                                            nvmlMemory_t* memory) {
  FAKE_FUNCTION(nvmlDeviceGetMemoryInfo);
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = MemoryInfo(device, memory->total, memory->used);
  memory->free = memory->total - std::min(memory->total, memory->used);
  return rc;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device,
                                                                            nvmlPciInfo_t* pci) {
  return PciInfo(device, pci);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(
    nvmlDevice_t device, nvmlUtilization_t* utilization) {
  FAKE_FUNCTION(nvmlDeviceGetUtilizationRates);
  FAKE_DEVICE(device);
  utilization->gpu = static_cast<unsigned>(Metric(*g, "utilization", t));
  utilization->memory = static_cast<unsigned>(Metric(*g, "memory_utilization", t));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device,
                                                                            unsigned int* power) {
  FAKE_FUNCTION(nvmlDeviceGetPowerUsage);
  FAKE_DEVICE(device);
  *power = static_cast<unsigned>(Metric(*g, "power_w", t) * 1000);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(
    nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int* temp) {
  FAKE_FUNCTION(nvmlDeviceGetTemperature);
  FAKE_DEVICE(device);
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = static_cast<unsigned>(Metric(*g, "temperature_c", t));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperatureThreshold(
    nvmlDevice_t device, nvmlTemperatureThresholds_t kind, unsigned int* temp) {
  FAKE_FUNCTION(nvmlDeviceGetTemperatureThreshold);
  FAKE_DEVICE(device);
  (void)t;
  int c = -1;
  if (kind == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN) c = g->temperature_slowdown_c;
  if (kind == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN) c = g->temperature_shutdown_c;
  if (c < 0) return NVML_ERROR_NOT_SUPPORTED;
  *temp = static_cast<unsigned>(c);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_FUNCTION(nvmlDeviceGetCurrentClocksThrottleReasons);
  FAKE_DEVICE(device);
  *reasons = static_cast<unsigned long long>(Metric(*g, "clock_event_reasons", t));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEccErrors(
    nvmlDevice_t device, nvmlMemoryErrorType_t type, nvmlEccCounterType_t counter,
    unsigned long long* count) {
  FAKE_FUNCTION(nvmlDeviceGetTotalEccErrors);
  FAKE_DEVICE(device);
  if (!g->ecc) return NVML_ERROR_NOT_SUPPORTED;
  const char* name = nullptr;
  bool corrected = type == NVML_MEMORY_ERROR_TYPE_CORRECTED;
  if (counter == NVML_VOLATILE_ECC) {
    name = corrected ? "ecc_volatile_corrected" : "ecc_volatile_uncorrected";
  } else {
    name = corrected ? "ecc_aggregate_corrected" : "ecc_aggregate_uncorrected";
  }
  *count = static_cast<unsigned long long>(Metric(*g, name, t));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPcieReplayCounter(
    nvmlDevice_t device, unsigned int* value) {
  FAKE_FUNCTION(nvmlDeviceGetPcieReplayCounter);
  FAKE_DEVICE(device);
  *value = static_cast<unsigned>(Metric(*g, "pcie_replays", t));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(
    nvmlDevice_t device, unsigned int* value) {
  FAKE_FUNCTION(nvmlDeviceGetCurrPcieLinkWidth);
  FAKE_DEVICE(device);
  double w = Metric(*g, "pcie_width", t);
  *value = w < 0 ? g->pcie_max_width : static_cast<unsigned>(w);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(
    nvmlDevice_t device, unsigned int* value) {
  FAKE_FUNCTION(nvmlDeviceGetMaxPcieLinkWidth);
  FAKE_DEVICE(device);
  *value = g->pcie_max_width;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(
    nvmlDevice_t device, unsigned int* value) {
  FAKE_FUNCTION(nvmlDeviceGetCurrPcieLinkGeneration);
  FAKE_DEVICE(device);
  double gen = Metric(*g, "pcie_gen", t);
  *value = gen < 0 ? g->pcie_max_gen : static_cast<unsigned>(gen);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(
    nvmlDevice_t device, unsigned int* value) {
  FAKE_FUNCTION(nvmlDeviceGetMaxPcieLinkGeneration);
  FAKE_DEVICE(device);
  *value = g->pcie_max_gen;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkState(
    nvmlDevice_t device, unsigned int link, nvmlEnableState_t* active) {
  FAKE_FUNCTION(nvmlDeviceGetNvLinkState);
  FAKE_DEVICE(device);
  if (static_cast<int>(link) >= g->nvlinks) return NVML_ERROR_NOT_SUPPORTED;
  double up = Metric(*g, "nvlink_active_links", t);
  bool is_up = up < 0 || static_cast<double>(link) < up;
  *active = is_up ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(
    nvmlDevice_t device, unsigned int link, nvmlNvLinkErrorCounter_t counter,
    unsigned long long* value) {
  FAKE_FUNCTION(nvmlDeviceGetNvLinkErrorCounter);
  FAKE_DEVICE(device);
  if (static_cast<int>(link) >= g->nvlinks) return NVML_ERROR_NOT_SUPPORTED;
  // The scenario's nvlink_errors counts DL replays on link 0.
  bool counted = link == 0 && counter == NVML_NVLINK_ERROR_DL_REPLAY;
  *value = counted ? static_cast<unsigned long long>(Metric(*g, "nvlink_errors", t)) : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device,
                                                                         unsigned int* current,
                                                                         unsigned int* pending) {
  FAKE_FUNCTION(nvmlDeviceGetMigMode);
  FAKE_DEVICE(device);
  if (g->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = static_cast<unsigned>(g->mig_mode);
  *pending = static_cast<unsigned>(g->mig_mode);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(
    nvmlDevice_t device, unsigned int* count) {
  FAKE_FUNCTION(nvmlDeviceGetMaxMigDeviceCount);
  FAKE_DEVICE(device);
  if (g->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
  *count = kMaxMigDevices;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(
    nvmlDevice_t device, unsigned int index, nvmlDevice_t* mig) {
  FAKE_FUNCTION(nvmlDeviceGetMigDeviceHandleByIndex);
  FAKE_DEVICE(device);
  if (mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
  for (FakeMig& m : g->migs) {
    if (m.index == index) {
      *mig = &m.handle;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FAKE_FUNCTION(nvmlEventSetCreate);
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new nvmlEventSet_st();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(
    nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
  FAKE_FUNCTION(nvmlDeviceRegisterEvents);
  FAKE_DEVICE(device);
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_ERROR_NOT_SUPPORTED;
  State& st = S();
  std::lock_guard lock(st.mu);
  set->devices.insert(device->index);
  // Events that happened before registration are not delivered (they are in the kernel log).
  const auto& events = st.scenario->events;
  while (set->next_event < events.size() && events[set->next_event].t <= t) ++set->next_event;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set,
                                                                     nvmlEventData_t* data,
                                                                     unsigned int timeoutms) {
  FAKE_FUNCTION(nvmlEventSetWait);
  return EventWait(set, data, timeoutms, false);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}

#ifndef CHAMBER_FAKE_NVML_OLD_DRIVER

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() { return InitImpl(); }

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(
    int* version) {
  return nvmlSystemGetCudaDriverVersion(version);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return GetCount(count);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned int index, nvmlDevice_t* device) {
  return GetHandle(index, device);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(
    nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  FAKE_FUNCTION(nvmlDeviceGetMemoryInfo_v2);
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlReturn_t rc = MemoryInfo(device, memory->total, memory->used);
  memory->reserved = 0;
  memory->free = memory->total - std::min(memory->total, memory->used);
  return rc;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device,
                                                                            nvmlPciInfo_t* pci) {
  FAKE_FUNCTION(nvmlDeviceGetPciInfo_v3);
  return PciInfo(device, pci);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(
    nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_FUNCTION(nvmlDeviceGetCurrentClocksEventReasons);
  FAKE_DEVICE(device);
  *reasons = static_cast<unsigned long long>(Metric(*g, "clock_event_reasons", t));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetRemappedRows(
    nvmlDevice_t device, unsigned int* corrected, unsigned int* uncorrected, unsigned int* pending,
    unsigned int* failure) {
  FAKE_FUNCTION(nvmlDeviceGetRemappedRows);
  FAKE_DEVICE(device);
  if (!g->remap) return NVML_ERROR_NOT_SUPPORTED;
  *corrected = static_cast<unsigned>(Metric(*g, "remap_corrected_rows", t));
  *uncorrected = static_cast<unsigned>(Metric(*g, "remap_uncorrected_rows", t));
  *pending = Metric(*g, "remap_pending", t) != 0 ? 1 : 0;
  *failure = Metric(*g, "remap_failure", t) != 0 ? 1 : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetFieldValues(
    nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  FAKE_FUNCTION(nvmlDeviceGetFieldValues);
  FAKE_DEVICE(device);
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& v = values[i];
    if (v.fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) {
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      v.value.uiVal = static_cast<unsigned>(Metric(*g, "recovery_action", t));
      v.nvmlReturn = NVML_SUCCESS;
    } else {
      v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set,
                                                                        nvmlEventData_t* data,
                                                                        unsigned int timeoutms) {
  FAKE_FUNCTION(nvmlEventSetWait_v2);
  return EventWait(set, data, timeoutms, true);
}

// Added with MIG; the old-driver build lacks them, so that their absence is exercised.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device,
                                                                               unsigned int* id) {
  FAKE_FUNCTION(nvmlDeviceGetGpuInstanceId);
  FAKE_ANY_DEVICE(device);
  if (mig == nullptr || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *id = mig->gpu_instance_id;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeInstanceId(
    nvmlDevice_t device, unsigned int* id) {
  FAKE_FUNCTION(nvmlDeviceGetComputeInstanceId);
  FAKE_ANY_DEVICE(device);
  if (mig == nullptr || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *id = mig->compute_instance_id;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmQueryDeviceSupport(
    nvmlDevice_t device, nvmlGpmSupport_t* support) {
  FAKE_FUNCTION(nvmlGpmQueryDeviceSupport);
  FAKE_DEVICE(device);
  if (support == nullptr || support->version != NVML_GPM_SUPPORT_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  support->isSupportedDevice = g->gpm ? 1 : 0;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  FAKE_FUNCTION(nvmlGpmSampleAlloc);
  if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *sample = new nvmlGpmSample_st();
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  delete sample;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device,
                                                                     nvmlGpmSample_t sample) {
  FAKE_FUNCTION(nvmlGpmSampleGet);
  FAKE_DEVICE(device);
  if (sample == nullptr || !g->gpm) return NVML_ERROR_NOT_SUPPORTED;
  sample->device = device->index;
  sample->time = t;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmMetricsGet(
    nvmlGpmMetricsGet_t* metrics) {
  FAKE_FUNCTION(nvmlGpmMetricsGet);
  if (metrics == nullptr || metrics->version != NVML_GPM_METRICS_GET_VERSION) {
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  }
  if (metrics->sample1 == nullptr || metrics->sample2 == nullptr ||
      metrics->sample1->device != metrics->sample2->device || metrics->sample1->device < 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  State& st = S();
  if (!st.scenario) return NVML_ERROR_UNINITIALIZED;
  const FakeGpu& g = st.scenario->gpus[static_cast<size_t>(metrics->sample1->device)];
  double t = metrics->sample2->time;
  for (unsigned i = 0; i < metrics->numMetrics && i < NVML_GPM_METRIC_MAX; ++i) {
    nvmlGpmMetric_t& m = metrics->metrics[i];
    m.nvmlReturn = NVML_SUCCESS;
    if (m.metricId == NVML_GPM_METRIC_SM_UTIL) {
      m.value = Metric(g, "sm_active", t);
    } else if (m.metricId == NVML_GPM_METRIC_ANY_TENSOR_UTIL) {
      m.value = Metric(g, "tensor_active", t);
    } else {
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}

#endif  // CHAMBER_FAKE_NVML_OLD_DRIVER

}  // extern "C"
