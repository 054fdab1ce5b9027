// Reads GPUs through NVML: discovery once, a sample per GPU each interval, and Xid events from
// an NVML event set. Every query checks that its function was resolved and treats "not
// supported" as an absent value; GPU_IS_LOST on any query marks the sample lost.
//
// Thread use: Sample() from one thread, WaitXid() from another (NVML is thread-safe).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_types.h"
#include "agent/nvml_library.h"

namespace chamber::agent {

class GpuCollector {
 public:
  // `proc_root`: where the node's processes are listed (/proc, or the host's /proc mounted
  // elsewhere), to find the pod of each GPU process.
  explicit GpuCollector(std::unique_ptr<NvmlLibrary> nvml, std::string proc_root = "/proc");
  ~GpuCollector();
  GpuCollector(const GpuCollector&) = delete;
  GpuCollector& operator=(const GpuCollector&) = delete;

  // Finds the GPUs and what each supports. Call once, before Sample and the event calls.
  Inventory Discover(double now);

  // One sample of GPU `index` (an index from Discover). GPM figures need two samples: the
  // first call per GPU reports the coarse utilization.
  GpuSample Sample(int index, double now);

  // Registers every GPU for Xid critical-error events. False, with the reason logged, when the
  // driver lacks event sets.
  bool RegisterXidEvents();

  // Waits up to timeout_ms for one Xid event.
  std::optional<XidEvent> WaitXid(unsigned timeout_ms, double (*now)());

 private:
  struct Device;
  void SampleProcesses(Device& d, GpuSample& s);
  std::unique_ptr<NvmlLibrary> nvml_;
  std::string proc_root_;
  std::vector<std::unique_ptr<Device>> devices_;
  nvmlEventSet_t event_set_ = nullptr;
};

// The UID of the Kubernetes pod process `pid` runs in, from <proc_root>/<pid>/cgroup (the kubelet's
// cgroupfs and systemd layouts); empty when it is not a pod's or the file cannot be read.
std::string PodUidOfProcess(const std::string& proc_root, unsigned pid);

// Node labels that describe the node's GPUs, computed from the inventory:
// chamber.io/gpu.count, and when there are GPUs chamber.io/gpu.model (the common model, or
// "mixed"), chamber.io/gpu.memory (MiB of the smallest GPU), chamber.io/gpu.driver. Values are
// valid Kubernetes label values (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends).
std::map<std::string, std::string> NodeLabels(const Inventory& inventory);

// Rewrites `value` into a valid Kubernetes label value: other characters become '-', the ends
// are trimmed to alphanumerics, the length is capped at 63.
std::string SanitizeLabelValue(const std::string& value);

// PCI domain, bus and device parsed from "00000000:3B:00.0" (NVML) or "0000:3b:00" (kernel
// log), for matching one to the other. Nullopt when the text is not a PCI address.
struct PciAddress {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  bool operator==(const PciAddress&) const = default;
};
std::optional<PciAddress> ParsePciAddress(const std::string& text);

}  // namespace chamber::agent
