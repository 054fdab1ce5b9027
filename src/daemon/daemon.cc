#include "daemon/daemon.h"

#include <algorithm>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "common/cpu_time.h"
#include "daemon/fleet_input.h"

namespace chamber::daemon {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

}  // namespace

Daemon::Daemon(std::unique_ptr<ClusterBackend> backend, DaemonOptions options,
               std::unique_ptr<fleet::HistoryStore> history)
    : backend_(std::move(backend)),
      options_(std::move(options)),
      history_(std::move(history)),
      engine_(options_.engine),
      activity_(options_.fleet.activity_threshold),
      ledger_(options_.fleet.recent_window_ms),
      incidents_(options_.max_incidents),
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
  ledger_.NoteDecisions(*snap, result);
  queue_status_ = result.queues;

  CHAMBER_RETURN_IF_ERROR(backend_->Apply(result));
  Observation obs = backend_->Observe();
  const core::Snapshot& s = *obs.snapshot;
  const int64_t now = obs.clock_offset_ms + s.now.count();
  ledger_.Record(obs, now);

  auto state = std::make_shared<FleetState>();
  state->time_ms = now;
  state->mode = std::string(backend_->mode());
  state->simulated = backend_->simulated_time();
  state->cycle_ms = cycle_ms;
  state->cycle_cpu_ms = cycle_cpu_ms;
  state->cycles = cycles_;
  state->currency = options_.fleet.currency;
  state->backend_metrics = std::move(obs.metrics);
  fleet::FleetInput& in = state->input;
  in.now = now;
  in.pools = obs.pools;
  in.recent_starts.assign(ledger_.recent_starts().begin(), ledger_.recent_starts().end());
  in.recent_preemptions.assign(ledger_.recent_preemptions().begin(),
                               ledger_.recent_preemptions().end());
  in.preemption_totals = ledger_.preemption_totals();
  AddObserved(obs, ledger_, activity_, queue_status_, now, in);
  state->node_schedulable.reserve(in.nodes.size());
  for (const fleet::NodeInput& n : in.nodes) state->node_schedulable.push_back(n.schedulable);
  incidents_.Observe(s, obs.gpu_faults, now);
  state->incidents = incidents_.Latest(options_.max_incidents);

  state->view = fleet::ComputeFleet(in, options_.fleet);
  AddToTotals(*state);
  const Status history_status = RecordHistory(*state);
  Publish(std::move(state));
  return history_status;
}

void Daemon::AddToTotals(FleetState& state) {
  // The previous state held from its time until now.
  const std::shared_ptr<const FleetState> prev = this->state();
  if (prev->version > 0 && state.time_ms > prev->time_ms) {
    fleet::Accumulate(prev->view, static_cast<double>(state.time_ms - prev->time_ms) / kHourMs,
                      totals_, &pool_totals_);
  } else if (prev->version == 0) {
    totals_ = {};
    totals_.since = state.time_ms;
  }
  state.totals = totals_;
  state.pool_totals = pool_totals_;
  state.pool_totals.resize(state.input.pools.size());
}

Status Daemon::RecordHistory(const FleetState& state) {
  if (!history_) return Status::Ok();
  const int64_t now = state.time_ms;
  CHAMBER_RETURN_IF_ERROR(history_->Write(now / 1000, HistorySamples(state)));
  const int64_t bucket = now / 1000 / history_->options().fine_step_seconds;
  if (bucket == last_fine_bucket_) return Status::Ok();
  last_fine_bucket_ = bucket;
  return history_->Maintain(now / 1000);
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
