#include "core/io/config_yaml.h"

#include <sstream>

#include "common/time.h"
#include "common/yaml_reader.h"

namespace chamber::core::io {

Result<EngineConfig> ReadEngineConfig(const ConfigFile& file) {
  const YamlReader& y = file.reader();
  const YAML::Node& root = file.root();
  EngineConfig c;
  if (root.IsNull()) return c;  // an empty file means every default
  // `health` belongs to chamberd's health controller and `pricing` to its fleet pools (cost);
  // chamberd reads and checks them.
  CHAMBER_RETURN_IF_ERROR(y.CheckKeys(
      root, "",
      {"queueOrder", "fairShare", "queueing", "preemption", "cyclePeriod", "health", "pricing"}));

  if (const YAML::Node qo = root["queueOrder"]) {
    CHAMBER_ASSIGN_OR_RETURN(std::string s, y.String(qo, "queueOrder"));
    if (s == "FairShare") {
      c.queue_order = QueueOrder::kFairShare;
    } else if (s == "DominantShare") {
      c.queue_order = QueueOrder::kDominantShare;
    } else if (s == "OldestHead") {
      c.queue_order = QueueOrder::kOldestHead;
    } else {
      return y.Error(qo, "queueOrder",
                     "expected FairShare, DominantShare or OldestHead, got \"" + s + "\"");
    }
  }

  if (const YAML::Node fs = root["fairShare"]) {
    CHAMBER_RETURN_IF_ERROR(y.CheckKeys(fs, "fairShare", {"usageHalfLife", "usageWeight"}));
    if (fs["usageHalfLife"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.usage_half_life,
                               y.Dur(fs["usageHalfLife"], "fairShare.usageHalfLife"));
    }
    if (fs["usageWeight"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.usage_weight,
                               y.Double(fs["usageWeight"], "fairShare.usageWeight"));
      if (c.usage_weight < 0)
        return y.Error(fs["usageWeight"], "fairShare.usageWeight", "must not be negative");
    }
  }
  if (const YAML::Node q = root["queueing"]) {
    CHAMBER_ASSIGN_OR_RETURN(std::string s, y.String(q, "queueing"));
    if (s == "BestEffort") {
      c.default_queueing = QueueingStrategy::kBestEffort;
    } else if (s == "StrictFIFO") {
      c.default_queueing = QueueingStrategy::kStrictFifo;
    } else {
      return y.Error(q, "queueing", "expected BestEffort or StrictFIFO, got \"" + s + "\"");
    }
  }
  if (const YAML::Node p = root["preemption"]) {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(p, "preemption",
                    {"reclaim", "fairShareReclaim", "priority", "minRuntime", "maxPerWindow",
                     "window", "checkpointGraceSeconds", "onUnhealthyGpu"}));
    if (p["reclaim"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.reclaim_enabled, y.Bool(p["reclaim"], "preemption.reclaim"));
    }
    if (p["fairShareReclaim"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.fair_share_reclaim_enabled,
                               y.Bool(p["fairShareReclaim"], "preemption.fairShareReclaim"));
    }
    if (p["priority"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.priority_preemption_enabled,
                               y.Bool(p["priority"], "preemption.priority"));
    }
    if (p["minRuntime"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.min_runtime, y.Dur(p["minRuntime"], "preemption.minRuntime"));
    }
    if (p["maxPerWindow"]) {
      CHAMBER_ASSIGN_OR_RETURN(int64_t v, y.Int(p["maxPerWindow"], "preemption.maxPerWindow"));
      if (v < 1 || v > 1000000)
        return y.Error(p["maxPerWindow"], "preemption.maxPerWindow",
                       "must be between 1 and 1000000 (turn preemption off with reclaim and "
                       "priority instead)");
      c.max_preemptions_per_window = static_cast<int32_t>(v);
    }
    if (p["window"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.preemption_window, y.Dur(p["window"], "preemption.window"));
      if (c.preemption_window.count() <= 0)
        return y.Error(p["window"], "preemption.window", "must be longer than zero");
    }
    if (p["checkpointGraceSeconds"]) {
      CHAMBER_ASSIGN_OR_RETURN(
          int64_t v, y.Int(p["checkpointGraceSeconds"], "preemption.checkpointGraceSeconds"));
      if (v < 0 || v > 86400)
        return y.Error(p["checkpointGraceSeconds"], "preemption.checkpointGraceSeconds",
                       "must be between 0 and 86400");
      c.default_checkpoint_grace_seconds = static_cast<int32_t>(v);
    }
    if (p["onUnhealthyGpu"]) {
      CHAMBER_ASSIGN_OR_RETURN(c.preempt_on_unhealthy_gpu,
                               y.Bool(p["onUnhealthyGpu"], "preemption.onUnhealthyGpu"));
    }
  }
  if (const YAML::Node cp = root["cyclePeriod"]) {
    CHAMBER_ASSIGN_OR_RETURN(c.cycle_period, y.Dur(cp, "cyclePeriod"));
    if (c.cycle_period < Duration(10)) return y.Error(cp, "cyclePeriod", "must be at least 10ms");
  }
  return c;
}

Result<EngineConfig> ParseEngineConfig(std::string_view text, std::string_view source) {
  CHAMBER_ASSIGN_OR_RETURN(ConfigFile file, ConfigFile::Parse(text, std::string(source)));
  return ReadEngineConfig(file);
}

std::string EngineConfigToYaml(const EngineConfig& c) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::ostringstream o;
  const char* order = c.queue_order == QueueOrder::kDominantShare ? "DominantShare"
                      : c.queue_order == QueueOrder::kOldestHead  ? "OldestHead"
                                                                  : "FairShare";
  o << "queueOrder: " << order << "\n"
    << "fairShare:\n"
    << "  usageHalfLife: " << FormatDuration(c.usage_half_life) << "\n"
    << "  usageWeight: " << c.usage_weight << "\n"
    << "queueing: "
    << (c.default_queueing == QueueingStrategy::kStrictFifo ? "StrictFIFO" : "BestEffort") << "\n"
    << "preemption:\n"
    << "  reclaim: " << b(c.reclaim_enabled) << "\n"
    << "  fairShareReclaim: " << b(c.fair_share_reclaim_enabled) << "\n"
    << "  priority: " << b(c.priority_preemption_enabled) << "\n"
    << "  minRuntime: " << FormatDuration(c.min_runtime) << "\n"
    << "  maxPerWindow: " << c.max_preemptions_per_window << "\n"
    << "  window: " << FormatDuration(c.preemption_window) << "\n"
    << "  checkpointGraceSeconds: " << c.default_checkpoint_grace_seconds << "\n"
    << "  onUnhealthyGpu: " << b(c.preempt_on_unhealthy_gpu) << "\n"
    << "cyclePeriod: " << FormatDuration(c.cycle_period) << "\n";
  return o.str();
}

}  // namespace chamber::core::io
