// What the leader does while it leads: the Kubernetes backend's informers, the health
// controller, the API and dashboard, and the daemon's scheduling loop.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "chamberd/flags.h"
#include "common/status.h"
#include "core/config.h"
#include "fleet/history_store.h"
#include "kube/client.h"
#include "kube/leader_election.h"

namespace chamber::chamberd {

// The Lease a replica leads by ("<namespace>/<name>") and its term there
// (kube::LeaderElector::term()), stamped on its binds; both empty without leader election.
struct LeaderTerm {
  std::string lease, term;
};

// Leads until `stop` is cancelled: informers, scheduling cycles, the API, and the history
// (`history`, null for none); writes only while `leading` is not cancelled. With leader
// election both are the leadership token: a deposed leader stops writing at once, even half-way
// through a gang's binds (the next leader binds the rest or rolls it back). Without it,
// `leading` is never cancelled, so a stop lets the cycle in flight finish its writes (a gang
// bound whole, or rolled back) before the loop ends. `serving` is true while the API is served
// (the informers have synced): /readyz and the leader label; `serving_changed` runs after it
// changes.
Status Lead(const Flags& f, const core::EngineConfig& engine, kube::Client* client,
            std::unique_ptr<fleet::HistoryStore> history, const kube::CancellationToken& leading,
            const kube::CancellationToken& stop, const LeaderTerm& term, std::atomic<bool>& serving,
            const std::function<void()>& serving_changed);

}  // namespace chamber::chamberd
