// The health controller inside chamberd: takes agent reports from the API server's threads,
// runs the pure HealthController (health_controller.h) under one lock, and carries its desired
// state to the Node objects with HealthWriter on a thread of its own, woken at once by a report
// that changes something and at least every `period` (probation ends, stale agents).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/kube/kube_backend.h"
#include "daemon/health_api.h"
#include "health/health_controller.h"
#include "health/health_writer.h"

namespace chamber::health {

class HealthService : public daemon::HealthApi {
 public:
  using NodeLister = std::function<std::vector<std::shared_ptr<const kube::Node>>()>;
  struct Options {
    HealthControllerConfig config;
    std::chrono::milliseconds period{1000};
    std::function<double()> clock;         // unix seconds; empty: the system clock
    std::function<bool()> writes_allowed;  // false: write nothing (leadership lost)
  };
  // `writer` may be null (nothing is written: tests, or health.enabled false).
  HealthService(Options options, std::unique_ptr<HealthWriter> writer, NodeLister lister);
  ~HealthService() override;

  // Restores the fences the nodes carry (an earlier leader's), then runs Step() on a thread.
  void Start();
  void Stop();
  // Restore, evaluate, write: one pass.
  void Step();

  Status PostReport(std::string_view body, const std::string& principal,
                    const std::string& bound_node) override;
  // The utilization and memory use each node's agent last reported, for the nodes whose agent
  // reported within `stale_after` (KubeBackend::SetGpuUsageSource).
  backend::AgentGpuUsage GpuUsage();
  // Which GPUs the device plugin gave which pods whole, as each node's agent last read the
  // kubelet's pod-resources API, for the nodes whose agent reported within `stale_after` and
  // could read it (KubeBackend::SetDeviceAssignmentSource).
  backend::DeviceAssignments DeviceAssignments();
  // Why each fenced GPU is fenced, with the evidence (KubeBackend::SetGpuFaultSource).
  backend::GpuFaultsByNode GpuFaults();
  // Workloads the scheduler requeued off fenced GPUs (KubeBackend::SetFaultRequeueSink): they
  // join their incidents' evidence, and an Event on the node names them.
  void RecordRequeued(const std::vector<backend::FaultRequeue>& requeued);
  nlohmann::json View() override;
  Status Clear(const std::string& node, const std::string& principal) override;
  std::string Metrics() override;

 private:
  double Now() const;
  void RestoreFromNodes(double now);  // under mu_
  void Loop();

  Options options_;
  std::unique_ptr<HealthWriter> writer_;
  NodeLister lister_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;
  bool stop_ = false;
  HealthController controller_;
  // The Node objects RestoreFromNodes has read, by name.
  std::unordered_map<std::string, std::weak_ptr<const kube::Node>> observed_;
  int64_t reports_accepted_ = 0, reports_rejected_ = 0, reports_superseded_ = 0;
  // The agent's time of the last report accepted from each node: a report that arrives after a
  // later one (an agent's retry that outran the request it repeats) is superseded.
  std::unordered_map<std::string, double> last_report_time_;
  struct NodeUsage {
    double received = 0;
    std::shared_ptr<const std::vector<backend::AgentGpuSample>> gpus;
    std::shared_ptr<const backend::NodeDevices> devices;  // null: attribution not available
  };
  std::unordered_map<std::string, NodeUsage> usage_;
  HealthWriterStats writer_stats_;
  std::thread thread_;
};

}  // namespace chamber::health
