// What the agent knows about a node's GPUs: the inventory found at start, the samples taken
// every interval, and Xid events. Plain values; an absent optional means the driver or GPU
// could not report that quantity (missing function, not supported), never zero.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chamber::agent {

// One MIG device of a MIG-enabled GPU: a compute instance inside a GPU instance, as NVML lists
// it under its parent (nvmlDeviceGetMigDeviceHandleByIndex). The NVIDIA device plugin hands it
// out as "MIG-<uuid>" (or "<gpu index>:<index>" with deviceIDStrategy=index).
struct MigInstance {
  int index = 0;     // the MIG device handle index on the parent GPU
  std::string uuid;  // "MIG-..."; empty when NVML did not say
  std::string name;  // as NVML names it: "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
  // The profile, the part of the name after "MIG ": "1g.10gb"; empty when the name has none.
  std::string profile;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<unsigned> gpu_instance_id;      // unique on the parent GPU
  std::optional<unsigned> compute_instance_id;  // unique within its GPU instance
};

// "NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb"; "" when the name holds no "MIG " part.
std::string MigProfileFromName(const std::string& name);

struct GpuInfo {
  int index = 0;
  std::string uuid;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::uint64_t memory_total_bytes = 0;
  std::string pci_bus_id;  // as NVML spells it: "00000000:3B:00.0"
  std::optional<bool> mig_enabled;
  // The MIG devices found at discovery, by handle index; empty unless MIG is enabled.
  std::vector<MigInstance> mig;
  // Links that reported a state; empty on GPUs without NVLink.
  std::vector<int> nvlinks_active;
  int nvlinks_total = 0;
  bool gpm_supported = false;
  // nvmlDeviceGetTemperatureThreshold: the hardware slows the clocks at `slowdown`, and shuts
  // the GPU down at `shutdown`; absent when the driver does not say.
  std::optional<unsigned> temperature_slowdown_c;
  std::optional<unsigned> temperature_shutdown_c;
  // Feature name -> available on this GPU with this driver: "utilization", "gpm", "ecc",
  // "remapped_rows", "pcie", "nvlink", "clock_event_reasons", "recovery_action", ...
  std::map<std::string, bool> features;

  bool HasNvLink() const { return nvlinks_total > 0; }
  bool Has(const std::string& feature) const {
    auto it = features.find(feature);
    return it != features.end() && it->second;
  }
};

struct Inventory {
  bool nvml_loaded = false;
  std::string nvml_error;  // why NVML is unavailable, when it is
  std::string nvml_library;
  double nvml_initialized_at = 0;  // unix seconds
  std::string driver_version;
  std::string cuda_driver_version;  // "12.4"
  std::vector<GpuInfo> gpus;
  std::vector<std::string> missing_functions;
  bool xid_events = false;  // an NVML event set delivers Xid events
};

struct NvLinkSample {
  int link = 0;
  bool active = false;
  std::uint64_t replay_errors = 0;
  std::uint64_t recovery_errors = 0;
  std::uint64_t crc_flit_errors = 0;
  std::uint64_t crc_data_errors = 0;

  std::uint64_t Total() const {
    return replay_errors + recovery_errors + crc_flit_errors + crc_data_errors;
  }
};

struct RemapSample {
  unsigned corrected_rows = 0;
  unsigned uncorrected_rows = 0;
  bool pending = false;
  bool failure = false;
};

// Where the utilization figures come from.
enum class UtilizationSource { kNone, kGpm, kCoarse };
const char* UtilizationSourceName(UtilizationSource source);

// A process holding a GPU context, as NVML lists it (compute processes only).
struct GpuProcess {
  unsigned pid = 0;                                // in the node's PID namespace
  std::optional<std::uint64_t> used_memory_bytes;  // absent: the driver cannot tell
  // nvmlDeviceGetProcessUtilization over the driver's last sampling period; absent when the
  // driver keeps no per-process samples or the process ran no kernel in that period.
  std::optional<unsigned> sm_percent;
  std::optional<unsigned> memory_percent;
  // On a MIG device: its GPU and compute instance ids (NVML leaves them 0xFFFFFFFF otherwise).
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  // The Kubernetes pod the process runs in, from its cgroup (PodUidOfProcess); empty when the
  // process is not a pod's or its cgroup could not be read.
  std::string pod_uid;
};

struct GpuSample {
  int index = 0;
  std::string uuid;
  double time = 0;    // unix seconds
  bool lost = false;  // NVML answered GPU_IS_LOST: the GPU fell off the bus
  UtilizationSource utilization_source = UtilizationSource::kNone;
  std::optional<double> gpu_utilization;     // percent of time a kernel ran (coarse)
  std::optional<double> memory_utilization;  // percent of time memory was read or written
  std::optional<double> sm_active;           // GPM: percent of SMs busy
  std::optional<double> tensor_active;       // GPM: percent of time tensor cores were busy
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<double> power_watts;
  std::optional<unsigned> temperature_c;
  std::optional<std::uint64_t> clock_event_reasons;
  std::optional<std::uint64_t> ecc_volatile_corrected;
  std::optional<std::uint64_t> ecc_volatile_uncorrected;
  std::optional<std::uint64_t> ecc_aggregate_corrected;
  std::optional<std::uint64_t> ecc_aggregate_uncorrected;
  std::optional<RemapSample> remap;
  std::optional<unsigned> pcie_replays;
  std::optional<unsigned> pcie_width_current;
  std::optional<unsigned> pcie_width_max;
  std::optional<unsigned> pcie_gen_current;
  std::optional<unsigned> pcie_gen_max;
  std::vector<NvLinkSample> nvlinks;
  std::optional<unsigned> recovery_action;  // nvmlDeviceGpuRecoveryAction_t
  // The compute processes on the GPU (and its MIG devices); absent when NVML cannot list them.
  std::optional<std::vector<GpuProcess>> processes;
};

struct XidEvent {
  int gpu_index = -1;  // -1: no GPU of this node matches
  std::string gpu_uuid;
  std::string pci_bus_id;
  unsigned xid = 0;
  double time = 0;      // unix seconds when the agent saw it
  std::string source;   // "nvml-event" or "kernel-log"
  std::string message;  // the log text after the Xid number, when known
};

}  // namespace chamber::agent
