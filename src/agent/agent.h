// The chamber-agent runtime: loads NVML, discovers GPUs, reads the kernel log for earlier Xids,
// then (in Serve) samples every interval, classifies health as samples and Xid events arrive,
// serves /metrics, /healthz and /v1/report, and pushes reports to chamberd.
//
// Threads in Serve: the caller's (sampling), one waiting on the NVML event set, one for HTTP,
// one pushing, one asking the kubelet for pod resources (so a slow kubelet never delays a
// sample). They share one mutex-guarded state; the classifier itself is single-threaded
// code called under that mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_collector.h"
#include "agent/health.h"
#include "agent/pod_resources.h"
#include "agent/report.h"
#include "common/status.h"

namespace chamber::agent {

struct AgentOptions {
  std::string node_name;
  std::string nvml_library = kDefaultNvmlLibrary;
  std::string kernel_log = "/dev/kmsg";  // empty: do not read
  std::string host_proc = "/proc";       // the node's processes, for each GPU process's pod
  // The kubelet's pod-resources socket, for per-pod attribution; empty: none. Pod assignments
  // change slowly, so List is called on its own, slower period, each call with a deadline.
  std::string pod_resources_socket = kDefaultPodResourcesSocket;
  double pod_resources_interval_s = 10;
  double pod_resources_timeout_s = 2;
  double interval_s = 1.0;
  std::string listen_host = "0.0.0.0";
  int listen_port = 9401;    // 0: any free port
  std::string port_file;     // written with the bound port when set
  std::string chamberd_url;  // http://host:port/path; empty: no push
  // With an https:// chamberd_url: the PEM CA bundle chamberd's certificate must chain to (its
  // host name is checked too); empty: the system's trust store.
  std::string chamberd_ca_file;
  // Sent as `Authorization: Bearer` with every push, read again each time (tokens rotate);
  // empty: no header.
  std::string token_file;
  double push_interval_s = 10;
  double push_max_backoff_s = 60;
  HealthConfig health;
  double boot_time = 0;  // unix seconds
};

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Loads NVML and discovers GPUs, registers for Xid events and reads the kernel log. Without
  // NVML the inventory is empty and says why; the agent keeps working.
  void Start();

  // Samples every GPU once and classifies the samples.
  void SampleOnce();

  // Asks the kubelet which containers hold which GPUs (List, with a deadline) and keeps the
  // answer for Snapshot. Logs when attribution becomes unavailable or available again, not on
  // every call. Serve calls it every pod_resources_interval_s on a thread of its own.
  void RefreshPodResources();

  // True when some GPU supports GPM (its figures need two samples some time apart).
  bool UsesGpm() const;

  AgentSnapshot Snapshot() const;

  // Serves until Stop(). Fails only when the HTTP port cannot be bound.
  Status Serve();
  void Stop();

 private:
  void HandleXid(XidEvent event);
  void Record(const std::vector<IncidentChange>& changes);  // under mu_
  void EventLoop();
  void PushLoop();
  void PodResourcesLoop();

  AgentOptions options_;
  std::unique_ptr<GpuCollector> collector_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  bool push_due_ = false;
  Inventory inventory_;
  std::unique_ptr<HealthClassifier> classifier_;
  std::map<int, GpuSample> latest_;
  std::map<std::pair<int, unsigned>, std::uint64_t> xid_counts_;
  std::map<std::string, std::string> labels_;
  PodAttribution pod_attribution_;
  std::optional<bool> pod_resources_ok_;  // the last List's outcome, so only changes are logged
  std::uint64_t push_success_ = 0;
  std::uint64_t push_failure_ = 0;

  struct Http;
  std::unique_ptr<Http> http_;
};

// Seconds since the Unix epoch, from the system clock.
double UnixNow();

// When the host booted (unix seconds), from /proc/uptime; now when that cannot be read.
double HostBootTime();

}  // namespace chamber::agent
