// The scheduling loop chamberd and the demo share. Each tick: the backend refreshes the snapshot,
// the engine schedules it, the backend applies the decisions, the fleet model rolls up what the
// cluster now looks like, the history store records it, and the result is published as an
// immutable FleetState that the API, the event stream and /metrics read without touching the
// loop. What a tick remembers for the next lives in named pieces: the WorkloadLedger (borrowing,
// recent starts and preemptions, lost work), the IncidentLog (GPUs out of service), the fleet
// model's ActivityTracker and the totals; fleet_input.h converts the snapshot for the fleet
// model.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "core/config.h"
#include "core/engine.h"
#include "daemon/backend.h"
#include "daemon/incident_log.h"
#include "daemon/workload_ledger.h"
#include "fleet/fleet_model.h"
#include "fleet/history_store.h"

namespace chamber::daemon {

// Everything one tick produced. Published by shared_ptr and never changed afterwards, except
// for the cache of serialized responses.
struct FleetState {
  uint64_t version = 0;
  int64_t time_ms = 0;  // Unix milliseconds (simulated in the demo)
  std::string mode;
  bool simulated = false;
  fleet::FleetInput input;
  fleet::FleetView view;
  fleet::Totals totals;
  std::vector<fleet::Totals> pool_totals;
  std::vector<Incident> incidents;  // newest first
  std::vector<bool> node_schedulable;
  double cycle_ms = 0;
  double cycle_cpu_ms = 0;  // the engine's CPU time in that cycle
  int64_t cycles = 0;
  std::string currency = "USD";
  std::vector<BackendMetric> backend_metrics;  // Observation::metrics

  // Serialized responses, filled on first use (see api_json.h).
  mutable std::mutex cache_mu;
  mutable std::map<std::string, std::shared_ptr<const std::string>> cache;
};

struct DaemonOptions {
  core::EngineConfig engine;
  fleet::FleetOptions fleet;
  std::chrono::milliseconds tick{500};  // wall time between cycles in Run()
  size_t max_incidents = 200;
};

class Daemon {
 public:
  // `history` may be null: no history is kept.
  Daemon(std::unique_ptr<ClusterBackend> backend, DaemonOptions options,
         std::unique_ptr<fleet::HistoryStore> history);

  // One cycle. Errors from the backend or the history store are returned (Run logs them).
  Status Tick();

  // What a caller of Run adds to the loop: chamberd logs what each cycle wrote and stops when it
  // stops leading; the demo stops on a stop_token.
  struct LoopHooks {
    // Waits until `deadline` unless the loop must stop first; false: stop.
    std::function<bool(std::chrono::steady_clock::time_point deadline)> wait_until;
    // After each tick, with its status (a failed one is logged before). May be empty.
    std::function<void(const Status&)> after_tick;
  };
  // The scheduling loop: ticks every options.tick (a tick that overruns starts the next at once,
  // without catching up) until hooks.wait_until says to stop.
  void Run(const LoopHooks& hooks);
  // The loop until `stop` is requested.
  void Run(std::stop_token stop);

  // The latest published state; an empty state (version 0) before the first tick.
  std::shared_ptr<const FleetState> state() const;
  // Blocks until a state newer than `after` is published, `timeout` passes or Shutdown().
  // Returns the latest state.
  std::shared_ptr<const FleetState> WaitForUpdate(uint64_t after,
                                                  std::chrono::milliseconds timeout) const;
  // Wakes every waiter for good (the server is stopping).
  void Shutdown();
  bool shutting_down() const { return shutdown_.load(); }

  Status SetSchedulable(std::string_view node, bool schedulable);
  fleet::HistoryStore* history() { return history_.get(); }
  const DaemonOptions& options() const { return options_; }

 private:
  void Publish(std::shared_ptr<FleetState> s);
  // The totals: the previous state's view held from its time until `state`'s.
  void AddToTotals(FleetState& state);
  // The state's samples into the history store, and its upkeep once per fine step.
  Status RecordHistory(const FleetState& state);
  std::vector<fleet::HistorySample> HistorySamples(const FleetState& s) const;

  std::unique_ptr<ClusterBackend> backend_;
  DaemonOptions options_;
  std::unique_ptr<fleet::HistoryStore> history_;
  core::Engine engine_;
  std::mutex backend_mu_;  // Tick and admin calls take turns with the backend

  // Loop state (under backend_mu_).
  fleet::ActivityTracker activity_;
  WorkloadLedger ledger_;  // borrowing, recent starts and preemptions, lost work
  IncidentLog incidents_;
  std::vector<core::QueueStatus> queue_status_;
  fleet::Totals totals_;
  std::vector<fleet::Totals> pool_totals_;
  int64_t cycles_ = 0;
  int64_t last_fine_bucket_ = INT64_MIN;

  mutable std::mutex state_mu_;
  mutable std::condition_variable state_cv_;
  std::shared_ptr<const FleetState> state_;
  std::atomic<bool> shutdown_{false};
};

}  // namespace chamber::daemon
