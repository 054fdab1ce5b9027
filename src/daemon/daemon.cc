#include "daemon/daemon.h"

#include <algorithm>
#include <bit>
#include <set>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "common/cpu_time.h"

namespace chamber::daemon {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

fleet::WorkloadPhase PhaseOf(core::WorkloadState s) {
  switch (s) {
    case core::WorkloadState::kPending:
      return fleet::WorkloadPhase::kPending;
    case core::WorkloadState::kRunning:
      return fleet::WorkloadPhase::kRunning;
    case core::WorkloadState::kPreempting:
      return fleet::WorkloadPhase::kPreempting;
    case core::WorkloadState::kSuspended:
      return fleet::WorkloadPhase::kSuspended;
  }
  return fleet::WorkloadPhase::kPending;
}

fleet::PreemptionReason ReasonOf(core::PreemptReason r) {
  switch (r) {
    case core::PreemptReason::kReclaim:
      return fleet::PreemptionReason::kReclaim;
    case core::PreemptReason::kPriority:
      return fleet::PreemptionReason::kPriority;
    case core::PreemptReason::kHardwareFault:
      return fleet::PreemptionReason::kHardwareFault;
  }
  return fleet::PreemptionReason::kReclaim;
}

// The node of a decision's first placed pod; -1 when none is placed.
int32_t FirstNode(const std::vector<core::PodAssignment>& pods) {
  for (const core::PodAssignment& a : pods)
    if (a.placement.node.valid()) return a.placement.node.value;
  return -1;
}

// An open incident says what the backend knows of its fault: the rule, the readings and what was
// done. A GPU marked unhealthy without a known fault (by hand, or a fence restored from an
// earlier leader) still says what was done; a fault known once is kept while the GPU stays out
// (a probation outlives the agent's incident).
void DescribeFault(Incident& inc, const std::unordered_map<std::string, GpuFault>& faults) {
  const std::string where = "GPU " + std::to_string(inc.gpu_index) + " on " + inc.node;
  auto f = faults.find(inc.uuid);
  if (f == faults.end()) {
    if (!inc.evidence.empty()) return;
    inc.message = where +
                  " is marked unhealthy (no fault evidence reported); excluded from "
                  "scheduling";
    ActionEvidence fenced;
    fenced.gpu_fenced = true;
    inc.evidence = {fenced};
    return;
  }
  inc.cause = f->second.cause;
  inc.severity = f->second.severity;
  inc.message = where + ": " + f->second.message;
  inc.evidence = f->second.evidence;
}

struct PendingInfo {
  std::string reason;
  std::string message;
  std::vector<std::string> details;
  int32_t position = 0;
};

}  // namespace

Daemon::Daemon(std::unique_ptr<ClusterBackend> backend, DaemonOptions options,
               std::unique_ptr<fleet::HistoryStore> history)
    : backend_(std::move(backend)),
      options_(std::move(options)),
      history_(std::move(history)),
      engine_(options_.engine),
      activity_(options_.fleet.activity_threshold),
      state_(std::make_shared<FleetState>()) {}

std::shared_ptr<const FleetState> Daemon::state() const {
  std::lock_guard lock(state_mu_);
  return state_;
}

std::shared_ptr<const FleetState> Daemon::WaitForUpdate(uint64_t after,
                                                        std::chrono::milliseconds timeout) const {
  std::unique_lock lock(state_mu_);
  state_cv_.wait_for(lock, timeout, [&] { return state_->version > after || shutdown_.load(); });
  return state_;
}

void Daemon::Shutdown() {
  {
    std::lock_guard lock(state_mu_);
    shutdown_ = true;
  }
  state_cv_.notify_all();
}

void Daemon::Publish(std::shared_ptr<FleetState> s) {
  {
    std::lock_guard lock(state_mu_);
    s->version = state_->version + 1;
    state_ = std::move(s);
  }
  state_cv_.notify_all();
}

Status Daemon::SetSchedulable(std::string_view node, bool schedulable) {
  std::lock_guard lock(backend_mu_);
  return backend_->SetSchedulable(node, schedulable);
}

Status Daemon::Tick() {
  std::lock_guard lock(backend_mu_);
  CHAMBER_ASSIGN_OR_RETURN(const core::Snapshot* snap, backend_->Refresh());

  const auto begin = std::chrono::steady_clock::now();
  const double begin_cpu = ThreadCpuMs();
  const core::CycleResult result = engine_.Schedule(*snap);
  const double cycle_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  const double cycle_cpu_ms = ThreadCpuMs() - begin_cpu;
  ++cycles_;

  // What the decisions say, by workload name: indices are only good for this snapshot.
  std::unordered_map<std::string, PendingInfo> pending;
  for (const core::PendingDecision& p : result.pending)
    pending[snap->workloads[p.workload.index()].name] = {
        std::string(core::PendingReasonName(p.reason)), p.message(), p.details(), p.queue_position};
  // First starts (the wait figures) and preemptions (lost work), with the node of the first pod
  // for the pool, which is known once the backend has been observed.
  std::vector<std::pair<fleet::StartRecord, int32_t>> started;
  for (const core::BindDecision& b : result.binds) {
    const core::Workload& w = snap->workloads[b.workload.index()];
    borrowing_[w.name] = b.borrowing;
    // A workload preempted before starts again: its wait since submission is not a queue wait.
    if (!w.recent_preemptions.empty() || workload_losses_.contains(w.name)) continue;
    fleet::StartRecord r;
    r.wait_seconds = static_cast<double>((snap->now - w.submit_time).count()) / 1000;
    r.queue = w.queue;
    started.emplace_back(std::move(r), FirstNode(b.pods));
  }
  for (const core::ResumeDecision& r : result.resumes)
    borrowing_[snap->workloads[r.workload.index()].name] = r.borrowing;
  struct Preempted {
    fleet::PreemptionRecord record;
    int32_t node;
    int64_t run;  // the start time of the run it ends
    size_t workload;
  };
  std::vector<Preempted> preempted;
  for (const core::PreemptDecision& p : result.preemptions) {
    const core::Workload& w = snap->workloads[p.workload.index()];
    // A run is preempted once: the engine decides again while the cluster has not yet acted
    // (a suspend still on its way, a workload on a failed GPU until it stops).
    if (auto it = workload_losses_.find(w.name);
        it != workload_losses_.end() && it->second.preempted_run == w.start_time.count())
      continue;
    fleet::PreemptionRecord r;
    r.workload = w.name;
    r.queue = w.queue;
    r.reason = ReasonOf(p.reason);
    r.gpu_hours_lost = p.gpu_hours_lost;
    int32_t node = -1;
    for (const core::PodPlacement& pl : w.placements)
      if (pl.node.valid() && node < 0) node = pl.node.value;
    preempted.push_back({std::move(r), node, w.start_time.count(), p.workload.index()});
  }
  queue_status_ = result.queues;

  CHAMBER_RETURN_IF_ERROR(backend_->Apply(result));
  Observation obs = backend_->Observe();
  const core::Snapshot& s = *obs.snapshot;
  const int64_t now = obs.clock_offset_ms + s.now.count();

  auto pool_of = [&obs](int32_t node) {
    return node >= 0 && static_cast<size_t>(node) < obs.node_pool.size() ? obs.node_pool[node] : -1;
  };
  for (auto& [r, node] : started) {
    r.time = now;
    r.pool = pool_of(node);
    starts_.push_back(std::move(r));
  }
  // A workload's lost work starts from what the cluster records of it (after a restart or a
  // leader change), the first time this server counts it.
  auto losses_of = [&](size_t i, const std::string& name) -> WorkloadLosses& {
    auto [it, inserted] = workload_losses_.try_emplace(name);
    if (inserted && i < obs.stored_losses.size()) {
      it->second.preemptions = obs.stored_losses[i].preemptions;
      it->second.gpu_hours_lost = obs.stored_losses[i].gpu_hours_lost;
    }
    return it->second;
  };
  for (auto& [r, node, run, workload] : preempted) {
    r.time = now;
    r.pool = pool_of(node);
    fleet::AddPreemption(preemption_totals_, r);
    WorkloadLosses& l = losses_of(workload, r.workload);
    l.preempted_run = run;
    l.preemptions += 1;
    l.gpu_hours_lost += r.gpu_hours_lost;
    l.history.push_back(r);
    if (l.history.size() > kPreemptionHistory) l.history.pop_front();
    preemptions_.push_back(std::move(r));
  }
  const int64_t window_start = now - options_.fleet.recent_window_ms;
  while (!starts_.empty() && starts_.front().time <= window_start) starts_.pop_front();
  while (!preemptions_.empty() && preemptions_.front().time <= window_start)
    preemptions_.pop_front();

  auto state = std::make_shared<FleetState>();
  state->time_ms = now;
  state->mode = std::string(backend_->mode());
  state->simulated = backend_->simulated_time();
  state->cycle_ms = cycle_ms;
  state->cycle_cpu_ms = cycle_cpu_ms;
  state->cycles = cycles_;
  state->currency = options_.fleet.currency;
  fleet::FleetInput& in = state->input;
  in.now = now;
  in.pools = obs.pools;
  in.recent_starts.assign(starts_.begin(), starts_.end());
  in.recent_preemptions.assign(preemptions_.begin(), preemptions_.end());
  in.preemption_totals = preemption_totals_;

  // Workloads.
  std::set<std::string> live;
  in.workloads.reserve(s.workloads.size());
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const core::Workload& w = s.workloads[i];
    fleet::WorkloadInput wi;
    wi.name = w.name;
    wi.queue = w.queue;
    wi.priority = w.priority;
    wi.phase = PhaseOf(w.state);
    wi.gpus = static_cast<int32_t>(w.TotalRequest().gpu());
    wi.submitted = obs.clock_offset_ms + w.submit_time.count();
    wi.reserved = w.reserved();
    if (i < obs.workload_pods.size()) wi.pods = std::move(obs.workload_pods[i]);
    for (const core::Time t : w.recent_preemptions)
      wi.preemptions.push_back(obs.clock_offset_ms + t.count());
    WorkloadLosses* losses = nullptr;
    if (i < obs.stored_losses.size() && obs.stored_losses[i].preemptions > 0) {
      losses = &losses_of(i, w.name);
    } else if (!workload_losses_.empty()) {
      if (auto it = workload_losses_.find(w.name); it != workload_losses_.end())
        losses = &it->second;
    }
    if (losses != nullptr) {
      losses->seen_cycle = cycles_;
      wi.preemption_count = losses->preemptions;
      wi.gpu_hours_lost = losses->gpu_hours_lost;
      wi.preemption_history.assign(losses->history.begin(), losses->history.end());
    }
    const bool holding =
        w.state == core::WorkloadState::kRunning || w.state == core::WorkloadState::kPreempting;
    if (holding) {
      wi.started = obs.clock_offset_ms + w.start_time.count();
      auto it = borrowing_.find(w.name);
      wi.borrowing = it != borrowing_.end() && it->second;
      std::set<int32_t> nodes;
      for (const core::PodPlacement& p : w.placements)
        if (p.node.valid() && p.node.index() < s.nodes.size()) nodes.insert(p.node.value);
      for (int32_t n : nodes) wi.nodes.push_back(s.nodes[n].name);
      live.insert(w.name);
    } else if (auto it = pending.find(w.name); it != pending.end()) {
      wi.pending_reason = it->second.reason;
      wi.pending_message = it->second.message;
      wi.queue_position = it->second.position;
      wi.pending_details = it->second.details;
    }
    in.workloads.push_back(std::move(wi));
  }
  std::erase_if(borrowing_, [&](const auto& kv) { return !live.contains(kv.first); });
  std::erase_if(workload_losses_, [&](const auto& kv) { return kv.second.seen_cycle != cycles_; });

  // Nodes and GPUs, with their holders and the health incidents.
  in.nodes.resize(s.nodes.size());
  state->node_schedulable.resize(s.nodes.size());
  std::set<std::string> unhealthy_now;
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    const core::Node& node = s.nodes[n];
    fleet::NodeInput& ni = in.nodes[n];
    ni.name = node.name;
    ni.pool = n < obs.node_pool.size() ? obs.node_pool[n] : -1;
    ni.schedulable = !node.unschedulable;
    state->node_schedulable[n] = ni.schedulable;
    ni.gpus.resize(node.gpus.size());
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const core::Gpu& gpu = node.gpus[g];
      fleet::GpuInput& gi = ni.gpus[g];
      gi.uuid = gpu.uuid;
      gi.model = gpu.model;
      gi.healthy = gpu.healthy;
      gi.memory_total_bytes = gpu.memory_mib * 1048576;
      if (n < obs.samples.size() && g < obs.samples[n].size()) {
        gi.utilization = obs.samples[n][g].utilization;
        gi.memory_used_bytes = obs.samples[n][g].memory_used_bytes;
      }
      gi.below_threshold_since = activity_.Observe(gpu.uuid, gi.utilization, now);
      if (!gpu.healthy) {
        unhealthy_now.insert(gpu.uuid);
        auto open = open_incidents_.find(gpu.uuid);
        if (open == open_incidents_.end()) {
          Incident inc;
          inc.time_ms = now;
          inc.node = node.name;
          inc.gpu_index = static_cast<int32_t>(g);
          inc.uuid = gpu.uuid;
          open = open_incidents_.emplace(gpu.uuid, incidents_.size()).first;
          incidents_.push_back(std::move(inc));
        }
        DescribeFault(incidents_[open->second], obs.gpu_faults);
      }
    }
  }
  activity_.Forget(now - kHourMs);
  for (auto it = open_incidents_.begin(); it != open_incidents_.end();) {
    if (unhealthy_now.contains(it->first)) {
      ++it;
      continue;
    }
    incidents_[it->second].resolved_ms = now;
    it = open_incidents_.erase(it);
  }
  if (incidents_.size() > options_.max_incidents * 2) {
    // Drop the oldest resolved incidents; open ones are kept.
    std::vector<Incident> kept;
    const size_t drop = incidents_.size() - options_.max_incidents;
    for (size_t i = 0; i < incidents_.size(); ++i)
      if (i >= drop || !incidents_[i].resolved_ms) kept.push_back(incidents_[i]);
    incidents_ = std::move(kept);
    open_incidents_.clear();
    for (size_t i = 0; i < incidents_.size(); ++i)
      if (!incidents_[i].resolved_ms) open_incidents_[incidents_[i].uuid] = i;
  }
  for (size_t i = incidents_.size(); i-- > 0 && state->incidents.size() < options_.max_incidents;)
    state->incidents.push_back(incidents_[i]);

  for (size_t w = 0; w < s.workloads.size(); ++w) {
    const core::Workload& wl = s.workloads[w];
    if (wl.state != core::WorkloadState::kRunning && wl.state != core::WorkloadState::kPreempting)
      continue;
    for (const core::PodPlacement& p : wl.placements) {
      if (!p.node.valid() || p.node.index() >= in.nodes.size()) continue;
      auto& gpus = in.nodes[p.node.index()].gpus;
      for (uint64_t mask = p.gpu_mask; mask != 0; mask &= mask - 1) {
        const auto g = static_cast<size_t>(std::countr_zero(mask));
        if (g < gpus.size()) gpus[g].workload = static_cast<int32_t>(w);
      }
    }
  }

  // Queues: the spec from the snapshot, the standing from the engine.
  for (const core::Queue& q : s.queues) {
    fleet::QueueInput qi;
    qi.name = q.name;
    qi.parent = q.parent;
    const core::QueueResource& r = q.res(core::Resource::kGpu);
    qi.quota = static_cast<double>(r.quota);
    if (r.limit != core::kUnlimited) qi.limit = static_cast<double>(r.limit);
    qi.weight = r.over_quota_weight;
    qi.decayed_gpu_hours = q.decayed_usage;
    for (const core::QueueStatus& st : queue_status_) {
      if (st.name != q.name) continue;
      qi.allocated = static_cast<double>(st.allocated.gpu());
      qi.fair_share = st.fair_share[static_cast<int>(core::Resource::kGpu)];
      qi.borrowed = static_cast<double>(st.borrowed.gpu());
      qi.lent = static_cast<double>(st.lent.gpu());
      qi.error = st.error;
    }
    in.queues.push_back(std::move(qi));
  }

  state->view = fleet::ComputeFleet(in, options_.fleet);

  // Totals: the previous state held from its time until now.
  const std::shared_ptr<const FleetState> prev = this->state();
  if (prev->version > 0 && now > prev->time_ms) {
    fleet::Accumulate(prev->view, static_cast<double>(now - prev->time_ms) / kHourMs, totals_,
                      &pool_totals_);
  } else if (prev->version == 0) {
    totals_ = {};
    totals_.since = now;
  }
  state->totals = totals_;
  state->pool_totals = pool_totals_;
  state->pool_totals.resize(in.pools.size());

  Status history_status;
  if (history_) {
    history_status = history_->Write(now / 1000, HistorySamples(*state));
    const int64_t bucket = now / 1000 / history_->options().fine_step_seconds;
    if (history_status.ok() && bucket != last_fine_bucket_) {
      last_fine_bucket_ = bucket;
      history_status = history_->Maintain(now / 1000);
    }
  }
  Publish(std::move(state));
  return history_status;
}

std::vector<fleet::HistorySample> Daemon::HistorySamples(const FleetState& s) const {
  std::vector<fleet::HistorySample> out;
  auto add = [&](const std::string& scope, const fleet::GpuCounts& g, const fleet::Ratios& r,
                 const fleet::CostRates& c) {
    out.push_back({"gpus_capacity", scope, g.capacity});
    out.push_back({"gpus_allocated", scope, g.allocated});
    out.push_back({"gpus_used", scope, g.used});
    out.push_back({"gpus_idle", scope, g.idle});
    out.push_back({"gpus_allocated_idle", scope, g.allocated_idle});
    out.push_back({"gpus_unhealthy", scope, g.unhealthy});
    out.push_back({"utilization", scope, r.utilization});
    out.push_back({"allocation", scope, r.allocation});
    out.push_back({"idle_fraction", scope, r.idle_fraction});
    out.push_back({"cost_per_hour", scope, c.total});
    out.push_back({"idle_cost_per_hour", scope, c.idle()});
    out.push_back({"backfill_savings_per_hour", scope, c.backfill});
  };
  add("cluster", s.view.gpus, s.view.ratios, s.view.cost);
  out.push_back({"pending_workloads", "cluster", double(s.view.queue.pending_workloads)});
  out.push_back({"pending_gpus", "cluster", s.view.queue.pending_gpus});
  out.push_back({"wait_p50_seconds", "cluster", s.view.recent.wait_p50_seconds});
  out.push_back({"wait_p95_seconds", "cluster", s.view.recent.wait_p95_seconds});
  out.push_back({"running_workloads", "cluster", double(s.view.running_workloads)});
  out.push_back({"preemptions_last_hour", "cluster", double(s.view.recent.preemptions)});
  out.push_back({"cycle_ms", "cluster", s.cycle_ms});
  for (size_t p = 0; p < s.view.pools.size(); ++p)
    add("pool:" + s.input.pools[p].name, s.view.pools[p].gpus, s.view.pools[p].ratios,
        s.view.pools[p].cost);
  for (size_t q = 0; q < s.view.queues.size(); ++q) {
    const std::string scope = "queue:" + s.input.queues[q].name;
    const fleet::QueueView& v = s.view.queues[q];
    out.push_back({"gpus_allocated", scope, v.allocated_gpus});
    out.push_back({"gpus_used", scope, v.used});
    out.push_back({"fair_share", scope, s.input.queues[q].fair_share});
    out.push_back({"pending_workloads", scope, double(v.pending_workloads)});
    out.push_back({"cost_per_hour", scope, v.cost.total});
  }
  return out;
}

void Daemon::Run(const LoopHooks& hooks) {
  auto next = std::chrono::steady_clock::now();
  while (true) {
    const Status st = Tick();
    if (!st.ok()) spdlog::warn("scheduling cycle: {}", st.ToString());
    if (hooks.after_tick) hooks.after_tick(st);
    next += options_.tick;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // fell behind: do not try to catch up
    if (!hooks.wait_until(next)) return;
  }
}

void Daemon::Run(std::stop_token stop) {
  if (stop.stop_requested()) return;
  LoopHooks hooks;
  hooks.wait_until = [&stop](std::chrono::steady_clock::time_point deadline) {
    std::mutex m;
    std::unique_lock lock(m);
    std::condition_variable_any cv;
    cv.wait_until(lock, stop, deadline, [] { return false; });
    return !stop.stop_requested();
  };
  Run(hooks);
}

}  // namespace chamber::daemon
