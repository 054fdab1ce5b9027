#include "daemon/fleet_input.h"

#include <algorithm>
#include <bit>

#include "daemon/workload_ledger.h"

namespace chamber::daemon {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

// The pod of a workload's placement `i`: a bare pod is the workload itself; the others' pods
// follow pod-set order, as the placements do. Null where the backend has no pods (the demo).
const std::string* PodOf(const SharedItems<fleet::WorkloadInput>& workloads, size_t w, size_t i) {
  if (w >= workloads.size()) return nullptr;
  const fleet::WorkloadInput& wi = workloads[w];
  return wi.bare_pod ? &wi.name : i < wi.pods.size() ? &wi.pods[i] : nullptr;
}

// The devices of `profile` on a GPU in MIG mode that its agent names no holder of, less those
// counted on it already for pods no agent names a device of.
int UnnamedFree(const fleet::GpuInput& g, const std::string& profile) {
  int unnamed = 0, named_held = 0, shares = 0;
  for (const fleet::MigDeviceInput& d : g.mig_devices) {
    if (d.profile != profile) continue;
    if (d.pod.empty()) {
      ++unnamed;
    } else if (std::any_of(g.shares.begin(), g.shares.end(),
                           [&](const fleet::GpuShareInput& sh) { return sh.pod == d.pod; })) {
      ++named_held;
    }
  }
  for (const fleet::GpuShareInput& sh : g.shares) shares += sh.mig_profile == profile ? 1 : 0;
  return unnamed - (shares - named_held);
}

// Counts a MIG pod's devices on its node's GPUs in MIG mode, each as a share of its GPU of the
// device's charge: on the GPU whose agent names the pod as the device's holder; the devices no
// agent names (none reports the node, or the kubelet's pod-resources are off) on the first GPU
// with a free device of the profile, or, where the GPUs' devices are not listed, with room for
// the charge. Node, pool and cluster figures are then exact; which GPU holds such a device is
// the kubelet's choice, which Chamber does not know.
void MarkMigDevices(const core::Snapshot& s, const core::MigAsk& ask, int32_t workload,
                    const std::string& pod, std::vector<fleet::GpuInput>& gpus) {
  if (static_cast<size_t>(ask.profile) >= s.mig_profiles.size()) return;
  const std::string& profile = s.mig_profiles[static_cast<size_t>(ask.profile)].name;
  auto hold = [&](fleet::GpuInput& g) {
    fleet::GpuShareInput share;
    share.workload = workload;
    share.gpu_milli = ask.milli;
    share.pod = pod;
    share.mig_profile = profile;
    g.shares.push_back(std::move(share));
  };
  int devices = ask.devices;
  if (!pod.empty()) {
    for (fleet::GpuInput& g : gpus) {
      if (!g.mig) continue;
      for (const fleet::MigDeviceInput& d : g.mig_devices)
        if (devices > 0 && d.pod == pod) {
          hold(g);
          --devices;
        }
    }
  }
  for (; devices > 0; --devices) {
    fleet::GpuInput* to = nullptr;
    for (fleet::GpuInput& g : gpus) {
      if (!g.mig) continue;
      if (g.mig_devices.empty() ? g.HeldMilli() + ask.milli <= fleet::kMilliPerGpu
                                : UnnamedFree(g, profile) > 0) {
        to = &g;
        break;
      }
    }
    if (to == nullptr) {  // more devices than the GPUs known hold: on the one with most room
      for (fleet::GpuInput& g : gpus)
        if (g.mig && (to == nullptr || g.HeldMilli() < to->HeldMilli())) to = &g;
    }
    if (to == nullptr) return;  // no GPU in MIG mode known on the node
    hold(*to);
  }
}

}  // namespace

std::vector<fleet::NodeInput> FleetNodes(const Observation& obs, fleet::ActivityTracker& activity,
                                         int64_t now) {
  const core::Snapshot& s = *obs.snapshot;
  std::vector<fleet::NodeInput> nodes(s.nodes.size());
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    const core::Node& node = s.nodes[n];
    fleet::NodeInput& ni = nodes[n];
    ni.name = node.name;
    ni.pool = n < obs.node_pool.size() ? obs.node_pool[n] : -1;
    ni.schedulable = !node.unschedulable;
    ni.gpus.resize(node.gpus.size());
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const core::Gpu& gpu = node.gpus[g];
      fleet::GpuInput& gi = ni.gpus[g];
      gi.uuid = gpu.uuid;
      gi.model = gpu.model;
      gi.healthy = gpu.healthy;
      gi.memory_total_bytes = gpu.memory_mib * 1048576;
      if (n < obs.samples.size() && g < obs.samples[n].size()) {
        gi.utilization = obs.samples[n][g].utilization;
        gi.memory_used_bytes = obs.samples[n][g].memory_used_bytes;
        gi.mig_devices = obs.samples[n][g].mig_devices;
      }
      gi.below_threshold_since = activity.Observe(gpu.uuid, gi.utilization, now);
    }
    if (n < obs.mig_gpus.size()) {
      for (const fleet::GpuInput& mig : obs.mig_gpus[n]) {
        fleet::GpuInput& gi = ni.gpus.emplace_back(mig);
        gi.mig = true;
        gi.below_threshold_since = activity.Observe(gi.uuid, gi.utilization, now);
      }
    }
  }
  activity.Forget(now - kHourMs);
  return nodes;
}

void MarkHolders(const Observation& obs, const SharedItems<fleet::WorkloadInput>& workloads,
                 std::vector<fleet::NodeInput>& nodes) {
  const core::Snapshot& s = *obs.snapshot;
  for (size_t w = 0; w < s.workloads.size(); ++w) {
    const core::Workload& wl = s.workloads[w];
    if (wl.state != core::WorkloadState::kRunning && wl.state != core::WorkloadState::kPreempting)
      continue;
    for (size_t i = 0; i < wl.placements.size(); ++i) {
      const core::PodPlacement& p = wl.placements[i];
      if (!p.node.valid() || p.node.index() >= nodes.size()) continue;
      auto& gpus = nodes[p.node.index()].gpus;
      const core::Resources request = wl.PlacementRequest(i);
      const core::PodSet* set = wl.PlacementPodSet(i);
      if (set != nullptr && set->mig.any()) {
        const std::string* pod = PodOf(workloads, w, i);
        MarkMigDevices(s, set->mig, static_cast<int32_t>(w), pod ? *pod : std::string(),
                       nodes[p.node.index()].gpus);
        continue;
      }
      for (uint64_t mask = p.gpu_mask; mask != 0; mask &= mask - 1) {
        const auto g = static_cast<size_t>(std::countr_zero(mask));
        if (g >= gpus.size()) continue;
        if (!request.gpu_share()) {
          gpus[g].workload = static_cast<int32_t>(w);
          continue;
        }
        fleet::GpuShareInput share;
        share.workload = static_cast<int32_t>(w);
        share.gpu_milli = static_cast<int32_t>(request.gpu_milli());
        share.memory_mib = set ? set->gpu_memory_mib : 0;
        if (const std::string* pod = PodOf(workloads, w, i)) {
          share.pod = *pod;
          if (auto m = obs.share_memory.find(*pod); m != obs.share_memory.end()) {
            share.memory_used_bytes = m->second.used_bytes;
            share.over_memory_since = m->second.over_since_ms;
          }
        }
        gpus[g].shares.push_back(share);
      }
    }
  }
}

std::vector<fleet::QueueInput> FleetQueues(const core::Snapshot& s,
                                           const std::vector<core::QueueStatus>& status) {
  std::vector<fleet::QueueInput> queues;
  for (const core::Queue& q : s.queues) {
    fleet::QueueInput qi;
    qi.name = q.name;
    qi.parent = q.parent;
    const core::QueueResource& r = q.res(core::Resource::kGpu);
    qi.quota = core::GpusOf(r.quota);
    if (r.limit != core::kUnlimited) qi.limit = core::GpusOf(r.limit);
    qi.weight = r.over_quota_weight;
    qi.decayed_gpu_hours = q.decayed_usage;
    for (const core::QueueStatus& st : status) {
      if (st.name != q.name) continue;
      qi.allocated = core::GpusOf(st.allocated.gpu_milli());
      qi.fair_share = st.fair_share[static_cast<int>(core::Resource::kGpu)] / core::kMilliPerGpu;
      qi.borrowed = core::GpusOf(st.borrowed.gpu_milli());
      qi.lent = core::GpusOf(st.lent.gpu_milli());
      qi.error = st.error;
    }
    queues.push_back(std::move(qi));
  }
  return queues;
}

void AddObserved(Observation& obs, WorkloadLedger& ledger, fleet::ActivityTracker& activity,
                 const std::vector<core::QueueStatus>& queue_status, int64_t now,
                 fleet::FleetInput& in) {
  in.workloads = ledger.Workloads(obs);
  in.nodes = FleetNodes(obs, activity, now);
  MarkHolders(obs, in.workloads, in.nodes);
  in.queues = FleetQueues(*obs.snapshot, queue_status);
}

}  // namespace chamber::daemon
