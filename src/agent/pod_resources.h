// Per-pod attribution of GPUs through the kubelet's pod-resources API: which container holds
// which GPU. The kubelet serves PodResourcesLister (gRPC, k8s.io/kubelet/pkg/apis/podresources/v1)
// on a unix socket; its List names, per pod and container, the device ids each device plugin
// handed out. The NVIDIA device plugin names a GPU by its UUID ("GPU-<uuid>"), a time-sliced
// replica of one as "GPU-<uuid>::<n>", a MIG device by its MIG UUID ("MIG-<uuid>"), and with
// deviceIDStrategy=index a GPU by its index ("0") and a MIG device by its parent's index and its
// own MIG device index ("0:1").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/gpu_types.h"
#include "common/status.h"

namespace chamber::agent {

inline constexpr const char* kDefaultPodResourcesSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

// One device the kubelet assigned to one container.
struct DeviceAssignment {
  std::string resource_name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  std::string device_id;      // as the device plugin named it
  std::string namespace_name;
  std::string pod;
  std::string container;
  // Set by Attribute() when the device is a MIG device of an inventory GPU: its MIG UUID.
  std::string mig_uuid = {};

  friend bool operator==(const DeviceAssignment&, const DeviceAssignment&) = default;
};

// Calls List on the PodResourcesLister at `socket_path` with a deadline of `timeout_s` and
// returns every device assignment, in the kubelet's order. Failures (nothing listens there, no
// answer within the deadline, an error from the kubelet) are Unavailable and name the socket and
// the gRPC status.
Result<std::vector<DeviceAssignment>> ListPodDevices(const std::string& socket_path,
                                                     double timeout_s);

enum class AttributionState {
  kDisabled,     // no socket configured
  kUnavailable,  // the last List failed (no kubelet socket, timeout, error)
  kAvailable,    // the last List succeeded
};
const char* AttributionStateName(AttributionState state);

// What the last List said about this node's GPUs.
struct PodAttribution {
  AttributionState state = AttributionState::kDisabled;
  std::string error;      // why unavailable
  double updated_at = 0;  // unix seconds of the last successful List; 0: none yet
  // GPU UUID -> the containers holding that GPU or one of its MIG devices (those carry
  // mig_uuid); several when the GPU is shared (time-slicing, MIG).
  std::map<std::string, std::vector<DeviceAssignment>> by_gpu;
  // NVIDIA devices that name no GPU or MIG device of the inventory: ids of devices NVML did not
  // report, such as a MIG device created after the agent started.
  std::vector<DeviceAssignment> unmatched;
};

// Maps the assignments of NVIDIA resources ("nvidia.com/...") to the inventory's GPUs by UUID,
// replica ("GPU-<uuid>::<n>") or index, and MIG devices to their parent GPU by MIG UUID (or
// replica) or "<gpu index>:<mig index>"; other vendors' resources are dropped.
PodAttribution Attribute(const Inventory& inventory, const std::vector<DeviceAssignment>& devices);

}  // namespace chamber::agent
