// Carries the health controller's desired fencing (health_controller.h) to Node objects:
//
//   metadata  `chamber.io/unhealthy-gpus: "1,5"` (the snapshot builder's format: those GPUs are
//             never given out and the engine preempts their work with reason HardwareFault),
//             `chamber.io/gpu-health-hold: "true"` while an operator hold lasts,
//             `chamber.io/gpu-fault-history` (the faults within the window) and
//             `chamber.io/gpu-uuids` (the agent's GPUs by index: the snapshot's GPU names);
//             the labels the
//             agent computed (`chamber.io/gpu.*`), exactly those of its last report: keys it no
//             longer reports are removed, labels with other keys are never touched;
//   spec      the taint `chamber.io/gpu-unhealthy` (NoSchedule, or NoExecute for fatal faults by
//             config); other taints are kept as they are;
//   status    the condition ChamberGPUHealthy (nodes/status).
//
// Writes only what differs from the node as last seen, as a JSON merge patch carrying the node's
// resourceVersion (metadata and taints) and a JSON patch whose first operation tests the
// resourceVersion (the condition), so a concurrent change (the kubelet, an operator) is never
// overwritten: on a conflict the node is read again and the patch recomputed. Events on the
// node say when a GPU is fenced (with the fault's evidence and the taint), when workloads are
// requeued off it, and when it returns; messages stay within 1024 bytes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "health/health_controller.h"
#include "kube/client.h"
#include "kube/types.h"

namespace chamber::health {

// The merge patch that brings `node`'s annotations, agent labels and taints to `desired`;
// nullopt when they already match.
std::optional<kube::Json> NodePatch(const kube::Json& node, const DesiredNode& desired);
// The JSON patch that brings `node`'s ChamberGPUHealthy condition to `desired`; nullopt when it
// matches. `now` is an RFC 3339 time for the condition's heartbeat and transition times.
std::optional<kube::Json> ConditionPatch(const kube::Json& node, const DesiredNode& desired,
                                         const std::string& now);
// The fault history annotation's text (kFaultHistoryAnnotation): "1:1764500000,1764503600;5:..."
// with whole seconds; "" for none. Parse names the bad entry in its error.
std::string FormatFaultHistory(const FaultHistory& h);
Result<FaultHistory> ParseFaultHistory(std::string_view text);

// The fence a node carries now (for Restore at start): the annotation's GPU indices, the hold and
// the fault history; nullopt when there is none of these or the GPU list does not parse.
struct ObservedFence {
  std::vector<int> gpus;
  bool held = false;
  FaultHistory history;
  std::string history_error;  // the history annotation did not parse: why (history is empty)
};
std::optional<ObservedFence> ObserveFence(const kube::Json& node);

struct HealthWriterStats {
  int64_t node_patches = 0, status_patches = 0, conflicts = 0, errors = 0, events = 0;
};

class HealthWriter {
 public:
  // The node as the informer has it; null when there is no such node.
  using NodeLookup = std::function<std::shared_ptr<const kube::Node>(const std::string&)>;
  HealthWriter(kube::Client* client, NodeLookup lookup, bool write_events = true);

  // Brings every node of `desired` to its state and writes an Event per change. Returns the
  // first error; the other nodes are still written.
  Status Apply(const std::map<std::string, DesiredNode>& desired,
               const std::vector<HealthChange>& changes);

  HealthWriterStats stats() const { return stats_; }

 private:
  Status ApplyNode(const DesiredNode& d);
  kube::Json Current(const std::string& name);

  kube::Client* client_;
  NodeLookup lookup_;
  bool write_events_;
  // Our own last write per node: the informer may not have seen it yet.
  struct Written {
    std::vector<std::string> superseded;  // resourceVersions our writes replaced
    kube::Json after;
  };
  std::map<std::string, Written> written_;
  std::map<std::string, bool> missing_logged_;
  HealthWriterStats stats_;
};

}  // namespace chamber::health
