// NVML loaded at run time with dlopen. Each function is resolved by name, newest version first
// (nvmlInit_v2, then nvmlInit); a function the driver lacks stays null and the feature that
// needs it is off, reported through MissingFunctions(). Only nvmlInit and device enumeration are
// required.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/nvml_api.h"
#include "common/status.h"

namespace chamber::agent {

// The library name the driver installs; the agent loads it unless told otherwise.
inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

class NvmlLibrary {
 public:
  // Loads the library at `path` (a file name searched the usual way, or a path) and calls
  // nvmlInit. Unavailable when the library cannot be loaded, lacks nvmlInit or device
  // enumeration, or nvmlInit fails; the message says which.
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // "nvmlDeviceGetMemoryInfo_v2 (using nvmlDeviceGetMemoryInfo)", "nvmlGpmMetricsGet", ... for
  // every function whose newest version the library does not export.
  const std::vector<std::string>& MissingFunctions() const { return missing_; }
  const std::string& path() const { return path_; }

  // "GPU is lost (NVML error 15)".
  std::string ErrorString(nvmlReturn_t code) const;

  // Resolved functions; null when absent. Call through these after checking.
  nvml_fn::Init* init = nullptr;
  nvml_fn::Shutdown* shutdown = nullptr;
  nvml_fn::ErrorString* error_string = nullptr;
  nvml_fn::SystemGetDriverVersion* system_get_driver_version = nullptr;
  nvml_fn::SystemGetCudaDriverVersion* system_get_cuda_driver_version = nullptr;
  nvml_fn::DeviceGetCount* device_get_count = nullptr;
  nvml_fn::DeviceGetHandleByIndex* device_get_handle_by_index = nullptr;
  nvml_fn::DeviceGetString* device_get_uuid = nullptr;
  nvml_fn::DeviceGetString* device_get_name = nullptr;
  nvml_fn::DeviceGetMemoryInfoV2* device_get_memory_info_v2 = nullptr;
  nvml_fn::DeviceGetMemoryInfo* device_get_memory_info = nullptr;
  nvml_fn::DeviceGetPciInfo* device_get_pci_info = nullptr;
  nvml_fn::DeviceGetUtilizationRates* device_get_utilization_rates = nullptr;
  nvml_fn::DeviceGetUint* device_get_power_usage = nullptr;
  nvml_fn::DeviceGetTemperature* device_get_temperature = nullptr;
  nvml_fn::DeviceGetTemperatureThreshold* device_get_temperature_threshold = nullptr;
  nvml_fn::DeviceGetUll* device_get_clock_event_reasons = nullptr;
  nvml_fn::DeviceGetTotalEccErrors* device_get_total_ecc_errors = nullptr;
  nvml_fn::DeviceGetRemappedRows* device_get_remapped_rows = nullptr;
  nvml_fn::DeviceGetUint* device_get_pcie_replay_counter = nullptr;
  nvml_fn::DeviceGetUint* device_get_curr_pcie_link_width = nullptr;
  nvml_fn::DeviceGetUint* device_get_max_pcie_link_width = nullptr;
  nvml_fn::DeviceGetUint* device_get_curr_pcie_link_generation = nullptr;
  nvml_fn::DeviceGetUint* device_get_max_pcie_link_generation = nullptr;
  nvml_fn::DeviceGetNvLinkState* device_get_nvlink_state = nullptr;
  nvml_fn::DeviceGetNvLinkErrorCounter* device_get_nvlink_error_counter = nullptr;
  nvml_fn::DeviceGetMigMode* device_get_mig_mode = nullptr;
  nvml_fn::DeviceGetUint* device_get_max_mig_device_count = nullptr;
  nvml_fn::DeviceGetMigDeviceHandleByIndex* device_get_mig_device_handle_by_index = nullptr;
  nvml_fn::DeviceGetInstanceId* device_get_gpu_instance_id = nullptr;
  nvml_fn::DeviceGetInstanceId* device_get_compute_instance_id = nullptr;
  nvml_fn::DeviceGetFieldValues* device_get_field_values = nullptr;
  nvml_fn::EventSetCreate* event_set_create = nullptr;
  nvml_fn::DeviceRegisterEvents* device_register_events = nullptr;
  nvml_fn::EventSetWait* event_set_wait = nullptr;
  nvml_fn::EventSetFree* event_set_free = nullptr;
  // _v3 or _v2 (both take nvmlProcessInfo_t); never _v1, whose struct is shorter.
  nvml_fn::DeviceGetProcesses* device_get_compute_running_processes = nullptr;
  nvml_fn::DeviceGetProcessUtilization* device_get_process_utilization = nullptr;
  nvml_fn::GpmQueryDeviceSupport* gpm_query_device_support = nullptr;
  nvml_fn::GpmSampleAlloc* gpm_sample_alloc = nullptr;
  nvml_fn::GpmSampleFree* gpm_sample_free = nullptr;
  nvml_fn::GpmSampleGet* gpm_sample_get = nullptr;
  nvml_fn::GpmMetricsGet* gpm_metrics_get = nullptr;

 private:
  NvmlLibrary() = default;
  // Binds `*slot` to the first of `names` the library exports; records what is missing.
  template <typename Fn>
  void Bind(Fn*& slot, std::initializer_list<const char*> names);

  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string path_;
  std::vector<std::string> missing_;
};

// True for the return codes that mean "this driver or GPU cannot do that": not supported,
// function not found, or a struct version the driver does not know.
bool NvmlUnsupported(nvmlReturn_t code);

}  // namespace chamber::agent
