#include "sim/cluster_spec.h"

#include <algorithm>
#include <map>

#include "common/file.h"
#include "common/yaml_reader.h"
#include "core/gpu_share.h"
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

int64_t ClusterSpec::MigGpus() const {
  int64_t n = 0;
  for (const NodePool& p : pools) n += static_cast<int64_t>(p.count) * p.mig_gpus;
  return n;
}

std::vector<core::MigResource> ClusterSpec::MigProfiles() const {
  std::map<std::string, int32_t> by_name;
  for (const NodePool& p : pools) {
    if (p.mig_gpus == 0) continue;
    const core::MigModel* model = core::FindMigModel(p.gpu_model);
    for (const auto& [name, count] : p.mig_devices) {
      const core::MigProfile* profile = model ? core::FindMigProfile(*model, name) : nullptr;
      if (profile != nullptr) by_name[name] = core::MigDeviceMilli(profile->compute_slices, 7);
    }
  }
  std::vector<core::MigResource> out;
  for (const auto& [name, milli] : by_name) out.push_back({name, milli});
  return out;
}

namespace {

// Whether instances[i..] have places on a GPU whose slots `used` are held: each at one of its
// profile's starts, clear of the others (at most 7 instances of at most 7 starts: a short search).
bool MigLayoutFits(const std::vector<const core::MigProfile*>& instances, size_t i, uint8_t used) {
  if (i == instances.size()) return true;
  const core::MigProfile& profile = *instances[i];
  for (int32_t start = 0; start < 8; ++start) {
    if ((profile.starts >> start & 1) == 0) continue;
    const uint8_t slots = core::MigSlots(profile, start);
    if ((slots & used) == 0 && MigLayoutFits(instances, i + 1, used | slots)) return true;
  }
  return false;
}

// `mig: {gpus, devices: {<profile>: <count>}}`: the layout must be the GPU model's and fit on one
// GPU in the placements NVIDIA allows.
Status ParseMig(const YamlReader& y, const YAML::Node& m, const std::string& path, NodePool* p) {
  CHAMBER_RETURN_IF_ERROR(y.CheckKeys(m, path, {"gpus", "devices"}));
  const core::MigModel* model = core::FindMigModel(p->gpu_model);
  if (model == nullptr)
    return y.Error(m, path,
                   "gpuModel \"" + p->gpu_model +
                       "\" has no MIG profiles Chamber knows (A100 40GB or 80GB, H100 80GB)");
  p->mig_gpus = p->gpus_per_node;
  if (m["gpus"]) {
    CHAMBER_ASSIGN_OR_RETURN(int64_t v, y.Int(m["gpus"], path + ".gpus"));
    if (v < 1 || v > p->gpus_per_node)
      return y.Error(
          m["gpus"], path + ".gpus",
          "must be between 1 and gpusPerNode (" + std::to_string(p->gpus_per_node) + ")");
    p->mig_gpus = static_cast<int32_t>(v);
  }
  if (!m["devices"]) return y.Error(m, path + ".devices", "a MIG layout needs its devices");
  CHAMBER_ASSIGN_OR_RETURN(auto devices, y.StringMap(m["devices"], path + ".devices"));
  std::vector<const core::MigProfile*> instances;
  for (const auto& [name, text] : devices) {
    const std::string at = path + ".devices." + name;
    const core::MigProfile* profile = core::FindMigProfile(*model, name);
    if (profile == nullptr) {
      std::string known;
      for (const core::MigProfile& k : model->profiles)
        known += (known.empty() ? "" : ", ") + std::string(k.name);
      return y.Error(m["devices"], at,
                     "no MIG profile " + name + " on " + p->gpu_model + " (" + known + ")");
    }
    CHAMBER_ASSIGN_OR_RETURN(int64_t count, y.Int(m["devices"][name], at));
    if (count < 1 || count > 7) return y.Error(m["devices"][name], at, "must be between 1 and 7");
    p->mig_devices.emplace_back(name, static_cast<int32_t>(count));
    for (int64_t i = 0; i < count; ++i) instances.push_back(profile);
  }
  if (instances.empty()) return y.Error(m["devices"], path + ".devices", "no devices");
  std::stable_sort(
      instances.begin(), instances.end(),
      [](const core::MigProfile* a, const core::MigProfile* b) { return a->size > b->size; });
  if (!MigLayoutFits(instances, 0, 0))
    return y.Error(m["devices"], path + ".devices",
                   "the devices do not fit on one " + p->gpu_model +
                       " in any of the placements NVIDIA allows");
  return Status::Ok();
}

Status ParsePool(const YamlReader& y, const YAML::Node& e, const std::string& path, NodePool* p) {
  CHAMBER_RETURN_IF_ERROR(
      y.CheckKeys(e, path,
                  {"name", "count", "gpusPerNode", "gpuModel", "gpuMemory", "cpu", "memory", "zone",
                   "nodesPerBlock", "nodesPerNvlinkDomain", "price", "taints", "labels", "mig"}));
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
  if (e["mig"]) CHAMBER_RETURN_IF_ERROR(ParseMig(y, e["mig"], path + ".mig", p));
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
  if (const size_t profiles = spec.MigProfiles().size();
      profiles > static_cast<size_t>(core::kMaxMigProfiles))
    return y.Error(root["pools"], "pools",
                   "the pools' MIG layouts name " + std::to_string(profiles) +
                       " profiles; a cluster may have at most " +
                       std::to_string(core::kMaxMigProfiles));
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
  const std::vector<core::MigResource> profiles = spec.MigProfiles();
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
      const int32_t whole = p.gpus_per_node - p.mig_gpus;
      n.gpus.resize(static_cast<size_t>(whole));
      for (int32_t g = 0; g < whole; ++g) {
        core::Gpu& gpu = n.gpus[static_cast<size_t>(g)];
        gpu.uuid = "GPU-" + n.name + "-" + std::to_string(g);
        gpu.model = p.gpu_model;
        gpu.memory_mib = p.gpu_memory_bytes / (1024 * 1024);
      }
      if (p.mig_gpus > 0) n.mig_model = p.gpu_model;
      for (const auto& [name, count] : p.mig_devices) {
        for (size_t l = 0; l < profiles.size(); ++l)
          if (profiles[l].name == name)
            n.mig_devices[l] = static_cast<uint8_t>(
                std::min<int64_t>(int64_t{count} * p.mig_gpus, core::kMaxMigDevices));
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
