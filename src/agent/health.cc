#include "agent/health.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/nvml_api.h"

namespace chamber::agent {

namespace {

constexpr ClockEventReason kClockEventReasons[] = {
    {nvmlClocksEventReasonGpuIdle, "gpu_idle"},
    {nvmlClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
    {nvmlClocksEventReasonSwPowerCap, "sw_power_cap"},
    {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
    {nvmlClocksEventReasonSyncBoost, "sync_boost"},
    {nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {nvmlClocksEventReasonDisplayClockSetting, "display_clock_setting"},
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
  EvidenceList evidence;  // the readings that made it bad
};

CheckResult Good() { return {Verdict::kGood, {}, {}}; }
CheckResult Bad(std::string message, EvidenceList evidence = {}) {
  return {Verdict::kBad, std::move(message), std::move(evidence)};
}
CheckResult NotApplicable() { return {}; }

constexpr std::uint64_t kThermalReasons =
    nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown;
constexpr std::uint64_t kPowerReasons =
    nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown;

// --- evidence from a sample

std::optional<Evidence> EccOf(const GpuSample& s) {
  if (!s.ecc_volatile_corrected && !s.ecc_volatile_uncorrected && !s.ecc_aggregate_corrected &&
      !s.ecc_aggregate_uncorrected)
    return std::nullopt;
  return EccEvidence{s.ecc_volatile_corrected, s.ecc_volatile_uncorrected,
                     s.ecc_aggregate_corrected, s.ecc_aggregate_uncorrected};
}

std::optional<Evidence> RemapOf(const GpuSample& s) {
  if (!s.remap) return std::nullopt;
  return RowRemapEvidence{s.remap->corrected_rows, s.remap->uncorrected_rows, s.remap->pending,
                          s.remap->failure};
}

// The links with errors counted or down among those active at discovery.
std::optional<Evidence> NvLinkOf(const GpuSample& s, const GpuInfo& gpu) {
  if (s.nvlinks.empty()) return std::nullopt;
  NvLinkEvidence e;
  for (const NvLinkSample& l : s.nvlinks) {
    const bool was_active = std::find(gpu.nvlinks_active.begin(), gpu.nvlinks_active.end(),
                                      l.link) != gpu.nvlinks_active.end();
    const bool down = was_active && !l.active;
    if (down) e.links_down.push_back(l.link);
    if (l.Total() > 0 || down)
      e.links.push_back({l.link, l.active, l.replay_errors, l.recovery_errors, l.crc_flit_errors,
                         l.crc_data_errors});
  }
  return e;
}

Evidence PcieOf(const GpuSample& s) {
  return PcieEvidence{s.pcie_replays, s.pcie_width_current, s.pcie_width_max, s.pcie_gen_current,
                      s.pcie_gen_max};
}

Evidence ThermalOf(const GpuSample& s, const GpuInfo& gpu) {
  return ThermalEvidence{
      s.temperature_c, gpu.temperature_slowdown_c, gpu.temperature_shutdown_c,
      ClockEventReasonNames(s.clock_event_reasons.value_or(0) & (kThermalReasons | kPowerReasons))};
}

EvidenceList Present(std::initializer_list<std::optional<Evidence>> items) {
  EvidenceList out;
  for (const std::optional<Evidence>& e : items)
    if (e) out.push_back(*e);
  return out;
}

// The readings an Xid points at, from the GPU's latest sample: memory errors for the ECC and
// row-remapping Xids, the links for the NVLink Xids.
EvidenceList RelatedReadings(unsigned xid, const GpuSample* last, const GpuInfo& gpu) {
  if (!last) return {};
  switch (xid) {
    case 48:
    case 63:
    case 64:
    case 92:
    case 94:
    case 95:
    case 140:
      return Present({EccOf(*last), RemapOf(*last)});
    case 74:
    case 155:
      return Present({NvLinkOf(*last, gpu)});
    default:
      return {};
  }
}

RuleEvidence RuleOf(const HealthRule& rule, Severity severity, const HealthConfig& config,
                    unsigned xid = 0) {
  return {std::string(rule.id), std::string(SeverityName(severity)), std::string(rule.condition),
          RuleThreshold(rule.id, config.Rules(), xid)};
}

CheckResult RunCheck(std::string_view id, const CheckInput& in) {
  const GpuSample& s = in.s;
  if (id == "gpu-lost") return s.lost ? Bad("GPU is lost: NVML answers GPU_IS_LOST") : Good();
  if (id == "ecc-uncorrectable") {
    if (!s.ecc_volatile_uncorrected) return NotApplicable();
    return *s.ecc_volatile_uncorrected > 0
               ? Bad(fmt::format("{} uncorrectable ECC errors since the driver loaded",
                                 *s.ecc_volatile_uncorrected),
                     Present({EccOf(s), RemapOf(s)}))
               : Good();
  }
  if (id == "row-remap-failure") {
    if (!s.remap) return NotApplicable();
    return s.remap->failure ? Bad("row remapping failed", Present({RemapOf(s), EccOf(s)})) : Good();
  }
  if (id == "row-remap-pending") {
    if (!s.remap) return NotApplicable();
    return s.remap->pending ? Bad("a row remap is pending until the GPU is reset",
                                  Present({RemapOf(s), EccOf(s)}))
                            : Good();
  }
  if (id == "recovery-action-reset" || id == "recovery-action-reboot") {
    if (!s.recovery_action) return NotApplicable();
    unsigned a = *s.recovery_action;
    bool reboot = a == NVML_GPU_RECOVERY_ACTION_NODE_REBOOT;
    bool bad = id == "recovery-action-reboot" ? reboot : (a != 0 && !reboot);
    static constexpr std::array<std::string_view, 5> kNames = {"none", "GPU reset", "node reboot",
                                                               "drain P2P", "drain and reset"};
    std::string name = a < kNames.size() ? std::string(kNames[a]) : fmt::format("action {}", a);
    return bad ? Bad(fmt::format("the driver's recovery action is {}", name),
                     {RecoveryActionEvidence{a, name}})
               : Good();
  }
  if (id == "pcie-link-width") {
    if (!s.pcie_width_current || !s.pcie_width_max || *s.pcie_width_max == 0) {
      return NotApplicable();
    }
    return *s.pcie_width_current < *s.pcie_width_max
               ? Bad(fmt::format("PCIe link width x{} of x{}", *s.pcie_width_current,
                                 *s.pcie_width_max),
                     {PcieOf(s)})
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
                                 *s.pcie_gen_max, *busy),
                     {PcieOf(s)})
               : Good();
  }
  if (id == "nvlink-errors") {
    if (s.nvlinks.empty()) return NotApplicable();
    if (in.nvlink_last_increase &&
        in.now - *in.nvlink_last_increase <= in.config.nvlink_error_window_s) {
      std::uint64_t total = 0;
      for (const NvLinkSample& l : s.nvlinks) total += l.Total();
      return Bad(fmt::format("NVLink error counters grew (total {})", total),
                 Present({NvLinkOf(s, in.gpu)}));
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
    return down.empty() ? Good()
                        : Bad(fmt::format("NVLink links down: {}", fmt::join(down, ",")),
                              Present({NvLinkOf(s, in.gpu)}));
  }
  if (id == "thermal-critical") {
    // Past slowdown the GPU throttles itself and the work goes on; this close to shutdown it is
    // about to stop, and the work is better requeued with its checkpoint grace.
    if (!s.temperature_c || !in.gpu.temperature_shutdown_c) return NotApplicable();
    return *s.temperature_c + kThermalCriticalMarginC >= *in.gpu.temperature_shutdown_c
               ? Bad(fmt::format("temperature {} C within {} C of the shutdown threshold of {} C",
                                 *s.temperature_c, kThermalCriticalMarginC,
                                 *in.gpu.temperature_shutdown_c),
                     {ThermalOf(s, in.gpu)})
               : Good();
  }
  if (id == "thermal-slowdown" || id == "power-slowdown") {
    if (!s.clock_event_reasons) return NotApplicable();
    const bool thermal = id == "thermal-slowdown";
    std::uint64_t mask = thermal ? kThermalReasons : kPowerReasons;
    std::uint64_t hit = *s.clock_event_reasons & mask;
    if (hit == 0) return Good();
    Evidence e = thermal ? ThermalOf(s, in.gpu)
                         : Evidence(PowerEvidence{s.power_watts, ClockEventReasonNames(hit)});
    return Bad(fmt::format("clock event reasons 0x{:x}", hit), {std::move(e)});
  }
  return NotApplicable();
}

constexpr size_t kMaxClosed = 256;

std::string GpuKey(const std::string& uuid, int index) {
  return uuid.empty() ? fmt::format("gpu-{}", index) : uuid;
}

}  // namespace

std::span<const ClockEventReason> ClockEventReasons() { return kClockEventReasons; }

std::vector<std::string> ClockEventReasonNames(std::uint64_t mask) {
  std::vector<std::string> names;
  for (const ClockEventReason& r : kClockEventReasons)
    if (mask & r.bit) names.emplace_back(r.name);
  return names;
}

RuleSettings HealthConfig::Rules() const {
  RuleSettings r;
  r.debounce_samples = debounce_samples;
  r.nvlink_error_window_s = nvlink_error_window_s;
  r.pcie_gen_min_utilization = pcie_gen_min_utilization;
  r.app_xid_repeats = app_xid_repeats;
  r.app_xid_window_s = app_xid_window_s;
  return r;
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

void HealthClassifier::Open(RuleState& rs, GpuIncident incident, std::vector<IncidentChange>& out) {
  incident.id = next_id_++;
  rs.open = incident;
  out.push_back({IncidentChange::Kind::kOpened, std::move(incident)});
}

void HealthClassifier::Close(RuleState& rs, double now, std::vector<IncidentChange>& out) {
  GpuIncident done = *rs.open;
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
  st.last = sample;
  const GpuInfo& gpu = st.info;
  if (!sample.nvlinks.empty()) {
    std::uint64_t total = 0;
    for (const NvLinkSample& l : sample.nvlinks) total += l.Total();
    if (st.nvlink_errors && total > *st.nvlink_errors) st.nvlink_last_increase = now;
    st.nvlink_errors = total;
  }
  bool in_grace = now < boot_time_ + config_.boot_grace_s;
  for (const HealthRule& rule : HealthRules()) {
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
    GpuIncident inc;
    inc.gpu_index = sample.index;
    inc.gpu_uuid = sample.uuid;
    inc.pci_bus_id = gpu.pci_bus_id;
    inc.cause = std::string(rule.id);
    inc.severity = rule.severity;
    inc.message = r.message;
    inc.evidence = std::move(r.evidence);
    inc.evidence.push_back(RuleOf(rule, rule.severity, config_));
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
  GpuIncident inc;
  inc.gpu_index = event.gpu_index;
  inc.gpu_uuid = event.gpu_uuid;
  inc.pci_bus_id = event.pci_bus_id.empty() ? st.info.pci_bus_id : event.pci_bus_id;
  inc.cause = cause;
  inc.severity = severity;
  inc.xid = event.xid;
  inc.message = message;
  XidEvidence xid{event.xid,
                  std::string(rule->name),
                  std::string(rule->meaning),
                  std::string(XidClassName(rule->cls)),
                  event.source,
                  std::nullopt};
  if (rule->cls == XidClass::kApplication) xid.count = static_cast<int>(st.app_xids.size());
  inc.evidence.push_back(std::move(xid));
  for (Evidence& e : RelatedReadings(event.xid, st.last ? &*st.last : nullptr, st.info))
    inc.evidence.push_back(std::move(e));
  inc.evidence.push_back(RuleOf(*FindHealthRule(cause), severity, config_, event.xid));
  inc.opened_at = now;
  inc.last_seen = now;
  Open(rs, std::move(inc), out);
  return out;
}

std::vector<GpuIncident> HealthClassifier::OpenIncidents() const {
  std::vector<GpuIncident> open;
  for (const auto& [uuid, st] : gpus_) {
    for (const auto& [key, rs] : st.rules) {
      if (rs.open) open.push_back(*rs.open);
    }
  }
  std::sort(open.begin(), open.end(),
            [](const GpuIncident& a, const GpuIncident& b) { return a.id < b.id; });
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
