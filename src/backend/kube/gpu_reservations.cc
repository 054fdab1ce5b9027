#include "backend/kube/gpu_reservations.h"

#include <algorithm>
#include <bit>
#include <map>
#include <unordered_set>

namespace chamber::backend {

namespace {

// What the cycle knows of one node that reservations concern.
struct NodeView {
  bool reports = false;         // its agent reports pod resources: shares need reservations
  uint64_t share_gpus = 0;      // GPUs shares hold (bound or assumed) or are placed on this cycle
  std::vector<size_t> live;     // its reservation pods that hold a GPU (not ended)
  std::vector<size_t> pending;  // of those, the ones not reported yet and not being deleted
  size_t unseen = 0;            // made, and not in the snapshot yet
  size_t pending_claimed = 0;   // pending ones this cycle's waiting shares count on
  int64_t plugin_free = 0;      // GPUs the device plugin can still give
  int64_t to_free = 0;          // idle reservations to delete at once, for whole-GPU pods
};

}  // namespace

ReservationPlan PlanReservations(const BuiltSnapshot& built, const core::CycleResult& result,
                                 const DeviceAssignments& devices, int64_t now_ms,
                                 const ReservationOptions& options,
                                 std::unordered_map<std::string, int64_t>& idle_since,
                                 const std::vector<int32_t>& made_unseen) {
  const core::Snapshot& snap = built.snapshot;
  ReservationPlan plan;
  plan.wait.resize(result.binds.size());
  std::vector<NodeView> nodes(snap.nodes.size());
  for (size_t n = 0; n < snap.nodes.size(); ++n) {
    auto d = devices.find(snap.nodes[n].name);
    nodes[n].reports = d != devices.end() && d->second != nullptr;
  }
  for (size_t i = 0; i < built.reservations.size(); ++i) {
    const GpuReservation& r = built.reservations[i];
    if (r.failed || r.node < 0) continue;
    NodeView& v = nodes[static_cast<size_t>(r.node)];
    v.live.push_back(i);
    if (r.gpu < 0 && !r.deleting) v.pending.push_back(i);
  }
  for (int32_t n : made_unseen)
    if (n >= 0 && static_cast<size_t>(n) < nodes.size()) ++nodes[static_cast<size_t>(n)].unseen;
  // What the device plugin can give on each node that has reservation pods: its GPUs less
  // those held whole (by any pod) and those the reservation pods hold.
  std::vector<uint64_t> whole(snap.nodes.size(), 0);
  for (const core::Workload& w : snap.workloads) {
    if (w.state != core::WorkloadState::kRunning && w.state != core::WorkloadState::kPreempting)
      continue;
    for (size_t i = 0; i < w.placements.size(); ++i) {
      const core::PodSet* ps = w.PlacementPodSet(i);
      const core::PodPlacement& p = w.placements[i];
      if (ps == nullptr || !p.node.valid() || p.node.index() >= nodes.size()) continue;
      if (ps->request.gpu_share())
        nodes[p.node.index()].share_gpus |= p.gpu_mask;
      else
        whole[p.node.index()] |= p.gpu_mask;
    }
  }
  // GPUs whose shares were bound without a reservation (before reservations, or while the
  // node's agent did not report): none can be had for them, so more shares go there as before.
  std::vector<uint64_t> unreserved_shared(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    unreserved_shared[n] = nodes[n].share_gpus & ~snap.nodes[n].reserved_gpu_mask;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const core::Node& node = snap.nodes[n];
    nodes[n].plugin_free = static_cast<int64_t>(node.gpus.size()) -
                           std::popcount(whole[n] | node.external_gpu_mask) -
                           static_cast<int64_t>(nodes[n].live.size() + nodes[n].unseen);
  }

  std::vector<int32_t> create_on;  // nodes, one entry per new pod
  for (size_t d = 0; d < result.binds.size(); ++d) {
    const core::BindDecision& bind = result.binds[d];
    const core::Workload& w = snap.workloads[bind.workload.index()];
    std::map<size_t, uint64_t> unreserved;  // per node: GPUs its shares need reserved
    std::map<size_t, int64_t> whole_gpus;   // per node with reservations: GPUs asked whole
    for (const core::PodAssignment& a : bind.pods) {
      if (a.pod_set < 0 || static_cast<size_t>(a.pod_set) >= w.pod_sets.size()) continue;
      const core::PodSet& ps = w.pod_sets[static_cast<size_t>(a.pod_set)];
      const size_t n = a.placement.node.index();
      if (n >= nodes.size()) continue;
      if (ps.request.gpu_share()) {
        nodes[n].share_gpus |= a.placement.gpu_mask;  // in use, whether it waits or not
        const uint64_t open = snap.nodes[n].reserved_gpu_mask | unreserved_shared[n];
        if (nodes[n].reports && (a.placement.gpu_mask & ~open) != 0)
          unreserved[n] |= a.placement.gpu_mask;
      } else if (ps.request.whole_gpus() > 0 && nodes[n].live.size() + nodes[n].unseen > 0) {
        whole_gpus[n] += ps.request.whole_gpus();
      }
    }
    std::string why;
    for (const auto& [n, gpus] : unreserved) {
      NodeView& v = nodes[n];
      const size_t want = static_cast<size_t>(std::popcount(gpus));
      const size_t claim = std::min(want, v.pending.size() + v.unseen - v.pending_claimed);
      v.pending_claimed += claim;
      for (size_t k = claim; k < want; ++k) create_on.push_back(static_cast<int32_t>(n));
      if (why.empty())
        why = "its share waits for the device plugin to give a GPU to a reservation pod on node " +
              snap.nodes[n].name;
    }
    for (const auto& [n, gpus] : whole_gpus) {
      NodeView& v = nodes[n];
      if (gpus <= v.plugin_free) continue;
      v.to_free = std::max(v.to_free, gpus - v.plugin_free);
      if (why.empty())
        why = "waits for " + std::to_string(gpus - v.plugin_free) +
              " reservation pod(s) to leave node " + snap.nodes[n].name +
              ", so that the device plugin has GPUs to give its pods";
    }
    plan.wait[d] = why;
    if (!why.empty()) continue;
    for (const auto& [n, gpus] : whole_gpus) nodes[n].plugin_free -= gpus;
  }
  plan.create = std::move(create_on);

  // Which reservation pods go: ended ones, those never reported, those idle past the grace,
  // and idle ones the device plugin's GPUs are needed from.
  std::unordered_set<std::string> listed;
  for (size_t n = 0; n < nodes.size(); ++n) {
    NodeView& v = nodes[n];
    size_t pending_seen = 0;
    for (size_t i : v.live) {
      const GpuReservation& r = built.reservations[i];
      listed.insert(r.uid);
      if (r.deleting) continue;
      bool busy;
      if (r.gpu >= 0) {
        busy = (v.share_gpus >> r.gpu & 1) != 0;
      } else {
        busy = pending_seen++ < v.pending_claimed;
        if (now_ms - r.created_ms >= options.report_timeout.count()) {
          plan.remove.push_back(
              {i,
               "its node's agent has not reported the GPU the device plugin gave it in " +
                   std::to_string(options.report_timeout.count() / 1000) + " s",
               kRemovalReasons[1]});
          continue;
        }
      }
      if (busy) {
        idle_since.erase(r.uid);
        continue;
      }
      const int64_t since = idle_since.try_emplace(r.uid, now_ms).first->second;
      if (v.to_free > 0) {
        --v.to_free;
        plan.remove.push_back(
            {i, "no share holds its GPU, and whole-GPU pods need it", kRemovalReasons[3]});
      } else if (now_ms - since >= options.grace.count()) {
        plan.remove.push_back(
            {i,
             "no share has held its GPU for " + std::to_string(options.grace.count() / 1000) + " s",
             kRemovalReasons[2]});
      }
    }
  }
  for (size_t i = 0; i < built.reservations.size(); ++i) {
    const GpuReservation& r = built.reservations[i];
    if (r.failed && !r.deleting) plan.remove.push_back({i, "it ended", kRemovalReasons[0]});
  }
  std::erase_if(idle_since, [&](const auto& kv) { return !listed.contains(kv.first); });
  return plan;
}

kube::Json ReservationPod(const std::string& ns, const std::string& node, const std::string& image,
                          const std::string& gpu_resource) {
  kube::Json container = {
      {"name", "reservation"},
      {"image", image},
      {"resources",
       {{"limits", {{gpu_resource, "1"}}}, {"requests", {{"cpu", "1m"}, {"memory", "8Mi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"runAsNonRoot", true},
        {"runAsUser", 65535},
        {"capabilities", {{"drop", {"ALL"}}}},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", "gpu-reservation-"},
            {"namespace", ns},
            {"labels", {{keys::kGpuReservation, "true"}}}}},
          {"spec",
           {{"nodeName", node},
            {"containers", kube::Json::array({container})},
            {"tolerations", kube::Json::array({{{"operator", "Exists"}}})},
            {"terminationGracePeriodSeconds", 0},
            {"automountServiceAccountToken", false},
            {"enableServiceLinks", false}}}};
}

}  // namespace chamber::backend
