// Mapping rules: which queue and priority a trace job gets (docs/traces.md, "Mapping rules").
#include <limits>

#include "common/yaml_reader.h"
#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

Result<int32_t> Int32(const YamlReader& y, const YAML::Node& node, const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(const int64_t v, y.Int(node, path));
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return y.Error(node, path, "out of range for a priority");
  }
  return static_cast<int32_t>(v);
}

Result<std::string> Name(const YamlReader& y, const YAML::Node& node, const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string s, y.String(node, path));
  if (s.empty()) return y.Error(node, path, "must not be empty");
  return s;
}

}  // namespace

Result<MappingRules> ParseMappingRules(std::string_view text, std::string_view source) {
  const YamlReader y{std::string(source)};
  CHAMBER_ASSIGN_OR_RETURN(const YAML::Node root, y.Load(text));
  MappingRules rules;
  if (root.IsNull()) return rules;  // an empty file: every default
  CHAMBER_RETURN_IF_ERROR(
      y.CheckKeys(root, "", {"queueBy", "fixedQueue", "queues", "priorities", "defaultPriority"}));
  if (const YAML::Node n = root["queueBy"]) {
    CHAMBER_ASSIGN_OR_RETURN(const std::string s, y.String(n, "queueBy"));
    if (s == "group") {
      rules.queue_by = MappingRules::QueueBy::kGroup;
    } else if (s == "user") {
      rules.queue_by = MappingRules::QueueBy::kUser;
    } else if (s == "fixed") {
      rules.queue_by = MappingRules::QueueBy::kFixed;
    } else {
      return y.Error(n, "queueBy", "expected group, user or fixed, got \"" + s + "\"");
    }
  }
  if (const YAML::Node n = root["fixedQueue"]) {
    CHAMBER_ASSIGN_OR_RETURN(rules.fixed_queue, Name(y, n, "fixedQueue"));
  }
  if (const YAML::Node n = root["queues"]) {
    CHAMBER_RETURN_IF_ERROR(y.ExpectMap(n, "queues"));
    for (const auto& kv : n) {
      CHAMBER_ASSIGN_OR_RETURN(const std::string from, Name(y, kv.first, "queues"));
      CHAMBER_ASSIGN_OR_RETURN(rules.queue_rename[from], Name(y, kv.second, "queues." + from));
    }
  }
  if (const YAML::Node n = root["priorities"]) {
    CHAMBER_RETURN_IF_ERROR(y.ExpectMap(n, "priorities"));
    for (const auto& kv : n) {
      CHAMBER_ASSIGN_OR_RETURN(const std::string group, Name(y, kv.first, "priorities"));
      CHAMBER_ASSIGN_OR_RETURN(rules.priority_by_group[group],
                               Int32(y, kv.second, "priorities." + group));
    }
  }
  if (const YAML::Node n = root["defaultPriority"]) {
    CHAMBER_ASSIGN_OR_RETURN(rules.default_priority, Int32(y, n, "defaultPriority"));
  }
  return rules;
}

void ApplyMappingRules(const MappingRules& rules, std::optional<int32_t> trace_priority,
                       TraceJob* job) {
  const auto first_of = [](const std::string& a, const std::string& b) -> const std::string& {
    static const std::string kDefault = "default";
    return !a.empty() ? a : !b.empty() ? b : kDefault;
  };
  switch (rules.queue_by) {
    case MappingRules::QueueBy::kGroup:
      job->queue = first_of(job->group, job->user);
      break;
    case MappingRules::QueueBy::kUser:
      job->queue = first_of(job->user, job->group);
      break;
    case MappingRules::QueueBy::kFixed:
      job->queue = rules.fixed_queue;
      break;
  }
  if (const auto it = rules.queue_rename.find(job->queue); it != rules.queue_rename.end()) {
    job->queue = it->second;
  }
  auto it = rules.priority_by_group.find(job->group);
  if (it == rules.priority_by_group.end() && !job->qos.empty()) {
    it = rules.priority_by_group.find(job->qos);
  }
  if (it != rules.priority_by_group.end()) {
    job->priority = it->second;
  } else {
    job->priority = trace_priority.value_or(rules.default_priority);
  }
}

}  // namespace chamber::sim
