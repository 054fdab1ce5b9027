#include "common/gpu_evidence.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// Typed reads of one evidence object; absent and null fields keep their defaults.
class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const json* Get(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string Where(const char* key) const { return path_ + "." + key; }
  Status Bad(const char* key, const char* what) const {
    return Status::InvalidArgument(Where(key) + ": expected " + what);
  }

  template <typename T>
  Status Unsigned(const char* key, T& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_number_unsigned()) return Bad(key, "an unsigned integer");
    out = v->get<T>();
    return Status::Ok();
  }
  template <typename T>
  Status Unsigned(const char* key, std::optional<T>& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_number_unsigned()) return Bad(key, "an unsigned integer");
    out = v->get<T>();
    return Status::Ok();
  }
  Status Int(const char* key, int& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_number_integer()) return Bad(key, "an integer");
    out = v->get<int>();
    return Status::Ok();
  }
  Status Int(const char* key, std::optional<int>& out) const {
    int v = 0;
    if (!Get(key)) return Status::Ok();
    CHAMBER_RETURN_IF_ERROR(Int(key, v));
    out = v;
    return Status::Ok();
  }
  Status Int64(const char* key, std::int64_t& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_number_integer()) return Bad(key, "an integer");
    out = v->get<std::int64_t>();
    return Status::Ok();
  }
  Status Number(const char* key, std::optional<double>& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_number() || !std::isfinite(v->get<double>())) return Bad(key, "a number");
    out = v->get<double>();
    return Status::Ok();
  }
  Status Bool(const char* key, bool& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_boolean()) return Bad(key, "a boolean");
    out = v->get<bool>();
    return Status::Ok();
  }
  Status String(const char* key, std::string& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_string()) return Bad(key, "a string");
    out = v->get<std::string>();
    return Status::Ok();
  }
  Status Strings(const char* key, std::vector<std::string>& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_array()) return Bad(key, "an array of strings");
    for (const json& s : *v) {
      if (!s.is_string()) return Bad(key, "an array of strings");
      out.push_back(s.get<std::string>());
    }
    return Status::Ok();
  }
  Status Ints(const char* key, std::vector<int>& out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_array()) return Bad(key, "an array of integers");
    for (const json& s : *v) {
      if (!s.is_number_integer()) return Bad(key, "an array of integers");
      out.push_back(s.get<int>());
    }
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
};

// Nullopt: a type this version does not know.
Result<std::optional<Evidence>> ParseOne(const json& j, const std::string& path) {
  if (!j.is_object()) return Status::InvalidArgument(path + ": expected an object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string())
    return Status::InvalidArgument(path + ".type: expected a string");
  const std::string type = t->get<std::string>();
  Reader r(j, path);
  if (type == "xid") {
    XidEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("xid", e.xid));
    CHAMBER_RETURN_IF_ERROR(r.String("name", e.name));
    CHAMBER_RETURN_IF_ERROR(r.String("meaning", e.meaning));
    CHAMBER_RETURN_IF_ERROR(r.String("class", e.xid_class));
    CHAMBER_RETURN_IF_ERROR(r.String("source", e.source));
    CHAMBER_RETURN_IF_ERROR(r.Int("count", e.count));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "ecc") {
    EccEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("volatile_single_bit", e.volatile_single_bit));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("volatile_double_bit", e.volatile_double_bit));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("aggregate_single_bit", e.aggregate_single_bit));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("aggregate_double_bit", e.aggregate_double_bit));
    return std::optional<Evidence>(e);
  }
  if (type == "row_remap") {
    RowRemapEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("single_bit_rows", e.single_bit_rows));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("double_bit_rows", e.double_bit_rows));
    CHAMBER_RETURN_IF_ERROR(r.Bool("pending", e.pending));
    CHAMBER_RETURN_IF_ERROR(r.Bool("failed", e.failed));
    return std::optional<Evidence>(e);
  }
  if (type == "nvlink") {
    NvLinkEvidence e;
    if (const json* links = r.Get("links")) {
      if (!links->is_array()) return r.Bad("links", "an array");
      for (size_t i = 0; i < links->size(); ++i) {
        const json& l = (*links)[i];
        const std::string at = fmt::format("{}.links[{}]", path, i);
        if (!l.is_object()) return Status::InvalidArgument(at + ": expected an object");
        Reader lr(l, at);
        NvLinkCounters c;
        CHAMBER_RETURN_IF_ERROR(lr.Int("link", c.link));
        CHAMBER_RETURN_IF_ERROR(lr.Bool("active", c.active));
        CHAMBER_RETURN_IF_ERROR(lr.Unsigned("replay_errors", c.replay_errors));
        CHAMBER_RETURN_IF_ERROR(lr.Unsigned("recovery_errors", c.recovery_errors));
        CHAMBER_RETURN_IF_ERROR(lr.Unsigned("crc_flit_errors", c.crc_flit_errors));
        CHAMBER_RETURN_IF_ERROR(lr.Unsigned("crc_data_errors", c.crc_data_errors));
        e.links.push_back(c);
      }
    }
    CHAMBER_RETURN_IF_ERROR(r.Ints("links_down", e.links_down));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "pcie") {
    PcieEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("replays", e.replays));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("width_current", e.width_current));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("width_max", e.width_max));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("gen_current", e.gen_current));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("gen_max", e.gen_max));
    return std::optional<Evidence>(e);
  }
  if (type == "thermal") {
    ThermalEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("temperature_c", e.temperature_c));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("slowdown_c", e.slowdown_c));
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("shutdown_c", e.shutdown_c));
    CHAMBER_RETURN_IF_ERROR(r.Strings("clock_event_reasons", e.clock_event_reasons));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "power") {
    PowerEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Number("power_watts", e.power_watts));
    CHAMBER_RETURN_IF_ERROR(r.Strings("clock_event_reasons", e.clock_event_reasons));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "recovery_action") {
    RecoveryActionEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Unsigned("action", e.action));
    CHAMBER_RETURN_IF_ERROR(r.String("name", e.name));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "rule") {
    RuleEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.String("rule", e.rule));
    CHAMBER_RETURN_IF_ERROR(r.String("severity", e.severity));
    CHAMBER_RETURN_IF_ERROR(r.String("condition", e.condition));
    CHAMBER_RETURN_IF_ERROR(r.String("threshold", e.threshold));
    return std::optional<Evidence>(std::move(e));
  }
  if (type == "action") {
    ActionEvidence e;
    CHAMBER_RETURN_IF_ERROR(r.Bool("gpu_fenced", e.gpu_fenced));
    CHAMBER_RETURN_IF_ERROR(r.String("taint", e.taint));
    CHAMBER_RETURN_IF_ERROR(r.Bool("breaker_held", e.breaker_held));
    CHAMBER_RETURN_IF_ERROR(r.Strings("workloads_requeued", e.workloads_requeued));
    CHAMBER_RETURN_IF_ERROR(r.Int64("workloads_requeued_count", e.workloads_requeued_count));
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
