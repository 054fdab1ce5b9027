#include "core/fair_share.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>

namespace chamber::core {

std::vector<double> WaterFill(double total, const std::vector<double>& demand,
                              const std::vector<double>& guaranteed,
                              const std::vector<double>& weight) {
  const size_t n = demand.size();
  std::vector<double> give(n, 0.0);
  if (total <= 0) return give;
  // Stage 1: guarantees.
  double wanted = 0;
  for (size_t i = 0; i < n; ++i) {
    give[i] = std::max(0.0, std::min(demand[i], guaranteed[i]));
    wanted += give[i];
  }
  if (wanted > total) {
    const double scale = total / wanted;
    for (double& g : give) g *= scale;
    return give;
  }
  double remaining = total - wanted;
  // Stage 2: pour the rest by weight; whoever fills up drops out and the rest is poured again.
  std::vector<size_t> active;
  for (size_t i = 0; i < n; ++i)
    if (demand[i] > give[i] && weight[i] > 0) active.push_back(i);
  while (remaining > 1e-9 && !active.empty()) {
    double weights = 0;
    for (size_t i : active) weights += weight[i];
    std::vector<size_t> capped, still;
    for (size_t i : active) {
      const bool fills = give[i] + remaining * weight[i] / weights >= demand[i];
      (fills ? capped : still).push_back(i);
    }
    if (capped.empty()) {
      for (size_t i : active) give[i] += remaining * weight[i] / weights;
      remaining = 0;
      break;
    }
    for (size_t i : capped) {
      remaining -= demand[i] - give[i];
      give[i] = demand[i];
    }
    active = std::move(still);
  }
  return give;
}

std::vector<ShareVector> WaterFillingFairShare::Compute(const QueueTree& tree,
                                                        const std::vector<Resources>& demand,
                                                        const Resources& capacity) const {
  std::vector<ShareVector> share(tree.size(), ShareVector{});
  auto split = [&](double total, const std::vector<QueueId>& group, Resource r) {
    std::vector<double> d, g, w;
    for (QueueId q : group) {
      const QueueResource& qr = tree.queue(q).res(r);
      double dq = static_cast<double>(demand[q.index()][r]);
      if (qr.limit != kUnlimited) dq = std::min(dq, static_cast<double>(qr.limit));
      d.push_back(dq);
      g.push_back(static_cast<double>(tree.effective_quota(q)[r]));
      w.push_back(qr.over_quota_weight);
    }
    std::vector<double> given = WaterFill(total, d, g, w);
    for (size_t i = 0; i < group.size(); ++i)
      share[group[i].index()][static_cast<int>(r)] = given[i];
  };
  for (Resource r : kAllResources) {
    split(static_cast<double>(capacity[r]), tree.roots(), r);
    for (QueueId q : tree.top_down()) {
      if (!tree.children(q).empty())
        split(share[q.index()][static_cast<int>(r)], tree.children(q), r);
    }
  }
  return share;
}

double DecayUsage(double previous, double gpus, Duration elapsed, Duration half_life) {
  if (half_life.count() <= 0) return 0;
  const double factor =
      std::exp2(-static_cast<double>(elapsed.count()) / static_cast<double>(half_life.count()));
  // Each moment held counts as it has decayed by the end: gpus * integral of 2^(-s/halfLife)
  // over the interval, whatever the interval's length (cycles may be a second or hours apart).
  const double half_life_hours = static_cast<double>(half_life.count()) / 3.6e6;
  return previous * factor + gpus * half_life_hours / std::numbers::ln2 * (1 - factor);
}

double DecayedUsageFraction(double gpu_hours, double cluster_gpus, Duration half_life) {
  if (half_life.count() <= 0 || cluster_gpus <= 0) return 0;
  // Holding every GPU forever adds up to cluster_gpus * halfLife / ln 2 decayed GPU-hours.
  const double saturated =
      cluster_gpus * static_cast<double>(half_life.count()) / 3.6e6 / std::numbers::ln2;
  return std::max(0.0, gpu_hours) / saturated;
}

void DecayedUsage::Restore(const std::string& queue, double gpu_hours, Time at) {
  if (!enabled() || !std::isfinite(gpu_hours) || gpu_hours < 0) return;
  entries_[queue] = Entry{gpu_hours, at};
}

void DecayedUsage::Advance(Time now, const std::vector<Queue>& queues,
                           const std::vector<double>& held) {
  if (!enabled()) return;
  // In place: the simulator calls this at every event.
  for (size_t i = 0; i < queues.size(); ++i) {
    // A queue new since the last call has held what it holds since then.
    auto [it, added] = entries_.try_emplace(queues[i].name, Entry{0, last_.value_or(now)});
    Entry& e = it->second;
    const Duration elapsed = std::max(Duration(0), now - e.at);
    e.gpu_hours = DecayUsage(e.gpu_hours, i < held.size() ? held[i] : 0, elapsed, half_life_);
    e.at = now;
  }
  if (entries_.size() != queues.size()) {
    std::erase_if(entries_, [&](const auto& kv) {
      return std::none_of(queues.begin(), queues.end(),
                          [&](const Queue& q) { return q.name == kv.first; });
    });
  }
  last_ = now;
}

void DecayedUsage::AdvanceByWorkloads(Time now, const std::vector<Queue>& queues,
                                      const std::vector<Workload>& workloads) {
  if (!enabled()) return;
  std::map<std::string_view, size_t> index;
  for (size_t i = 0; i < queues.size(); ++i) index.emplace(queues[i].name, i);
  std::vector<double> held(queues.size(), 0);
  for (const Workload& w : workloads) {
    if (w.state != WorkloadState::kRunning && w.state != WorkloadState::kPreempting) continue;
    auto it = index.find(w.queue);
    if (it == index.end()) continue;
    for (size_t i = 0; i < w.placements.size(); ++i)
      held[it->second] += GpusOf(HeldGpuMilli(w.placements[i], w.PlacementPodSet(i)));
  }
  Advance(now, queues, held);
}

bool DecayedUsage::Fill(std::vector<Queue>& queues) const {
  bool changed = false;
  for (Queue& q : queues) {
    auto it = entries_.find(q.name);
    const double u = it == entries_.end() ? 0 : it->second.gpu_hours;
    if (q.decayed_usage != u) {
      q.decayed_usage = u;
      changed = true;
    }
  }
  return changed;
}

}  // namespace chamber::core
