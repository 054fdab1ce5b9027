#include "core/gpu_model_queues.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/resources.h"

namespace chamber::core {
namespace {

// A queue being split: its models' queues, in the order listed.
struct Split {
  size_t first_lane = 0;  // index in Snapshot::queues of its first model's queue
  std::vector<GpuModelQuota> models;
  std::vector<int64_t> usage;  // GPU thousandths its running work holds, per model
};

// Whether a pod of `ps` asks for GPUs: whole, a share or MIG devices.
bool UsesGpus(const PodSet& ps) { return ps.request.gpu_milli() > 0 || ps.mig.any(); }

// Whether every pod set of `w` that asks for GPUs allows `model`.
bool Allows(const Workload& w, const std::string& model) {
  for (const PodSet& ps : w.pod_sets) {
    if (!UsesGpus(ps) || ps.gpu_models.empty()) continue;
    if (std::find(ps.gpu_models.begin(), ps.gpu_models.end(), model) == ps.gpu_models.end())
      return false;
  }
  return true;
}

bool AsksForGpus(const Workload& w) {
  return std::any_of(w.pod_sets.begin(), w.pod_sets.end(), UsesGpus);
}

// The GPU model of the node that running work's first pod with GPUs is on (of its GPUs in MIG
// mode, for a pod of MIG devices); empty if none.
std::string RunningModel(const Snapshot& s, const Workload& w) {
  for (size_t i = 0; i < w.placements.size(); ++i) {
    const PodSet* ps = w.PlacementPodSet(i);
    const PodPlacement& p = w.placements[i];
    if (ps == nullptr || !UsesGpus(*ps)) continue;
    if (!p.node.valid() || p.node.index() >= s.nodes.size()) continue;
    const Node& n = s.nodes[p.node.index()];
    if (ps->mig.any() && !n.mig_model.empty()) return n.mig_model.str();
    if (!n.gpus.empty()) return std::string(n.gpus.front().model);
  }
  return {};
}

int64_t HeldMilli(const Workload& w) {
  int64_t milli = 0;
  for (size_t i = 0; i < w.placements.size(); ++i)
    milli += HeldGpuMilli(w.placements[i], w.PlacementPodSet(i));
  return milli;
}

// Free GPUs per model, in thousandths: healthy GPUs of schedulable nodes that no running work
// and no pod outside the engine holds, and the MIG devices no running work holds, by their
// charge, under the model of the node's GPUs in MIG mode.
std::unordered_map<std::string, int64_t> FreeMilliByModel(const Snapshot& s) {
  std::vector<uint64_t> used(s.nodes.size());
  std::vector<int64_t> mig_held(s.nodes.size(), 0);
  for (size_t n = 0; n < s.nodes.size(); ++n) used[n] = s.nodes[n].external_gpu_mask;
  for (const Workload& w : s.workloads) {
    if (w.state != WorkloadState::kRunning && w.state != WorkloadState::kPreempting) continue;
    for (size_t i = 0; i < w.placements.size(); ++i) {
      const PodPlacement& p = w.placements[i];
      if (!p.node.valid() || p.node.index() >= used.size()) continue;
      used[p.node.index()] |= p.gpu_mask;
      if (const PodSet* ps = w.PlacementPodSet(i); ps != nullptr)
        mig_held[p.node.index()] += ps->mig.charge();
    }
  }
  std::unordered_map<std::string, int64_t> free;
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    const Node& node = s.nodes[n];
    if (node.unschedulable) continue;
    for (size_t g = 0; g < node.gpus.size() && g < static_cast<size_t>(kMaxGpusPerNode); ++g)
      if (node.gpus[g].healthy && (used[n] >> g & 1) == 0) free[node.gpus[g].model] += Gpus(1);
    if (node.mig_model.empty()) continue;
    int64_t mig = -mig_held[n];
    for (size_t p = 0; p < s.mig_profiles.size() && p < node.mig_devices.size(); ++p)
      mig += int64_t{node.mig_devices[p]} * s.mig_profiles[p].milli;
    if (mig > 0) free[node.mig_model.str()] += mig;
  }
  return free;
}

std::string CommaList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : ", ") + names[i];
  return out;
}

std::string ModelList(const std::vector<GpuModelQuota>& models) {
  std::vector<std::string> names;
  for (const GpuModelQuota& m : models) names.push_back(m.model);
  return CommaList(names);
}

}  // namespace

std::string CheckGpuModels(const Queue& q) {
  std::unordered_set<std::string_view> seen;
  for (const GpuModelQuota& m : q.gpu_models) {
    const std::string field = "resources.gpu.models[" + m.model + "].";
    if (m.model.empty()) return "resources.gpu.models: a model has an empty name";
    if (m.model.find(kGpuModelQueueSeparator) != std::string::npos)
      return "resources.gpu.models[" + m.model + "]: a model name has no '/'";
    if (!seen.insert(m.model).second)
      return "resources.gpu.models[" + m.model + "]: the model is listed twice";
    const QueueResource& r = m.gpu;
    if (r.quota < 0) return field + "quota must not be negative";
    if (r.limit < kUnlimited) return field + "limit must be -1 (none) or at least 0";
    if (r.limit != kUnlimited && r.limit < r.quota)
      return field + "limit " + FormatQuantity(Resource::kGpu, r.limit) + " is below quota " +
             FormatQuantity(Resource::kGpu, r.quota);
    if (!(r.over_quota_weight >= 0)) return field + "overQuotaWeight must not be negative";
    if (r.lending_limit < kUnlimited) return field + "lendingLimit must be -1 (all) or at least 0";
  }
  return {};
}

std::string_view GpuModelQueueOwner(std::string_view name) {
  const size_t at = name.find(kGpuModelQueueSeparator);
  return at == std::string_view::npos ? name : name.substr(0, at);
}

void SplitGpuModelQueues(Snapshot& s) {
  if (std::none_of(s.queues.begin(), s.queues.end(),
                   [](const Queue& q) { return !q.gpu_models.empty(); }))
    return;
  std::unordered_set<std::string> parents;
  for (const Queue& q : s.queues)
    if (!q.parent.empty()) parents.insert(q.parent);

  std::unordered_map<std::string, Split> splits;
  const size_t original = s.queues.size();
  for (size_t i = 0; i < original; ++i) {
    if (s.queues[i].gpu_models.empty() || parents.contains(s.queues[i].name) ||
        !CheckGpuModels(s.queues[i]).empty() || splits.contains(s.queues[i].name))
      continue;
    Split split;
    split.first_lane = s.queues.size();
    split.models = std::move(s.queues[i].gpu_models);
    split.usage.assign(split.models.size(), 0);
    s.queues[i].gpu_models.clear();
    for (const GpuModelQuota& m : split.models) {
      const Queue& team = s.queues[i];
      Queue lane;
      lane.name = team.name + kGpuModelQueueSeparator + m.model;
      lane.parent = team.name;
      lane.priority = team.priority;
      lane.queueing = team.queueing;
      lane.preemption = team.preemption;
      // Parents add up their leaves' decayed usage: the queue's goes to its first model.
      if (s.queues.size() == split.first_lane) lane.decayed_usage = team.decayed_usage;
      lane.res(Resource::kGpu) = m.gpu;
      s.queues.push_back(std::move(lane));  // `team` is not read past this point
    }
    splits.emplace(s.queues[i].name, std::move(split));
  }
  if (splits.empty()) return;

  auto narrow = [](Workload& w, const std::string& model) {
    for (PodSet& ps : w.pod_sets)
      if (UsesGpus(ps)) ps.gpu_models = {model};
  };
  auto lane_name = [&](const Split& split, size_t m) -> const std::string& {
    return s.queues[split.first_lane + m].name;
  };

  // Running work first: where it runs decides its model, and what it holds is each model's usage
  // when the waiting work chooses.
  std::vector<bool> placed(s.workloads.size());
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    Workload& w = s.workloads[i];
    auto it = splits.find(w.queue);
    if (it == splits.end() || w.placements.empty()) continue;
    Split& split = it->second;
    placed[i] = true;
    const std::string model = RunningModel(s, w);
    size_t m = 0;
    while (m < split.models.size() && split.models[m].model != model) ++m;
    if (m == split.models.size()) {
      m = 0;  // a model the queue does not list (its list changed): counted on the first
    } else {
      narrow(w, model);
    }
    split.usage[m] += HeldMilli(w);
    w.queue = lane_name(split, m);
  }

  std::unordered_map<std::string, int64_t> free;
  bool free_known = false;
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    Workload& w = s.workloads[i];
    auto it = splits.find(w.queue);
    if (it == splits.end() || placed[i]) continue;
    const Split& split = it->second;
    const std::string& team = it->first;
    if (!AsksForGpus(w)) {
      w.queue = lane_name(split, 0);
      continue;
    }
    std::vector<size_t> allowed;
    for (size_t m = 0; m < split.models.size(); ++m)
      if (Allows(w, split.models[m].model)) allowed.push_back(m);
    if (allowed.empty()) {
      for (PodSet& ps : w.pod_sets) {
        if (!UsesGpus(ps) || !ps.invalid_reason.empty()) continue;
        ps.invalid_reason = "pod set " + ps.name + " may use GPU models " +
                            CommaList(ps.gpu_models) + " only, and queue " + team +
                            " runs work on GPU models " + ModelList(split.models) +
                            " only (resources.gpu.models)";
        break;
      }
      w.queue = lane_name(split, 0);
      continue;
    }
    const int64_t request = w.TotalRequest().gpu_milli();
    auto fits_limit = [&](size_t m) {
      const int64_t limit = split.models[m].gpu.limit;
      return limit == kUnlimited || split.usage[m] + request <= limit;
    };
    std::optional<size_t> chosen;
    for (size_t m : allowed)
      if (!chosen && split.usage[m] + request <= split.models[m].gpu.quota) chosen = m;
    if (!chosen) {
      if (!free_known) free = FreeMilliByModel(s);
      free_known = true;
      for (size_t m : allowed) {
        auto f = free.find(split.models[m].model);
        if (!chosen && fits_limit(m) && f != free.end() && f->second >= request) chosen = m;
      }
    }
    for (size_t m : allowed)
      if (!chosen && fits_limit(m)) chosen = m;
    const size_t m = chosen.value_or(allowed.front());
    narrow(w, split.models[m].model);
    w.queue = lane_name(split, m);
  }
}

}  // namespace chamber::core
