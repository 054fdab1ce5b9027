// The leader's pod label. Every healthy chamberd replica is ready (so rollouts and disruption
// budgets work as for any Deployment); the Service routes to the one that serves the API by
// selecting the label `chamber.io/leader: "true"`, which the serving leader sets on its own pod
// and every other replica keeps "false" on its own.
//
// A replica that starts, or stops serving, sets its own label to "false"; the serving leader
// sets "true" on its pod and "false" on any other pod of the namespace that still says "true"
// (an earlier leader that lost its connection before it could clear its own). Patches carry
// the pod's UID, and the ones on other pods their resourceVersion, as preconditions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"
#include "kube/client.h"

namespace chamber::chamberd {

inline constexpr char kLeaderLabel[] = "chamber.io/leader";

class LeaderLabeler {
 public:
  struct Options {
    std::string pod_namespace;
    std::string pod_name;
    std::chrono::milliseconds period{2000};
    // Every this many steps the labels are written again even if nothing changed here (someone
    // may have edited them) and the namespace is searched for stale leader labels.
    int resync_steps = 15;
  };
  // `serving_leader`: true while this replica leads and serves the API.
  LeaderLabeler(kube::Client* client, Options options, std::function<bool()> serving_leader);
  ~LeaderLabeler();
  LeaderLabeler(const LeaderLabeler&) = delete;
  LeaderLabeler& operator=(const LeaderLabeler&) = delete;

  // One reconciliation: the own pod's label, and when leading the other pods'.
  Status Step();
  // Runs Step() every period on a thread of its own (and at once when Poke()d).
  void Start();
  // Wakes the thread: leadership or serving changed.
  void Poke();
  // Stops the thread and sets the own label to "false" when it may say "true".
  void Stop();

  // What the own pod's label was last set to (nullopt: not yet).
  std::optional<bool> applied() const;

 private:
  Status SetOwn(bool leader);
  Status ClearOthers();

  kube::Client* client_;
  const Options options_;
  std::function<bool()> serving_leader_;
  std::string uid_;  // the own pod's, read on the first step

  std::mutex step_mu_;  // one Step (or the final label) at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, poked_ = false;
  std::optional<bool> applied_;
  bool others_cleared_ = false;
  int steps_ = 0;
  std::string last_error_;  // logged once until it changes
  std::thread thread_;
};

}  // namespace chamber::chamberd
