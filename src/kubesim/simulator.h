// The pod lifecycle simulator: the part of a kubelet that the control plane can see, for pods
// bound to fake nodes. Bound pods become Running, finish after their declared duration
// (Succeeded, or Failed with a nonzero exit code), and pods being deleted are marked terminal
// and removed after min(their grace period, a cap), as a kubelet would.
//
// Two informers feed one keyed work queue: pods with a spec.nodeName, and the fake nodes
// (a label selector). A pool of writers takes pod keys from the queue, asks NextStep
// (pod_lifecycle.h) what is due, and either applies it through the API or queues the key again
// for when it is due. Status patches carry the resourceVersion they were computed from; a
// conflict or an error queues the key again after a short delay.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kubesim/nodes.h"
#include "kubesim/pod_lifecycle.h"
#include "kubesim/work_queue.h"

namespace chamber::kubesim {

struct SimulatorOptions {
  std::string node_selector = kFakeNodeSelector;  // label selector of the nodes to simulate
  std::chrono::milliseconds grace_cap{2000};      // longest wait before deleting a pod
  int writers = 16;
  std::chrono::milliseconds resync_period{30'000};  // revisit every pod this often
  std::chrono::milliseconds sync_timeout{60'000};   // Start waits this long for the informers
};

struct SimulatorStats {
  int64_t started = 0;    // pods marked Running
  int64_t succeeded = 0;  // pods finished with exit code 0
  int64_t failed = 0;     // pods finished with a nonzero code, killed, or with bad annotations
  int64_t deleted = 0;    // pods removed after their deletion grace
  int64_t conflicts = 0;  // writes refused on a stale resourceVersion (retried)
  int64_t errors = 0;     // other failed writes (retried)
};

class Simulator {
 public:
  // `client` must outlive the simulator; give it qps 0 (no client-side limit) for large runs.
  Simulator(kube::Client* client, SimulatorOptions options = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Starts the informers, waits until both have listed, then starts the writers.
  Status Start();
  void Stop();
  SimulatorStats stats() const;

 private:
  void Worker();
  void Process(const std::string& key);
  Status Apply(const kube::Pod& pod, Action action, const Result<PodPlan>& plan,
               const std::string& host_ip);
  bool OnFakeNode(const kube::Pod& pod, std::string* host_ip) const;

  kube::Client* client_;
  const SimulatorOptions options_;
  WorkQueue queue_;
  std::unique_ptr<kube::Informer<kube::Node>> nodes_;
  std::unique_ptr<kube::Informer<kube::Pod>> pods_;
  std::vector<std::thread> workers_;
  std::atomic<bool> running_{false};

  std::mutex mu_;  // guards the two maps below, keyed "namespace/name/uid"
  std::map<std::string, Clock::time_point> started_at_;      // when this simulator started it
  std::map<std::string, Clock::time_point> deleting_since_;  // first seen with deletionTimestamp

  std::atomic<int64_t> started_{0}, succeeded_{0}, failed_{0}, deleted_{0}, conflicts_{0},
      errors_{0};
};

}  // namespace chamber::kubesim
