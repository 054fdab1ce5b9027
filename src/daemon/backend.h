// Where chamberd's cluster comes from and where its decisions go. A backend turns the outside
// world into the engine's snapshot and carries the engine's decisions back out:
//
//   Kubernetes (KubeBackend, src/backend/kube): informers on Nodes, Pods, Jobs and Queues keep the
//   snapshot current; Refresh() rebuilds it from their caches; Apply() binds pods, suspends and
//   resumes Jobs and evicts victims; GPU samples come from the agents.
//   Simulated (SimulatedBackend, src/backend/sim): the steppable simulator in accelerated time;
//   that is `chamber demo`.
//
// The daemon calls the backend from one thread at a time (it holds its own lock around calls).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/gpu_evidence.h"
#include "common/status.h"
#include "core/decision.h"
#include "core/model.h"
#include "fleet/fleet_model.h"

namespace chamber::daemon {

struct GpuSample {
  double utilization = 0;  // 0..1
  int64_t memory_used_bytes = 0;
  // In MIG mode: its MIG devices, and the pod holding each (from the kubelet's pod-resources).
  std::vector<fleet::MigDeviceInput> mig_devices;
};

// Why a GPU is unhealthy, as the backend knows it: on a cluster the health controller's incident
// that fenced it (from the agent's report), in the demo the simulated fault.
struct GpuFault {
  std::string cause;      // the health rule that fired: "xid-hardware", "thermal-critical", ...
  std::string severity;   // "unhealthy" or "fatal"
  std::string message;    // one line: "Xid 79 (GPU has fallen off the bus): ..."
  EvidenceList evidence;  // readings, the rule, and what was done (the last item, an `action`)
};

// A counter or gauge of the backend's own, served on /metrics as it is: what the backend did
// to the cluster (binds, rollbacks, reservation pods) rather than what the fleet holds. The
// samples of one family are consecutive, its first sample giving the family's help and type.
struct BackendMetric {
  std::string name;  // a Prometheus metric name: "chamber_binds_total"
  std::string help;
  bool counter = false;  // else a gauge
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

// What the fleet model needs beyond the snapshot, as of the last Refresh() and Apply().
struct Observation {
  // Unix milliseconds for snapshot time 0: snapshot times plus this are Unix times (0 for a
  // backend whose snapshot runs on the wall clock).
  int64_t clock_offset_ms = 0;
  const core::Snapshot* snapshot = nullptr;  // valid until the next Refresh()
  std::vector<fleet::PoolInput> pools;
  std::vector<int32_t> node_pool;               // per snapshot node: index into pools, or -1
  std::vector<std::vector<GpuSample>> samples;  // per snapshot node, per GPU
  // Per snapshot node (or none), its GPUs in MIG mode, which the snapshot does not list (the
  // device plugin's mixed strategy advertises their MIG devices, not them): uuid, model, memory,
  // the latest sample and the MIG devices as the node's agent reports them. Where no agent
  // lists them, the backend names as many as the node has ("<node>/mig-gpu<k>") with no devices.
  std::vector<std::vector<fleet::GpuInput>> mig_gpus;
  // Per snapshot workload, the "namespace/name" of each of its pods, when the backend has pods
  // (empty for the simulated backend): `chamber why <pod>` finds a workload through these. A
  // bare pod's workload lists none: it is marked in `bare_pods` instead.
  std::vector<std::vector<std::string>> workload_pods;
  // Per snapshot workload, whether it is one pod whose "namespace/name" is the workload's name
  // (most of a large cluster's workloads: listing the pod again would copy every name).
  std::vector<bool> bare_pods;
  // Per snapshot workload, the lost work of its earlier preemptions as the cluster records it
  // (a Job's annotations; empty for the simulated backend): a new leader starts from these.
  struct StoredLosses {
    int64_t preemptions = 0;
    double gpu_hours_lost = 0;
  };
  std::vector<StoredLosses> stored_losses;
  // The unhealthy GPUs whose fault the backend knows, by GPU UUID (as the snapshot names it).
  std::unordered_map<std::string, GpuFault> gpu_faults;
  // What the node agents measure of running shares of GPUs, by pod "namespace/name": the GPU
  // memory its processes hold and, while that is more than the share asked for, since when
  // (Unix ms; 0: not over). Only pods whose processes an agent reports now are listed.
  struct ShareMemory {
    int64_t used_bytes = 0;
    int64_t over_since_ms = 0;
  };
  std::unordered_map<std::string, ShareMemory> share_memory;
  // The backend's own counters and gauges (none for the simulated backend).
  std::vector<BackendMetric> metrics;
};

class ClusterBackend {
 public:
  virtual ~ClusterBackend() = default;

  // "demo" or "cluster", as GET /api/v1/fleet reports it.
  virtual std::string_view mode() const = 0;
  // True when the backend's clock is simulated (and may run faster than the wall clock).
  virtual bool simulated_time() const = 0;

  // Brings the snapshot up to date and returns it for a scheduling cycle. The pointer stays
  // valid until the next Refresh().
  virtual Result<const core::Snapshot*> Refresh() = 0;
  // Carries out the decisions of a cycle over the snapshot Refresh() returned.
  virtual Status Apply(const core::CycleResult& result) = 0;
  // The state after Apply(), for the fleet model.
  virtual Observation Observe() = 0;

  // Cordons (false) or uncordons (true) a node. NotFound for an unknown node.
  virtual Status SetSchedulable(std::string_view node, bool schedulable) = 0;
};

}  // namespace chamber::daemon
