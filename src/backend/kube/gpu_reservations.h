// Reservation pods (docs/sharing.md, "Reservation pods"): on a node whose agent reports which
// pod holds which GPU, a share is bound only to a GPU that the device plugin gave a reservation
// pod of chamberd's, so that no whole-GPU pod is ever given it. PlanReservations decides, after
// a cycle, which of its binds wait, which reservation pods to create and which to delete; the
// caller (KubeBackend) does the writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/kube/snapshot_builder.h"
#include "core/decision.h"

namespace chamber::backend {

struct ReservationOptions {
  // A reservation pod with no share on its GPU this long is deleted.
  std::chrono::milliseconds grace{10'000};
  // One whose GPU the node's agent has not reported this long after it was made is deleted.
  std::chrono::milliseconds report_timeout{120'000};
};

// Why a reservation pod is deleted, as the metrics label it: it ended; its node's agent never
// reported its GPU; no share held its GPU through the grace; whole-GPU pods needed its GPU.
inline constexpr std::string_view kRemovalReasons[] = {"ended", "unreported", "idle", "needed"};

struct ReservationPlan {
  // Per bind decision of the cycle (its index in CycleResult::binds): empty when it is bound;
  // else why the whole decision waits (a gang waits whole).
  std::vector<std::string> wait;
  // A new reservation pod on each of these nodes (snapshot node indices; a node once per pod).
  std::vector<int32_t> create;
  // Reservation pods to delete (indices into BuiltSnapshot::reservations), each with why: one
  // line for the log, and its reason for the metrics (kRemovalReasons).
  struct Removal {
    size_t reservation;
    std::string why;
    std::string_view reason;
  };
  std::vector<Removal> remove;
};

// `idle_since` keeps, across cycles, when each live reservation pod (by UID) last stopped
// holding a share; entries of pods no longer listed are dropped. `made_unseen` names the nodes
// (snapshot indices, once per pod) of reservation pods made that the snapshot does not show
// yet: counted on as not reported, never made again.
ReservationPlan PlanReservations(const BuiltSnapshot& built, const core::CycleResult& result,
                                 const DeviceAssignments& devices, int64_t now_ms,
                                 const ReservationOptions& options,
                                 std::unordered_map<std::string, int64_t>& idle_since,
                                 const std::vector<int32_t>& made_unseen = {});

// The reservation pod to create on `node`, in `ns`: a pause container asking for one
// `gpu_resource`, bound to the node, tolerating every taint.
kube::Json ReservationPod(const std::string& ns, const std::string& node, const std::string& image,
                          const std::string& gpu_resource);

}  // namespace chamber::backend
