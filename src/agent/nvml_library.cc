#include "agent/nvml_library.h"

#include <dlfcn.h>

#include <cstring>
#include <initializer_list>

#include <fmt/format.h>

namespace chamber::agent {

template <typename Fn>
void NvmlLibrary::Bind(Fn*& slot, std::initializer_list<const char*> names) {
  const char* newest = *names.begin();
  for (const char* name : names) {
    void* symbol = dlsym(handle_, name);
    if (symbol == nullptr) continue;
    // POSIX guarantees a dlsym result converts to a function pointer.
    slot = reinterpret_cast<Fn*>(symbol);
    if (std::strcmp(name, newest) != 0) {
      missing_.push_back(fmt::format("{} (using {})", newest, name));
    }
    return;
  }
  missing_.emplace_back(newest);
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(
        fmt::format("cannot load NVML library {}: {}", path, why ? why : "unknown error"));
  }
  lib->Bind(lib->init, {"nvmlInit_v2", "nvmlInit"});
  lib->Bind(lib->shutdown, {"nvmlShutdown"});
  lib->Bind(lib->error_string, {"nvmlErrorString"});
  lib->Bind(lib->system_get_driver_version, {"nvmlSystemGetDriverVersion"});
  lib->Bind(lib->system_get_cuda_driver_version,
            {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  lib->Bind(lib->device_get_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  lib->Bind(lib->device_get_handle_by_index,
            {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  lib->Bind(lib->device_get_uuid, {"nvmlDeviceGetUUID"});
  lib->Bind(lib->device_get_name, {"nvmlDeviceGetName"});
  // The v2 memory query takes a different struct, so the two are separate slots; v1 is looked
  // up only as the fallback.
  if (void* v2 = dlsym(lib->handle_, "nvmlDeviceGetMemoryInfo_v2")) {
    lib->device_get_memory_info_v2 = reinterpret_cast<nvml_fn::DeviceGetMemoryInfoV2*>(v2);
  } else if (void* v1 = dlsym(lib->handle_, "nvmlDeviceGetMemoryInfo")) {
    lib->device_get_memory_info = reinterpret_cast<nvml_fn::DeviceGetMemoryInfo*>(v1);
    lib->missing_.emplace_back("nvmlDeviceGetMemoryInfo_v2 (using nvmlDeviceGetMemoryInfo)");
  } else {
    lib->missing_.emplace_back("nvmlDeviceGetMemoryInfo_v2");
  }
  lib->Bind(lib->device_get_pci_info,
            {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"});
  lib->Bind(lib->device_get_utilization_rates, {"nvmlDeviceGetUtilizationRates"});
  lib->Bind(lib->device_get_power_usage, {"nvmlDeviceGetPowerUsage"});
  lib->Bind(lib->device_get_temperature, {"nvmlDeviceGetTemperature"});
  lib->Bind(lib->device_get_temperature_threshold, {"nvmlDeviceGetTemperatureThreshold"});
  lib->Bind(lib->device_get_clock_event_reasons, {"nvmlDeviceGetCurrentClocksEventReasons",
                                                  "nvmlDeviceGetCurrentClocksThrottleReasons"});
  lib->Bind(lib->device_get_total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
  lib->Bind(lib->device_get_remapped_rows, {"nvmlDeviceGetRemappedRows"});
  lib->Bind(lib->device_get_pcie_replay_counter, {"nvmlDeviceGetPcieReplayCounter"});
  lib->Bind(lib->device_get_curr_pcie_link_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  lib->Bind(lib->device_get_max_pcie_link_width, {"nvmlDeviceGetMaxPcieLinkWidth"});
  lib->Bind(lib->device_get_curr_pcie_link_generation, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  lib->Bind(lib->device_get_max_pcie_link_generation, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  lib->Bind(lib->device_get_nvlink_state, {"nvmlDeviceGetNvLinkState"});
  lib->Bind(lib->device_get_nvlink_error_counter, {"nvmlDeviceGetNvLinkErrorCounter"});
  lib->Bind(lib->device_get_mig_mode, {"nvmlDeviceGetMigMode"});
  lib->Bind(lib->device_get_max_mig_device_count, {"nvmlDeviceGetMaxMigDeviceCount"});
  lib->Bind(lib->device_get_mig_device_handle_by_index, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  lib->Bind(lib->device_get_gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
  lib->Bind(lib->device_get_compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
  lib->Bind(lib->device_get_field_values, {"nvmlDeviceGetFieldValues"});
  lib->Bind(lib->event_set_create, {"nvmlEventSetCreate"});
  lib->Bind(lib->device_register_events, {"nvmlDeviceRegisterEvents"});
  // nvmlEventSetWait (v1) fills a shorter nvmlEventData_t; ours is large enough for both.
  lib->Bind(lib->event_set_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  lib->Bind(lib->event_set_free, {"nvmlEventSetFree"});
  lib->Bind(lib->device_get_compute_running_processes,
            {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  lib->Bind(lib->device_get_process_utilization, {"nvmlDeviceGetProcessUtilization"});
  lib->Bind(lib->gpm_query_device_support, {"nvmlGpmQueryDeviceSupport"});
  lib->Bind(lib->gpm_sample_alloc, {"nvmlGpmSampleAlloc"});
  lib->Bind(lib->gpm_sample_free, {"nvmlGpmSampleFree"});
  lib->Bind(lib->gpm_sample_get, {"nvmlGpmSampleGet"});
  lib->Bind(lib->gpm_metrics_get, {"nvmlGpmMetricsGet"});

  if (lib->init == nullptr || lib->device_get_count == nullptr ||
      lib->device_get_handle_by_index == nullptr) {
    return Status::Unavailable(
        fmt::format("NVML library {} lacks nvmlInit or device enumeration", path));
  }
  nvmlReturn_t rc = lib->init();
  if (rc != NVML_SUCCESS) {
    return Status::Unavailable(
        fmt::format("nvmlInit failed in {}: {}", path, lib->ErrorString(rc)));
  }
  lib->initialized_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && shutdown != nullptr) shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string NvmlLibrary::ErrorString(nvmlReturn_t code) const {
  const char* text = error_string ? error_string(code) : nullptr;
  return fmt::format("{} (NVML error {})", text ? text : "unknown error", static_cast<int>(code));
}

bool NvmlUnsupported(nvmlReturn_t code) {
  return code == NVML_ERROR_NOT_SUPPORTED || code == NVML_ERROR_FUNCTION_NOT_FOUND ||
         code == NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

}  // namespace chamber::agent
