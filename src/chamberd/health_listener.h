// chamberd's health listener (--health-listen): /healthz and /readyz on a port of their own,
// served by every replica, while the API and dashboard are served by the leader alone.
//
//   /healthz  200 "ok" while the process and its leader-election loop are alive; 500 and the
//             reason when the loop is stuck (ElectionLiveness). The liveness probe.
//   /readyz   200 on every replica that can do its part: a standby once it has made a Lease
//             attempt ("ok: standby: leader is chamber-5f7c9-x2x7q_1"), the leader once its
//             informers have synced and its API server listens ("ok: leader"); 503 and the
//             reason otherwise ("starting: waiting for the informers to sync"). The readiness
//             probe. The Service routes to the leader by its pod label (leader_label.h), not by
//             readiness, so that rollouts and disruption budgets see every healthy replica.
//
// Neither needs a token: they say nothing about the cluster beyond the leader's name.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "kube/leader_election.h"

namespace chamber::chamberd {

// Each check returns "" when all is well, else a one-line reason. Called from the listener's
// threads, so they must be thread-safe.
struct HealthChecks {
  std::function<std::string()> live;
  std::function<std::string()> ready;
  // What a passing /readyz says after "ok: " (e.g. "leader"); empty or unset: just "ok".
  std::function<std::string()> role;
  // This replica's own metrics, in the Prometheus text format, served on /metrics; unset: no
  // /metrics (404).
  std::function<std::string()> metrics;
};

class HealthListener {
 public:
  explicit HealthListener(HealthChecks checks);
  ~HealthListener();
  HealthListener(const HealthListener&) = delete;
  HealthListener& operator=(const HealthListener&) = delete;

  // Binds host:port (port 0: any free port) and serves on a thread of its own.
  Status Start(const std::string& host, int port);
  // Stops serving; idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// Whether the leader-election loop is alive, from its activity (LeaderElector::activity): ""
// when it is, else why not. Stuck: an attempt has run for longer than `attempt_limit` (its
// requests' time-outs have long passed), or none has started for `idle_limit` since the last
// one finished (Run starts one every retry period). `since` is when the elector was created,
// which counts as the end of an attempt before the first one.
std::string ElectionLiveness(const kube::LeaderElector::Activity& activity,
                             std::chrono::steady_clock::time_point since,
                             std::chrono::steady_clock::time_point now,
                             std::chrono::milliseconds idle_limit,
                             std::chrono::milliseconds attempt_limit);

}  // namespace chamber::chamberd
