// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics:
//
// - A candidate takes the lease when it does not exist, when its holder is empty (released), or
//   when the lease record has not changed for leaseDurationSeconds as observed on the local
//   clock. The remote renewTime is never compared with the local time, so clock skew between
//   machines does not matter.
// - Taking over from another holder increments leaseTransitions and sets acquireTime.
// - The leader renews every retry period; if no renewal succeeds within the renew deadline it
//   stops leading. Its CancellationToken is cancelled first, and the token also reports
//   cancelled on its own once the renew deadline has passed since the last successful renewal,
//   so writers that check it stop at once even while the elector is stuck on a request. That
//   is final: a renewal that succeeds after the deadline does not make the candidate lead on
//   (its work has been told to stop); Run returns as for any lost leadership.
// - On shutdown (the stop token passed to Run is cancelled) a leader with release_on_cancel
//   clears holderIdentity so a successor takes over at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "kube/client.h"
#include "kube/types.h"

namespace chamber::kube {

// A shareable cancellation flag with an optional deadline. Copies share state.
class CancellationToken {
 public:
  CancellationToken();
  void Cancel() const;
  // True once Cancel() was called or the deadline (if set) has passed; either is final.
  bool cancelled() const;
  // Waits up to `d` (or until the deadline); returns true when cancelled.
  bool WaitFor(std::chrono::milliseconds d) const;
  // Moves the deadline; does nothing once the token is cancelled.
  void set_deadline(std::chrono::steady_clock::time_point t) const;

 private:
  struct State {
    std::atomic<bool> cancelled{false};
    std::atomic<int64_t> deadline_ns{0};  // 0: none
    std::mutex mu;
    std::condition_variable cv;
  };
  std::shared_ptr<State> state_;
};

struct LeaderElectionConfig {
  std::string lease_namespace = "default";
  std::string lease_name;
  std::string identity;  // unique per candidate, e.g. the pod name
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  bool release_on_cancel = true;

  // Runs on its own thread while this candidate leads; must return once `leading` is cancelled.
  std::function<void(CancellationToken leading)> on_started_leading;
  // After leadership ended (lost or released), once on_started_leading has returned.
  std::function<void()> on_stopped_leading;
  // Whenever the observed leader changes (also to this candidate).
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  static Result<std::unique_ptr<LeaderElector>> Create(Client* client, LeaderElectionConfig config);

  // Campaigns until leading, leads until leadership is lost or `stop` is cancelled, then
  // returns (as client-go's Run does). Call it again to campaign again.
  void Run(const CancellationToken& stop);

  bool IsLeader() const;
  std::string leader() const;  // the last observed holder ("" when none)
  // While leading, this tenure's term: "<identity>/<leaseTransitions>" of the Lease it holds,
  // which no other tenure of a candidate with this identity shares ("" when not leading). A
  // writer stamps it on its writes so that the API server can refuse those of a deposed leader
  // (chamberd's binds, docs/reliability.md#fencing-a-deposed-leader).
  std::string term() const;

  // When the last acquire-or-renew attempt started and when the last one finished (steady
  // clock; the epoch before the first). Run starts one every retry period, so these show
  // whether the election loop is alive (chamberd's /healthz).
  struct Activity {
    std::chrono::steady_clock::time_point started, finished;
  };
  Activity activity() const;

  // One acquire-or-renew attempt (the step Run repeats); public for tests.
  bool TryAcquireOrRenew();
  // Clears holderIdentity if this candidate holds the lease.
  Status Release();

 private:
  LeaderElector(Client* client, LeaderElectionConfig config)
      : client_(client), config_(std::move(config)) {}
  void Observe(const Lease& lease, std::chrono::steady_clock::time_point now);

  Client* client_;
  const LeaderElectionConfig config_;
  mutable std::mutex mu_;
  std::string observed_record_;  // holder|duration|acquire|renew|transitions
  Lease observed_lease_;
  bool have_observed_ = false;
  std::chrono::steady_clock::time_point observed_time_;
  std::string reported_leader_;
  CancellationToken leading_;
  bool is_leader_ = false;
  std::string term_;  // while leading
  Activity activity_;
};

}  // namespace chamber::kube
