// One chamberd replica: with leader election it campaigns for the Lease, copies the leader's
// history while standby and leads (lead.h) once elected; it serves /healthz and /readyz and
// labels its pod while it leads and serves. Without election it leads at once.
#pragma once

#include <memory>

#include "chamberd/flags.h"
#include "core/config.h"
#include "fleet/history_store.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_election.h"

namespace chamber::chamberd {

// Runs until `stop` is cancelled (a signal) or leadership is lost. Returns the process's exit
// status: 0 after a clean stop, 1 after a lost Lease or a failed lead, 2 for bad flags.
int RunReplica(Flags& f, const core::EngineConfig& engine, const kube::RestConfig& rest,
               kube::Client* client, std::unique_ptr<fleet::HistoryStore> history,
               kube::CancellationToken stop);

}  // namespace chamber::chamberd
