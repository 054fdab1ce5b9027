#include "health/health_controller.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/config_file.h"
#include "common/json_reader.h"
#include "common/kube_labels.h"
#include "common/time.h"

namespace chamber::health {

using nlohmann::json;

std::string_view TaintEffectName(TaintEffect e) {
  switch (e) {
    case TaintEffect::kNone:
      return "";
    case TaintEffect::kNoSchedule:
      return "NoSchedule";
    case TaintEffect::kNoExecute:
      return "NoExecute";
  }
  return "";
}

std::string_view ChangeKindName(HealthChange::Kind k) {
  switch (k) {
    case HealthChange::Kind::kFenced:
      return "fenced";
    case HealthChange::Kind::kUnfenced:
      return "unfenced";
    case HealthChange::Kind::kHeld:
      return "held";
    case HealthChange::Kind::kCleared:
      return "cleared";
    case HealthChange::Kind::kBreakerOpened:
      return "breaker-opened";
    case HealthChange::Kind::kBreakerClosed:
      return "breaker-closed";
    case HealthChange::Kind::kStale:
      return "stale";
    case HealthChange::Kind::kRequeued:
      return "requeued";
  }
  return "unknown";
}

// --- report parser

namespace {

constexpr int64_t kMaxGpuIndex = 1023;

// The report's members are read with JsonReader (common/json_reader.h); errors start at the
// member's path ("report.samples[0].lost: expected true or false").
const JsonReader kReport;

Result<Severity> ParseSeverity(const std::string& s, const std::string& where) {
  if (std::optional<Severity> named = SeverityNamed(s)) return *named;
  return kReport.Error(where, "expected healthy, degraded, unhealthy or fatal, got \"" + s + "\"");
}

// A required member: present and not null.
Status Require(const json& obj, std::string_view key, const std::string& path) {
  if (JsonReader::Find(obj, key) == nullptr)
    return kReport.Error(JsonReader::Join(path, key), "missing");
  return Status::Ok();
}

Status RequireObject(const json& j, const std::string& path) {
  if (!j.is_object()) return kReport.Error(path, "expected an object");
  return Status::Ok();
}

Result<std::string> RequiredString(const json& obj, std::string_view key, const std::string& path) {
  CHAMBER_RETURN_IF_ERROR(Require(obj, key, path));
  std::string out;
  CHAMBER_RETURN_IF_ERROR(kReport.String(obj, key, path, &out));
  return out;
}

Result<double> RequiredNumber(const json& obj, std::string_view key, const std::string& path) {
  CHAMBER_RETURN_IF_ERROR(Require(obj, key, path));
  double out = 0;
  CHAMBER_RETURN_IF_ERROR(kReport.Number(obj, key, path, &out));
  return out;
}

Result<bool> RequiredBool(const json& obj, std::string_view key, const std::string& path) {
  CHAMBER_RETURN_IF_ERROR(Require(obj, key, path));
  bool out = false;
  CHAMBER_RETURN_IF_ERROR(kReport.Bool(obj, key, path, &out));
  return out;
}

// An integer from `lo` to `hi`; absent or null: nullopt unless `required`.
Result<std::optional<int64_t>> IntegerIn(const json& obj, std::string_view key,
                                         const std::string& path, int64_t lo, int64_t hi,
                                         bool required) {
  if (required) CHAMBER_RETURN_IF_ERROR(Require(obj, key, path));
  std::optional<int64_t> out;
  CHAMBER_RETURN_IF_ERROR(kReport.Integer(obj, key, path, &out));
  if (out && (*out < lo || *out > hi))
    return kReport.Error(JsonReader::Join(path, key),
                         fmt::format("must be between {} and {}", lo, hi));
  return out;
}

Result<const json*> RequiredArray(const json& obj, std::string_view key, const std::string& path) {
  CHAMBER_RETURN_IF_ERROR(Require(obj, key, path));
  const json* out = nullptr;
  CHAMBER_RETURN_IF_ERROR(kReport.Array(obj, key, path, &out));
  return out;
}

// A sample's `utilization` (optional: an agent without NVML sends none): SM activity for
// source "gpm", the coarse rate otherwise; percent in the report, 0-1 here.
Result<std::optional<double>> SampleUtilization(const json& sample, const std::string& path) {
  const json* u = nullptr;
  CHAMBER_RETURN_IF_ERROR(kReport.Object(sample, "utilization", path, &u));
  if (u == nullptr) return std::optional<double>();
  const std::string where = JsonReader::Join(path, "utilization");
  std::string source;
  CHAMBER_RETURN_IF_ERROR(kReport.String(*u, "source", where, &source));
  auto percent = [&](std::string_view key) -> Result<std::optional<double>> {
    const json* given = JsonReader::Find(*u, key);
    if (given != nullptr && !given->is_number())
      return kReport.Error(JsonReader::Join(where, key), "expected a number or null");
    std::optional<double> v;
    CHAMBER_RETURN_IF_ERROR(kReport.Number(*u, key, where, &v));
    if (v && (*v < 0 || *v > 100))
      return kReport.Error(JsonReader::Join(where, key), "must be a percentage from 0 to 100");
    return v ? std::optional<double>(*v / 100) : std::nullopt;
  };
  CHAMBER_ASSIGN_OR_RETURN(std::optional<double> sm, percent("sm_active_percent"));
  CHAMBER_ASSIGN_OR_RETURN(std::optional<double> coarse, percent("gpu_percent"));
  if (source == "gpm" && sm) return sm;
  return coarse ? coarse : sm;
}

}  // namespace

Result<AgentReport> ParseAgentReport(const json& j) {
  const std::string report = "report";
  CHAMBER_RETURN_IF_ERROR(RequireObject(j, report));
  AgentReport out;
  CHAMBER_ASSIGN_OR_RETURN(std::string kind, RequiredString(j, "kind", report));
  if (kind != "chamber.io/agent-report/v1")
    return kReport.Error("report.kind",
                         "expected \"chamber.io/agent-report/v1\", got \"" + kind + "\"");
  CHAMBER_ASSIGN_OR_RETURN(out.node, RequiredString(j, "node", report));
  if (out.node.empty() || out.node.size() > 253)
    return kReport.Error("report.node", "must be a node name of 1 to 253 characters");
  CHAMBER_ASSIGN_OR_RETURN(out.time, RequiredNumber(j, "time", report));

  CHAMBER_RETURN_IF_ERROR(Require(j, "inventory", report));
  const json& inventory = j["inventory"];
  CHAMBER_RETURN_IF_ERROR(RequireObject(inventory, "report.inventory"));
  CHAMBER_ASSIGN_OR_RETURN(const json* gpus, RequiredArray(inventory, "gpus", "report.inventory"));
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string at = fmt::format("report.inventory.gpus[{}]", i);
    const json& g = (*gpus)[i];
    CHAMBER_RETURN_IF_ERROR(RequireObject(g, at));
    ReportGpu rg;
    CHAMBER_ASSIGN_OR_RETURN(std::optional<int64_t> index,
                             IntegerIn(g, "index", at, 0, kMaxGpuIndex, /*required=*/true));
    rg.index = static_cast<int>(*index);
    CHAMBER_ASSIGN_OR_RETURN(rg.uuid, RequiredString(g, "uuid", at));
    // Optional: agents before MIG inventory send none; a GPU not in MIG mode lists no devices.
    if (const json* mig = JsonReader::Find(g, "mig"); mig != nullptr && !mig->is_null()) {
      CHAMBER_RETURN_IF_ERROR(RequireObject(*mig, at + ".mig"));
      if (const json* devices = JsonReader::Find(*mig, "devices"); devices != nullptr) {
        if (!devices->is_array()) return kReport.Error(at + ".mig.devices", "expected an array");
        for (size_t k = 0; k < devices->size(); ++k) {
          const std::string dat = fmt::format("{}.mig.devices[{}]", at, k);
          const json& d = (*devices)[k];
          CHAMBER_RETURN_IF_ERROR(RequireObject(d, dat));
          ReportMigDevice md;
          CHAMBER_ASSIGN_OR_RETURN(md.uuid, RequiredString(d, "uuid", dat));
          if (const json* p = JsonReader::Find(d, "profile"); p != nullptr && !p->is_null()) {
            if (!p->is_string())
              return kReport.Error(dat + ".profile", "expected a string or null");
            md.profile = p->get<std::string>();
          }
          CHAMBER_ASSIGN_OR_RETURN(md.memory_total_bytes,
                                   IntegerIn(d, "memory_total_bytes", dat, 0, int64_t{1} << 50,
                                             /*required=*/false));
          rg.mig_devices.push_back(std::move(md));
        }
      }
    }
    out.gpus.push_back(std::move(rg));
  }

  CHAMBER_ASSIGN_OR_RETURN(const json* samples, RequiredArray(j, "samples", report));
  for (size_t i = 0; i < samples->size(); ++i) {
    const std::string at = fmt::format("report.samples[{}]", i);
    const json& s = (*samples)[i];
    CHAMBER_RETURN_IF_ERROR(RequireObject(s, at));
    ReportSample rs;
    CHAMBER_ASSIGN_OR_RETURN(std::optional<int64_t> index,
                             IntegerIn(s, "index", at, 0, kMaxGpuIndex, /*required=*/true));
    rs.index = static_cast<int>(*index);
    CHAMBER_ASSIGN_OR_RETURN(rs.uuid, RequiredString(s, "uuid", at));
    CHAMBER_ASSIGN_OR_RETURN(rs.lost, RequiredBool(s, "lost", at));
    // Required, and null when the driver does not say.
    if (!s.contains("recovery_action")) return kReport.Error(at + ".recovery_action", "missing");
    CHAMBER_ASSIGN_OR_RETURN(rs.recovery_action,
                             IntegerIn(s, "recovery_action", at, 0, 1 << 20, /*required=*/false));
    CHAMBER_ASSIGN_OR_RETURN(rs.utilization, SampleUtilization(s, at));
    CHAMBER_ASSIGN_OR_RETURN(rs.memory_used_bytes,
                             IntegerIn(s, "memory_used_bytes", at, 0, int64_t{1} << 50,
                                       /*required=*/false));
    // Optional: agents before pod attribution send none.
    if (const json* pods = JsonReader::Find(s, "pods")) {
      if (!pods->is_array()) return kReport.Error(at + ".pods", "expected an array");
      for (size_t k = 0; k < pods->size(); ++k) {
        const std::string pat = fmt::format("{}.pods[{}]", at, k);
        const json& p = (*pods)[k];
        CHAMBER_RETURN_IF_ERROR(RequireObject(p, pat));
        ReportHolder h;
        CHAMBER_ASSIGN_OR_RETURN(h.namespace_name, RequiredString(p, "namespace", pat));
        CHAMBER_ASSIGN_OR_RETURN(h.pod, RequiredString(p, "pod", pat));
        CHAMBER_ASSIGN_OR_RETURN(h.resource, RequiredString(p, "resource", pat));
        if (const json* mig = JsonReader::Find(p, "mig_uuid"); mig != nullptr && !mig->is_null()) {
          if (!mig->is_string())
            return kReport.Error(pat + ".mig_uuid", "expected a string or null");
          h.mig = true;
          h.mig_uuid = mig->get<std::string>();
        }
        rs.pods.push_back(std::move(h));
      }
    }
    // Optional and nullable: agents before process attribution, and drivers that cannot list
    // processes, send none.
    if (const json* ps = JsonReader::Find(s, "processes"); ps != nullptr && !ps->is_null()) {
      if (!ps->is_array()) return kReport.Error(at + ".processes", "expected an array or null");
      for (size_t k = 0; k < ps->size(); ++k) {
        const std::string pat = fmt::format("{}.processes[{}]", at, k);
        const json& p = (*ps)[k];
        CHAMBER_RETURN_IF_ERROR(RequireObject(p, pat));
        ReportProcess rp;
        if (const json* uid = JsonReader::Find(p, "pod_uid"); uid != nullptr && !uid->is_null()) {
          if (!uid->is_string())
            return kReport.Error(pat + ".pod_uid", "expected a string or null");
          rp.pod_uid = uid->get<std::string>();
        }
        CHAMBER_ASSIGN_OR_RETURN(rp.used_memory_bytes,
                                 IntegerIn(p, "used_memory_bytes", pat, 0, int64_t{1} << 50,
                                           /*required=*/false));
        if (!rp.pod_uid.empty()) rs.processes.push_back(std::move(rp));
      }
    }
    out.samples.push_back(std::move(rs));
  }
  if (const json* pr = JsonReader::Find(j, "pod_resources")) {
    CHAMBER_RETURN_IF_ERROR(RequireObject(*pr, "report.pod_resources"));
    CHAMBER_ASSIGN_OR_RETURN(std::string state,
                             RequiredString(*pr, "state", "report.pod_resources"));
    out.pod_resources_available = state == "available";
  }

  CHAMBER_ASSIGN_OR_RETURN(const json* incidents, RequiredArray(j, "incidents", report));
  for (size_t i = 0; i < incidents->size(); ++i) {
    const std::string at = fmt::format("report.incidents[{}]", i);
    const json& f = (*incidents)[i];
    CHAMBER_RETURN_IF_ERROR(RequireObject(f, at));
    GpuIncident ri;
    CHAMBER_ASSIGN_OR_RETURN(std::optional<int64_t> id,
                             IntegerIn(f, "id", at, 0, INT64_MAX, /*required=*/true));
    ri.id = static_cast<uint64_t>(*id);
    CHAMBER_ASSIGN_OR_RETURN(std::optional<int64_t> gpu,
                             IntegerIn(f, "gpu_index", at, -1, kMaxGpuIndex, /*required=*/true));
    ri.gpu_index = static_cast<int>(*gpu);
    CHAMBER_ASSIGN_OR_RETURN(ri.gpu_uuid, RequiredString(f, "gpu_uuid", at));
    CHAMBER_ASSIGN_OR_RETURN(ri.cause, RequiredString(f, "cause", at));
    if (ri.cause.empty()) return kReport.Error(at + ".cause", "must not be empty");
    CHAMBER_ASSIGN_OR_RETURN(std::string sev, RequiredString(f, "severity", at));
    CHAMBER_ASSIGN_OR_RETURN(ri.severity, ParseSeverity(sev, at + ".severity"));
    CHAMBER_ASSIGN_OR_RETURN(std::optional<int64_t> xid,
                             IntegerIn(f, "xid", at, 0, UINT32_MAX, /*required=*/false));
    if (xid) ri.xid = static_cast<unsigned>(*xid);
    CHAMBER_ASSIGN_OR_RETURN(ri.message, RequiredString(f, "message", at));
    CHAMBER_ASSIGN_OR_RETURN(ri.opened_at, RequiredNumber(f, "opened_at", at));
    CHAMBER_ASSIGN_OR_RETURN(ri.last_seen, RequiredNumber(f, "last_seen", at));
    CHAMBER_ASSIGN_OR_RETURN(std::optional<int64_t> occurrences,
                             IntegerIn(f, "occurrences", at, 1, INT64_MAX, /*required=*/true));
    ri.occurrences = *occurrences;
    // Optional: agents before evidence send none.
    if (const json* ev = JsonReader::Find(f, "evidence")) {
      CHAMBER_ASSIGN_OR_RETURN(ri.evidence, ParseEvidenceList(*ev, at + ".evidence"));
    }
    out.incidents.push_back(std::move(ri));
  }

  // Optional: reports of agents that compute no labels leave the node's labels alone.
  if (const json* labels = JsonReader::Find(j, "labels")) {
    const std::string where = "report.labels";
    if (!labels->is_object()) return kReport.Error(where, "expected an object");
    std::map<std::string, std::string> own;
    const std::string_view prefix = kAgentLabelPrefix;
    for (const auto& [key, value] : labels->items()) {
      const std::string at = fmt::format("{}[\"{}\"]", where, key);
      if (!value.is_string()) return kReport.Error(at, "expected a string");
      if (key.rfind(prefix, 0) != 0) continue;  // not the agent's to set
      if (!IsLabelKey(key)) return kReport.Error(at, "not a valid label key");
      std::string v = value.get<std::string>();
      if (!IsLabelValue(v))
        return kReport.Error(at, "\"" + v +
                                     "\" is not a valid label value (at most 63 of A-Z a-z 0-9 . _ "
                                     "-, alphanumeric at both ends)");
      own.emplace(key, std::move(v));
    }
    out.labels = std::move(own);
  }
  return out;
}

Result<AgentReport> ParseAgentReportText(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("report: not valid JSON");
  return ParseAgentReport(j);
}

// --- configuration

namespace {
double Seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }
std::string FormatSeconds(double s) {
  return FormatDuration(std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000))));
}
}  // namespace

Result<HealthControllerConfig> ReadHealthConfig(const ConfigFile& file, bool* found) {
  const YamlReader& y = file.reader();
  const YAML::Node h = file.Section("health", found);
  HealthControllerConfig c;
  if (h.IsNull()) return c;
  CHAMBER_RETURN_IF_ERROR(
      y.CheckKeys(h, "health",
                  {"enabled", "probation", "maxProbation", "faultWindow", "holdAfterFaults",
                   "fatalNoExecute", "staleAfter", "circuitBreaker"}));
  auto dur = [&](const YAML::Node& parent, const char* key, std::string path, double* out,
                 bool positive) -> Status {
    if (!parent[key]) return Status::Ok();
    CHAMBER_ASSIGN_OR_RETURN(std::chrono::milliseconds d, y.Dur(parent[key], path));
    if (d.count() < 0 || (positive && d.count() == 0))
      return y.Error(parent[key], path,
                     positive ? "must be longer than zero" : "must not be negative");
    *out = Seconds(d);
    return Status::Ok();
  };
  if (h["enabled"]) {
    CHAMBER_ASSIGN_OR_RETURN(c.enabled, y.Bool(h["enabled"], "health.enabled"));
  }
  CHAMBER_RETURN_IF_ERROR(dur(h, "probation", "health.probation", &c.probation_s, false));
  CHAMBER_RETURN_IF_ERROR(dur(h, "maxProbation", "health.maxProbation", &c.max_probation_s, false));
  if (h["maxProbation"] && c.max_probation_s < c.probation_s)
    return y.Error(h["maxProbation"], "health.maxProbation", "must not be shorter than probation");
  if (!h["maxProbation"]) c.max_probation_s = std::max(c.max_probation_s, c.probation_s);
  CHAMBER_RETURN_IF_ERROR(dur(h, "faultWindow", "health.faultWindow", &c.fault_window_s, true));
  if (h["holdAfterFaults"]) {
    CHAMBER_ASSIGN_OR_RETURN(int64_t v, y.Int(h["holdAfterFaults"], "health.holdAfterFaults"));
    if (v < 0 || v > 1000)
      return y.Error(h["holdAfterFaults"], "health.holdAfterFaults",
                     "must be between 0 (never hold) and 1000");
    c.hold_after_faults = static_cast<int>(v);
  }
  if (h["fatalNoExecute"]) {
    CHAMBER_ASSIGN_OR_RETURN(c.fatal_no_execute,
                             y.Bool(h["fatalNoExecute"], "health.fatalNoExecute"));
  }
  CHAMBER_RETURN_IF_ERROR(dur(h, "staleAfter", "health.staleAfter", &c.stale_after_s, true));
  if (const YAML::Node b = h["circuitBreaker"]) {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(b, "health.circuitBreaker", {"fraction", "minNodes", "window"}));
    if (b["fraction"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.breaker_fraction,
                               y.Double(b["fraction"], "health.circuitBreaker.fraction"));
      if (!(c.breaker_fraction > 0 && c.breaker_fraction <= 1))
        return y.Error(b["fraction"], "health.circuitBreaker.fraction",
                       "must be above 0 and at most 1 (1: off)");
    }
    if (b["minNodes"]) {
      CHAMBER_ASSIGN_OR_RETURN(int64_t v, y.Int(b["minNodes"], "health.circuitBreaker.minNodes"));
      if (v < 1 || v > 1000000)
        return y.Error(b["minNodes"], "health.circuitBreaker.minNodes",
                       "must be between 1 and 1000000");
      c.breaker_min_nodes = static_cast<int>(v);
    }
    CHAMBER_RETURN_IF_ERROR(
        dur(b, "window", "health.circuitBreaker.window", &c.breaker_window_s, true));
  }
  return c;
}

Result<HealthControllerConfig> ParseHealthConfig(std::string_view text, std::string_view source,
                                                 bool* found) {
  CHAMBER_ASSIGN_OR_RETURN(ConfigFile file, ConfigFile::Parse(text, std::string(source)));
  return ReadHealthConfig(file, found);
}

std::string HealthConfigToYaml(const HealthControllerConfig& c) {
  return fmt::format(
      "health:\n"
      "  enabled: {}\n"
      "  probation: {}\n"
      "  maxProbation: {}\n"
      "  faultWindow: {}\n"
      "  holdAfterFaults: {}\n"
      "  fatalNoExecute: {}\n"
      "  staleAfter: {}\n"
      "  circuitBreaker:\n"
      "    fraction: {}\n"
      "    minNodes: {}\n"
      "    window: {}\n",
      c.enabled, FormatSeconds(c.probation_s), FormatSeconds(c.max_probation_s),
      FormatSeconds(c.fault_window_s), c.hold_after_faults, c.fatal_no_execute,
      FormatSeconds(c.stale_after_s), c.breaker_fraction, c.breaker_min_nodes,
      FormatSeconds(c.breaker_window_s));
}

// --- the controller

namespace {

constexpr size_t kMaxIncidents = 500;

bool Fences(Severity s) { return s >= Severity::kUnhealthy; }

std::string IncidentKey(const GpuIncident& i) {
  return fmt::format("{}|{}|{}|{}", i.gpu_index, i.cause,
                     i.xid ? static_cast<int64_t>(*i.xid) : int64_t{-1}, i.opened_at);
}

// Whole seconds; the fraction is dropped.
std::string Rfc3339(double unix_s) {
  return FormatRfc3339Ms(static_cast<int64_t>(std::floor(unix_s)) * 1000, TimeFraction::kNone);
}

}  // namespace

EvidenceList IncidentEvidence(const HealthIncident& i) {
  EvidenceList out = i.incident.evidence;
  ActionEvidence a;
  a.gpu_fenced = i.fenced;
  a.taint = i.taint;
  a.breaker_held = i.breaker_held;
  a.workloads_requeued = i.requeued;
  a.workloads_requeued_count = i.requeued_count;
  out.push_back(std::move(a));
  return out;
}

HealthController::HealthController(HealthControllerConfig config) : config_(config) {}

void HealthController::Trim(std::deque<double>& times, double now, double window) const {
  while (!times.empty() && now - times.front() > window) times.pop_front();
}

const HealthIncident* HealthController::FindIncident(uint64_t id) const {
  // Ids grow with the deque's order: binary search.
  auto it = std::lower_bound(incidents_.begin(), incidents_.end(), id,
                             [](const HealthIncident& i, uint64_t v) { return i.incident.id < v; });
  return it != incidents_.end() && it->incident.id == id ? &*it : nullptr;
}

HealthIncident* HealthController::FindIncident(uint64_t id) {
  return const_cast<HealthIncident*>(std::as_const(*this).FindIncident(id));
}

TaintEffect HealthController::NodeTaint(const Node& n) const {
  bool any = false, fatal = false;
  for (const auto& [index, g] : n.gpus) {
    if (!g.fenced) continue;
    any = true;
    fatal = fatal || (g.faulty && g.worst == Severity::kFatal);
  }
  if (!any) return TaintEffect::kNone;
  return fatal && config_.fatal_no_execute ? TaintEffect::kNoExecute : TaintEffect::kNoSchedule;
}

const HealthIncident* HealthController::CauseOf(const Node& n, int index) const {
  const HealthIncident* worst = nullptr;
  for (const auto& [key, id] : n.open) {
    const HealthIncident* hi = FindIncident(id);
    if (!hi) continue;
    const GpuIncident& i = hi->incident;
    if (i.gpu_index != index || !Fences(i.severity)) continue;
    if (!worst || i.severity > worst->incident.severity ||
        (i.severity == worst->incident.severity && i.id < worst->incident.id))
      worst = hi;
  }
  return worst;
}

double HealthController::BackoffProbation(const Gpu& g) const {
  // Every earlier fault within the window doubles the probation.
  const double doublings = g.faults.empty() ? 0.0 : static_cast<double>(g.faults.size() - 1);
  return std::min(config_.probation_s * std::pow(2.0, std::min(doublings, 60.0)),
                  std::max(config_.max_probation_s, config_.probation_s));
}

bool HealthController::AnyFenced(const Node& n) const {
  return std::any_of(n.gpus.begin(), n.gpus.end(), [](const auto& g) { return g.second.fenced; });
}

bool HealthController::BreakerBlocks(double now) {
  while (!newly_fenced_.empty() && now - newly_fenced_.front().first > config_.breaker_window_s)
    newly_fenced_.pop_front();
  if (config_.breaker_fraction >= 1) return false;
  std::set<std::string> distinct;
  for (const auto& [t, node] : newly_fenced_) distinct.insert(node);
  int reporting = 0;
  for (const auto& [name, n] : nodes_) reporting += n.reported && !n.stale ? 1 : 0;
  const int would_be = static_cast<int>(distinct.size()) + 1;
  return would_be >= config_.breaker_min_nodes &&
         would_be > config_.breaker_fraction * static_cast<double>(reporting);
}

bool HealthController::Fence(const std::string& name, Node& n, int index, Gpu& g, double now,
                             const HealthIncident* cause) {
  if (!AnyFenced(n)) {
    if (BreakerBlocks(now)) {
      if (!breaker_open_) {
        breaker_open_ = true;
        breaker_opened_at_ = now;
        changes_.push_back(
            {HealthChange::Kind::kBreakerOpened, name,
             fmt::format("circuit breaker open: {} nodes newly fenced within {:.0f} s; node {} "
                         "is not fenced (a shared cause is likely)",
                         newly_fenced_.size(), config_.breaker_window_s, name)});
      }
      n.suppressed = true;
      return false;
    }
    newly_fenced_.push_back({now, name});
  }
  g.fenced = true;
  g.fenced_at = now;
  // The Event says why: the incident's evidence (an older agent's: its message), and the taint.
  std::string why;
  if (cause) {
    const GpuIncident& i = cause->incident;
    why = "; " + (i.evidence.empty() ? i.message : EvidenceSummary(i.evidence, 700));
  }
  changes_.push_back({HealthChange::Kind::kFenced, name,
                      fmt::format("GPU {} ({}) fenced: {} fault{}; node tainted {}", index, g.uuid,
                                  SeverityName(g.worst), why, TaintEffectName(NodeTaint(n)))});
  return true;
}

void HealthController::Unfence(const std::string& name, Node& n, int index, Gpu& g) {
  (void)n;
  g.fenced = false;
  g.clean_since.reset();
  changes_.push_back({HealthChange::Kind::kUnfenced, name,
                      fmt::format("GPU {} ({}) returned after {:.0f} s of probation", index, g.uuid,
                                  g.probation_s)});
}

void HealthController::Ingest(const AgentReport& report, double now) {
  Node& n = nodes_[report.node];
  n.reported = true;
  n.last_report = now;
  n.stale = false;
  n.uuids.clear();
  for (const ReportGpu& rg : report.gpus) {
    n.gpus[rg.index].uuid = rg.uuid;
    if (static_cast<size_t>(rg.index) >= n.uuids.size()) n.uuids.resize(rg.index + 1);
    n.uuids[rg.index] = rg.uuid;
  }
  if (report.labels) n.labels = report.labels;

  // Per GPU: the worst open incident, and whether the sample reads clean.
  std::map<int, Severity> worst;
  for (const GpuIncident& i : report.incidents) {
    if (i.gpu_index < 0) continue;
    Severity& w = worst[i.gpu_index];
    w = std::max(w, i.severity);
  }
  std::map<int, bool> sample_clean;
  for (const ReportSample& s : report.samples) {
    sample_clean[s.index] = !s.lost && s.recovery_action.value_or(0) == 0;
    if (n.gpus[s.index].uuid.empty()) n.gpus[s.index].uuid = s.uuid;
  }

  // The incident log: one entry per agent incident, however many reports repeat it.
  std::map<std::string, uint64_t> open;
  for (const GpuIncident& ri : report.incidents) {
    if (ri.severity == Severity::kHealthy) continue;
    const std::string key = IncidentKey(ri);
    HealthIncident* hi = nullptr;
    if (auto it = n.open.find(key); it != n.open.end()) hi = FindIncident(it->second);
    if (!hi) {
      HealthIncident inc;
      inc.incident = ri;
      inc.node = report.node;
      inc.incident.id = next_incident_++;
      inc.incident.opened_at = now;
      incidents_.push_back(std::move(inc));
      if (incidents_.size() > kMaxIncidents) incidents_.pop_front();
      hi = &incidents_.back();
    }
    GpuIncident& i = hi->incident;
    i.message = ri.message;
    if (!ri.evidence.empty() || i.evidence.empty()) i.evidence = ri.evidence;
    i.last_seen = now;
    i.occurrences = ri.occurrences;
    i.severity = ri.severity;
    open[key] = i.id;
  }
  for (const auto& [key, id] : n.open) {
    if (open.contains(key)) continue;
    if (HealthIncident* hi = FindIncident(id)) hi->incident.closed_at = now;
  }
  n.open = std::move(open);

  for (auto& [index, g] : n.gpus) {
    auto w = worst.find(index);
    const Severity sev = w == worst.end() ? Severity::kHealthy : w->second;
    const bool was_faulty = g.faulty;
    g.faulty = Fences(sev);
    g.worst = sev;
    if (g.faulty) {
      g.clean_since.reset();
      if (!was_faulty) {
        Trim(g.faults, now, config_.fault_window_s);
        Trim(n.faults, now, config_.fault_window_s);
        g.faults.push_back(now);
        n.faults.push_back(now);
        g.probation_s = BackoffProbation(g);
        if (config_.hold_after_faults > 0 && !n.held &&
            static_cast<int>(n.faults.size()) >= config_.hold_after_faults) {
          n.held = true;
          changes_.push_back({HealthChange::Kind::kHeld, report.node,
                              fmt::format("{} faults within {:.0f} s: fenced until an operator "
                                          "clears the node",
                                          n.faults.size(), config_.fault_window_s)});
        }
      }
      if (!g.fenced) Fence(report.node, n, index, g, now, CauseOf(n, index));
    } else {
      auto c = sample_clean.find(index);
      const bool clean = c == sample_clean.end() ? true : c->second;
      if (!clean) {
        g.clean_since.reset();
      } else if (!g.clean_since) {
        g.clean_since = now;
      }
    }
  }
  // Incidents record whether they fenced anything.
  for (const auto& [key, id] : n.open) {
    HealthIncident* hi = FindIncident(id);
    if (!hi || hi->incident.gpu_index < 0) continue;
    auto g = n.gpus.find(hi->incident.gpu_index);
    const bool fences = Fences(hi->incident.severity);
    hi->fenced = g != n.gpus.end() && g->second.fenced && fences;
    hi->breaker_held = !hi->fenced && fences && g != n.gpus.end() && g->second.faulty;
    if (hi->fenced && hi->taint.empty()) hi->taint = TaintEffectName(NodeTaint(n));
  }
  n.suppressed = std::any_of(n.gpus.begin(), n.gpus.end(),
                             [](const auto& g) { return g.second.faulty && !g.second.fenced; });
}

void HealthController::Restore(const std::string& node, const std::vector<int>& gpus, bool held,
                               const FaultHistory& history, double now) {
  Node& n = nodes_[node];
  n.last_report = now;  // the agent gets stale_after to report
  n.held = n.held || held;
  std::vector<double> all;
  for (const auto& [index, times] : history) {
    Gpu& g = n.gpus[index];
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    for (double t : sorted) {
      // Faults after `now` are a clock skew between leaders: count them as now.
      const double at = std::min(t, now);
      if (now - at > config_.fault_window_s) continue;
      g.faults.push_back(at);
      all.push_back(at);
    }
  }
  for (double t : n.faults) all.push_back(t);
  std::sort(all.begin(), all.end());
  n.faults.assign(all.begin(), all.end());
  for (int index : gpus) {
    Gpu& g = n.gpus[index];
    if (g.fenced) continue;
    g.fenced = true;
    g.fenced_at = g.faults.empty() ? now : g.faults.back();
    g.probation_s = BackoffProbation(g);
  }
}

Status HealthController::Clear(const std::string& node, double now) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return Status::NotFound("no agent has reported node \"" + node + "\"");
  Node& n = it->second;
  n.held = false;
  n.faults.clear();
  int lifted = 0;
  for (auto& [index, g] : n.gpus) {
    g.faults.clear();
    g.probation_s = config_.probation_s;
    if (g.fenced && !g.faulty) {
      Unfence(node, n, index, g);
      ++lifted;
    }
  }
  changes_.push_back({HealthChange::Kind::kCleared, node,
                      fmt::format("cleared by an operator; {} fences lifted", lifted)});
  (void)now;
  return Status::Ok();
}

void HealthController::RecordRequeued(const std::vector<RequeuedWorkload>& requeued) {
  // By GPU: the workloads new to its incidents.
  std::map<std::pair<std::string, int>, std::vector<std::string>> added;
  for (const RequeuedWorkload& r : requeued) {
    auto it = nodes_.find(r.node);
    if (it == nodes_.end()) continue;
    Node& n = it->second;
    bool is_new = false;
    for (const auto& [key, id] : n.open) {
      HealthIncident* hi = FindIncident(id);
      if (!hi || hi->incident.gpu_index != r.gpu_index || !hi->fenced) continue;
      if (std::find(hi->requeued.begin(), hi->requeued.end(), r.workload) != hi->requeued.end())
        continue;
      if (hi->requeued.size() < kMaxNamedWorkloads) hi->requeued.push_back(r.workload);
      ++hi->requeued_count;
      is_new = true;
    }
    if (is_new) added[{r.node, r.gpu_index}].push_back(r.workload);
  }
  for (const auto& [at, workloads] : added) {
    const Node& n = nodes_.at(at.first);
    const HealthIncident* cause = CauseOf(n, at.second);
    auto g = n.gpus.find(at.second);
    std::string what;
    if (cause) {
      what = cause->incident.message;
      for (const Evidence& e : cause->incident.evidence) {
        if (std::holds_alternative<RuleEvidence>(e)) continue;
        what = EvidenceText(e);  // the first measurement or Xid
        break;
      }
    }
    changes_.push_back(
        {HealthChange::Kind::kRequeued, at.first,
         fmt::format("GPU {} ({}): {} workload{} requeued off the fenced GPU: {}{}", at.second,
                     g != n.gpus.end() ? g->second.uuid : "", workloads.size(),
                     workloads.size() == 1 ? "" : "s", fmt::join(workloads, ", "),
                     what.empty() ? "" : "; fault: " + what)});
  }
}

std::vector<FenceCause> HealthController::FenceCauses() const {
  std::vector<FenceCause> out;
  for (const auto& [name, n] : nodes_) {
    for (const auto& [index, g] : n.gpus) {
      if (!g.fenced) continue;
      const HealthIncident* hi = CauseOf(n, index);
      if (!hi) continue;
      const GpuIncident& i = hi->incident;
      out.push_back({name, index, g.uuid, i.cause, i.severity, i.message, IncidentEvidence(*hi)});
    }
  }
  return out;
}

std::vector<HealthChange> HealthController::Evaluate(double now) {
  for (auto& [name, n] : nodes_) {
    Trim(n.faults, now, config_.fault_window_s);
    for (auto& [index, g] : n.gpus) Trim(g.faults, now, config_.fault_window_s);
    if (!n.stale && now - n.last_report > config_.stale_after_s) {
      n.stale = true;
      changes_.push_back(
          {HealthChange::Kind::kStale, name,
           fmt::format("no report from the agent for {:.0f} s", now - n.last_report)});
    }
    if (n.stale || n.held) continue;
    for (auto& [index, g] : n.gpus) {
      if (g.fenced && !g.faulty && g.clean_since && now - *g.clean_since >= g.probation_s)
        Unfence(name, n, index, g);
    }
  }
  if (breaker_open_ && !BreakerBlocks(now)) {
    breaker_open_ = false;
    changes_.push_back(
        {HealthChange::Kind::kBreakerClosed, "", "circuit breaker closed: fencing resumes"});
  }
  std::vector<HealthChange> out;
  out.swap(changes_);
  return out;
}

std::map<std::string, DesiredNode> HealthController::Desired() const {
  std::map<std::string, DesiredNode> out;
  for (const auto& [name, n] : nodes_) {
    if (!n.reported) continue;
    DesiredNode d;
    d.node = name;
    d.held = n.held;
    d.labels = n.labels;
    d.gpu_uuids = n.uuids;
    bool faulty = false;
    std::vector<std::string> why;
    for (const auto& [index, g] : n.gpus) {
      if (!g.faults.empty()) d.fault_history[index].assign(g.faults.begin(), g.faults.end());
      if (!g.fenced) continue;
      d.unhealthy_gpus.push_back(index);
      faulty = faulty || g.faulty;
      why.push_back(g.faulty ? fmt::format("GPU {} {}", index, SeverityName(g.worst))
                             : fmt::format("GPU {} on probation ({:.0f} s)", index, g.probation_s));
    }
    d.taint = NodeTaint(n);
    if (n.stale) {
      d.condition = {"Unknown", "AgentStale",
                     d.unhealthy_gpus.empty()
                         ? "the node's chamber-agent stopped reporting"
                         : fmt::format("the node's chamber-agent stopped reporting; fenced: {}",
                                       fmt::join(why, ", "))};
    } else if (d.unhealthy_gpus.empty()) {
      if (n.suppressed) {
        d.condition = {"False", "CircuitBreakerOpen",
                       "GPU faults reported, but the fleet circuit breaker keeps the node "
                       "unfenced"};
      } else {
        d.condition = {"True", "GpusHealthy", "every GPU passes its health checks"};
      }
    } else {
      const char* reason = n.held ? "OperatorHold" : faulty ? "GpuFault" : "Probation";
      d.condition = {"False", reason,
                     fmt::format("{}{}", fmt::join(why, ", "),
                                 n.held ? "; held until `chamber health clear` " : "")};
    }
    out.emplace(name, std::move(d));
  }
  return out;
}

std::vector<NodeHealth> HealthController::Nodes() const {
  std::vector<NodeHealth> out;
  for (const auto& [name, n] : nodes_) {
    NodeHealth h;
    h.node = name;
    h.last_report = n.last_report;
    h.stale = n.stale;
    h.held = n.held;
    h.suppressed = n.suppressed;
    for (const auto& [index, g] : n.gpus) {
      if (!g.fenced) continue;
      h.fenced.push_back({index, g.uuid, g.faulty, g.worst, g.fenced_at, g.clean_since,
                          g.probation_s, static_cast<int>(g.faults.size())});
    }
    out.push_back(std::move(h));
  }
  return out;
}

BreakerState HealthController::Breaker() const {
  BreakerState b;
  b.open = breaker_open_;
  b.opened_at = breaker_opened_at_;
  std::set<std::string> distinct;
  for (const auto& [t, node] : newly_fenced_) distinct.insert(node);
  b.fenced_in_window = static_cast<int>(distinct.size());
  for (const auto& [name, n] : nodes_) {
    b.reporting_nodes += n.reported && !n.stale ? 1 : 0;
    if (n.suppressed) b.suppressed_nodes.push_back(name);
  }
  if (b.open)
    b.message = fmt::format(
        "circuit breaker open since {}: {} nodes newly fenced within {:.0f} s; {} more nodes "
        "with faults are not fenced (a shared cause is likely)",
        Rfc3339(b.opened_at), b.fenced_in_window, config_.breaker_window_s,
        b.suppressed_nodes.size());
  return b;
}

json HealthController::ToJson(double now) const {
  const std::map<std::string, DesiredNode> desired = Desired();
  json nodes = json::array();
  json stale = json::array();
  for (const NodeHealth& h : Nodes()) {
    auto di = desired.find(h.node);
    DesiredNode d = di != desired.end() ? di->second : DesiredNode{};
    json gpus = json::array();
    for (const GpuFence& g : h.fenced) {
      json probation_ends = nullptr;
      if (!g.faulty && g.clean_since && !h.held)
        probation_ends = Rfc3339(*g.clean_since + g.probation_s);
      gpus.push_back({{"index", g.index},
                      {"uuid", g.uuid},
                      {"faulty", g.faulty},
                      {"severity", SeverityName(g.worst)},
                      {"fenced_at", Rfc3339(g.fenced_at)},
                      {"probation_seconds", g.probation_s},
                      {"probation_ends", probation_ends},
                      {"faults_in_window", g.faults_in_window}});
    }
    if (h.stale) stale.push_back(h.node);
    nodes.push_back(
        {{"node", h.node},
         {"last_report", Rfc3339(h.last_report)},
         {"report_age_seconds", std::max(0.0, now - h.last_report)},
         {"stale", h.stale},
         {"held", h.held},
         {"suppressed", h.suppressed},
         {"taint", d.taint == TaintEffect::kNone ? json(nullptr) : json(TaintEffectName(d.taint))},
         {"condition",
          {{"status", d.condition.status},
           {"reason", d.condition.reason},
           {"message", d.condition.message}}},
         {"fenced_gpus", std::move(gpus)}});
  }
  json incidents = json::array();
  for (auto it = incidents_.rbegin(); it != incidents_.rend() && incidents.size() < 200; ++it) {
    const GpuIncident& i = it->incident;
    incidents.push_back({{"id", i.id},
                         {"node", it->node},
                         {"gpu_index", i.gpu_index},
                         {"gpu_uuid", i.gpu_uuid},
                         {"cause", i.cause},
                         {"severity", SeverityName(i.severity)},
                         {"xid", i.xid ? json(*i.xid) : json(nullptr)},
                         {"message", i.message},
                         {"evidence", EvidenceListJson(IncidentEvidence(*it))},
                         {"opened_at", Rfc3339(i.opened_at)},
                         {"last_seen", Rfc3339(i.last_seen)},
                         {"closed_at", i.closed_at ? json(Rfc3339(*i.closed_at)) : json(nullptr)},
                         {"occurrences", i.occurrences},
                         {"fenced", it->fenced}});
  }
  const BreakerState b = Breaker();
  return {{"enabled", config_.enabled},
          {"nodes", std::move(nodes)},
          {"incidents", std::move(incidents)},
          {"stale_agents", std::move(stale)},
          {"circuit_breaker",
           {{"open", b.open},
            {"opened_at", b.open ? json(Rfc3339(b.opened_at)) : json(nullptr)},
            {"fenced_in_window", b.fenced_in_window},
            {"reporting_nodes", b.reporting_nodes},
            {"suppressed_nodes", b.suppressed_nodes},
            {"message", b.message}}}};
}

}  // namespace chamber::health
