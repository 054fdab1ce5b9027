#include "sim/cluster_spec.h"

#include "common/file.h"
#include "common/yaml_reader.h"
#include "sim/trace/trace.h"

namespace chamber::sim {

std::string_view PricingTypeName(PricingType p) {
  switch (p) {
    case PricingType::kOnDemand:
      return "on-demand";
    case PricingType::kSpot:
      return "spot";
    case PricingType::kReserved:
      return "reserved";
  }
  return "unknown";
}

int64_t ClusterSpec::TotalGpus() const {
  int64_t n = 0;
  for (const NodePool& p : pools) n += static_cast<int64_t>(p.count) * p.gpus_per_node;
  return n;
}

namespace {

Status ParsePool(const YamlReader& y, const YAML::Node& e, const std::string& path, NodePool* p) {
  CHAMBER_RETURN_IF_ERROR(
      y.CheckKeys(e, path,
                  {"name", "count", "gpusPerNode", "gpuModel", "gpuMemory", "cpu", "memory", "zone",
                   "nodesPerBlock", "nodesPerNvlinkDomain", "price", "taints", "labels"}));
  if (!e["name"]) return y.Error(e, path + ".name", "a pool needs a name");
  CHAMBER_ASSIGN_OR_RETURN(p->name, y.String(e["name"], path + ".name"));
  if (p->name.empty()) return y.Error(e["name"], path + ".name", "a pool needs a name");
  auto bounded = [&](const char* key, int64_t lo, int64_t hi, int32_t* out) -> Status {
    if (!e[key]) return Status::Ok();
    CHAMBER_ASSIGN_OR_RETURN(int64_t v, y.Int(e[key], path + "." + key));
    if (v < lo || v > hi)
      return y.Error(e[key], path + "." + key,
                     "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    *out = static_cast<int32_t>(v);
    return Status::Ok();
  };
  CHAMBER_RETURN_IF_ERROR(bounded("count", 0, 1'000'000, &p->count));
  CHAMBER_RETURN_IF_ERROR(bounded("gpusPerNode", 0, core::kMaxGpusPerNode, &p->gpus_per_node));
  CHAMBER_RETURN_IF_ERROR(bounded("nodesPerBlock", 0, 1'000'000, &p->nodes_per_block));
  CHAMBER_RETURN_IF_ERROR(
      bounded("nodesPerNvlinkDomain", 0, 1'000'000, &p->nodes_per_nvlink_domain));
  if (e["gpuModel"]) {
    CHAMBER_ASSIGN_OR_RETURN(p->gpu_model, y.String(e["gpuModel"], path + ".gpuModel"));
  }
  if (e["gpuMemory"]) {
    CHAMBER_ASSIGN_OR_RETURN(p->gpu_memory_bytes, y.Bytes(e["gpuMemory"], path + ".gpuMemory"));
  }
  if (e["cpu"]) {
    CHAMBER_ASSIGN_OR_RETURN(p->cpu_milli, y.CpuMilli(e["cpu"], path + ".cpu"));
  }
  if (e["memory"]) {
    CHAMBER_ASSIGN_OR_RETURN(p->memory_bytes, y.Bytes(e["memory"], path + ".memory"));
  }
  if (p->cpu_milli < 0 || p->memory_bytes < 0 || p->gpu_memory_bytes < 0)
    return y.Error(e, path, "quantities must not be negative");
  if (e["zone"]) {
    CHAMBER_ASSIGN_OR_RETURN(p->zone, y.String(e["zone"], path + ".zone"));
  }
  if (const YAML::Node price = e["price"]) {
    CHAMBER_RETURN_IF_ERROR(y.CheckKeys(price, path + ".price", {"perGpuHour", "type"}));
    if (price["perGpuHour"]) {
      CHAMBER_ASSIGN_OR_RETURN(p->price_per_gpu_hour,
                               y.Double(price["perGpuHour"], path + ".price.perGpuHour"));
      if (p->price_per_gpu_hour < 0)
        return y.Error(price["perGpuHour"], path + ".price.perGpuHour", "must not be negative");
    }
    if (price["type"]) {
      CHAMBER_ASSIGN_OR_RETURN(std::string t, y.String(price["type"], path + ".price.type"));
      if (t == "on-demand") {
        p->pricing = PricingType::kOnDemand;
      } else if (t == "spot") {
        p->pricing = PricingType::kSpot;
      } else if (t == "reserved") {
        p->pricing = PricingType::kReserved;
      } else {
        return y.Error(price["type"], path + ".price.type",
                       "expected on-demand, spot or reserved, got \"" + t + "\"");
      }
    }
  }
  if (const YAML::Node taints = e["taints"]) {
    CHAMBER_RETURN_IF_ERROR(y.ExpectList(taints, path + ".taints"));
    for (size_t i = 0; i < taints.size(); ++i) {
      const std::string tp = path + ".taints[" + std::to_string(i) + "]";
      CHAMBER_RETURN_IF_ERROR(y.CheckKeys(taints[i], tp, {"key", "value", "effect"}));
      core::Taint t;
      if (!taints[i]["key"]) return y.Error(taints[i], tp + ".key", "a taint needs a key");
      CHAMBER_ASSIGN_OR_RETURN(t.key, y.String(taints[i]["key"], tp + ".key"));
      if (taints[i]["value"]) {
        CHAMBER_ASSIGN_OR_RETURN(t.value, y.String(taints[i]["value"], tp + ".value"));
      }
      if (taints[i]["effect"]) {
        CHAMBER_ASSIGN_OR_RETURN(std::string eff, y.String(taints[i]["effect"], tp + ".effect"));
        if (eff == "NoSchedule") {
          t.effect = core::TaintEffect::kNoSchedule;
        } else if (eff == "PreferNoSchedule") {
          t.effect = core::TaintEffect::kPreferNoSchedule;
        } else if (eff == "NoExecute") {
          t.effect = core::TaintEffect::kNoExecute;
        } else {
          return y.Error(taints[i]["effect"], tp + ".effect",
                         "expected NoSchedule, PreferNoSchedule or NoExecute");
        }
      }
      p->taints.push_back(std::move(t));
    }
  }
  if (e["labels"]) {
    CHAMBER_ASSIGN_OR_RETURN(p->labels, y.StringMap(e["labels"], path + ".labels"));
  }
  return Status::Ok();
}

}  // namespace

Result<ClusterSpec> ParseClusterSpec(std::string_view text, std::string_view source) {
  YamlReader y{std::string(source)};
  CHAMBER_ASSIGN_OR_RETURN(YAML::Node root, y.Load(text));
  CHAMBER_RETURN_IF_ERROR(y.CheckKeys(root, "", {"pools"}));
  if (!root["pools"]) return y.Error(root, "pools", "a cluster needs at least one pool");
  CHAMBER_RETURN_IF_ERROR(y.ExpectList(root["pools"], "pools"));
  ClusterSpec spec;
  for (size_t i = 0; i < root["pools"].size(); ++i) {
    NodePool p;
    CHAMBER_RETURN_IF_ERROR(ParsePool(y, root["pools"][i], "pools[" + std::to_string(i) + "]", &p));
    for (const NodePool& other : spec.pools)
      if (other.name == p.name)
        return y.Error(root["pools"][i]["name"], "pools[" + std::to_string(i) + "].name",
                       "duplicate pool name " + p.name);
    spec.pools.push_back(std::move(p));
  }
  if (spec.TotalGpus() == 0 && spec.pools.empty())
    return y.Error(root["pools"], "pools", "a cluster needs at least one pool");
  return spec;
}

Result<ClusterSpec> LoadClusterSpec(const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0) {
    CHAMBER_ASSIGN_OR_RETURN(std::vector<OpenbNode> nodes, ReadOpenbNodes(path));
    ClusterSpec spec;
    for (const OpenbNode& n : nodes) {
      NodePool p;
      p.name = n.name;
      p.count = 1;
      p.gpus_per_node = n.gpus;
      p.gpu_model = n.model;
      p.cpu_milli = n.cpu_milli;
      p.memory_bytes = n.memory_bytes;
      spec.pools.push_back(std::move(p));
    }
    return spec;
  }
  CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseClusterSpec(text, path);
}

std::vector<core::Node> BuildNodes(const ClusterSpec& spec) {
  std::vector<core::Node> nodes;
  // A pool without CPU or memory never runs out of them: far more than any pod asks for, yet
  // small enough that the engine's cluster-wide sums cannot overflow (2^44 bytes, 16 TiB, over
  // half a million nodes stays below 2^63).
  constexpr int64_t kUnboundedCpu = int64_t{1} << 40;
  constexpr int64_t kUnboundedMemory = int64_t{1} << 44;
  for (const NodePool& p : spec.pools) {
    for (int32_t i = 0; i < p.count; ++i) {
      core::Node n;
      n.name = p.count == 1 && spec.pools.size() > 1 ? p.name : p.name + "-" + std::to_string(i);
      core::Labels labels = p.labels;
      labels.emplace_back("chamber.io/pool", p.name);
      n.labels = std::move(labels);
      n.taints = p.taints;
      n.allocatable = core::Resources::Of(0, p.cpu_milli > 0 ? p.cpu_milli : kUnboundedCpu,
                                          p.memory_bytes > 0 ? p.memory_bytes : kUnboundedMemory);
      n.max_pods = 1'000'000;
      n.gpus.resize(static_cast<size_t>(p.gpus_per_node));
      for (int32_t g = 0; g < p.gpus_per_node; ++g) {
        core::Gpu& gpu = n.gpus[static_cast<size_t>(g)];
        gpu.uuid = "GPU-" + n.name + "-" + std::to_string(g);
        gpu.model = p.gpu_model;
        gpu.memory_mib = p.gpu_memory_bytes / (1024 * 1024);
      }
      n.topology.zone = p.zone;
      if (p.nodes_per_block > 0)
        n.topology.block = p.name + "/block-" + std::to_string(i / p.nodes_per_block);
      if (p.nodes_per_nvlink_domain > 0)
        n.topology.nvlink_domain = p.name + "/nvl-" + std::to_string(i / p.nodes_per_nvlink_domain);
      nodes.push_back(std::move(n));
    }
  }
  return nodes;
}

}  // namespace chamber::sim
