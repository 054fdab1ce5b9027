#include "backend/kube/queue_resource.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "common/time.h"
#include "common/yaml_reader.h"
#include "core/gpu_model_queues.h"
#include "core/io/queue_yaml.h"
#include "core/io/result_json.h"
#include "kube/errors.h"

namespace chamber::backend {

const kube::ResourceType kQueues{"chamber.io", "v1alpha1", "queues", "Queue", false};
const kube::ResourceType kCustomResourceDefinitions{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false};

namespace {

using nlohmann::json;

// The JSON tree as a YAML tree, so that core/io's reader decodes it. Built node by node, the
// tree has no source marks, so errors read "<source>: field <path>: <problem>".
YAML::Node ToYaml(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      YAML::Node map(YAML::NodeType::Map);
      for (const auto& [key, value] : j.items()) map[key] = ToYaml(value);
      return map;
    }
    case json::value_t::array: {
      YAML::Node seq(YAML::NodeType::Sequence);
      for (const json& value : j) seq.push_back(ToYaml(value));
      return seq;
    }
    case json::value_t::string:
      return YAML::Node(j.get<std::string>());
    case json::value_t::null:
    case json::value_t::discarded:
      return YAML::Node(YAML::NodeType::Null);
    default:  // numbers and booleans: their JSON text is the YAML scalar
      return YAML::Node(j.dump());
  }
}

// A number in YAML 1.2's core schema: [-+]?(.digits|digits[.digits])([eE][-+]?digits)?
bool IsYamlNumber(std::string_view s, bool* integer) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  *integer = true;
  if (i < s.size() && s[i] == '.') {
    *integer = false;
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    *integer = false;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  if (s == "null" || s == "Null" || s == "NULL" || s == "~") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  bool integer = false;
  if (IsYamlNumber(s, &integer)) {
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    if (integer) {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
      if (ec == std::errc() && end == s.data() + s.size()) return v;
    }
    const double d = std::strtod(s.c_str(), nullptr);
    if (std::isfinite(d)) return d;
  }
  return s;
}

Result<json> YamlToJson(const YAML::Node& node, const YamlReader& y, const std::string& path) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return y.Error(kv.first, path, "keys must be plain strings");
        const std::string& key = kv.first.Scalar();
        CHAMBER_ASSIGN_OR_RETURN(out[key],
                                 YamlToJson(kv.second, y, path.empty() ? key : path + "." + key));
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        CHAMBER_ASSIGN_OR_RETURN(json item,
                                 YamlToJson(node[i], y, path + "[" + std::to_string(i) + "]"));
        out.push_back(std::move(item));
      }
      return out;
    }
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    default:
      return json(nullptr);
  }
}

json Amounts(const core::Resources& r) {
  return {{"gpu", core::io::GpuAmountJson(r.gpu_milli())},
          {"cpu", CpuQuantity(r.cpu_milli())},
          {"memory", MemoryQuantity(r.memory_bytes())}};
}

int64_t RoundShare(double v) { return std::isfinite(v) ? std::llround(v) : 0; }

// A fair share of GPUs (thousandths) as the status writes it: GPUs to 2 decimals.
double GpuShareJson(double milli) {
  const double gpus = milli / core::kMilliPerGpu;
  return std::isfinite(gpus) ? std::round(gpus * 100) / 100 : 0.0;
}

}  // namespace

Result<core::Queue> QueueFromResource(const json& object) {
  if (!object.is_object()) return Status::InvalidArgument("Queue object: expected a JSON object");
  const json* name = nullptr;
  if (auto meta = object.find("metadata"); meta != object.end() && meta->is_object())
    if (auto n = meta->find("name");
        n != meta->end() && n->is_string() && !n->get_ref<const std::string&>().empty())
      name = &*n;
  if (name == nullptr)
    return Status::InvalidArgument("Queue object: field metadata.name: a Queue needs a name");
  core::Queue q;
  q.name = name->get<std::string>();
  const std::string source = "queue " + q.name;
  if (auto kind = object.find("kind"); kind != object.end() && *kind != "Queue")
    return Status::InvalidArgument(source + ": field kind: expected Queue, got " + kind->dump());
  if (auto api = object.find("apiVersion");
      api != object.end() && *api != json(kQueues.ApiVersion()))
    return Status::InvalidArgument(source + ": field apiVersion: expected " + kQueues.ApiVersion() +
                                   ", got " + api->dump());
  const auto spec = object.find("spec");
  if (spec == object.end() || spec->is_null()) return q;
  const YamlReader y{source};
  CHAMBER_RETURN_IF_ERROR(core::io::ParseQueueSpec(y, ToYaml(*spec), "spec", &q));
  return q;
}

std::string CpuQuantity(int64_t millicores) {
  if (millicores % 1000 == 0) return std::to_string(millicores / 1000);
  return std::to_string(millicores) + "m";
}

std::string MemoryQuantity(int64_t bytes) {
  static constexpr std::pair<int64_t, const char*> kUnits[] = {{int64_t{1} << 50, "Pi"},
                                                               {int64_t{1} << 40, "Ti"},
                                                               {int64_t{1} << 30, "Gi"},
                                                               {int64_t{1} << 20, "Mi"},
                                                               {int64_t{1} << 10, "Ki"}};
  for (const auto& [size, suffix] : kUnits)
    if (bytes != 0 && bytes % size == 0) return std::to_string(bytes / size) + suffix;
  return std::to_string(bytes);
}

json QueueStatusJson(const core::QueueStatus& s, int64_t observed_generation) {
  const auto share = [&](core::Resource r) { return s.fair_share[static_cast<int>(r)]; };
  json valid = {{"type", "Valid"}, {"observedGeneration", observed_generation}};
  if (s.error.empty()) {
    valid["status"] = "True";
    valid["reason"] = "Accepted";
    valid["message"] = "the scheduler accepts the spec";
  } else {
    valid["status"] = "False";
    valid["reason"] = "InvalidSpec";
    valid["message"] = s.error;
  }
  return {
      {"observedGeneration", observed_generation},
      {"allocated", Amounts(s.allocated)},
      {"fairShare",
       {{"gpu", GpuShareJson(share(core::Resource::kGpu))},
        {"cpu", CpuQuantity(RoundShare(share(core::Resource::kCpu)))},
        {"memory", MemoryQuantity(RoundShare(share(core::Resource::kMemory)))}}},
      {"borrowed", Amounts(s.borrowed)},
      {"lent", Amounts(s.lent)},
      {"pendingWorkloads", s.pending_workloads},
      {"runningWorkloads", s.running_workloads},
      {"conditions", json::array({valid})},
  };
}

json QueueModelStatusJson(const core::QueueStatus& s) {
  const std::string_view owner = core::GpuModelQueueOwner(s.name);
  return {{"name", s.name.substr(std::min(s.name.size(), owner.size() + 1))},
          {"allocated", core::io::GpuAmountJson(s.allocated.gpu_milli())},
          {"fairShare", GpuShareJson(s.fair_share[static_cast<int>(core::Resource::kGpu)])},
          {"borrowed", core::io::GpuAmountJson(s.borrowed.gpu_milli())},
          {"pendingWorkloads", s.pending_workloads},
          {"runningWorkloads", s.running_workloads}};
}

json DecayedUsageJson(double gpu_hours, int64_t unix_ms) {
  const auto at = std::chrono::system_clock::time_point(std::chrono::milliseconds(unix_ms));
  return {{"gpuHours", std::round(std::max(0.0, gpu_hours) * 1000) / 1000},
          {"time", FormatRfc3339(at)}};
}

namespace {

// `holder`.decayedUsage (a queue's status, or an entry of its status.models), if it reads.
std::optional<StoredUsage> StoredUsageIn(const json& holder) {
  if (!holder.is_object() || !holder.contains("decayedUsage")) return {};
  const json& u = holder["decayedUsage"];
  if (!u.is_object() || !u.contains("gpuHours") || !u["gpuHours"].is_number() ||
      !u.contains("time") || !u["time"].is_string())
    return {};
  const double gpu_hours = u["gpuHours"].get<double>();
  Result<std::chrono::system_clock::time_point> at = ParseRfc3339(u["time"].get<std::string>());
  if (!at.ok() || !std::isfinite(gpu_hours) || gpu_hours < 0) return {};
  return StoredUsage{
      gpu_hours,
      std::chrono::duration_cast<std::chrono::milliseconds>(at->time_since_epoch()).count()};
}

const json* StatusOf(const json& object) {
  if (!object.is_object() || !object.contains("status")) return nullptr;
  const json& status = object["status"];
  return status.is_object() ? &status : nullptr;
}

}  // namespace

std::optional<StoredUsage> DecayedUsageFromResource(const json& object) {
  const json* status = StatusOf(object);
  return status != nullptr ? StoredUsageIn(*status) : std::nullopt;
}

std::vector<std::pair<std::string, StoredUsage>> ModelDecayedUsageFromResource(const json& object) {
  std::vector<std::pair<std::string, StoredUsage>> out;
  const json* status = StatusOf(object);
  if (status == nullptr || !status->contains("models") || !(*status)["models"].is_array())
    return out;
  for (const json& m : (*status)["models"]) {
    if (!m.is_object() || !m.contains("name") || !m["name"].is_string()) continue;
    const std::string name = m["name"].get<std::string>();
    if (name.empty()) continue;
    if (std::optional<StoredUsage> u = StoredUsageIn(m)) out.emplace_back(name, *u);
  }
  return out;
}

Result<std::vector<json>> ManifestToJson(std::string_view yaml_text, std::string_view source) {
  const YamlReader y{std::string(source)};
  CHAMBER_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, y.LoadAll(yaml_text));
  std::vector<json> out;
  for (const YAML::Node& doc : docs) {
    if (doc.IsNull()) continue;
    CHAMBER_RETURN_IF_ERROR(y.ExpectMap(doc, "(top level)"));
    CHAMBER_ASSIGN_OR_RETURN(json j, YamlToJson(doc, y, ""));
    out.push_back(std::move(j));
  }
  return out;
}

Status ApplyQueueCrd(kube::Client& client, const json& crd, std::chrono::milliseconds timeout) {
  return ApplyCrd(client, crd, timeout);
}

Status ApplyCrd(kube::Client& client, const json& crd, std::chrono::milliseconds timeout) {
  kube::ApplyOptions options;
  options.field_manager = "chamber";
  options.force = true;
  const std::string name = crd.value("/metadata/name"_json_pointer, std::string());
  if (name.empty()) return Status::InvalidArgument("a CustomResourceDefinition without a name");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A CRD being deleted cannot be applied again until its Queues are gone and it is removed.
  while (true) {
    Result<json> existing = client.Get(kCustomResourceDefinitions, "", name);
    if (!existing.ok() && kube::IsNotFound(existing.status())) break;
    CHAMBER_RETURN_IF_ERROR(existing.status());
    if (!existing->value("/metadata/deletionTimestamp"_json_pointer, json()).is_string()) break;
    if (std::chrono::steady_clock::now() >= deadline)
      return Status::Unavailable("CustomResourceDefinition " + name + " is still being deleted");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHAMBER_RETURN_IF_ERROR(
      client.Apply(kCustomResourceDefinitions, "", name, crd, options).status());
  std::string last = "no conditions yet";
  while (true) {
    CHAMBER_ASSIGN_OR_RETURN(json got, client.Get(kCustomResourceDefinitions, "", name));
    for (const json& c : got.value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") != "Established") continue;
      if (c.value("status", "") == "True") return Status::Ok();
      last = c.value("reason", "") + ": " + c.value("message", "");
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("CustomResourceDefinition " + name + " is not Established after " +
                             std::to_string(timeout.count()) + " ms (" + last + ")");
}

}  // namespace chamber::backend
