#include "health/health_writer.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

#include "backend/kube/snapshot_builder.h"
#include "common/time.h"
#include "kube/client.h"
#include "kube/errors.h"

namespace chamber::health {

using kube::Json;

namespace {

// The API server refuses longer Event notes (events.k8s.io/v1); core/v1 messages stay within it.
constexpr size_t kEventMessageLimit = 1024;

const Json* Field(const Json& j, std::initializer_list<const char*> path) {
  const Json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string Annotation(const Json& node, const char* key) {
  const Json* v = Field(node, {"metadata", "annotations", key});
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

std::optional<Json> NodePatch(const Json& node, const DesiredNode& d) {
  Json patch = Json::object();
  const std::string want_gpus = backend::FormatIndexList(d.unhealthy_gpus);
  if (Annotation(node, backend::keys::kUnhealthyGpus) != want_gpus)
    patch["metadata"]["annotations"][backend::keys::kUnhealthyGpus] =
        want_gpus.empty() ? Json(nullptr) : Json(want_gpus);
  const std::string want_history = FormatFaultHistory(d.fault_history);
  if (Annotation(node, kFaultHistoryAnnotation) != want_history)
    patch["metadata"]["annotations"][kFaultHistoryAnnotation] =
        want_history.empty() ? Json(nullptr) : Json(want_history);
  if (!d.gpu_uuids.empty()) {
    std::string want_uuids;
    for (size_t i = 0; i < d.gpu_uuids.size(); ++i) want_uuids += (i ? "," : "") + d.gpu_uuids[i];
    if (Annotation(node, backend::keys::kGpuUuids) != want_uuids)
      patch["metadata"]["annotations"][backend::keys::kGpuUuids] = want_uuids;
  }
  const std::string want_hold = d.held ? "true" : "";
  if (Annotation(node, kHoldAnnotation) != want_hold)
    patch["metadata"]["annotations"][kHoldAnnotation] =
        want_hold.empty() ? Json(nullptr) : Json(want_hold);

  if (d.labels) {
    // Exactly the agent's labels: set what differs, remove agent keys the report dropped, and
    // leave every other label alone.
    const std::string_view prefix = kAgentLabelPrefix;
    const Json* have = Field(node, {"metadata", "labels"});
    for (const auto& [key, value] : *d.labels) {
      if (key.rfind(prefix, 0) != 0) continue;
      const Json* v = have && have->is_object() && have->contains(key) ? &(*have)[key] : nullptr;
      if (!v || !v->is_string() || v->get<std::string>() != value)
        patch["metadata"]["labels"][key] = value;
    }
    if (have && have->is_object()) {
      for (const auto& [key, value] : have->items())
        if (key.rfind(prefix, 0) == 0 && !d.labels->contains(key))
          patch["metadata"]["labels"][key] = nullptr;
    }
  }

  const Json* cur = Field(node, {"spec", "taints"});
  Json taints = Json::array();
  bool ours_ok = false;
  if (cur && cur->is_array()) {
    for (const Json& t : *cur) {
      const bool ours = t.is_object() && t.value("key", "") == kTaintKey;
      if (!ours) {
        taints.push_back(t);
      } else if (!ours_ok && d.taint != TaintEffect::kNone &&
                 t.value("effect", "") == TaintEffectName(d.taint)) {
        taints.push_back(t);  // keep it as it is (timeAdded)
        ours_ok = true;
      }
    }
  }
  if (d.taint != TaintEffect::kNone && !ours_ok)
    taints.push_back({{"key", kTaintKey}, {"effect", TaintEffectName(d.taint)}});
  const Json before = cur && cur->is_array() ? *cur : Json::array();
  if (taints != before) patch["spec"]["taints"] = taints;

  if (patch.empty()) return std::nullopt;
  // A merge patch that carries the resourceVersion fails with 409 when the node changed since.
  patch["metadata"]["resourceVersion"] = node["metadata"].value("resourceVersion", "");
  return patch;
}

std::optional<Json> ConditionPatch(const Json& node, const DesiredNode& d, const std::string& now) {
  const Json* conds = Field(node, {"status", "conditions"});
  int index = -1;
  if (conds && conds->is_array()) {
    for (size_t i = 0; i < conds->size(); ++i)
      if ((*conds)[i].is_object() && (*conds)[i].value("type", "") == kConditionType)
        index = static_cast<int>(i);
  }
  Json cond = {{"type", kConditionType},       {"status", d.condition.status},
               {"reason", d.condition.reason}, {"message", d.condition.message},
               {"lastHeartbeatTime", now},     {"lastTransitionTime", now}};
  if (index >= 0) {
    const Json& old = (*conds)[index];
    if (old.value("status", "") == d.condition.status &&
        old.value("reason", "") == d.condition.reason &&
        old.value("message", "") == d.condition.message)
      return std::nullopt;
    if (old.value("status", "") == d.condition.status && old.contains("lastTransitionTime"))
      cond["lastTransitionTime"] = old["lastTransitionTime"];
  }
  Json ops = Json::array();
  ops.push_back({{"op", "test"},
                 {"path", "/metadata/resourceVersion"},
                 {"value", node["metadata"].value("resourceVersion", "")}});
  if (index >= 0) {
    ops.push_back({{"op", "replace"},
                   {"path", "/status/conditions/" + std::to_string(index)},
                   {"value", cond}});
  } else if (conds && conds->is_array()) {
    ops.push_back({{"op", "add"}, {"path", "/status/conditions/-"}, {"value", cond}});
  } else if (Field(node, {"status"}) != nullptr) {
    ops.push_back({{"op", "add"}, {"path", "/status/conditions"}, {"value", Json::array({cond})}});
  } else {
    ops.push_back({{"op", "add"}, {"path", "/status"}, {"value", {{"conditions", {cond}}}}});
  }
  return ops;
}

std::string FormatFaultHistory(const FaultHistory& h) {
  std::string out;
  for (const auto& [index, times] : h) {
    if (times.empty()) continue;
    if (!out.empty()) out += ';';
    out += std::to_string(index) + ':';
    for (size_t i = 0; i < times.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(static_cast<int64_t>(std::floor(times[i])));
    }
  }
  return out;
}

Result<FaultHistory> ParseFaultHistory(std::string_view text) {
  FaultHistory out;
  auto bad = [&](std::string_view entry, const std::string& why) {
    return Status::InvalidArgument(std::string("annotation ") + kFaultHistoryAnnotation +
                                   ": entry \"" + std::string(entry) + "\": " + why);
  };
  auto number = [](std::string_view s, int64_t max, int64_t* v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty() && *v >= 0 && *v <= max;
  };
  size_t pos = 0;
  while (!text.empty() && pos <= text.size()) {
    size_t end = text.find(';', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view entry = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = entry.find(':');
    if (colon == std::string_view::npos) return bad(entry, "expected <gpu index>:<times>");
    int64_t index = 0;
    if (!number(entry.substr(0, colon), 1023, &index))
      return bad(entry, "the GPU index is not a number from 0 to 1023");
    if (out.contains(static_cast<int>(index))) return bad(entry, "GPU index listed twice");
    std::vector<double>& times = out[static_cast<int>(index)];
    std::string_view rest = entry.substr(colon + 1);
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view t = rest.substr(0, comma);
      int64_t v = 0;
      if (!number(t, int64_t{1} << 40, &v))
        return bad(entry, "\"" + std::string(t) + "\" is not a time in unix seconds");
      times.push_back(static_cast<double>(v));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    std::sort(times.begin(), times.end());
  }
  return out;
}

std::optional<ObservedFence> ObserveFence(const Json& node) {
  const std::string gpus = Annotation(node, backend::keys::kUnhealthyGpus);
  const bool held = Annotation(node, kHoldAnnotation) == "true";
  const std::string history = Annotation(node, kFaultHistoryAnnotation);
  if (gpus.empty() && !held && history.empty()) return std::nullopt;
  ObservedFence f;
  f.held = held;
  if (Result<FaultHistory> h = ParseFaultHistory(history); h.ok()) {
    f.history = std::move(*h);
  } else {
    f.history_error = h.status().message();
  }
  Result<std::vector<int>> idx = backend::ParseIndexList(gpus);
  // Not ours to interpret: the snapshot builder takes every GPU as unhealthy and says why.
  if (!idx.ok()) return std::nullopt;
  f.gpus = std::move(*idx);
  return f;
}

HealthWriter::HealthWriter(kube::Client* client, NodeLookup lookup, bool write_events)
    : client_(client), lookup_(std::move(lookup)), write_events_(write_events) {}

Json HealthWriter::Current(const std::string& name) {
  std::shared_ptr<const kube::Node> n = lookup_(name);
  if (!n) return nullptr;
  auto w = written_.find(name);
  // The informer has not seen our last write yet: start from what the write returned.
  if (w != written_.end()) {
    const std::vector<std::string>& old = w->second.superseded;
    if (std::find(old.begin(), old.end(), n->metadata.resource_version) != old.end())
      return w->second.after;
    written_.erase(w);
  }
  if (n->raw.is_object() && n->raw.contains("metadata")) return n->raw;
  return n->ToJson();
}

Status HealthWriter::ApplyNode(const DesiredNode& d) {
  Json cur = Current(d.node);
  if (cur.is_null()) {
    if (!missing_logged_[d.node])
      spdlog::warn("health: an agent reports node {}, but there is no such Node", d.node);
    missing_logged_[d.node] = true;
    return Status::Ok();
  }
  missing_logged_.erase(d.node);
  Status last;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) {
      Result<Json> fresh = client_->Get(kube::resources::kNodes, "", d.node);
      if (!fresh.ok()) return fresh.status();
      cur = std::move(*fresh);
    }
    Written written;
    if (auto it = written_.find(d.node); it != written_.end())
      written.superseded = it->second.superseded;
    if (std::optional<Json> np = NodePatch(cur, d)) {
      Result<Json> r = client_->MergePatch(kube::resources::kNodes, "", d.node, *np);
      if (!r.ok()) {
        if (kube::IsConflict(r.status())) {
          ++stats_.conflicts;
          last = r.status();
          continue;
        }
        ++stats_.errors;
        return r.status();
      }
      ++stats_.node_patches;
      written.superseded.push_back(cur["metadata"].value("resourceVersion", ""));
      cur = std::move(*r);
      written.after = cur;
      written_[d.node] = written;
    }
    if (std::optional<Json> cp =
            ConditionPatch(cur, d, FormatRfc3339(std::chrono::system_clock::now()))) {
      Result<Json> r = client_->JsonPatch(kube::resources::kNodes, "", d.node, *cp, "status");
      if (!r.ok()) {
        if (kube::IsConflict(r.status()) || kube::IsInvalid(r.status())) {
          ++stats_.conflicts;  // the resourceVersion test failed: the node changed
          last = r.status();
          continue;
        }
        ++stats_.errors;
        return r.status();
      }
      ++stats_.status_patches;
      written.superseded.push_back(cur["metadata"].value("resourceVersion", ""));
      written.after = std::move(*r);
      written_[d.node] = std::move(written);
    }
    return Status::Ok();
  }
  ++stats_.errors;
  return Status::Unavailable("node " + d.node +
                             ": still conflicting after 4 attempts: " + last.message());
}

Status HealthWriter::Apply(const std::map<std::string, DesiredNode>& desired,
                           const std::vector<HealthChange>& changes) {
  Status first;
  for (const auto& [name, d] : desired) {
    Status s = ApplyNode(d);
    if (!s.ok()) {
      spdlog::warn("health: writing node {}: {}", name, s.message());
      if (first.ok()) first = s;
    }
  }
  if (!write_events_) return first;
  for (const HealthChange& c : changes) {
    if (c.node.empty()) continue;
    std::shared_ptr<const kube::Node> n = lookup_(c.node);
    if (!n) continue;
    const char* reason = nullptr;
    bool warning = true;
    switch (c.kind) {
      case HealthChange::Kind::kFenced:
        reason = "GpuFenced";
        break;
      case HealthChange::Kind::kUnfenced:
        reason = "GpuReturned";
        warning = false;
        break;
      case HealthChange::Kind::kHeld:
        reason = "GpuHealthHold";
        break;
      case HealthChange::Kind::kCleared:
        reason = "GpuHealthCleared";
        warning = false;
        break;
      case HealthChange::Kind::kStale:
        reason = "AgentStale";
        break;
      case HealthChange::Kind::kBreakerOpened:
        reason = "HealthCircuitBreakerOpen";
        break;
      case HealthChange::Kind::kRequeued:
        reason = "GpuWorkloadsRequeued";
        break;
      case HealthChange::Kind::kBreakerClosed:
        break;
    }
    if (!reason) continue;
    kube::EventSpec e;
    e.involved = {{"kind", "Node"},
                  {"apiVersion", "v1"},
                  {"metadata", {{"name", c.node}, {"uid", n->metadata.uid}}}};
    e.reason = reason;
    e.message = LimitText(c.message, kEventMessageLimit);
    e.type = warning ? "Warning" : "Normal";
    e.component = "chamber-health";
    Result<Json> r = client_->CreateEvent(e);
    if (r.ok()) {
      ++stats_.events;
    } else {
      spdlog::debug("health: event on node {}: {}", c.node, r.status().message());
    }
  }
  return first;
}

}  // namespace chamber::health
