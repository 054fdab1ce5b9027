// GPU health classification, by the two tables in common/gpu_health_rules.h (documented in
// docs/health.md, one row each): HealthRules(), the checks (sample checks look at each GpuSample,
// event checks at Xid events), and XidRules(), what each Xid means and how severe it is.
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
// Each incident (common/gpu_incident.h) carries its evidence (common/gpu_evidence.h): the readings
// that made the check bad, or the Xid with what it means and the GPU's related readings, and the
// rule that fired with its threshold.
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
#include "common/gpu_evidence.h"
#include "common/gpu_health_rules.h"
#include "common/gpu_incident.h"
#include "common/gpu_severity.h"

namespace chamber::agent {

using Severity = ::chamber::GpuSeverity;  // common/gpu_severity.h
using ::chamber::SeverityName;

using ::chamber::FindHealthRule;
using ::chamber::FindXidRule;
using ::chamber::HealthRule;
using ::chamber::HealthRules;
using ::chamber::XidClass;
using ::chamber::XidClassName;
using ::chamber::XidRule;
using ::chamber::XidRules;

// Clock event reason bits by the names the report, /metrics and the evidence use.
struct ClockEventReason {
  std::uint64_t bit;
  const char* name;
};
std::span<const ClockEventReason> ClockEventReasons();
std::vector<std::string> ClockEventReasonNames(std::uint64_t mask);

struct HealthConfig {
  int debounce_samples = 3;
  double clear_after_s = 60;             // good for this long before a sample incident closes
  double boot_grace_s = 300;             // after host boot
  int app_xid_repeats = 3;               // application Xids on one GPU within the window...
  double app_xid_window_s = 600;         // ...that make an incident
  double nvlink_error_window_s = 10;     // NVLink counters grew this recently: bad
  double pcie_gen_min_utilization = 10;  // a lower link generation counts only when busier
  double xid_clear_after_s = 0;          // 0: Xid incidents stay open until the agent restarts

  RuleSettings Rules() const;  // the settings rule thresholds name
};

struct IncidentChange {
  enum class Kind { kOpened, kClosed };
  Kind kind;
  GpuIncident incident;
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
  std::vector<GpuIncident> OpenIncidents() const;
  const std::vector<GpuIncident>& ClosedIncidents() const { return closed_; }

  // The worst severity among a GPU's open incidents.
  Severity GpuSeverity(const std::string& uuid) const;

  const HealthConfig& config() const { return config_; }

 private:
  struct RuleState {
    int consecutive_bad = 0;
    double last_bad = 0;
    std::optional<GpuIncident> open;
  };
  struct GpuState {
    GpuInfo info;
    std::optional<std::uint64_t> nvlink_errors;  // total at the previous sample
    std::optional<double> nvlink_last_increase;
    std::deque<double> app_xids;             // times of recent application Xids
    std::optional<GpuSample> last;           // the latest sample, for an Xid's evidence
    std::map<std::string, RuleState> rules;  // by rule id (and ":<xid>" for Xid incidents)
  };

  GpuState& StateFor(const std::string& uuid, int index);
  void Open(RuleState& rs, GpuIncident incident, std::vector<IncidentChange>& out);
  void Close(RuleState& rs, double now, std::vector<IncidentChange>& out);

  HealthConfig config_;
  double boot_time_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, GpuState> gpus_;  // by UUID (PCI address when the UUID is unknown)
  std::vector<GpuIncident> closed_;
};

}  // namespace chamber::agent
