#include "common/gpu_evidence.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/json_reader.h"

namespace chamber {

using nlohmann::json;

namespace {

template <typename T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <typename T>
std::string OptText(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("-");
}

struct ToJson {
  json operator()(const XidEvidence& e) const {
    return {{"type", "xid"},        {"xid", e.xid},         {"name", e.name},
            {"meaning", e.meaning}, {"class", e.xid_class}, {"source", e.source},
            {"count", Opt(e.count)}};
  }
  json operator()(const EccEvidence& e) const {
    return {{"type", "ecc"},
            {"volatile_single_bit", Opt(e.volatile_single_bit)},
            {"volatile_double_bit", Opt(e.volatile_double_bit)},
            {"aggregate_single_bit", Opt(e.aggregate_single_bit)},
            {"aggregate_double_bit", Opt(e.aggregate_double_bit)}};
  }
  json operator()(const RowRemapEvidence& e) const {
    return {{"type", "row_remap"},
            {"single_bit_rows", e.single_bit_rows},
            {"double_bit_rows", e.double_bit_rows},
            {"pending", e.pending},
            {"failed", e.failed}};
  }
  json operator()(const NvLinkEvidence& e) const {
    json links = json::array();
    for (const NvLinkCounters& l : e.links)
      links.push_back({{"link", l.link},
                       {"active", l.active},
                       {"replay_errors", l.replay_errors},
                       {"recovery_errors", l.recovery_errors},
                       {"crc_flit_errors", l.crc_flit_errors},
                       {"crc_data_errors", l.crc_data_errors}});
    return {{"type", "nvlink"}, {"links", std::move(links)}, {"links_down", e.links_down}};
  }
  json operator()(const PcieEvidence& e) const {
    return {{"type", "pcie"},
            {"replays", Opt(e.replays)},
            {"width_current", Opt(e.width_current)},
            {"width_max", Opt(e.width_max)},
            {"gen_current", Opt(e.gen_current)},
            {"gen_max", Opt(e.gen_max)}};
  }
  json operator()(const ThermalEvidence& e) const {
    return {{"type", "thermal"},
            {"temperature_c", Opt(e.temperature_c)},
            {"slowdown_c", Opt(e.slowdown_c)},
            {"shutdown_c", Opt(e.shutdown_c)},
            {"clock_event_reasons", e.clock_event_reasons}};
  }
  json operator()(const PowerEvidence& e) const {
    return {{"type", "power"},
            {"power_watts", Opt(e.power_watts)},
            {"clock_event_reasons", e.clock_event_reasons}};
  }
  json operator()(const RecoveryActionEvidence& e) const {
    return {{"type", "recovery_action"}, {"action", e.action}, {"name", e.name}};
  }
  json operator()(const RuleEvidence& e) const {
    return {{"type", "rule"},
            {"rule", e.rule},
            {"severity", e.severity},
            {"condition", e.condition},
            {"threshold", e.threshold}};
  }
  json operator()(const ActionEvidence& e) const {
    return {{"type", "action"},
            {"gpu_fenced", e.gpu_fenced},
            {"taint", e.taint.empty() ? json(nullptr) : json(e.taint)},
            {"breaker_held", e.breaker_held},
            {"workloads_requeued", e.workloads_requeued},
            {"workloads_requeued_count", e.workloads_requeued_count}};
  }
};

// Nullopt: a type this version does not know.
Result<std::optional<Evidence>> ParseOne(const json& j, const std::string& path) {
  if (!j.is_object()) return Status::InvalidArgument(path + ": expected an object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string())
    return Status::InvalidArgument(path + ".type: expected a string");
  const std::string type = t->get<std::string>();
  // Absent and null fields keep their defaults.
  const JsonReader r;
  if (type == "xid") {
    XidEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "xid", path, &e.xid));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "name", path, &e.name));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "meaning", path, &e.meaning));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "class", path, &e.xid_class));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "source", path, &e.source));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "count", path, &e.count));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "ecc") {
    EccEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "volatile_single_bit", path, &e.volatile_single_bit));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "volatile_double_bit", path, &e.volatile_double_bit));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "aggregate_single_bit", path, &e.aggregate_single_bit));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "aggregate_double_bit", path, &e.aggregate_double_bit));
    return std::optional<Evidence>(e);
  }
  if (type == "row_remap") {
    RowRemapEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "single_bit_rows", path, &e.single_bit_rows));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "double_bit_rows", path, &e.double_bit_rows));
    CHAMBER_RETURN_IF_ERROR(r.Bool(j, "pending", path, &e.pending));
    CHAMBER_RETURN_IF_ERROR(r.Bool(j, "failed", path, &e.failed));
    return std::optional<Evidence>(e);
  }
  if (type == "nvlink") {
    NvLinkEvidence e;
    const json* links = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Array(j, "links", path, &links));
    if (links != nullptr) {
      for (size_t i = 0; i < links->size(); ++i) {
        const json& l = (*links)[i];
        const std::string at = fmt::format("{}.links[{}]", path, i);
        if (!l.is_object()) return Status::InvalidArgument(at + ": expected an object");
        NvLinkCounters c;
        CHAMBER_RETURN_IF_ERROR(r.Integer(l, "link", at, &c.link));
        CHAMBER_RETURN_IF_ERROR(r.Bool(l, "active", at, &c.active));
        CHAMBER_RETURN_IF_ERROR(r.Integer(l, "replay_errors", at, &c.replay_errors));
        CHAMBER_RETURN_IF_ERROR(r.Integer(l, "recovery_errors", at, &c.recovery_errors));
        CHAMBER_RETURN_IF_ERROR(r.Integer(l, "crc_flit_errors", at, &c.crc_flit_errors));
        CHAMBER_RETURN_IF_ERROR(r.Integer(l, "crc_data_errors", at, &c.crc_data_errors));
        e.links.push_back(c);
      }
    }
    CHAMBER_RETURN_IF_ERROR(r.Integers(j, "links_down", path, &e.links_down));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "pcie") {
    PcieEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "replays", path, &e.replays));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "width_current", path, &e.width_current));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "width_max", path, &e.width_max));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "gen_current", path, &e.gen_current));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "gen_max", path, &e.gen_max));
    return std::optional<Evidence>(e);
  }
  if (type == "thermal") {
    ThermalEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "temperature_c", path, &e.temperature_c));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "slowdown_c", path, &e.slowdown_c));
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "shutdown_c", path, &e.shutdown_c));
    CHAMBER_RETURN_IF_ERROR(r.Strings(j, "clock_event_reasons", path, &e.clock_event_reasons));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "power") {
    PowerEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Number(j, "power_watts", path, &e.power_watts));
    CHAMBER_RETURN_IF_ERROR(r.Strings(j, "clock_event_reasons", path, &e.clock_event_reasons));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "recovery_action") {
    RecoveryActionEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Integer(j, "action", path, &e.action));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "name", path, &e.name));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "rule") {
    RuleEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.String(j, "rule", path, &e.rule));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "severity", path, &e.severity));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "condition", path, &e.condition));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "threshold", path, &e.threshold));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "action") {
    ActionEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Bool(j, "gpu_fenced", path, &e.gpu_fenced));
    CHAMBER_RETURN_IF_ERROR(r.String(j, "taint", path, &e.taint));
    CHAMBER_RETURN_IF_ERROR(r.Bool(j, "breaker_held", path, &e.breaker_held));
    CHAMBER_RETURN_IF_ERROR(r.Strings(j, "workloads_requeued", path, &e.workloads_requeued));
    CHAMBER_RETURN_IF_ERROR(
        r.Integer(j, "workloads_requeued_count", path, &e.workloads_requeued_count));
    return std::optional<Evidence>(std::move(e));
  }
  return std::optional<Evidence>();
}

std::string Reasons(const std::vector<std::string>& reasons) {
  return reasons.empty() ? "" : fmt::format("; clocks held by {}", fmt::join(reasons, ", "));
}

struct ToText {
  std::string operator()(const XidEvidence& e) const {
    std::string out =
        e.name.empty() ? fmt::format("Xid {}", e.xid) : fmt::format("Xid {} ({})", e.xid, e.name);
    if (!e.meaning.empty()) out += ": " + e.meaning;
    if (e.count) out += fmt::format(" ({} times)", *e.count);
    return out;
  }
  std::string operator()(const EccEvidence& e) const {
    return fmt::format(
        "ECC double-bit {} volatile, {} aggregate; single-bit {} volatile, {} "
        "aggregate",
        OptText(e.volatile_double_bit), OptText(e.aggregate_double_bit),
        OptText(e.volatile_single_bit), OptText(e.aggregate_single_bit));
  }
  std::string operator()(const RowRemapEvidence& e) const {
    std::string state = e.failed    ? "row remapping failed"
                        : e.pending ? "row remap pending until a GPU reset"
                                    : "no row remap pending";
    return fmt::format("{}; rows remapped: {} for double-bit, {} for single-bit errors", state,
                       e.double_bit_rows, e.single_bit_rows);
  }
  std::string operator()(const NvLinkEvidence& e) const {
    std::vector<std::string> parts;
    for (const NvLinkCounters& l : e.links)
      parts.push_back(fmt::format("NVLink {}{}: replay {}, recovery {}, CRC flit {}, CRC data {}",
                                  l.link, l.active ? "" : " (down)", l.replay_errors,
                                  l.recovery_errors, l.crc_flit_errors, l.crc_data_errors));
    if (!e.links_down.empty())
      parts.push_back(fmt::format("NVLink links down: {}", fmt::join(e.links_down, ",")));
    if (parts.empty()) return "NVLink: no errors counted";
    return fmt::format("{}", fmt::join(parts, "; "));
  }
  std::string operator()(const PcieEvidence& e) const {
    return fmt::format("PCIe x{} of x{}, Gen{} of Gen{}, {} replays", OptText(e.width_current),
                       OptText(e.width_max), OptText(e.gen_current), OptText(e.gen_max),
                       OptText(e.replays));
  }
  std::string operator()(const ThermalEvidence& e) const {
    std::vector<std::string> limits;
    if (e.slowdown_c) limits.push_back(fmt::format("slowdown at {} C", *e.slowdown_c));
    if (e.shutdown_c) limits.push_back(fmt::format("shutdown at {} C", *e.shutdown_c));
    return fmt::format("temperature {} C{}{}", OptText(e.temperature_c),
                       limits.empty() ? "" : fmt::format(" ({})", fmt::join(limits, ", ")),
                       Reasons(e.clock_event_reasons));
  }
  std::string operator()(const PowerEvidence& e) const {
    // Halves round away from zero, as the dashboard's toFixed(0) does.
    return fmt::format("power {} W{}",
                       e.power_watts ? std::to_string(std::llround(*e.power_watts)) : "-",
                       Reasons(e.clock_event_reasons));
  }
  std::string operator()(const RecoveryActionEvidence& e) const {
    return fmt::format("driver recovery action: {} ({})", e.name, e.action);
  }
  std::string operator()(const RuleEvidence& e) const {
    std::string out = fmt::format("rule {} ({})", e.rule, e.severity);
    if (!e.threshold.empty()) out += ": " + e.threshold;
    return out;
  }
  std::string operator()(const ActionEvidence& e) const {
    if (!e.gpu_fenced)
      return e.breaker_held ? "not fenced: the fleet circuit breaker held the fence back"
                            : "not fenced (reported only)";
    std::string out = "GPU fenced";
    if (!e.taint.empty()) out += ", node tainted " + e.taint;
    if (e.workloads_requeued_count > 0) {
      out += fmt::format(", {} workload{} requeued", e.workloads_requeued_count,
                         e.workloads_requeued_count == 1 ? "" : "s");
      if (!e.workloads_requeued.empty()) {
        out += fmt::format(" ({}", fmt::join(e.workloads_requeued, ", "));
        const auto named = static_cast<std::int64_t>(e.workloads_requeued.size());
        if (e.workloads_requeued_count > named)
          out += fmt::format(" and {} more", e.workloads_requeued_count - named);
        out += ")";
      }
    }
    return out;
  }
};

}  // namespace

std::string_view EvidenceType(const Evidence& e) {
  static constexpr std::string_view kTypes[] = {"xid",  "ecc",     "row_remap", "nvlink",
                                                "pcie", "thermal", "power",     "recovery_action",
                                                "rule", "action"};
  static_assert(std::size(kTypes) == std::variant_size_v<Evidence>);
  return kTypes[e.index()];
}

json EvidenceJson(const Evidence& e) { return std::visit(ToJson{}, e); }

json EvidenceListJson(const EvidenceList& list) {
  json out = json::array();
  for (const Evidence& e : list) out.push_back(EvidenceJson(e));
  return out;
}

Result<EvidenceList> ParseEvidenceList(const json& j, const std::string& path) {
  if (!j.is_array()) return Status::InvalidArgument(path + ": expected an array");
  EvidenceList out;
  for (size_t i = 0; i < j.size(); ++i) {
    CHAMBER_ASSIGN_OR_RETURN(std::optional<Evidence> e,
                             ParseOne(j[i], fmt::format("{}[{}]", path, i)));
    if (e) out.push_back(std::move(*e));
  }
  return out;
}

std::string EvidenceText(const Evidence& e) { return std::visit(ToText{}, e); }

std::string LimitText(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  if (max_bytes < 3) return text.substr(0, 0);
  size_t cut = max_bytes - 3;
  // Back up to the start of a UTF-8 character.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text + "...";
}

std::string EvidenceSummary(const EvidenceList& list, size_t max_bytes) {
  std::string out;
  for (const Evidence& e : list) {
    if (!out.empty()) out += "; ";
    out += EvidenceText(e);
  }
  return LimitText(std::move(out), max_bytes);
}

}  // namespace chamber
