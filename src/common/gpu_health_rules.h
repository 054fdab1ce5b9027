// The two tables GPU health is classified by (docs/health.md, one row each), shared by the agent
// (which applies them), chamberd's health controller and the demo's simulated faults (which
// describe their incidents with the same words):
//
//   - XidRules(): what each Xid means and how severe it is. Hardware Xids open an incident at
//     once; application Xids (13, 31, 43, 45) only when they repeat on one GPU N times within a
//     window; informational Xids and Xids not in the table never do.
//   - HealthRules(): the checks. Sample checks look at each sample of a GPU (GPU lost,
//     uncorrectable ECC, row remapping, recovery action, PCIe link, NVLink, temperature, thermal
//     and power slowdown); event checks look at Xid events.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/gpu_severity.h"

namespace chamber {

enum class XidClass { kHardware, kApplication, kInformational };
std::string_view XidClassName(XidClass cls);  // "hardware", "application", "informational"

struct XidRule {
  unsigned xid;
  XidClass cls;
  GpuSeverity severity;  // of the incident a hardware Xid opens
  std::string_view name;
  std::string_view meaning;
};
std::span<const XidRule> XidRules();
const XidRule* FindXidRule(unsigned xid);

struct HealthRule {
  std::string_view id;  // the incident cause: "gpu-lost", "nvlink-errors", ...
  GpuSeverity severity;
  bool event;                // triggered by Xid events, not samples
  bool debounced;            // needs debounce_samples consecutive bad samples
  bool boot_grace;           // suppressed during the boot grace period
  std::string_view feature;  // GPU feature the check needs; empty: none
  std::string_view condition;
};
std::span<const HealthRule> HealthRules();
const HealthRule* FindHealthRule(std::string_view id);

// thermal-critical fires this close (degrees C) to a GPU's shutdown temperature.
inline constexpr unsigned kThermalCriticalMarginC = 5;

// The settings a rule's threshold depends on (the agent's flags; the defaults are the agent's).
struct RuleSettings {
  int debounce_samples = 3;
  double nvlink_error_window_s = 10;
  double pcie_gen_min_utilization = 10;
  int app_xid_repeats = 3;
  double app_xid_window_s = 600;
};

// What made rule `id` fire, in words with its numbers: "3 consecutive samples with the
// temperature within 5 C of the shutdown temperature". `xid` is the Xid of an Xid rule (0: none).
std::string RuleThreshold(std::string_view id, const RuleSettings& settings, unsigned xid = 0);

}  // namespace chamber
