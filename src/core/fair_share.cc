#include "core/fair_share.h"

#include <algorithm>
#include <cmath>

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
  const double hours = static_cast<double>(elapsed.count()) / 3.6e6;
  const double factor =
      std::exp2(-static_cast<double>(elapsed.count()) / static_cast<double>(half_life.count()));
  return previous * factor + gpus * hours;
}

}  // namespace chamber::core
