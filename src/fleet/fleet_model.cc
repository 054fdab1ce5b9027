#include "fleet/fleet_model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace chamber::fleet {

std::string_view PricingName(Pricing p) {
  switch (p) {
    case Pricing::kOnDemand:
      return "on-demand";
    case Pricing::kReserved:
      return "reserved";
    case Pricing::kSpot:
      return "spot";
  }
  return "on-demand";
}

std::string_view GpuStateName(GpuState s) {
  switch (s) {
    case GpuState::kIdle:
      return "idle";
    case GpuState::kAllocatedIdle:
      return "allocated_idle";
    case GpuState::kBusy:
      return "busy";
    case GpuState::kUnhealthy:
      return "unhealthy";
  }
  return "idle";
}

std::string_view WorkloadPhaseName(WorkloadPhase p) {
  switch (p) {
    case WorkloadPhase::kPending:
      return "pending";
    case WorkloadPhase::kRunning:
      return "running";
    case WorkloadPhase::kPreempting:
      return "preempting";
    case WorkloadPhase::kSuspended:
      return "suspended";
  }
  return "pending";
}

std::string_view PreemptionReasonName(PreemptionReason r) {
  switch (r) {
    case PreemptionReason::kReclaim:
      return "Reclaim";
    case PreemptionReason::kPriority:
      return "Priority";
    case PreemptionReason::kHardwareFault:
      return "HardwareFault";
  }
  return "Reclaim";
}

LostWork& LostWork::operator+=(const LostWork& o) {
  preemptions += o.preemptions;
  gpu_hours += o.gpu_hours;
  return *this;
}

LostWork Sum(const LostByReason& by_reason) {
  LostWork sum;
  for (const LostWork& l : by_reason) sum += l;
  return sum;
}

void AddPreemption(PreemptionTotals& totals, const PreemptionRecord& p) {
  LostWork& l = totals[p.queue][static_cast<size_t>(p.reason)];
  l.preemptions += 1;
  l.gpu_hours += p.gpu_hours_lost;
}

GpuCounts& GpuCounts::operator+=(const GpuCounts& o) {
  capacity += o.capacity;
  allocated += o.allocated;
  used += o.used;
  idle += o.idle;
  allocated_idle += o.allocated_idle;
  unhealthy += o.unhealthy;
  backfill += o.backfill;
  shared += o.shared;
  mig += o.mig;
  return *this;
}

CostRates& CostRates::operator+=(const CostRates& o) {
  total += o.total;
  unallocated += o.unallocated;
  allocated_idle += o.allocated_idle;
  unhealthy += o.unhealthy;
  backfill += o.backfill;
  return *this;
}

int32_t GpuInput::HeldMilli() const {
  if (workload >= 0) return kMilliPerGpu;
  int64_t sum = 0;
  for (const GpuShareInput& s : shares) sum += std::max(0, s.gpu_milli);
  return static_cast<int32_t>(std::min<int64_t>(sum, kMilliPerGpu));
}

GpuState ClassifyGpu(const GpuInput& gpu, TimeMs now, const FleetOptions& options) {
  if (!gpu.healthy) return GpuState::kUnhealthy;
  if (gpu.HeldMilli() == 0) return GpuState::kIdle;
  // NVML measures no utilization of a GPU in MIG mode: its held devices are not called idle.
  if (gpu.mig) return GpuState::kBusy;
  if (gpu.below_threshold_since && now - *gpu.below_threshold_since >= options.idle_window_ms)
    return GpuState::kAllocatedIdle;
  return GpuState::kBusy;
}

namespace {

double NearestRank(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(p * n)));
  return sorted[std::min(rank, sorted.size()) - 1];
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return NearestRank(values, p);
}

namespace {

Ratios RatiosOf(const GpuCounts& c) {
  Ratios r;
  if (c.capacity <= 0) return r;
  r.utilization = c.used / c.capacity;
  r.allocation = c.allocated / c.capacity;
  r.idle_fraction = (c.idle + c.allocated_idle) / c.capacity;
  return r;
}

// The recent figures of the cluster, each pool and each queue (a parent's with its children's),
// from the records inside the window. Cost: linear in the window's records times the queue
// depth (fleet_model_bench).
void ComputeRecent(const FleetInput& in, const FleetOptions& options,
                   const std::unordered_map<std::string_view, size_t>& queue_index, FleetView& v) {
  // Each queue with its ancestors, nearest first; a cycle of parents stops where it repeats.
  std::vector<std::vector<size_t>> chain(in.queues.size());
  for (size_t q = 0; q < in.queues.size(); ++q) {
    for (size_t at = q; chain[q].size() <= in.queues.size();) {
      if (std::find(chain[q].begin(), chain[q].end(), at) != chain[q].end()) break;
      chain[q].push_back(at);
      auto parent = queue_index.find(in.queues[at].parent);
      if (in.queues[at].parent.empty() || parent == queue_index.end()) break;
      at = parent->second;
    }
  }
  auto queues_of = [&](const std::string& queue) -> const std::vector<size_t>* {
    auto it = queue_index.find(queue);
    return it == queue_index.end() ? nullptr : &chain[it->second];
  };
  auto pool_of = [&](int32_t pool) -> PoolView* {
    return pool >= 0 && static_cast<size_t>(pool) < v.pools.size() ? &v.pools[pool] : nullptr;
  };
  const TimeMs since = in.now - options.recent_window_ms;

  std::vector<double> cluster_waits;
  std::vector<std::vector<double>> pool_waits(v.pools.size()), queue_waits(v.queues.size());
  for (const StartRecord& s : in.recent_starts) {
    if (s.time <= since || s.time > in.now) continue;
    cluster_waits.push_back(s.wait_seconds);
    if (pool_of(s.pool)) pool_waits[s.pool].push_back(s.wait_seconds);
    if (const auto* qs = queues_of(s.queue))
      for (size_t q : *qs) queue_waits[q].push_back(s.wait_seconds);
  }
  // Nearest rank without a full sort: the p50 element, then the p95 element among those above.
  auto set_waits = [](RecentFigures& r, std::vector<double>& waits) {
    r.started = static_cast<int32_t>(waits.size());
    if (waits.empty()) return;
    const auto rank = [n = static_cast<double>(waits.size())](double p) {
      return static_cast<size_t>(std::max(1.0, std::ceil(p * n))) - 1;
    };
    const auto p50 = waits.begin() + static_cast<std::ptrdiff_t>(rank(0.50));
    const auto p95 = waits.begin() + static_cast<std::ptrdiff_t>(rank(0.95));
    std::nth_element(waits.begin(), p50, waits.end());
    r.wait_p50_seconds = *p50;  // before the second pass reorders what follows it
    std::nth_element(p50, p95, waits.end());
    r.wait_p95_seconds = *p95;
  };
  set_waits(v.recent, cluster_waits);
  for (size_t p = 0; p < v.pools.size(); ++p) set_waits(v.pools[p].recent, pool_waits[p]);
  for (size_t q = 0; q < v.queues.size(); ++q) set_waits(v.queues[q].recent, queue_waits[q]);

  auto add = [](RecentFigures& r, const PreemptionRecord& p) {
    r.preemptions += 1;
    r.gpu_hours_lost += p.gpu_hours_lost;
  };
  for (const PreemptionRecord& p : in.recent_preemptions) {
    if (p.time <= since || p.time > in.now) continue;
    add(v.recent, p);
    if (PoolView* pv = pool_of(p.pool)) add(pv->recent, p);
    if (const auto* qs = queues_of(p.queue))
      for (size_t q : *qs) add(v.queues[q].recent, p);
  }
  for (const auto& [queue, lost] : in.preemption_totals) {
    const auto* qs = queues_of(queue);
    if (!qs) continue;
    for (size_t q : *qs)
      for (size_t r = 0; r < kPreemptionReasons; ++r) v.queues[q].lost_total[r] += lost[r];
  }
}

}  // namespace

FleetView ComputeFleet(const FleetInput& in, const FleetOptions& options) {
  FleetView v;
  v.now = in.now;
  v.pools.resize(in.pools.size());
  v.nodes.resize(in.nodes.size());
  v.queues.resize(in.queues.size());

  std::unordered_map<std::string_view, size_t> queue_index;
  for (size_t q = 0; q < in.queues.size(); ++q) queue_index.emplace(in.queues[q].name, q);
  auto queue_of = [&](const WorkloadInput& w) -> QueueView* {
    auto it = queue_index.find(w.queue);
    return it == queue_index.end() ? nullptr : &v.queues[it->second];
  };

  size_t total_gpus = 0;
  for (const NodeInput& n : in.nodes) total_gpus += n.gpus.size();
  v.gpus_flat.reserve(total_gpus);

  for (size_t n = 0; n < in.nodes.size(); ++n) {
    const NodeInput& node = in.nodes[n];
    NodeView& nv = v.nodes[n];
    const double price = node.pool >= 0 && static_cast<size_t>(node.pool) < in.pools.size()
                             ? in.pools[node.pool].price_per_gpu_hour
                             : 0;
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const GpuInput& gpu = node.gpus[g];
      GpuView gv;
      gv.node = static_cast<int32_t>(n);
      gv.index = static_cast<int32_t>(g);
      gv.state = ClassifyGpu(gpu, in.now, options);
      gv.utilization = std::clamp(gpu.utilization, 0.0, 1.0);
      gv.memory_used_bytes = gpu.memory_used_bytes;
      const bool whole =
          gpu.workload >= 0 && static_cast<size_t>(gpu.workload) < in.workloads.size();
      gv.workload = whole ? gpu.workload : -1;
      gv.held_milli = whole ? kMilliPerGpu : gpu.HeldMilli();
      const double held = gv.held_milli / static_cast<double>(kMilliPerGpu);

      nv.gpus.capacity += 1;
      nv.gpus.used += gv.utilization;
      nv.cost.total += price;
      nv.gpus.allocated += held;
      if (gpu.mig)
        nv.gpus.mig += 1;
      else if (!whole && !gpu.shares.empty())
        nv.gpus.shared += 1;
      switch (gv.state) {
        case GpuState::kUnhealthy:
          nv.gpus.unhealthy += 1;
          nv.cost.unhealthy += price;
          nv.healthy = false;
          break;
        case GpuState::kIdle:
          nv.gpus.idle += 1;
          nv.cost.unallocated += price;
          break;
        case GpuState::kAllocatedIdle:
          nv.gpus.allocated_idle += held;
          nv.cost.allocated_idle += price * held;
          break;
        case GpuState::kBusy:
          break;
      }
      if (gv.state == GpuState::kAllocatedIdle || gv.state == GpuState::kBusy) {
        nv.gpus.idle += 1 - held;  // the part no share holds
        nv.cost.unallocated += price * (1 - held);
      }
      // Each holder is charged its part of the GPU: the whole of it, or its share; the GPU's
      // use is divided among its shares by their size.
      auto charge = [&](int32_t workload, int32_t milli) {
        if (workload < 0 || static_cast<size_t>(workload) >= in.workloads.size()) return;
        const double part = milli / static_cast<double>(kMilliPerGpu);
        const WorkloadInput& w = in.workloads[workload];
        if (w.borrowing) {
          nv.gpus.backfill += part;
          nv.cost.backfill += price * part;
        }
        if (QueueView* q = queue_of(w)) {
          q->allocated_gpus += part;
          q->used += gv.held_milli > 0 ? gv.utilization * milli / gv.held_milli : 0;
          q->cost.total += price * part;
          if (w.borrowing) q->cost.backfill += price * part;
          if (gv.state == GpuState::kAllocatedIdle) q->cost.allocated_idle += price * part;
        }
      };
      if (whole) {
        charge(gpu.workload, kMilliPerGpu);
      } else {
        for (const GpuShareInput& sh : gpu.shares) charge(sh.workload, sh.gpu_milli);
      }
      v.gpus_flat.push_back(gv);
    }
    nv.ratios = RatiosOf(nv.gpus);
    v.gpus += nv.gpus;
    v.cost += nv.cost;
    if (node.pool >= 0 && static_cast<size_t>(node.pool) < v.pools.size()) {
      PoolView& pv = v.pools[node.pool];
      pv.nodes += 1;
      pv.gpus += nv.gpus;
      pv.cost += nv.cost;
    }
  }
  for (PoolView& pv : v.pools) pv.ratios = RatiosOf(pv.gpus);
  v.ratios = RatiosOf(v.gpus);

  for (const WorkloadInput& w : in.workloads) {
    QueueView* q = queue_of(w);
    if (w.phase == WorkloadPhase::kPending || w.phase == WorkloadPhase::kSuspended) {
      v.queue.pending_workloads += 1;
      const double gpus = w.gpu_milli / static_cast<double>(kMilliPerGpu);
      v.queue.pending_gpus += gpus;
      if (q) {
        q->pending_workloads += 1;
        q->pending_gpus += gpus;
      }
    } else if (w.phase == WorkloadPhase::kRunning) {
      v.running_workloads += 1;
      if (q) q->running_workloads += 1;
    }
  }
  ComputeRecent(in, options, queue_index, v);
  return v;
}

double Totals::UsedOverCapacity() const {
  return capacity_gpu_hours > 0 ? used_gpu_hours / capacity_gpu_hours : 0;
}
double Totals::UsedOverAllocated() const {
  return allocated_gpu_hours > 0 ? used_gpu_hours / allocated_gpu_hours : 0;
}

namespace {

void AddTo(Totals& t, const GpuCounts& g, const CostRates& c, double hours) {
  t.hours += hours;
  t.capacity_gpu_hours += g.capacity * hours;
  t.allocated_gpu_hours += g.allocated * hours;
  t.used_gpu_hours += g.used * hours;
  t.idle_gpu_hours += (g.idle + g.allocated_idle) * hours;
  t.cost += c.total * hours;
  t.idle_cost += c.idle() * hours;
  t.backfill_gpu_hours += g.backfill * hours;
  t.backfill_savings += c.backfill * hours;
}

}  // namespace

void Accumulate(const FleetView& view, double hours, Totals& cluster, std::vector<Totals>* pools) {
  if (hours <= 0) return;
  AddTo(cluster, view.gpus, view.cost, hours);
  if (pools) {
    pools->resize(view.pools.size());
    for (size_t p = 0; p < view.pools.size(); ++p)
      AddTo((*pools)[p], view.pools[p].gpus, view.pools[p].cost, hours);
  }
}

std::optional<TimeMs> ActivityTracker::Observe(const SharedString& uuid, double utilization,
                                               TimeMs now) {
  Entry& e = gpus_[uuid];
  e.last_seen = now;
  if (utilization >= threshold_) {
    e.below_since.reset();
  } else if (!e.below_since) {
    e.below_since = now;
  }
  return e.below_since;
}

void ActivityTracker::Forget(TimeMs before) {
  std::erase_if(gpus_, [&](const auto& kv) { return kv.second.last_seen < before; });
}

}  // namespace chamber::fleet
