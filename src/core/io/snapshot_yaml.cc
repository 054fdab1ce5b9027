#include "core/io/snapshot_yaml.h"

#include <unordered_map>

#include "common/file.h"
#include "common/yaml_reader.h"
#include "core/gpu_model_queues.h"
#include "core/io/queue_yaml.h"
#include "core/mig_profile.h"

namespace chamber::core::io {
namespace {

std::string At(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

Result<TaintEffect> ParseEffect(const YamlReader& y, const YAML::Node& n, const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string s, y.String(n, path));
  if (s == "NoSchedule") return TaintEffect::kNoSchedule;
  if (s == "PreferNoSchedule") return TaintEffect::kPreferNoSchedule;
  if (s == "NoExecute") return TaintEffect::kNoExecute;
  return y.Error(n, path, "expected NoSchedule, PreferNoSchedule or NoExecute, got \"" + s + "\"");
}

Result<Time> ParseTime(const YamlReader& y, const YAML::Node& n, const std::string& path) {
  return y.Dur(n, path);  // times are offsets on the snapshot's clock: "90s", "1h", or seconds
}

class SnapshotParser {
 public:
  explicit SnapshotParser(std::string source) : y_(std::move(source)) {}

  Result<Snapshot> Parse(std::string_view text) {
    CHAMBER_ASSIGN_OR_RETURN(YAML::Node root, y_.Load(text));
    if (root.IsNull()) return Snapshot{};
    CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(root, "", {"now", "nodes", "queues", "workloads"}));
    Snapshot s;
    snapshot_ = &s;
    if (root["now"]) {
      CHAMBER_ASSIGN_OR_RETURN(s.now, ParseTime(y_, root["now"], "now"));
    }
    if (const YAML::Node nodes = root["nodes"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(nodes, "nodes"));
      for (size_t i = 0; i < nodes.size(); ++i)
        CHAMBER_RETURN_IF_ERROR(ParseNodes(nodes[i], At("nodes", i), &s));
    }
    if (const YAML::Node queues = root["queues"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(queues, "queues"));
      for (size_t i = 0; i < queues.size(); ++i) {
        const std::string path = At("queues", i);
        const YAML::Node e = queues[i];
        CHAMBER_RETURN_IF_ERROR(y_.ExpectMap(e, path));
        Queue q;
        if (!e["name"]) return y_.Error(e, path + ".name", "a queue needs a name");
        CHAMBER_ASSIGN_OR_RETURN(q.name, y_.String(e["name"], path + ".name"));
        CHAMBER_RETURN_IF_ERROR(ParseQueueSpec(y_, e, path, &q, "name"));
        s.queues.push_back(std::move(q));
      }
    }
    if (const YAML::Node workloads = root["workloads"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(workloads, "workloads"));
      for (size_t i = 0; i < workloads.size(); ++i)
        CHAMBER_RETURN_IF_ERROR(ParseWorkload(workloads[i], At("workloads", i), &s));
    }
    SplitGpuModelQueues(s);  // queues per GPU model, as every caller of the engine makes them
    return s;
  }

 private:
  // The index of MIG profile `node` names in the snapshot's profiles, which gain it when new:
  // profiles in the order the file first names them, with their charge.
  Result<int8_t> MigProfileIndex(const YAML::Node& node, const std::string& path, Snapshot* s) {
    CHAMBER_ASSIGN_OR_RETURN(const std::string name, y_.String(node, path));
    for (size_t l = 0; l < s->mig_profiles.size(); ++l)
      if (s->mig_profiles[l].name == name) return static_cast<int8_t>(l);
    const int32_t milli = MigProfileMilli(name);
    if (milli <= 0)
      return y_.Error(node, path,
                      "\"" + name + "\" is not a MIG profile (forms like 1g.10gb, 3g.40gb)");
    if (s->mig_profiles.size() >= static_cast<size_t>(kMaxMigProfiles))
      return y_.Error(
          node, path,
          "a snapshot names at most " + std::to_string(kMaxMigProfiles) + " MIG profiles");
    s->mig_profiles.push_back({name, milli});
    return static_cast<int8_t>(s->mig_profiles.size() - 1);
  }

  // One entry may describe `count` identical nodes, named <name>-0, <name>-1, ...
  Status ParseNodes(const YAML::Node& e, const std::string& path, Snapshot* s) {
    CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(
        e, path,
        {"name", "count", "gpus", "gpuModel", "gpuMemory", "cpu", "memory", "maxPods", "labels",
         "taints", "unschedulable", "unhealthyGpus", "nvlinkIslands", "topology", "mig"}));
    Node n;
    if (!e["name"]) return y_.Error(e, path + ".name", "a node needs a name");
    CHAMBER_ASSIGN_OR_RETURN(n.name, y_.String(e["name"], path + ".name"));
    int64_t count = 1;
    if (e["count"]) {
      CHAMBER_ASSIGN_OR_RETURN(count, y_.Int(e["count"], path + ".count"));
      if (count < 1 || count > 100000)
        return y_.Error(e["count"], path + ".count", "must be between 1 and 100000");
    }
    int64_t gpus = 0;
    if (e["gpus"]) {
      CHAMBER_ASSIGN_OR_RETURN(gpus, y_.Int(e["gpus"], path + ".gpus"));
      if (gpus < 0 || gpus > kMaxGpusPerNode)
        return y_.Error(e["gpus"], path + ".gpus",
                        "must be between 0 and " + std::to_string(kMaxGpusPerNode));
    }
    std::string model;
    if (e["gpuModel"]) {
      CHAMBER_ASSIGN_OR_RETURN(model, y_.String(e["gpuModel"], path + ".gpuModel"));
    }
    int64_t gpu_memory = 0;
    if (e["gpuMemory"]) {
      CHAMBER_ASSIGN_OR_RETURN(gpu_memory, y_.Bytes(e["gpuMemory"], path + ".gpuMemory"));
    }
    int64_t cpu = 0, memory = 0;
    if (e["cpu"]) {
      CHAMBER_ASSIGN_OR_RETURN(cpu, y_.CpuMilli(e["cpu"], path + ".cpu"));
    }
    if (e["memory"]) {
      CHAMBER_ASSIGN_OR_RETURN(memory, y_.Bytes(e["memory"], path + ".memory"));
    }
    if (cpu < 0 || memory < 0) return y_.Error(e, path, "cpu and memory must not be negative");
    n.allocatable = Resources::Of(0, cpu, memory);
    if (e["maxPods"]) {
      CHAMBER_ASSIGN_OR_RETURN(int64_t mp, y_.Int(e["maxPods"], path + ".maxPods"));
      if (mp < 0 || mp > 100000) return y_.Error(e["maxPods"], path + ".maxPods", "out of range");
      n.max_pods = static_cast<int32_t>(mp);
    }
    if (e["labels"]) {
      CHAMBER_ASSIGN_OR_RETURN(n.labels, y_.StringMap(e["labels"], path + ".labels"));
    }
    if (const YAML::Node taints = e["taints"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(taints, path + ".taints"));
      for (size_t i = 0; i < taints.size(); ++i) {
        const std::string tp = At(path + ".taints", i);
        CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(taints[i], tp, {"key", "value", "effect"}));
        Taint t;
        if (!taints[i]["key"]) return y_.Error(taints[i], tp + ".key", "a taint needs a key");
        CHAMBER_ASSIGN_OR_RETURN(t.key, y_.String(taints[i]["key"], tp + ".key"));
        if (taints[i]["value"]) {
          CHAMBER_ASSIGN_OR_RETURN(t.value, y_.String(taints[i]["value"], tp + ".value"));
        }
        if (taints[i]["effect"]) {
          CHAMBER_ASSIGN_OR_RETURN(t.effect, ParseEffect(y_, taints[i]["effect"], tp + ".effect"));
        }
        n.taints.push_back(std::move(t));
      }
    }
    if (e["unschedulable"]) {
      CHAMBER_ASSIGN_OR_RETURN(n.unschedulable,
                               y_.Bool(e["unschedulable"], path + ".unschedulable"));
    }
    n.gpus.resize(static_cast<size_t>(gpus));
    for (Gpu& g : n.gpus) {
      g.model = model;
      g.memory_mib = gpu_memory / (1024 * 1024);
    }
    if (const YAML::Node bad = e["unhealthyGpus"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(bad, path + ".unhealthyGpus"));
      for (size_t i = 0; i < bad.size(); ++i) {
        CHAMBER_ASSIGN_OR_RETURN(int64_t g, y_.Int(bad[i], At(path + ".unhealthyGpus", i)));
        if (g < 0 || g >= gpus)
          return y_.Error(bad[i], At(path + ".unhealthyGpus", i),
                          "GPU index " + std::to_string(g) + " does not exist on this node");
        n.gpus[static_cast<size_t>(g)].healthy = false;
      }
    }
    if (const YAML::Node islands = e["nvlinkIslands"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(islands, path + ".nvlinkIslands"));
      for (size_t i = 0; i < islands.size(); ++i) {
        const std::string ip = At(path + ".nvlinkIslands", i);
        CHAMBER_RETURN_IF_ERROR(y_.ExpectList(islands[i], ip));
        for (size_t j = 0; j < islands[i].size(); ++j) {
          CHAMBER_ASSIGN_OR_RETURN(int64_t g, y_.Int(islands[i][j], At(ip, j)));
          if (g < 0 || g >= gpus)
            return y_.Error(islands[i][j], At(ip, j),
                            "GPU index " + std::to_string(g) + " does not exist");
          n.gpus[static_cast<size_t>(g)].nvlink_island = static_cast<int32_t>(i);
        }
      }
    }
    if (const YAML::Node topo = e["topology"]) {
      CHAMBER_RETURN_IF_ERROR(
          y_.CheckKeys(topo, path + ".topology", {"zone", "block", "nvlinkDomain"}));
      if (topo["zone"]) {
        CHAMBER_ASSIGN_OR_RETURN(n.topology.zone, y_.String(topo["zone"], path + ".topology.zone"));
      }
      if (topo["block"]) {
        CHAMBER_ASSIGN_OR_RETURN(n.topology.block,
                                 y_.String(topo["block"], path + ".topology.block"));
      }
      if (topo["nvlinkDomain"]) {
        CHAMBER_ASSIGN_OR_RETURN(n.topology.nvlink_domain,
                                 y_.String(topo["nvlinkDomain"], path + ".topology.nvlinkDomain"));
      }
    }
    if (const YAML::Node mig = e["mig"]) {
      // MIG devices per profile, as the device plugin's mixed strategy advertises them.
      CHAMBER_RETURN_IF_ERROR(y_.ExpectMap(mig, path + ".mig"));
      for (const auto& kv : mig) {
        const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "";
        const std::string at = path + ".mig." + name;
        CHAMBER_ASSIGN_OR_RETURN(const int8_t profile, MigProfileIndex(kv.first, at, s));
        CHAMBER_ASSIGN_OR_RETURN(const int64_t devices, y_.Int(kv.second, at));
        if (devices < 0 || devices > kMaxMigDevices)
          return y_.Error(kv.second, at, "must be between 0 and " + std::to_string(kMaxMigDevices));
        n.mig_devices[static_cast<size_t>(profile)] = static_cast<uint8_t>(devices);
      }
    }
    for (int64_t c = 0; c < count; ++c) {
      Node copy = n;
      if (count > 1) copy.name = n.name + "-" + std::to_string(c);
      for (size_t g = 0; g < copy.gpus.size(); ++g)
        copy.gpus[g].uuid = "GPU-" + copy.name + "-" + std::to_string(g);
      auto [it, inserted] = node_ids_.try_emplace(copy.name, static_cast<int32_t>(s->nodes.size()));
      if (!inserted) return y_.Error(e["name"], path + ".name", "duplicate node name " + copy.name);
      s->nodes.push_back(std::move(copy));
    }
    return Status::Ok();
  }

  Status ParsePodSet(const YAML::Node& e, const std::string& path, bool in_workload, PodSet* ps) {
    if (!in_workload) {
      CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(e, path,
                                           {"name", "count", "gpu", "gpuMemory", "mig", "cpu",
                                            "memory", "nodeSelector", "tolerations", "gpuModels"}));
      if (e["name"]) {
        CHAMBER_ASSIGN_OR_RETURN(ps->name, y_.String(e["name"], path + ".name"));
      }
    }
    const char* count_key = in_workload ? "pods" : "count";
    if (e[count_key]) {
      CHAMBER_ASSIGN_OR_RETURN(int64_t c, y_.Int(e[count_key], path + "." + count_key));
      if (c < 1 || c > 1000000)
        return y_.Error(e[count_key], path + "." + count_key, "must be between 1 and 1000000");
      ps->count = static_cast<int32_t>(c);
    }
    if (const YAML::Node gpu = e["gpu"]) {
      const std::string text = gpu.IsScalar() ? gpu.Scalar() : "";
      if (text.find_first_of(".m") != std::string::npos) {
        // A share of one GPU's compute: "0.25", "250m".
        CHAMBER_ASSIGN_OR_RETURN(const int64_t milli, y_.GpuMilli(gpu, path + ".gpu", 1000000));
        if (milli >= kMilliPerGpu && milli % kMilliPerGpu != 0)
          return y_.Error(gpu, path + ".gpu",
                          "a share of one GPU is below 1; more than one GPU is whole GPUs");
        ps->request[Resource::kGpu] = milli;
      } else {
        CHAMBER_ASSIGN_OR_RETURN(const int64_t gpus, y_.Int(gpu, path + ".gpu"));
        if (gpus < 0) return y_.Error(gpu, path + ".gpu", "must not be negative");
        if (gpus > 1000000) return y_.Error(gpu, path + ".gpu", "must be at most 1000000");
        ps->request[Resource::kGpu] = Gpus(gpus);
      }
    }
    if (const YAML::Node memory = e["gpuMemory"]) {
      // With a share: the GPU memory the pod holds.
      CHAMBER_ASSIGN_OR_RETURN(const int64_t bytes, y_.Bytes(memory, path + ".gpuMemory"));
      if (bytes <= 0) return y_.Error(memory, path + ".gpuMemory", "must be positive");
      ps->gpu_memory_mib = (bytes + 1048575) / 1048576;
    }
    if (const YAML::Node mig = e["mig"]) {
      // MIG devices of one profile per pod: {profile: 1g.10gb, devices: 1}.
      CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(mig, path + ".mig", {"profile", "devices"}));
      if (!mig["profile"])
        return y_.Error(mig, path + ".mig.profile", "MIG devices need a profile");
      CHAMBER_ASSIGN_OR_RETURN(const int8_t profile,
                               MigProfileIndex(mig["profile"], path + ".mig.profile", snapshot_));
      int64_t devices = 1;
      if (mig["devices"]) {
        CHAMBER_ASSIGN_OR_RETURN(devices, y_.Int(mig["devices"], path + ".mig.devices"));
        if (devices < 1 || devices > kMaxMigDevices)
          return y_.Error(mig["devices"], path + ".mig.devices",
                          "must be between 1 and " + std::to_string(kMaxMigDevices));
      }
      if (ps->request.gpu_milli() != 0 || ps->gpu_memory_mib != 0)
        return y_.Error(
            mig, path + ".mig",
            "a pod asks for MIG devices, whole GPUs or a share of one, not two of them");
      ps->mig = {profile, static_cast<uint8_t>(devices),
                 static_cast<int16_t>(snapshot_->mig_profiles[static_cast<size_t>(profile)].milli)};
    }
    if (e["cpu"]) {
      CHAMBER_ASSIGN_OR_RETURN(ps->request[Resource::kCpu], y_.CpuMilli(e["cpu"], path + ".cpu"));
    }
    if (e["memory"]) {
      CHAMBER_ASSIGN_OR_RETURN(ps->request[Resource::kMemory],
                               y_.Bytes(e["memory"], path + ".memory"));
    }
    if (ps->request.AnyNegative()) return y_.Error(e, path, "requests must not be negative");
    if (e["nodeSelector"]) {
      CHAMBER_ASSIGN_OR_RETURN(ps->node_selector,
                               y_.StringMap(e["nodeSelector"], path + ".nodeSelector"));
    }
    if (const YAML::Node tols = e["tolerations"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(tols, path + ".tolerations"));
      std::vector<Toleration> tolerations;
      for (size_t i = 0; i < tols.size(); ++i) {
        const std::string tp = At(path + ".tolerations", i);
        CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(tols[i], tp, {"key", "operator", "value", "effect"}));
        Toleration t;
        if (tols[i]["key"]) {
          CHAMBER_ASSIGN_OR_RETURN(t.key, y_.String(tols[i]["key"], tp + ".key"));
        }
        if (tols[i]["operator"]) {
          CHAMBER_ASSIGN_OR_RETURN(std::string op,
                                   y_.String(tols[i]["operator"], tp + ".operator"));
          if (op == "Exists") {
            t.op = Toleration::Operator::kExists;
          } else if (op != "Equal") {
            return y_.Error(tols[i]["operator"], tp + ".operator", "expected Equal or Exists");
          }
        }
        if (tols[i]["value"]) {
          CHAMBER_ASSIGN_OR_RETURN(t.value, y_.String(tols[i]["value"], tp + ".value"));
        }
        if (tols[i]["effect"]) {
          CHAMBER_ASSIGN_OR_RETURN(t.effect, ParseEffect(y_, tols[i]["effect"], tp + ".effect"));
        }
        tolerations.push_back(std::move(t));
      }
      ps->tolerations = Interned(std::move(tolerations));
    }
    if (const YAML::Node models = e["gpuModels"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(models, path + ".gpuModels"));
      for (size_t i = 0; i < models.size(); ++i) {
        CHAMBER_ASSIGN_OR_RETURN(std::string m, y_.String(models[i], At(path + ".gpuModels", i)));
        ps->gpu_models.push_back(std::move(m));
      }
    }
    return Status::Ok();
  }

  Status ParseWorkload(const YAML::Node& e, const std::string& path, Snapshot* s) {
    CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(e, path,
                                         {"name",
                                          "queue",
                                          "priority",
                                          "submitTime",
                                          "minMember",
                                          "awaitedPods",
                                          "bindRetryAt",
                                          "bindRollbacks",
                                          "bindFailure",
                                          "podSets",
                                          "pods",
                                          "gpu",
                                          "gpuMemory",
                                          "mig",
                                          "cpu",
                                          "memory",
                                          "nodeSelector",
                                          "tolerations",
                                          "gpuModels",
                                          "state",
                                          "placements",
                                          "startTime",
                                          "lastCheckpointTime",
                                          "recentPreemptions",
                                          "checkpointGraceSeconds"}));
    Workload w;
    if (!e["name"]) return y_.Error(e, path + ".name", "a workload needs a name");
    CHAMBER_ASSIGN_OR_RETURN(w.name, y_.String(e["name"], path + ".name"));
    if (e["queue"]) {
      CHAMBER_ASSIGN_OR_RETURN(w.queue, y_.String(e["queue"], path + ".queue"));
    }
    if (e["priority"]) {
      CHAMBER_ASSIGN_OR_RETURN(int64_t p, y_.Int(e["priority"], path + ".priority"));
      if (p < -1000000000 || p > 1000000000)
        return y_.Error(e["priority"], path + ".priority", "out of range");
      w.priority = static_cast<int32_t>(p);
    }
    if (e["submitTime"]) {
      CHAMBER_ASSIGN_OR_RETURN(w.submit_time, ParseTime(y_, e["submitTime"], path + ".submitTime"));
    }
    // A count of pods or tries: 0 to a million.
    auto count = [&](const char* key, int32_t* out) -> Status {
      if (!e[key]) return Status::Ok();
      CHAMBER_ASSIGN_OR_RETURN(int64_t m, y_.Int(e[key], path + "." + key));
      if (m < 0 || m > 1000000) return y_.Error(e[key], path + "." + key, "out of range");
      *out = static_cast<int32_t>(m);
      return Status::Ok();
    };
    CHAMBER_RETURN_IF_ERROR(count("minMember", &w.min_member));
    CHAMBER_RETURN_IF_ERROR(count("awaitedPods", &w.awaited_pods));
    CHAMBER_RETURN_IF_ERROR(count("bindRollbacks", &w.bind_rollbacks));
    if (e["bindRetryAt"]) {
      CHAMBER_ASSIGN_OR_RETURN(w.bind_retry_at,
                               ParseTime(y_, e["bindRetryAt"], path + ".bindRetryAt"));
    }
    if (e["bindFailure"]) {
      CHAMBER_ASSIGN_OR_RETURN(w.bind_failure, y_.String(e["bindFailure"], path + ".bindFailure"));
    }
    if (const YAML::Node sets = e["podSets"]) {
      for (const char* k :
           {"pods", "gpu", "cpu", "memory", "nodeSelector", "tolerations", "gpuModels"})
        if (e[k])
          return y_.Error(e[k], path + "." + k,
                          "give pod fields inside podSets, or use no podSets");
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(sets, path + ".podSets"));
      for (size_t i = 0; i < sets.size(); ++i) {
        PodSet ps;
        CHAMBER_RETURN_IF_ERROR(ParsePodSet(sets[i], At(path + ".podSets", i), false, &ps));
        w.pod_sets.push_back(std::move(ps));
      }
    } else {
      PodSet ps;
      ps.name = "main";
      CHAMBER_RETURN_IF_ERROR(ParsePodSet(e, path, true, &ps));
      w.pod_sets.push_back(std::move(ps));
    }
    if (e["state"]) {
      CHAMBER_ASSIGN_OR_RETURN(std::string st, y_.String(e["state"], path + ".state"));
      if (st == "Pending")
        w.state = WorkloadState::kPending;
      else if (st == "Running")
        w.state = WorkloadState::kRunning;
      else if (st == "Preempting")
        w.state = WorkloadState::kPreempting;
      else if (st == "Suspended")
        w.state = WorkloadState::kSuspended;
      else
        return y_.Error(e["state"], path + ".state",
                        "expected Pending, Running, Preempting or Suspended, got \"" + st + "\"");
    }
    if (const YAML::Node pl = e["placements"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(pl, path + ".placements"));
      for (size_t i = 0; i < pl.size(); ++i) {
        const std::string pp = At(path + ".placements", i);
        CHAMBER_RETURN_IF_ERROR(y_.CheckKeys(pl[i], pp, {"node", "gpus"}));
        if (!pl[i]["node"]) return y_.Error(pl[i], pp + ".node", "a placement needs a node");
        CHAMBER_ASSIGN_OR_RETURN(std::string node, y_.String(pl[i]["node"], pp + ".node"));
        auto it = node_ids_.find(node);
        if (it == node_ids_.end())
          return y_.Error(pl[i]["node"], pp + ".node", "no node named " + node);
        PodPlacement p{NodeId{it->second}, 0};
        if (const YAML::Node gpus = pl[i]["gpus"]) {
          CHAMBER_RETURN_IF_ERROR(y_.ExpectList(gpus, pp + ".gpus"));
          const int64_t have = static_cast<int64_t>(s->nodes[it->second].gpus.size());
          for (size_t j = 0; j < gpus.size(); ++j) {
            CHAMBER_ASSIGN_OR_RETURN(int64_t g, y_.Int(gpus[j], At(pp + ".gpus", j)));
            if (g < 0 || g >= have)
              return y_.Error(gpus[j], At(pp + ".gpus", j),
                              "GPU index " + std::to_string(g) + " does not exist on node " + node);
            p.gpu_mask |= uint64_t{1} << g;
          }
        }
        w.placements.push_back(p);
      }
    }
    const bool holds = w.state == WorkloadState::kRunning || w.state == WorkloadState::kPreempting;
    if (holds && w.placements.empty())
      return y_.Error(e, path + ".placements", "a running workload needs its placements");
    if (!holds && !w.placements.empty())
      return y_.Error(e["placements"], path + ".placements",
                      "only Running or Preempting workloads have placements");
    if (e["startTime"]) {
      CHAMBER_ASSIGN_OR_RETURN(w.start_time, ParseTime(y_, e["startTime"], path + ".startTime"));
    }
    if (e["lastCheckpointTime"]) {
      CHAMBER_ASSIGN_OR_RETURN(
          Time t, ParseTime(y_, e["lastCheckpointTime"], path + ".lastCheckpointTime"));
      w.last_checkpoint_time = t;
    }
    if (const YAML::Node rp = e["recentPreemptions"]) {
      CHAMBER_RETURN_IF_ERROR(y_.ExpectList(rp, path + ".recentPreemptions"));
      for (size_t i = 0; i < rp.size(); ++i) {
        CHAMBER_ASSIGN_OR_RETURN(Time t, ParseTime(y_, rp[i], At(path + ".recentPreemptions", i)));
        w.recent_preemptions.push_back(t);
      }
    }
    if (e["checkpointGraceSeconds"]) {
      CHAMBER_ASSIGN_OR_RETURN(
          int64_t g, y_.Int(e["checkpointGraceSeconds"], path + ".checkpointGraceSeconds"));
      if (g < 0 || g > 86400)
        return y_.Error(e["checkpointGraceSeconds"], path + ".checkpointGraceSeconds",
                        "must be between 0 and 86400");
      w.checkpoint_grace_seconds = static_cast<int32_t>(g);
    }
    s->workloads.push_back(std::move(w));
    return Status::Ok();
  }

  YamlReader y_;
  Snapshot* snapshot_ = nullptr;  // the one Parse is filling
  std::unordered_map<std::string, int32_t> node_ids_;
};

}  // namespace

Result<Snapshot> ParseSnapshot(std::string_view text, std::string_view source) {
  return SnapshotParser(std::string(source)).Parse(text);
}

Result<Snapshot> LoadSnapshotFile(const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseSnapshot(text, path);
}

}  // namespace chamber::core::io
