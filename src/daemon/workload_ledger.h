// WorkloadLedger: what the daemon remembers of workloads from one cycle to the next, for the
// fleet view (docs/fleet.md, "Waiting and lost work"):
//   - whether each running workload was admitted beyond its queue's quota (borrowing);
//   - the first starts and the preemptions of the recent window, oldest first: the wait and
//     lost-work figures, bounded by what happens in the window whatever the history;
//   - preemptions and lost GPU-hours per queue and reason since the server started;
//   - each live workload's lost work (count, GPU-hours, its latest preemptions), which starts
//     from what the cluster records of it (Observation::stored_losses) after a restart or a
//     leader change, and is dropped once the workload leaves.
//
// A cycle calls NoteDecisions before the backend applies the decisions (indices are good for
// that snapshot only), Record once the backend has been observed, then Workloads for the
// observed snapshot.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/decision.h"
#include "core/model.h"
#include "daemon/backend.h"
#include "fleet/fleet_model.h"

namespace chamber::daemon {

class WorkloadLedger {
 public:
  // `window_ms`: how far back the recent starts and preemptions reach.
  explicit WorkloadLedger(int64_t window_ms) : window_ms_(window_ms) {}

  // What the cycle's decisions say, by workload name: borrowing, pending reasons, and the first
  // starts and preemptions still to be stamped by Record. Replaces what an earlier cycle noted
  // and did not record (its backend failed to apply it).
  void NoteDecisions(const core::Snapshot& snapshot, const core::CycleResult& result);

  // Stamps the noted starts and preemptions with the observed time and pool, adds the
  // preemptions to the totals and to each workload's lost work, and drops what left the window.
  void Record(const Observation& obs, int64_t now);

  // The fleet model's workloads for the observed snapshot (moves its pod names out of `obs`),
  // with their borrowing, lost work and pending reasons. A workload equal to the one the last
  // call returned under its name is that one, shared. Afterwards the ledger forgets the
  // workloads that are no longer in the snapshot.
  SharedItems<fleet::WorkloadInput> Workloads(Observation& obs);

  const std::deque<fleet::StartRecord>& recent_starts() const { return starts_; }
  const std::deque<fleet::PreemptionRecord>& recent_preemptions() const { return preemptions_; }
  const fleet::PreemptionTotals& preemption_totals() const { return preemption_totals_; }

  static constexpr size_t kPreemptionHistory = 10;  // per workload, the latest

 private:
  struct Losses {
    int64_t preemptions = 0;
    double gpu_hours_lost = 0;
    std::deque<fleet::PreemptionRecord> history;  // the latest kPreemptionHistory
    std::optional<int64_t> preempted_run;         // start time of the run last preempted
    int64_t seen_cycle = 0;
  };
  struct NotedStart {
    fleet::StartRecord record;
    int32_t node;  // the first placed pod's, for the pool; -1: none
  };
  struct NotedPreemption {
    fleet::PreemptionRecord record;
    int32_t node;
    int64_t run;  // the start time of the run it ends
    size_t workload;
  };

  // The workload's lost work, created from what the cluster records the first time it is seen.
  Losses& LossesOf(const Observation& obs, size_t workload, const std::string& name);

  // Records whether a workload bound or resumed this cycle borrows.
  void NoteBorrowing(const std::string& workload, bool borrowing);

  // The workload the last call returned under `name` (at `index` when the snapshot kept its
  // order), or null.
  const SharedItems<fleet::WorkloadInput>::Item* Last(size_t index, const std::string& name);

  int64_t window_ms_;
  int64_t cycle_ = 0;
  SharedItems<fleet::WorkloadInput> last_;                   // what Workloads returned last
  std::unordered_map<std::string_view, size_t> last_index_;  // name -> index in last_, when
                                                             // the order changed
  // The running workloads admitted beyond their queue's quota (only those: most run within it),
  // each with the last Workloads call that saw it hold GPUs (0: bound, not yet seen).
  std::unordered_map<std::string, int64_t> borrowing_;
  int64_t sweep_ = 0;  // Workloads calls so far
  std::unordered_map<std::string, Shared<fleet::PendingWhy>> pending_;
  std::vector<NotedStart> noted_starts_;
  std::vector<NotedPreemption> noted_preemptions_;
  std::deque<fleet::StartRecord> starts_;
  std::deque<fleet::PreemptionRecord> preemptions_;
  fleet::PreemptionTotals preemption_totals_;
  std::unordered_map<std::string, Losses> losses_;
};

}  // namespace chamber::daemon
