#include "common/gpu_health_rules.h"

#include <array>

#include <fmt/format.h>

namespace chamber {

std::string_view XidClassName(XidClass cls) {
  switch (cls) {
    case XidClass::kHardware:
      return "hardware";
    case XidClass::kApplication:
      return "application";
    case XidClass::kInformational:
      return "informational";
  }
  return "unknown";
}

namespace {

using enum GpuSeverity;
using enum XidClass;

// Meanings in our words, after NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).
constexpr std::array kXidRules = {
    XidRule{13, kApplication, kHealthy, "Graphics engine exception",
            "an application fault (illegal instruction or address, out-of-range access)"},
    XidRule{31, kApplication, kHealthy, "GPU memory page fault",
            "an application accessed an unmapped or invalid address"},
    XidRule{43, kApplication, kHealthy, "GPU stopped processing",
            "the driver stopped a channel after an application fault"},
    XidRule{45, kApplication, kHealthy, "Preemptive cleanup",
            "channels torn down after an earlier error or a killed application"},
    XidRule{48, kHardware, kFatal, "Double-bit ECC error",
            "uncorrectable memory error; the GPU needs a reset or the node a reboot"},
    XidRule{61, kHardware, kUnhealthy, "Internal micro-controller breakpoint or warning",
            "a GPU micro-controller stopped at a breakpoint or warned; its engines may hang; "
            "the GPU needs a reset"},
    XidRule{62, kHardware, kUnhealthy, "Internal micro-controller halt",
            "GPU firmware halted; the GPU needs a reset"},
    XidRule{63, kInformational, kHealthy, "Row remapping or page retirement recorded",
            "a bad memory row was marked; the remap activates at the next GPU reset"},
    XidRule{64, kHardware, kUnhealthy, "Row remapping or page retirement failure",
            "a bad memory row could not be remapped"},
    XidRule{74, kHardware, kUnhealthy, "NVLink error",
            "a fault on an NVLink connection; a GPU reset or node reboot clears it"},
    XidRule{79, kHardware, kFatal, "GPU has fallen off the bus",
            "the GPU is no longer reachable over PCIe"},
    XidRule{92, kHardware, kDegraded, "High single-bit ECC error rate",
            "corrected memory errors at an excessive rate"},
    XidRule{94, kHardware, kUnhealthy, "Contained ECC error",
            "uncorrectable memory error contained to one application; reset the GPU soon"},
    XidRule{95, kHardware, kFatal, "Uncontained ECC error",
            "uncorrectable memory error affecting every application; the GPU needs a reset"},
    XidRule{119, kHardware, kFatal, "GSP RPC timeout",
            "the GPU system processor stopped answering; the GPU needs a reset"},
    XidRule{120, kHardware, kUnhealthy, "GSP error",
            "the GPU system processor reported an error; the GPU needs a reset"},
    XidRule{140, kHardware, kFatal, "Unrecovered ECC error",
            "uncorrectable memory error the driver could not recover"},
    XidRule{154, kInformational, kHealthy, "GPU recovery action changed",
            "the driver's recovery action changed; the recovery-action checks act on it"},
    XidRule{155, kHardware, kUnhealthy, "NVLink software-defined error",
            "an NVLink link went down; the GPU needs a reset"},
};

constexpr std::array kHealthRules = {
    HealthRule{"gpu-lost", kFatal, false, false, false, "",
               "an NVML query answers GPU_IS_LOST: the GPU fell off the bus"},
    HealthRule{"ecc-uncorrectable", kUnhealthy, false, false, false, "ecc",
               "volatile uncorrectable ECC count above zero"},
    HealthRule{"row-remap-failure", kUnhealthy, false, false, false, "remapped_rows",
               "row remapping failed"},
    HealthRule{"row-remap-pending", kUnhealthy, false, false, false, "remapped_rows",
               "a row remap waits for a GPU reset"},
    HealthRule{"recovery-action-reset", kUnhealthy, false, false, false, "recovery_action",
               "the driver's recovery action is GPU reset, drain P2P or drain and reset"},
    HealthRule{"recovery-action-reboot", kFatal, false, false, false, "recovery_action",
               "the driver's recovery action is node reboot"},
    HealthRule{"pcie-link-width", kDegraded, false, true, true, "pcie_link",
               "current PCIe link width below the maximum"},
    HealthRule{"pcie-link-generation", kDegraded, false, true, true, "pcie_link",
               "current PCIe generation below the maximum while the GPU is busy"},
    HealthRule{"nvlink-errors", kUnhealthy, false, true, true, "nvlink",
               "NVLink error counters grew within the error window"},
    HealthRule{"nvlink-down", kUnhealthy, false, true, true, "nvlink",
               "an NVLink link active at discovery is now inactive"},
    HealthRule{"thermal-critical", kUnhealthy, false, true, false, "temperature_thresholds",
               "GPU temperature within 5 C of its shutdown threshold: cooling failed and the "
               "GPU is about to shut down"},
    HealthRule{"thermal-slowdown", kDegraded, false, true, true, "clock_event_reasons",
               "clocks held down by hardware or software thermal slowdown"},
    HealthRule{"power-slowdown", kDegraded, false, true, true, "clock_event_reasons",
               "clocks held down by hardware slowdown or power brake"},
    HealthRule{"xid-hardware", kFatal, true, false, false, "",
               "a hardware Xid; severity from the Xid table"},
    HealthRule{"xid-application-repeated", kUnhealthy, true, false, false, "",
               "application Xids repeated on one GPU app_xid_repeats times within the window"},
};

std::string Samples(int n) {
  return n == 1 ? "1 sample" : fmt::format("{} consecutive samples", n);
}

}  // namespace

std::span<const XidRule> XidRules() { return kXidRules; }

const XidRule* FindXidRule(unsigned xid) {
  for (const XidRule& r : kXidRules) {
    if (r.xid == xid) return &r;
  }
  return nullptr;
}

std::span<const HealthRule> HealthRules() { return kHealthRules; }

const HealthRule* FindHealthRule(std::string_view id) {
  for (const HealthRule& r : kHealthRules) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

std::string RuleThreshold(std::string_view id, const RuleSettings& s, unsigned xid) {
  const int n = s.debounce_samples;
  if (id == "gpu-lost") return "one query answering GPU_IS_LOST";
  if (id == "ecc-uncorrectable") return "volatile double-bit ECC count > 0";
  if (id == "row-remap-failure") return "remapping failure reported";
  if (id == "row-remap-pending") return "remap pending reported";
  if (id == "recovery-action-reset")
    return "recovery action GPU reset, drain P2P or drain and reset";
  if (id == "recovery-action-reboot") return "recovery action node reboot";
  if (id == "pcie-link-width") return Samples(n) + " below the maximum width";
  if (id == "pcie-link-generation")
    return fmt::format("{} below the maximum generation while at least {:.0f}% busy", Samples(n),
                       s.pcie_gen_min_utilization);
  if (id == "nvlink-errors")
    return fmt::format("{} with counters grown within {:.0f} s", Samples(n),
                       s.nvlink_error_window_s);
  if (id == "nvlink-down") return Samples(n) + " with a link down";
  if (id == "thermal-critical")
    return Samples(n) + " within " + std::to_string(kThermalCriticalMarginC) +
           " C of the shutdown temperature";
  if (id == "thermal-slowdown") return Samples(n) + " with thermal slowdown active";
  if (id == "power-slowdown") return Samples(n) + " with power slowdown active";
  if (id == "xid-hardware") {
    const XidRule* r = FindXidRule(xid);
    return r ? fmt::format("Xid {} is a hardware Xid, {} in the Xid table", xid,
                           SeverityName(r->severity))
             : fmt::format("Xid {} is a hardware Xid", xid);
  }
  if (id == "xid-application-repeated")
    return fmt::format("{} application Xids on one GPU within {:.0f} s", s.app_xid_repeats,
                       s.app_xid_window_s);
  return "";
}

}  // namespace chamber
