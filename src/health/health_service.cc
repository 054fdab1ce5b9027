#include "health/health_service.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "backend/kube/snapshot_builder.h"
#include "common/prometheus_text.h"

namespace chamber::health {

HealthService::HealthService(Options options, std::unique_ptr<HealthWriter> writer,
                             NodeLister lister)
    : options_(std::move(options)),
      writer_(std::move(writer)),
      lister_(std::move(lister)),
      controller_(options_.config) {}

HealthService::~HealthService() { Stop(); }

double HealthService::Now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void HealthService::RestoreFromNodes(double now) {
  if (!lister_) return;
  std::unordered_map<std::string, std::weak_ptr<const kube::Node>> seen;
  for (const std::shared_ptr<const kube::Node>& n : lister_()) {
    if (!n) continue;
    // A Node object is read once: the informer hands out a new one when the node changes (the
    // weak pointer tells a new object at a reused address from the old one).
    auto last = observed_.find(n->metadata.name);
    const bool same =
        last != observed_.end() && !last->second.owner_before(n) && !n.owner_before(last->second);
    seen.emplace(n->metadata.name, n);
    if (same || controller_.Knows(n->metadata.name)) continue;
    const bool has_meta = n->raw.is_object() && n->raw.contains("metadata");
    std::optional<ObservedFence> f = has_meta ? ObserveFence(n->raw) : ObserveFence(n->ToJson());
    if (!f) continue;
    if (!f->history_error.empty())
      spdlog::warn("health: node {}: {}; its fault history starts empty", n->metadata.name,
                   f->history_error);
    if (!f->gpus.empty() || f->held) {
      spdlog::info("health: node {} carries a fence (GPUs {}{}); its probation starts now",
                   n->metadata.name, backend::FormatIndexList(f->gpus), f->held ? ", held" : "");
    }
    controller_.Restore(n->metadata.name, f->gpus, f->held, f->history, now);
  }
  observed_ = std::move(seen);
}

void HealthService::Start() {
  {
    std::lock_guard lock(mu_);
    RestoreFromNodes(Now());
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void HealthService::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthService::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, options_.period, [this] { return stop_ || dirty_; });
    if (stop_) break;
    dirty_ = false;
    lock.unlock();
    Step();
    lock.lock();
  }
}

void HealthService::Step() {
  std::vector<HealthChange> changes;
  std::map<std::string, DesiredNode> desired;
  {
    std::lock_guard lock(mu_);
    const double now = Now();
    RestoreFromNodes(now);
    changes = controller_.Evaluate(now);
    desired = controller_.Desired();
  }
  for (const HealthChange& c : changes) {
    const bool alarm =
        c.kind == HealthChange::Kind::kFenced || c.kind == HealthChange::Kind::kHeld ||
        c.kind == HealthChange::Kind::kBreakerOpened || c.kind == HealthChange::Kind::kStale ||
        c.kind == HealthChange::Kind::kRequeued;
    spdlog::log(alarm ? spdlog::level::warn : spdlog::level::info, "health: {} {}: {}",
                ChangeKindName(c.kind), c.node, c.message);
  }
  if (!writer_ || !options_.config.enabled) return;
  if (options_.writes_allowed && !options_.writes_allowed()) return;
  if (Status s = writer_->Apply(desired, changes); !s.ok())
    spdlog::warn("health: writing nodes: {}", s.message());
  std::lock_guard lock(mu_);
  writer_stats_ = writer_->stats();
}

Status HealthService::PostReport(std::string_view body, const std::string& principal,
                                 const std::string& bound_node) {
  Result<AgentReport> r = ParseAgentReportText(body);
  std::lock_guard lock(mu_);
  if (!r.ok()) {
    ++reports_rejected_;
    spdlog::warn("health: report from {} rejected: {}", principal, r.status().message());
    return r.status();
  }
  // A token the kubelet projected into an agent pod names the pod's node: that agent may speak
  // for its own node only, so one stolen token cannot fence (or unfence) the whole fleet.
  if (!bound_node.empty() && r->node != bound_node) {
    ++reports_rejected_;
    Status refused = Status::FailedPrecondition("token bound to node " + bound_node +
                                                " may not report for node " + r->node);
    spdlog::warn("health: report from {} rejected: {}", principal, refused.message());
    return refused;
  }
  // A report older than the last one from its node, by less than the staleness limit, arrived
  // out of order (a retried request that outran the one it repeats) or twice: the newer state
  // stands. Older by more is the agent's clock stepped back, and is taken.
  auto last = last_report_time_.find(r->node);
  if (last != last_report_time_.end() && r->time <= last->second &&
      last->second - r->time < options_.config.stale_after_s) {
    ++reports_superseded_;
    spdlog::debug("health: report of {} at {} superseded by its report at {}", r->node, r->time,
                  last->second);
    return Status::Ok();
  }
  last_report_time_[r->node] = r->time;
  ++reports_accepted_;
  const double now = Now();
  auto gpus = std::make_shared<std::vector<backend::AgentGpuSample>>();
  gpus->reserve(r->samples.size());
  for (const ReportSample& s : r->samples) {
    // A GPU in MIG mode reports no utilization (NVML does not measure it there): its MIG devices
    // are worth a sample still.
    auto inventory = std::find_if(r->gpus.begin(), r->gpus.end(),
                                  [&](const ReportGpu& g) { return g.index == s.index; });
    const bool mig = inventory != r->gpus.end() && !inventory->mig_devices.empty();
    if (s.lost || (!s.utilization && s.processes.empty() && !mig)) continue;
    backend::AgentGpuSample a{
        s.index, s.uuid, {s.utilization.value_or(0), s.memory_used_bytes.value_or(0), {}}, {}};
    if (mig) {
      for (const ReportMigDevice& d : inventory->mig_devices) {
        fleet::MigDeviceInput m{d.uuid, d.profile, d.memory_total_bytes.value_or(0), {}};
        for (const ReportHolder& h : s.pods)
          if (h.mig && h.mig_uuid == d.uuid) m.pod = h.namespace_name + "/" + h.pod;
        a.sample.mig_devices.push_back(std::move(m));
      }
    }
    for (const ReportProcess& p : s.processes) {
      if (!p.used_memory_bytes) continue;
      auto it = std::find_if(a.pod_memory.begin(), a.pod_memory.end(),
                             [&](const auto& e) { return e.first == p.pod_uid; });
      if (it == a.pod_memory.end())
        a.pod_memory.emplace_back(p.pod_uid, *p.used_memory_bytes);
      else
        it->second += *p.used_memory_bytes;
    }
    gpus->push_back(std::move(a));
  }
  std::shared_ptr<backend::NodeDevices> devices;
  if (r->pod_resources_available) {
    devices = std::make_shared<backend::NodeDevices>();
    for (const ReportSample& s : r->samples)
      for (const ReportHolder& h : s.pods)
        if (s.index < 64 && h.resource == kWholeGpuResource && !h.mig)  // 64-bit masks
          (*devices)[h.namespace_name + "/" + h.pod] |= uint64_t{1} << s.index;
  }
  usage_[r->node] = {now, std::move(gpus), std::move(devices)};
  controller_.Ingest(*r, now);
  dirty_ = true;
  cv_.notify_all();
  return Status::Ok();
}

backend::AgentGpuUsage HealthService::GpuUsage() {
  std::lock_guard lock(mu_);
  const double now = Now();
  backend::AgentGpuUsage out;
  out.reserve(usage_.size());
  for (const auto& [node, u] : usage_)
    if (now - u.received <= options_.config.stale_after_s) out.emplace(node, u.gpus);
  return out;
}

backend::DeviceAssignments HealthService::DeviceAssignments() {
  std::lock_guard lock(mu_);
  const double now = Now();
  backend::DeviceAssignments out;
  for (const auto& [node, u] : usage_)
    if (u.devices != nullptr && now - u.received <= options_.config.stale_after_s)
      out.emplace(node, u.devices);
  return out;
}

backend::GpuFaultsByNode HealthService::GpuFaults() {
  std::lock_guard lock(mu_);
  backend::GpuFaultsByNode out;
  for (FenceCause& c : controller_.FenceCauses())
    out[c.node].push_back(
        {c.gpu_index, daemon::GpuFault{c.cause, std::string(SeverityName(c.severity)),
                                       std::move(c.message), std::move(c.evidence)}});
  return out;
}

void HealthService::RecordRequeued(const std::vector<backend::FaultRequeue>& requeued) {
  std::vector<RequeuedWorkload> r;
  r.reserve(requeued.size());
  for (const backend::FaultRequeue& f : requeued) r.push_back({f.node, f.gpu_index, f.workload});
  std::lock_guard lock(mu_);
  controller_.RecordRequeued(r);
  dirty_ = true;
  cv_.notify_all();
}

nlohmann::json HealthService::View() {
  std::lock_guard lock(mu_);
  return controller_.ToJson(Now());
}

Status HealthService::Clear(const std::string& node, const std::string& principal) {
  std::lock_guard lock(mu_);
  CHAMBER_RETURN_IF_ERROR(controller_.Clear(node, Now()));
  spdlog::info("health: node {} cleared by {}", node, principal);
  dirty_ = true;
  cv_.notify_all();
  return Status::Ok();
}

std::string HealthService::Metrics() {
  namespace pm = chamber::prometheus;
  std::lock_guard lock(mu_);
  int fenced_gpus = 0, fenced_nodes = 0, held = 0, stale = 0;
  for (const NodeHealth& n : controller_.Nodes()) {
    fenced_gpus += static_cast<int>(n.fenced.size());
    fenced_nodes += n.fenced.empty() ? 0 : 1;
    held += n.held ? 1 : 0;
    stale += n.stale ? 1 : 0;
  }
  const BreakerState b = controller_.Breaker();
  pm::TextWriter w;
  w.Family("chamber_health_fenced_gpus", "GPUs the health controller fences now.",
           pm::MetricType::kGauge);
  w.Sample(fenced_gpus);
  w.Family("chamber_health_fenced_nodes", "Nodes with at least one fenced GPU.",
           pm::MetricType::kGauge);
  w.Sample(fenced_nodes);
  w.Family("chamber_health_held_nodes", "Nodes held until an operator clears them.",
           pm::MetricType::kGauge);
  w.Sample(held);
  w.Family("chamber_health_stale_agents", "Nodes whose agent stopped reporting.",
           pm::MetricType::kGauge);
  w.Sample(stale);
  w.Family("chamber_health_circuit_breaker_open",
           "1 while the fleet circuit breaker keeps new nodes from being fenced (an alert).",
           pm::MetricType::kGauge);
  w.Sample(b.open ? 1 : 0);
  w.Family("chamber_health_suppressed_nodes",
           "Nodes with GPU faults left unfenced by the circuit breaker.", pm::MetricType::kGauge);
  w.Sample(static_cast<double>(b.suppressed_nodes.size()));
  w.Family("chamber_health_reports_total", "Agent reports received, by result.",
           pm::MetricType::kCounter);
  w.Sample({{"result", "accepted"}}, static_cast<double>(reports_accepted_));
  w.Sample({{"result", "rejected"}}, static_cast<double>(reports_rejected_));
  w.Sample({{"result", "superseded"}}, static_cast<double>(reports_superseded_));
  w.Family("chamber_health_node_writes_total", "Writes to Node objects, by kind.",
           pm::MetricType::kCounter);
  w.Sample({{"kind", "node"}}, static_cast<double>(writer_stats_.node_patches));
  w.Sample({{"kind", "status"}}, static_cast<double>(writer_stats_.status_patches));
  w.Sample({{"kind", "conflict"}}, static_cast<double>(writer_stats_.conflicts));
  w.Sample({{"kind", "error"}}, static_cast<double>(writer_stats_.errors));
  return w.Take();
}

}  // namespace chamber::health
