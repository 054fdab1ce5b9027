// The evidence a GPU health incident carries: what was measured, which rule fired and what was
// done about it (docs/health.md, "Evidence"). The agent records the measurements and the rule when
// it opens an incident; chamberd's health controller adds the action (fence, taint, workloads
// requeued); the API, `chamber health`, the dashboard and the Events on the Node show them. The
// demo's simulated faults describe themselves with the same types.
//
// Each item is one typed value; in JSON an object whose `type` says which:
//   {"type": "xid", "xid": 79, "name": "GPU has fallen off the bus", ...}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace chamber {

// An Xid event and what the Xid table says about it.
struct XidEvidence {
  unsigned xid = 0;
  std::string name;          // from the Xid table; empty for an Xid it does not list
  std::string meaning;       // from the Xid table
  std::string xid_class;     // "hardware", "application", "informational" or "unknown"
  std::string source;        // "nvml-event", "kernel-log" or "simulated"
  std::optional<int> count;  // repeated application Xids: how many within the window
  bool operator==(const XidEvidence&) const = default;
};

// ECC error counts: volatile since the driver loaded, aggregate over the GPU's life. NVML's
// "corrected" errors are single-bit, its "uncorrected" errors double-bit. Absent: not reported.
struct EccEvidence {
  std::optional<std::uint64_t> volatile_single_bit;
  std::optional<std::uint64_t> volatile_double_bit;
  std::optional<std::uint64_t> aggregate_single_bit;
  std::optional<std::uint64_t> aggregate_double_bit;
  bool operator==(const EccEvidence&) const = default;
};

// Row remapping (Ampere and newer): rows remapped for single- and double-bit errors, a remap
// waiting for a GPU reset, a remap that failed.
struct RowRemapEvidence {
  unsigned single_bit_rows = 0;
  unsigned double_bit_rows = 0;
  bool pending = false;
  bool failed = false;
  bool operator==(const RowRemapEvidence&) const = default;
};

struct NvLinkCounters {
  int link = 0;
  bool active = true;
  std::uint64_t replay_errors = 0;
  std::uint64_t recovery_errors = 0;
  std::uint64_t crc_flit_errors = 0;
  std::uint64_t crc_data_errors = 0;
  bool operator==(const NvLinkCounters&) const = default;
};

// The NVLink links with errors or down (not every link: a GPU has up to 18).
struct NvLinkEvidence {
  std::vector<NvLinkCounters> links;
  std::vector<int> links_down;
  bool operator==(const NvLinkEvidence&) const = default;
};

struct PcieEvidence {
  std::optional<unsigned> replays;
  std::optional<unsigned> width_current;
  std::optional<unsigned> width_max;
  std::optional<unsigned> gen_current;
  std::optional<unsigned> gen_max;
  bool operator==(const PcieEvidence&) const = default;
};

// Temperature against the GPU's thresholds (nvmlDeviceGetTemperatureThreshold), and the clock
// event reasons that held clocks down ("hw_thermal_slowdown", ...).
struct ThermalEvidence {
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> slowdown_c;
  std::optional<unsigned> shutdown_c;
  std::vector<std::string> clock_event_reasons;
  bool operator==(const ThermalEvidence&) const = default;
};

struct PowerEvidence {
  std::optional<double> power_watts;
  std::vector<std::string> clock_event_reasons;
  bool operator==(const PowerEvidence&) const = default;
};

// The driver's recovery action (nvmlDeviceGpuRecoveryAction_t).
struct RecoveryActionEvidence {
  unsigned action = 0;
  std::string name;  // "GPU reset", "node reboot", ...
  bool operator==(const RecoveryActionEvidence&) const = default;
};

// The health rule that fired (common/gpu_health_rules.h) and its threshold.
struct RuleEvidence {
  std::string rule;       // "xid-hardware", "ecc-uncorrectable", ...
  std::string severity;   // "degraded", "unhealthy", "fatal"
  std::string condition;  // the rule, in words
  std::string threshold;  // what made it fire, with its numbers
  bool operator==(const RuleEvidence&) const = default;
};

// What was done: the GPU fenced (no new work), the node's taint, the workloads requeued off the
// GPU. Not fenced: degraded (reported only), or the circuit breaker held the fence back.
struct ActionEvidence {
  bool gpu_fenced = false;
  std::string taint;          // "NoSchedule", "NoExecute"; empty: none
  bool breaker_held = false;  // faulty, but the fleet circuit breaker kept it unfenced
  std::vector<std::string> workloads_requeued;  // "namespace/name"; at most the first 20
  std::int64_t workloads_requeued_count = 0;    // all of them
  bool operator==(const ActionEvidence&) const = default;
};

using Evidence = std::variant<XidEvidence, EccEvidence, RowRemapEvidence, NvLinkEvidence,
                              PcieEvidence, ThermalEvidence, PowerEvidence, RecoveryActionEvidence,
                              RuleEvidence, ActionEvidence>;
using EvidenceList = std::vector<Evidence>;

// How many requeued workloads an ActionEvidence names (the count holds them all).
inline constexpr size_t kMaxNamedWorkloads = 20;

// "xid", "ecc", "row_remap", "nvlink", "pcie", "thermal", "power", "recovery_action", "rule",
// "action".
std::string_view EvidenceType(const Evidence& e);

nlohmann::json EvidenceJson(const Evidence& e);
nlohmann::json EvidenceListJson(const EvidenceList& list);
// Reads an `evidence` array. A known type with a mistyped field fails naming its path
// ("report.incidents[0].evidence[1].xid: expected an unsigned integer"); items of a type this
// version does not know are skipped (a newer agent may send more).
Result<EvidenceList> ParseEvidenceList(const nlohmann::json& j, const std::string& path);

// One line, for people: "Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable
// over PCIe", "ECC double-bit 4 volatile, 4 aggregate; single-bit 12 volatile, 17 aggregate".
std::string EvidenceText(const Evidence& e);
// The items' lines joined with "; ", cut at `max_bytes` (with "...") for Event messages.
std::string EvidenceSummary(const EvidenceList& list, size_t max_bytes = 1024);
// `text` cut to at most `max_bytes`, ending in "..." when cut, never inside a UTF-8 character.
std::string LimitText(std::string text, size_t max_bytes);

// The first item of type T, or null.
template <typename T>
const T* FindEvidence(const EvidenceList& list) {
  for (const Evidence& e : list)
    if (const T* v = std::get_if<T>(&e)) return v;
  return nullptr;
}

}  // namespace chamber
