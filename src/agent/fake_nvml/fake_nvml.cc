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

#include "agent/fake_nvml/scenario.h"
#include "agent/nvml_api.h"

struct nvmlEventSet_st {
  std::set<int> devices;
  size_t next_event = 0;  // index into the scenario's events, in time order
};
struct nvmlGpmSample_st {
  int device = -1;
  double time = 0;
};

namespace {

using chamber::fake_nvml::FakeEvent;
using chamber::fake_nvml::FakeGpu;
using chamber::fake_nvml::FakeMig;
using chamber::fake_nvml::FakeProcess;
using chamber::fake_nvml::kMaxMigDevices;
using chamber::fake_nvml::LoadScenario;
using chamber::fake_nvml::Scenario;

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

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
    unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  FAKE_FUNCTION(nvmlDeviceGetProcessUtilization);
  FAKE_DEVICE(device);
  if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // One sample per process with a utilization, taken now (microseconds since the epoch).
  const auto now_us =
      static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (const FakeProcess& p : g->processes) {
    if (p.sm_util < 0 || now_us <= lastSeenTimeStamp) continue;
    samples.push_back(
        {p.pid, now_us, static_cast<unsigned>(p.sm_util), static_cast<unsigned>(p.mem_util), 0, 0});
  }
  if (samples.empty()) return NVML_ERROR_NOT_FOUND;
  if (utilization == nullptr || *processSamplesCount < samples.size()) {
    *processSamplesCount = static_cast<unsigned>(samples.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(samples.begin(), samples.end(), utilization);
  *processSamplesCount = static_cast<unsigned>(samples.size());
  (void)t;
  return NVML_SUCCESS;
}

#ifndef CHAMBER_FAKE_NVML_OLD_DRIVER

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() { return InitImpl(); }

namespace {
nvmlReturn_t RunningProcesses(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  FAKE_DEVICE(device);
  (void)t;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const size_t n = g->processes.size();
  if (*count < n || (n > 0 && infos == nullptr)) {
    *count = static_cast<unsigned>(n);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t i = 0; i < n; ++i) {
    const FakeProcess& p = g->processes[i];
    infos[i] = {p.pid, p.used_memory, p.gpu_instance_id, p.compute_instance_id};
  }
  *count = static_cast<unsigned>(n);
  return NVML_SUCCESS;
}
}  // namespace

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos) {
  FAKE_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v3);
  return RunningProcesses(device, infoCount, infos);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos) {
  FAKE_FUNCTION(nvmlDeviceGetComputeRunningProcesses_v2);
  return RunningProcesses(device, infoCount, infos);
}

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
