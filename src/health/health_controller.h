// chamberd's health controller: turns the agents' reports into the fencing each node should
// carry (docs/health.md, "Health controller"). Pure and single-threaded: reports and `now` come
// in as arguments, the desired state comes out; HealthWriter (health_writer.h) carries it to the
// Node objects and HealthService (health_service.h) does the locking and the HTTP side.
//
// Per GPU (node, index) the controller keeps a fence:
//   - fault: the GPU's agent reports an open incident of severity unhealthy or fatal. The GPU is
//     fenced at once (it joins the node's `chamber.io/unhealthy-gpus` annotation), the node gets
//     the taint `chamber.io/gpu-unhealthy` (NoSchedule; NoExecute when a fatal fault is open and
//     `fatal_no_execute` is set) and the condition ChamberGPUHealthy=False.
//   - probation: once the GPU reads clean (no such incident, not lost, recovery action none or
//     unknown) it stays fenced for the probation period; a fault during probation restarts it.
//   - backoff: the probation doubles with every earlier fault of the GPU within `fault_window`,
//     up to `max_probation`.
//   - hold: a node with `hold_after_faults` faults (all GPUs together) within `fault_window`
//     keeps every fence until an operator clears it (Clear()).
//   - circuit breaker: fencing a node that has nothing fenced yet counts against the breaker.
//     When the nodes newly fenced within `breaker_window` would reach `breaker_min_nodes` and
//     exceed `breaker_fraction` of the nodes that report, the node is not fenced; the breaker
//     opens (an alert in the status, the API, the log and /metrics) until the window has passed.
//   - stale: a node whose agent has not reported for `stale_after` is reported stale. Its fences
//     stay as they are and its probation does not advance: no data is not good news.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/gpu_evidence.h"
#include "common/gpu_incident.h"
#include "common/gpu_severity.h"
#include "common/status.h"

namespace chamber {
class ConfigFile;  // common/config_file.h
}  // namespace chamber

namespace chamber::health {

inline constexpr char kTaintKey[] = "chamber.io/gpu-unhealthy";
inline constexpr char kConditionType[] = "ChamberGPUHealthy";
inline constexpr char kHoldAnnotation[] = "chamber.io/gpu-health-hold";
// Each GPU's faults within the fault window, so that backoff and hold survive a change of
// leader: "1:1764500000,1764503600;5:1764510000" (GPU index, then unix seconds).
inline constexpr char kFaultHistoryAnnotation[] = "chamber.io/gpu-fault-history";

// A node's fault history: GPU index -> times it turned faulty (unix seconds, ascending).
using FaultHistory = std::map<int, std::vector<double>>;
// Node labels the agent owns (chamber.io/gpu.count, .model, .memory, .driver): chamberd writes
// the ones in a node's report to that Node and removes those the report no longer has.
inline constexpr char kAgentLabelPrefix[] = "chamber.io/gpu.";

// The agent's severities, by the names its report uses (common/gpu_severity.h).
using Severity = ::chamber::GpuSeverity;
using ::chamber::SeverityName;

enum class TaintEffect { kNone, kNoSchedule, kNoExecute };
std::string_view TaintEffectName(TaintEffect e);  // "", "NoSchedule", "NoExecute"

// --- the agent's report (docs/agent.md, "Report (push payload)"): the fields the controller uses

// A MIG device of a GPU, as the agent lists it in its inventory (docs/agent.md, "MIG").
struct ReportMigDevice {
  std::string uuid;     // "MIG-..."
  std::string profile;  // "3g.40gb"; empty when NVML's name has none
  std::optional<int64_t> memory_total_bytes;
};

struct ReportGpu {
  int index = 0;
  std::string uuid;
  std::vector<ReportMigDevice> mig_devices;  // empty unless the GPU is in MIG mode
};

// A container the kubelet's device plugin gave the GPU (or one of its MIG devices) to, as the
// agent read it from pod-resources (docs/agent.md, "Pods on GPUs").
struct ReportHolder {
  std::string namespace_name, pod;
  std::string resource;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  bool mig = false;      // a MIG device of the GPU, not the GPU itself
  std::string mig_uuid;  // that MIG device's UUID
};
inline constexpr char kWholeGpuResource[] = "nvidia.com/gpu";

// A compute process on the GPU, as the agent read it from NVML and its cgroup (docs/agent.md,
// "Processes on GPUs"): only those the agent could attribute to a pod.
struct ReportProcess {
  std::string pod_uid;
  std::optional<int64_t> used_memory_bytes;  // null: the driver cannot tell
};

struct ReportSample {
  int index = 0;
  std::string uuid;
  std::vector<ReportHolder> pods;  // empty when none, or when attribution is not available
  // Empty when the agent sends none (older agents, older drivers) or none is a pod's.
  std::vector<ReportProcess> processes;
  bool lost = false;
  std::optional<int64_t> recovery_action;  // null: the driver does not say
  // How busy the GPU is, 0-1: SM activity where the agent measures it (utilization.source
  // "gpm"), else the coarse utilization rate; null when the GPU reports neither.
  std::optional<double> utilization;
  std::optional<int64_t> memory_used_bytes;
};

struct AgentReport {
  std::string node;
  double time = 0;
  std::vector<ReportGpu> gpus;
  std::vector<ReportSample> samples;
  std::vector<GpuIncident> incidents;  // open ones; no pci_bus_id, no closed_at
  // pod_resources.state is "available": the samples' `pods` say who holds each GPU (agents that
  // send no pod_resources, or could not read it, say nothing about that).
  bool pod_resources_available = false;
  // The node labels the agent computed, only the keys with kAgentLabelPrefix (others are
  // dropped); nullopt when the report has no `labels` (the node's labels are left alone).
  std::optional<std::map<std::string, std::string>> labels;
};

// Strict: a missing or mistyped field fails with its path, e.g.
// "report.incidents[2].severity: expected a string". An agent label that is not a valid
// Kubernetes label fails too, naming its key.
Result<AgentReport> ParseAgentReport(const nlohmann::json& j);
Result<AgentReport> ParseAgentReportText(std::string_view text);

// --- configuration (the `health:` section of the engine configuration file)

struct HealthControllerConfig {
  bool enabled = true;
  double probation_s = 300;       // healthy this long before a fence lifts
  double max_probation_s = 3600;  // the backoff's cap
  double fault_window_s = 86400;  // faults counted for backoff and hold
  int hold_after_faults = 3;      // faults of one node within the window that hold it
  bool fatal_no_execute = false;  // fatal faults taint NoExecute instead of NoSchedule
  double stale_after_s = 60;      // no report for this long: the agent is stale
  double breaker_fraction = 0.1;  // share of reporting nodes newly fenced within the window...
  int breaker_min_nodes = 3;      // ...and at least this many, open the circuit breaker
  double breaker_window_s = 300;
};

// Reads the configuration file's `health:` section (other sections are left to their readers);
// `found`, when given, says whether the file has one.
Result<HealthControllerConfig> ReadHealthConfig(const ConfigFile& file, bool* found = nullptr);
// The same from a configuration file's text; `source` names it in errors.
Result<HealthControllerConfig> ParseHealthConfig(std::string_view text, std::string_view source,
                                                 bool* found = nullptr);
std::string HealthConfigToYaml(const HealthControllerConfig& c);

// --- output

struct NodeCondition {
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  bool operator==(const NodeCondition&) const = default;
};

struct DesiredNode {
  std::string node;
  std::vector<int> unhealthy_gpus;  // ascending
  TaintEffect taint = TaintEffect::kNone;
  NodeCondition condition;
  bool held = false;
  // The agent-owned labels (kAgentLabelPrefix) the node should carry, exactly; nullopt: leave
  // them as they are (the agent's reports carry none).
  std::optional<std::map<std::string, std::string>> labels;
  FaultHistory fault_history;  // within the fault window; empty when there is none
  // The GPUs' UUIDs by index, as the agent's inventory lists them ("" for an index it does not
  // list); empty: leave the node's `chamber.io/gpu-uuids` as it is (no GPUs reported).
  std::vector<std::string> gpu_uuids;
  bool operator==(const DesiredNode&) const = default;
};

// One fault as the controller saw it: an agent incident of severity unhealthy or fatal, or a
// degraded one (reported only). Repeats of the same agent incident in later reports update it.
struct HealthIncident {
  // The agent's incident, with chamberd's own id and times on chamberd's clock.
  GpuIncident incident;
  std::string node;
  bool fenced = false;  // false: degraded only, or the circuit breaker held the fence back
  // What was done, as it happened: the node's taint when the GPU was fenced, whether the
  // circuit breaker held the fence back, and the workloads requeued off the GPU.
  std::string taint;
  bool breaker_held = false;
  std::vector<std::string> requeued;  // the first kMaxNamedWorkloads
  int64_t requeued_count = 0;
};

// The incident's evidence as the API shows it: the agent's, then what was done (an `action`).
EvidenceList IncidentEvidence(const HealthIncident& i);

// A workload the scheduler requeued because it held a fenced GPU (reason HardwareFault).
struct RequeuedWorkload {
  std::string node;
  int gpu_index = 0;
  std::string workload;  // "namespace/name"
};

// A fenced GPU's fault as chamberd's other views show it: its worst open incident.
struct FenceCause {
  std::string node;
  int gpu_index = 0;
  std::string gpu_uuid;
  std::string cause;  // the rule: "xid-hardware", ...
  Severity severity = Severity::kHealthy;
  std::string message;    // the agent's line: "Xid 79 (GPU has fallen off the bus): ..."
  EvidenceList evidence;  // IncidentEvidence()
};

struct GpuFence {
  int index = 0;
  std::string uuid;
  bool faulty = false;                  // an unhealthy or fatal incident is open
  Severity worst = Severity::kHealthy;  // of the open incidents
  double fenced_at = 0;
  std::optional<double> clean_since;  // when it last turned clean
  double probation_s = 0;             // this fence's probation
  int faults_in_window = 0;
};

struct NodeHealth {
  std::string node;
  double last_report = 0;
  bool stale = false;
  bool held = false;
  bool suppressed = false;  // faulty, but the circuit breaker kept it unfenced
  std::vector<GpuFence> fenced;
};

struct BreakerState {
  bool open = false;
  double opened_at = 0;
  int fenced_in_window = 0;
  int reporting_nodes = 0;
  std::vector<std::string> suppressed_nodes;
  std::string message;
};

// What happened in one step, for logs, Events and metrics.
struct HealthChange {
  enum class Kind {
    kFenced,
    kUnfenced,
    kHeld,
    kCleared,
    kBreakerOpened,
    kBreakerClosed,
    kStale,
    kRequeued,  // workloads requeued off a fenced GPU
  };
  Kind kind;
  std::string node;
  std::string message;
};
std::string_view ChangeKindName(HealthChange::Kind k);

class HealthController {
 public:
  explicit HealthController(HealthControllerConfig config);

  // Takes one report, received at `now` (chamberd's clock, unix seconds).
  void Ingest(const AgentReport& report, double now);

  // A fence found on a Node at start (the annotations written by an earlier leader): the GPUs
  // stay fenced and their probation starts now; `held` restores an operator hold; `history`
  // restores the faults within the window, so that the backoff of the restored fences and of
  // later faults, and the count towards a hold, go on where the earlier leader left them.
  void Restore(const std::string& node, const std::vector<int>& gpus, bool held,
               const FaultHistory& history, double now);

  // Lifts an operator hold and every fence of the node whose GPU reads clean now; forgets its
  // fault history. NotFound for a node the controller does not know.
  Status Clear(const std::string& node, double now);

  // Workloads the scheduler requeued off fenced GPUs: added to the open incidents that fenced
  // them (their `action`), and one change per GPU (an Event on the node).
  void RecordRequeued(const std::vector<RequeuedWorkload>& requeued);

  // Each fenced GPU with an open fencing incident: that incident (the worst, the oldest of
  // equals). GPUs fenced without one (restored from an earlier leader) are not listed.
  std::vector<FenceCause> FenceCauses() const;

  // Advances time: probation ends, staleness, the breaker's window. Returns what changed since
  // the previous call (including changes Ingest and Clear made).
  std::vector<HealthChange> Evaluate(double now);

  // The fencing every node an agent has reported should carry, by node name. A node known only
  // from Restore is left as it is until its agent reports.
  std::map<std::string, DesiredNode> Desired() const;

  std::vector<NodeHealth> Nodes() const;
  const std::deque<HealthIncident>& Incidents() const { return incidents_; }  // newest last
  BreakerState Breaker() const;
  const HealthControllerConfig& config() const { return config_; }
  bool Knows(const std::string& node) const { return nodes_.contains(node); }

  // The controller's view as JSON (GET /api/v1/health, "controller").
  nlohmann::json ToJson(double now) const;

 private:
  struct Gpu {
    std::string uuid;
    bool faulty = false;
    Severity worst = Severity::kHealthy;
    bool fenced = false;
    double fenced_at = 0;
    std::optional<double> clean_since;
    double probation_s = 0;
    std::deque<double> faults;  // times this GPU turned faulty, within the window
  };
  struct Node {
    bool reported = false;  // false: known only from Restore
    double last_report = 0;
    bool stale = false;
    bool held = false;
    bool suppressed = false;
    std::optional<std::map<std::string, std::string>> labels;  // from the last report
    std::vector<std::string> uuids;  // the last report's inventory, by index
    std::map<int, Gpu> gpus;
    std::deque<double> faults;  // every GPU's, within the window
    // Incidents open in the last report: key -> index into incidents_ by id.
    std::map<std::string, uint64_t> open;
  };

  bool AnyFenced(const Node& n) const;
  // The taint the node carries for its fences (kNone when nothing is fenced).
  TaintEffect NodeTaint(const Node& n) const;
  // The worst open fencing incident of GPU `index` of `n` (the oldest of equals); null if none.
  const HealthIncident* CauseOf(const Node& n, int index) const;
  // Fences `g` of `n` for `cause` (may be null); false when the circuit breaker forbids it.
  bool Fence(const std::string& name, Node& n, int index, Gpu& g, double now,
             const HealthIncident* cause);
  void Unfence(const std::string& name, Node& n, int index, Gpu& g);
  void Trim(std::deque<double>& times, double now, double window) const;
  // The probation after a GPU's latest fault: doubled for every earlier one within the window.
  double BackoffProbation(const Gpu& g) const;
  HealthIncident* FindIncident(uint64_t id);
  const HealthIncident* FindIncident(uint64_t id) const;
  bool BreakerBlocks(double now);

  HealthControllerConfig config_;
  std::map<std::string, Node> nodes_;
  std::deque<HealthIncident> incidents_;
  uint64_t next_incident_ = 1;
  std::deque<std::pair<double, std::string>> newly_fenced_;  // (time, node), within the window
  bool breaker_open_ = false;
  double breaker_opened_at_ = 0;
  std::vector<HealthChange> changes_;
};

}  // namespace chamber::health
