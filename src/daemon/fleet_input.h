// From the engine's snapshot to the fleet model's input (fleet/fleet_model.h): the nodes with
// their GPUs' samples, the holders of the GPUs, and the queues with their standing. The
// workloads come from the WorkloadLedger, which remembers what the snapshot does not.
#pragma once

#include <cstdint>
#include <vector>

#include "core/decision.h"
#include "core/model.h"
#include "daemon/backend.h"
#include "fleet/fleet_model.h"

namespace chamber::daemon {

// The nodes of the observed snapshot: pool, schedulability, and each GPU with its sample and
// how long it has been below the activity threshold (`activity`, which forgets GPUs not seen for
// an hour).
std::vector<fleet::NodeInput> FleetNodes(const Observation& obs, fleet::ActivityTracker& activity,
                                         int64_t now);

// Marks each GPU that running or preempting work holds with its holder (an index into the
// snapshot's workloads, as FleetInput::workloads follows them): the workload holding it whole,
// or each pod's share of it, with what the agents measure of the share (`obs.share_memory`, by
// the pod's name in `workloads`).
void MarkHolders(const Observation& obs, const SharedItems<fleet::WorkloadInput>& workloads,
                 std::vector<fleet::NodeInput>& nodes);

// The queues: the spec from the snapshot, the standing (allocation, fair share, borrowed, lent,
// error) from the engine's cycle.
std::vector<fleet::QueueInput> FleetQueues(const core::Snapshot& snapshot,
                                           const std::vector<core::QueueStatus>& status);

class WorkloadLedger;

// The workloads (from the ledger), nodes with their holders, and queues of `in`: what each
// cycle publishes of the observed snapshot.
void AddObserved(Observation& obs, WorkloadLedger& ledger, fleet::ActivityTracker& activity,
                 const std::vector<core::QueueStatus>& queue_status, int64_t now,
                 fleet::FleetInput& in);

}  // namespace chamber::daemon
