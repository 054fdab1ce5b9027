// Workload traces: what the simulator replays. Readers turn real cluster logs (Helios, Philly,
// Alibaba openb) and Chamber's own CSV/JSONL format into one job list; mapping rules decide each
// job's queue and priority. docs/traces.md describes every format and rule.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace chamber::sim {

using core::Duration;
using core::Time;

// One job of a trace. Times are on the trace's own clock, shifted so the first submit is 0.
struct TraceJob {
  std::string id;
  std::string user;
  std::string group;  // the trace's team notion: Helios/Philly "vc", openb "qos", Chamber "queue"
  std::string queue;  // after mapping
  int32_t priority = 0;
  Time submit{0};
  Duration duration{0};  // run time when it runs uninterrupted from start to end
  int32_t pods = 1;
  int32_t gpus_per_pod = 0;       // whole GPUs per pod
  int32_t gpu_milli_per_pod = 0;  // a fraction of one GPU in thousandths (openb); 0: whole GPUs
  // GPU memory of a share of one GPU, MiB: with gpu_milli_per_pod, or alone (a share of memory
  // alone, docs/sharing.md); 0: none asked.
  int64_t gpu_memory_mib_per_pod = 0;
  // MIG devices of one profile per pod ("1g.10gb"), without GPUs or a fraction; empty: none.
  std::string mig_profile;
  int32_t mig_devices_per_pod = 0;
  int64_t cpu_milli_per_pod = 0;
  int64_t memory_bytes_per_pod = 0;
  std::vector<std::string> gpu_models;  // allowed models; empty: any
  std::string qos;                      // openb's QoS class, kept for mapping

  friend bool operator==(const TraceJob&, const TraceJob&) = default;
};

enum class TraceFormat { kChamberCsv, kChamberJsonl, kHelios, kPhilly, kOpenb };

// "chamber" (CSV or JSONL, told apart by the extension of `path`, else by its first byte),
// "chamber-csv", "chamber-jsonl", "helios", "philly", "openb".
Result<TraceFormat> ParseTraceFormat(std::string_view name, std::string_view path);

// How jobs get their queue and priority. Defaults: queue = the trace's group (vc, or qos for
// openb), else user, else "default"; priority from `priority_by_group` by group or qos, else the
// trace's own priority (Chamber format), else `default_priority`.
struct MappingRules {
  enum class QueueBy { kGroup, kUser, kFixed };
  QueueBy queue_by = QueueBy::kGroup;
  std::string fixed_queue = "default";
  std::map<std::string, std::string> queue_rename;   // applied after queue_by
  std::map<std::string, int32_t> priority_by_group;  // group or qos -> priority
  int32_t default_priority = 0;
};

struct TraceReadOptions {
  bool skip_bad_lines = false;  // count and skip malformed lines instead of failing
  MappingRules rules;
};

// How many skip reasons a Trace keeps.
inline constexpr size_t kMaxSkippedExamples = 5;

struct Trace {
  std::vector<TraceJob> jobs;  // sorted by submit time, then id
  int64_t skipped_lines = 0;   // malformed lines (Philly: jobs) left out under skip_bad_lines
  std::vector<std::string> skipped_examples;  // the first few skip reasons, for the report
};

// Reads a trace file. Errors name the file, line and column (or field):
// "venus.csv:12:34: column gpu_num: \"x\" is not an integer".
Result<Trace> ReadTrace(const std::string& path, TraceFormat format,
                        const TraceReadOptions& options);
// Same, from text already in memory; `source` names it in errors.
Result<Trace> ParseTrace(std::string_view text, std::string_view source, TraceFormat format,
                         const TraceReadOptions& options);

// Rules from YAML: queueBy (group|user|fixed), fixedQueue, queues (rename map), priorities
// (map), defaultPriority.
Result<MappingRules> ParseMappingRules(std::string_view text, std::string_view source);
// Sets job.queue and job.priority. `trace_priority` is the trace's own priority, if it has one.
void ApplyMappingRules(const MappingRules& rules, std::optional<int32_t> trace_priority,
                       TraceJob* job);

// Writes jobs in Chamber's CSV format (header included); ParseTrace reads it back unchanged
// (up to the shift of the first submit to 0).
std::string WriteChamberCsv(const std::vector<TraceJob>& jobs);

// One node of Alibaba's openb node list (openb_node_list_*.csv: sn,cpu_milli,memory_mib,gpu,
// model), for building the cluster the openb pods were recorded on.
struct OpenbNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int32_t gpus = 0;
  std::string model;  // empty for CPU-only nodes (the file says "nan" or nothing)

  friend bool operator==(const OpenbNode&, const OpenbNode&) = default;
};

Result<std::vector<OpenbNode>> ReadOpenbNodes(const std::string& path);
Result<std::vector<OpenbNode>> ParseOpenbNodes(std::string_view text, std::string_view source);

}  // namespace chamber::sim
