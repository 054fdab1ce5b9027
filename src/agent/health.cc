#include "agent/health.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/nvml_api.h"

namespace chamber::agent {

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

using enum Severity;
using enum XidClass;

// Meanings follow NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors).
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
    HealthRule{"thermal-slowdown", kDegraded, false, true, true, "clock_event_reasons",
               "clocks held down by hardware or software thermal slowdown"},
    HealthRule{"power-slowdown", kDegraded, false, true, true, "clock_event_reasons",
               "clocks held down by hardware slowdown or power brake"},
    HealthRule{"xid-hardware", kFatal, true, false, false, "",
               "a hardware Xid; severity from the Xid table"},
    HealthRule{"xid-application-repeated", kUnhealthy, true, false, false, "",
               "application Xids repeated on one GPU app_xid_repeats times within the window"},
};

enum class Verdict { kNotApplicable, kGood, kBad };

struct CheckInput {
  const GpuSample& s;
  const GpuInfo& gpu;
  const HealthConfig& config;
  std::optional<double> nvlink_last_increase;
  double now;
};

struct CheckResult {
  Verdict verdict = Verdict::kNotApplicable;
  std::string message;
};

CheckResult Good() { return {Verdict::kGood, {}}; }
CheckResult Bad(std::string message) { return {Verdict::kBad, std::move(message)}; }
CheckResult NotApplicable() { return {}; }

constexpr std::uint64_t kThermalReasons =
    nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown;
constexpr std::uint64_t kPowerReasons =
    nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown;

CheckResult RunCheck(std::string_view id, const CheckInput& in) {
  const GpuSample& s = in.s;
  if (id == "gpu-lost") return s.lost ? Bad("GPU is lost: NVML answers GPU_IS_LOST") : Good();
  if (id == "ecc-uncorrectable") {
    if (!s.ecc_volatile_uncorrected) return NotApplicable();
    return *s.ecc_volatile_uncorrected > 0
               ? Bad(fmt::format("{} uncorrectable ECC errors since the driver loaded",
                                 *s.ecc_volatile_uncorrected))
               : Good();
  }
  if (id == "row-remap-failure") {
    if (!s.remap) return NotApplicable();
    return s.remap->failure ? Bad("row remapping failed") : Good();
  }
  if (id == "row-remap-pending") {
    if (!s.remap) return NotApplicable();
    return s.remap->pending ? Bad("a row remap is pending until the GPU is reset") : Good();
  }
  if (id == "recovery-action-reset" || id == "recovery-action-reboot") {
    if (!s.recovery_action) return NotApplicable();
    unsigned a = *s.recovery_action;
    bool reboot = a == NVML_GPU_RECOVERY_ACTION_NODE_REBOOT;
    bool bad = id == "recovery-action-reboot" ? reboot : (a != 0 && !reboot);
    static constexpr std::array<std::string_view, 5> kNames = {"none", "GPU reset", "node reboot",
                                                               "drain P2P", "drain and reset"};
    std::string name = a < kNames.size() ? std::string(kNames[a]) : fmt::format("action {}", a);
    return bad ? Bad(fmt::format("the driver's recovery action is {}", name)) : Good();
  }
  if (id == "pcie-link-width") {
    if (!s.pcie_width_current || !s.pcie_width_max || *s.pcie_width_max == 0) {
      return NotApplicable();
    }
    return *s.pcie_width_current < *s.pcie_width_max
               ? Bad(fmt::format("PCIe link width x{} of x{}", *s.pcie_width_current,
                                 *s.pcie_width_max))
               : Good();
  }
  if (id == "pcie-link-generation") {
    if (!s.pcie_gen_current || !s.pcie_gen_max || *s.pcie_gen_max == 0) return NotApplicable();
    std::optional<double> busy = s.sm_active ? s.sm_active : s.gpu_utilization;
    if (!busy) return NotApplicable();
    // Idle GPUs lower their link generation to save power; only a busy GPU counts.
    if (*busy < in.config.pcie_gen_min_utilization) return Good();
    return *s.pcie_gen_current < *s.pcie_gen_max
               ? Bad(fmt::format("PCIe Gen{} of Gen{} while {:.0f}% busy", *s.pcie_gen_current,
                                 *s.pcie_gen_max, *busy))
               : Good();
  }
  if (id == "nvlink-errors") {
    if (s.nvlinks.empty()) return NotApplicable();
    if (in.nvlink_last_increase &&
        in.now - *in.nvlink_last_increase <= in.config.nvlink_error_window_s) {
      std::uint64_t total = 0;
      for (const NvLinkSample& l : s.nvlinks) total += l.Total();
      return Bad(fmt::format("NVLink error counters grew (total {})", total));
    }
    return Good();
  }
  if (id == "nvlink-down") {
    if (s.nvlinks.empty()) return NotApplicable();
    std::vector<int> down;
    for (int link : in.gpu.nvlinks_active) {
      for (const NvLinkSample& l : s.nvlinks) {
        if (l.link == link && !l.active) down.push_back(link);
      }
    }
    return down.empty() ? Good() : Bad(fmt::format("NVLink links down: {}", fmt::join(down, ",")));
  }
  if (id == "thermal-slowdown" || id == "power-slowdown") {
    if (!s.clock_event_reasons) return NotApplicable();
    std::uint64_t mask = id == "thermal-slowdown" ? kThermalReasons : kPowerReasons;
    std::uint64_t hit = *s.clock_event_reasons & mask;
    return hit != 0 ? Bad(fmt::format("clock event reasons 0x{:x}", hit)) : Good();
  }
  return NotApplicable();
}

constexpr size_t kMaxClosed = 256;

std::string GpuKey(const std::string& uuid, int index) {
  return uuid.empty() ? fmt::format("gpu-{}", index) : uuid;
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

HealthClassifier::HealthClassifier(HealthConfig config, double boot_time)
    : config_(config), boot_time_(boot_time) {}

void HealthClassifier::SetInventory(const Inventory& inventory) {
  for (const GpuInfo& g : inventory.gpus) StateFor(g.uuid, g.index).info = g;
}

HealthClassifier::GpuState& HealthClassifier::StateFor(const std::string& uuid, int index) {
  GpuState& st = gpus_[GpuKey(uuid, index)];
  if (st.info.uuid.empty()) {
    st.info.uuid = uuid;
    st.info.index = index;
  }
  return st;
}

void HealthClassifier::Open(RuleState& rs, Incident incident, std::vector<IncidentChange>& out) {
  incident.id = next_id_++;
  rs.open = incident;
  out.push_back({IncidentChange::Kind::kOpened, std::move(incident)});
}

void HealthClassifier::Close(RuleState& rs, double now, std::vector<IncidentChange>& out) {
  Incident done = *rs.open;
  done.closed_at = now;
  rs.open.reset();
  closed_.push_back(done);
  // Keep the most recent closed incidents only.
  if (closed_.size() > kMaxClosed) closed_.erase(closed_.begin());
  out.push_back({IncidentChange::Kind::kClosed, std::move(done)});
}

std::vector<IncidentChange> HealthClassifier::OnSample(const GpuSample& sample, double now) {
  std::vector<IncidentChange> out;
  GpuState& st = StateFor(sample.uuid, sample.index);
  const GpuInfo& gpu = st.info;
  if (!sample.nvlinks.empty()) {
    std::uint64_t total = 0;
    for (const NvLinkSample& l : sample.nvlinks) total += l.Total();
    if (st.nvlink_errors && total > *st.nvlink_errors) st.nvlink_last_increase = now;
    st.nvlink_errors = total;
  }
  bool in_grace = now < boot_time_ + config_.boot_grace_s;
  for (const HealthRule& rule : kHealthRules) {
    if (rule.event) continue;
    // A lost GPU answers nothing else; its other checks keep their state.
    if (sample.lost && rule.id != "gpu-lost") continue;
    if (!rule.feature.empty() && !gpu.Has(std::string(rule.feature))) continue;
    CheckResult r = RunCheck(rule.id, {sample, gpu, config_, st.nvlink_last_increase, now});
    RuleState& rs = st.rules[std::string(rule.id)];
    if (r.verdict == Verdict::kNotApplicable) continue;
    if (r.verdict == Verdict::kGood) {
      rs.consecutive_bad = 0;
      if (rs.open && now - rs.last_bad >= config_.clear_after_s) Close(rs, now, out);
      continue;
    }
    ++rs.consecutive_bad;
    rs.last_bad = now;
    if (rs.open) {
      rs.open->last_seen = now;
      ++rs.open->occurrences;
      rs.open->message = r.message;
      continue;
    }
    if (rule.debounced && rs.consecutive_bad < config_.debounce_samples) continue;
    if (rule.boot_grace && in_grace) continue;
    Incident inc;
    inc.gpu_index = sample.index;
    inc.gpu_uuid = sample.uuid;
    inc.pci_bus_id = gpu.pci_bus_id;
    inc.cause = std::string(rule.id);
    inc.severity = rule.severity;
    inc.message = r.message;
    inc.opened_at = now;
    inc.last_seen = now;
    Open(rs, std::move(inc), out);
  }
  // Time-based closing of event incidents.
  for (auto& [key, rs] : st.rules) {
    if (!rs.open || !rs.open->xid) continue;
    if (rs.open->cause == "xid-application-repeated") {
      while (!st.app_xids.empty() && now - st.app_xids.front() > config_.app_xid_window_s) {
        st.app_xids.pop_front();
      }
      if (static_cast<int>(st.app_xids.size()) < config_.app_xid_repeats &&
          now - rs.open->last_seen >= config_.clear_after_s) {
        Close(rs, now, out);
      }
    } else if (config_.xid_clear_after_s > 0 &&
               now - rs.open->last_seen >= config_.xid_clear_after_s) {
      Close(rs, now, out);
    }
  }
  return out;
}

std::vector<IncidentChange> HealthClassifier::OnXid(const XidEvent& event, double now) {
  std::vector<IncidentChange> out;
  const XidRule* rule = FindXidRule(event.xid);
  if (rule == nullptr || rule->cls == XidClass::kInformational) return out;
  std::string key_uuid = event.gpu_uuid.empty() ? event.pci_bus_id : event.gpu_uuid;
  GpuState& st = StateFor(key_uuid, event.gpu_index);
  std::string cause;
  Severity severity = rule->severity;
  std::string message = fmt::format("Xid {} ({}): {}", event.xid, rule->name, rule->meaning);
  if (rule->cls == XidClass::kApplication) {
    st.app_xids.push_back(now);
    while (!st.app_xids.empty() && now - st.app_xids.front() > config_.app_xid_window_s) {
      st.app_xids.pop_front();
    }
    if (static_cast<int>(st.app_xids.size()) < config_.app_xid_repeats) return out;
    cause = "xid-application-repeated";
    severity = FindHealthRule(cause)->severity;
    message = fmt::format("{} application Xids within {:.0f} s, the last Xid {} ({})",
                          st.app_xids.size(), config_.app_xid_window_s, event.xid, rule->name);
  } else {
    cause = "xid-hardware";
  }
  std::string key =
      rule->cls == XidClass::kApplication ? cause : fmt::format("{}:{}", cause, event.xid);
  RuleState& rs = st.rules[key];
  rs.last_bad = now;
  if (rs.open) {
    rs.open->last_seen = now;
    rs.open->xid = event.xid;
    ++rs.open->occurrences;
    return out;
  }
  Incident inc;
  inc.gpu_index = event.gpu_index;
  inc.gpu_uuid = event.gpu_uuid;
  inc.pci_bus_id = event.pci_bus_id.empty() ? st.info.pci_bus_id : event.pci_bus_id;
  inc.cause = cause;
  inc.severity = severity;
  inc.xid = event.xid;
  inc.message = message;
  inc.opened_at = now;
  inc.last_seen = now;
  Open(rs, std::move(inc), out);
  return out;
}

std::vector<Incident> HealthClassifier::OpenIncidents() const {
  std::vector<Incident> open;
  for (const auto& [uuid, st] : gpus_) {
    for (const auto& [key, rs] : st.rules) {
      if (rs.open) open.push_back(*rs.open);
    }
  }
  std::sort(open.begin(), open.end(),
            [](const Incident& a, const Incident& b) { return a.id < b.id; });
  return open;
}

Severity HealthClassifier::GpuSeverity(const std::string& uuid) const {
  Severity worst = Severity::kHealthy;
  auto it = gpus_.find(uuid);
  if (it == gpus_.end()) return worst;
  for (const auto& [key, rs] : it->second.rules) {
    if (rs.open) worst = std::max(worst, rs.open->severity);
  }
  return worst;
}

}  // namespace chamber::agent
