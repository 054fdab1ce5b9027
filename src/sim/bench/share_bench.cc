// GPU sharing, the figures issue 27 asks for.
//
// Saturation (BM_Saturation): synthetic openb pods (--profile openb's mix, SharingMix: the
// shapes of the openb trace's GPU pods, with their CPU and memory) arrive on a cluster and never
// finish, until arrived demand reaches the cluster's capacity; counters give each policy's
// unallocated and stranded share of GPU capacity at that point (the median over seeds 1 to 5)
// and the ratios of FGD's and Chamber's unallocated share to best fit's. Arguments: the cluster
// (0: 1,000 nodes of 8 H100s, no CPU or memory limit; 1: 400 nodes each of 8, 4, 2 and 1 GPUs,
// no limit; 2: the openb cluster's GPU nodes, src/sim/examples/openb-nodes.yaml).
//
// Placement rate (BM_Place): a cluster of N nodes of 8 GPUs held at about 80% allocated; each
// iteration places one pod drawn from the mix and releases the oldest one placed. items/s is
// placements per second (each with its release). Arguments: nodes, policy (0 first fit, 1 best
// fit, 2 FGD, 3 Chamber), and 1 for pods that ask for a share of one GPU only, 0 for the whole mix.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/gpu_share.h"
#include "sim/cluster_spec.h"
#include "sim/saturation.h"
#include "sim/synthetic.h"

namespace chamber::sim {
namespace {

std::vector<core::ShareNodeSpec> Cluster(int64_t kind) {
  if (kind == 0) return core::UniformShareNodes(1000, 8);
  if (kind == 2) {
    const Result<ClusterSpec> spec = LoadClusterSpec(CHAMBER_OPENB_NODES);
    return spec.ok() ? ShareNodesOf(BuildNodes(*spec)) : std::vector<core::ShareNodeSpec>{};
  }
  std::vector<core::ShareNodeSpec> nodes;
  for (int32_t gpus : {8, 4, 2, 1}) {
    const std::vector<core::ShareNodeSpec> pool = core::UniformShareNodes(400, gpus);
    nodes.insert(nodes.end(), pool.begin(), pool.end());
  }
  return nodes;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void BM_Saturation(benchmark::State& state) {
  const std::vector<core::ShareNodeSpec> nodes = Cluster(state.range(0));
  if (nodes.empty()) {
    state.SkipWithError("cannot read " CHAMBER_OPENB_NODES);
    return;
  }
  const core::ShareCluster empty(nodes);
  const int64_t capacity = empty.CapacityMilli();
  const std::vector<std::string> policies = {"first-fit", "best-fit", "fgd", "chamber"};
  std::vector<std::vector<double>> unallocated(policies.size()), stranded(policies.size());
  for (auto _ : state) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SyntheticSpec spec;
      spec.profile = SyntheticSpec::Profile::kOpenb;
      spec.jobs = capacity / 1000 * 2;  // more demand than the cluster holds
      spec.seed = seed;
      SaturationOptions options;
      options.until_permille = 1000;
      options.seed = seed;
      const Result<SaturationArrivals> arrivals =
          MakeSaturationArrivals(GenerateSyntheticTrace(spec), empty, options);
      if (!arrivals.ok()) {
        state.SkipWithError(arrivals.status().message().c_str());
        return;
      }
      for (size_t p = 0; p < policies.size(); ++p) {
        const Result<SaturationCurve> c = RunSaturation(nodes, *arrivals, policies[p], options);
        if (!c.ok()) {
          state.SkipWithError(c.status().message().c_str());
          return;
        }
        const SaturationPoint* at = PointAt(*c, 1000, options);
        unallocated[p].push_back(at->unallocated);
        stranded[p].push_back(at->stranded);
      }
    }
  }
  for (size_t p = 0; p < policies.size(); ++p) {
    state.counters[policies[p] + "_unalloc_%"] = Median(unallocated[p]) * 100;
    state.counters[policies[p] + "_stranded_%"] = Median(stranded[p]) * 100;
  }
  const double best = Median(unallocated[1]);
  state.counters["fgd/best-fit"] = best > 0 ? Median(unallocated[2]) / best : 0;
  state.counters["chamber/best-fit"] = best > 0 ? Median(unallocated[3]) / best : 0;
}
BENCHMARK(BM_Saturation)
    ->ArgName("cluster")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

std::vector<core::ShareRequest> Stream(bool shares_only, size_t n) {
  std::vector<core::ShareRequest> out;
  std::mt19937_64 rng(1);
  int64_t total = 0;
  // The mix's GPU requests (its pods without GPUs left out), or its shares only.
  auto drawn = [&](const SharingMixEntry& e) {
    return shares_only ? e.gpu_milli > 0 : e.gpu_milli > 0 || e.gpus > 0;
  };
  for (const SharingMixEntry& e : SharingMix())
    if (drawn(e)) total += e.pods;
  std::uniform_int_distribution<int64_t> u(0, total - 1);
  while (out.size() < n) {
    int64_t x = u(rng);
    for (const SharingMixEntry& e : SharingMix()) {
      if (!drawn(e)) continue;
      if (x < e.pods) {
        out.push_back(e.gpus > 0 ? core::WholeGpus(e.gpus) : core::GpuShare(e.gpu_milli));
        break;
      }
      x -= e.pods;
    }
  }
  return out;
}

void BM_Place(benchmark::State& state) {
  const int32_t nodes = static_cast<int32_t>(state.range(0));
  const auto strategy = static_cast<core::ShareStrategy>(state.range(1));
  const std::vector<core::ShareRequest> stream = Stream(state.range(2) != 0, 1 << 16);
  core::SharePlacer placer(strategy, core::UniformShareNodes(nodes, 8));
  std::deque<core::SharePlacement> held;
  size_t next = 0;
  auto request = [&]() -> const core::ShareRequest& {
    const core::ShareRequest& r = stream[next];
    next = (next + 1) % stream.size();
    return r;
  };
  // Fill to about 80% of capacity.
  const int64_t target = placer.cluster().CapacityMilli() / 5;
  while (placer.cluster().FreeMilli() > target) {
    if (auto p = placer.Place(request()))
      held.push_back(*p);
    else
      break;
  }
  int64_t placed = 0;
  for (auto _ : state) {
    if (auto p = placer.Place(request())) {
      held.push_back(*p);
      ++placed;
    }
    if (!held.empty()) {
      placer.Release(held.front());
      held.pop_front();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["placed_%"] = 100.0 * static_cast<double>(placed) /
                               static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["allocated_%"] =
      100.0 * (1.0 - static_cast<double>(placer.cluster().FreeMilli()) /
                         static_cast<double>(placer.cluster().CapacityMilli()));
}
BENCHMARK(BM_Place)
    ->ArgNames({"nodes", "policy", "shares_only"})
    ->Args({5000, 2, 1})
    ->Args({5000, 3, 1})
    ->Args({5000, 2, 0})
    ->Args({5000, 1, 1})
    ->Args({5000, 0, 1})
    ->Args({1000, 2, 1});

}  // namespace
}  // namespace chamber::sim
