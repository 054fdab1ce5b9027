// GPU health classification. Two tables (documented in docs/health.md, one row each):
//
//   - HealthRules(): the checks. Sample checks look at each GpuSample (GPU lost, uncorrectable
//     ECC, row remapping, recovery action, PCIe link, NVLink, thermal and power slowdown); event
//     checks look at Xid events.
//   - XidRules(): what each Xid means and how severe it is. Hardware Xids open an incident at
//     once; application Xids (13, 31, 43, 45) only when they repeat on one GPU N times within a
//     window; informational Xids and Xids not in the table never do.
//
// HealthClassifier keeps, per GPU and rule, the state that turns observations into incidents:
//   - debounce: a debounced sample check must be bad in N consecutive samples;
//   - de-duplication: one open incident per GPU and cause (and Xid) while it persists; repeats
//     only count occurrences;
//   - hysteresis: an incident closes after its check has been good for clear_after seconds, so
//     a flapping signal keeps one incident open instead of opening dozens;
//   - feature gating: a check whose feature the GPU lacks (NVLink on a PCIe card, ECC on a
//     consumer board) is not applicable, which is neither good nor bad;
//   - boot grace: checks marked so do not open incidents until boot_grace seconds after boot.
//
// Pure and deterministic: time comes in as an argument (seconds, any fixed epoch), no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_types.h"
#include "common/gpu_severity.h"

namespace chamber::agent {

using Severity = ::chamber::GpuSeverity;  // common/gpu_severity.h
using ::chamber::SeverityName;

enum class XidClass { kHardware, kApplication, kInformational };
std::string_view XidClassName(XidClass cls);

struct XidRule {
  unsigned xid;
  XidClass cls;
  Severity severity;  // of the incident a hardware Xid opens
  std::string_view name;
  std::string_view meaning;
};
std::span<const XidRule> XidRules();
const XidRule* FindXidRule(unsigned xid);

struct HealthRule {
  std::string_view id;  // the incident cause: "gpu-lost", "nvlink-errors", ...
  Severity severity;
  bool event;                // triggered by Xid events, not samples
  bool debounced;            // needs debounce_samples consecutive bad samples
  bool boot_grace;           // suppressed during the boot grace period
  std::string_view feature;  // GpuInfo feature the check needs; empty: none
  std::string_view condition;
};
std::span<const HealthRule> HealthRules();
const HealthRule* FindHealthRule(std::string_view id);

struct HealthConfig {
  int debounce_samples = 3;
  double clear_after_s = 60;             // good for this long before a sample incident closes
  double boot_grace_s = 300;             // after host boot
  int app_xid_repeats = 3;               // application Xids on one GPU within the window...
  double app_xid_window_s = 600;         // ...that make an incident
  double nvlink_error_window_s = 10;     // NVLink counters grew this recently: bad
  double pcie_gen_min_utilization = 10;  // a lower link generation counts only when busier
  double xid_clear_after_s = 0;          // 0: Xid incidents stay open until the agent restarts
};

struct Incident {
  std::uint64_t id = 0;
  int gpu_index = -1;
  std::string gpu_uuid;
  std::string pci_bus_id;
  std::string cause;  // a HealthRule id
  Severity severity = Severity::kHealthy;
  std::optional<unsigned> xid;
  std::string message;
  double opened_at = 0;
  double last_seen = 0;
  std::optional<double> closed_at;
  int occurrences = 1;
};

struct IncidentChange {
  enum class Kind { kOpened, kClosed };
  Kind kind;
  Incident incident;
};

class HealthClassifier {
 public:
  // `boot_time`: when the host booted, on the same clock as the `now` arguments.
  HealthClassifier(HealthConfig config, double boot_time);

  // The GPUs and their features, from discovery. Call before the first sample.
  void SetInventory(const Inventory& inventory);

  std::vector<IncidentChange> OnSample(const GpuSample& sample, double now);
  std::vector<IncidentChange> OnXid(const XidEvent& event, double now);

  // Open incidents, oldest first; and every incident closed so far, most recent last.
  std::vector<Incident> OpenIncidents() const;
  const std::vector<Incident>& ClosedIncidents() const { return closed_; }

  // The worst severity among a GPU's open incidents.
  Severity GpuSeverity(const std::string& uuid) const;

  const HealthConfig& config() const { return config_; }

 private:
  struct RuleState {
    int consecutive_bad = 0;
    double last_bad = 0;
    std::optional<Incident> open;
  };
  struct GpuState {
    GpuInfo info;
    std::optional<std::uint64_t> nvlink_errors;  // total at the previous sample
    std::optional<double> nvlink_last_increase;
    std::deque<double> app_xids;             // times of recent application Xids
    std::map<std::string, RuleState> rules;  // by rule id (and ":<xid>" for Xid incidents)
  };

  GpuState& StateFor(const std::string& uuid, int index);
  void Open(RuleState& rs, Incident incident, std::vector<IncidentChange>& out);
  void Close(RuleState& rs, double now, std::vector<IncidentChange>& out);

  HealthConfig config_;
  double boot_time_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, GpuState> gpus_;  // by UUID (PCI address when the UUID is unknown)
  std::vector<Incident> closed_;
};

}  // namespace chamber::agent
