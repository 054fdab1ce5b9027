#include "sim/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

namespace chamber::sim {
namespace {

// The GPU-count mix: most jobs take one GPU; a thin tail reaches 1,024-GPU gangs.
struct GpuBucket {
  int32_t gpus;
  double weight;
};
constexpr GpuBucket kGpuMix[] = {{1, 70.0},  {2, 8.0},    {4, 8.0},    {8, 8.0},
                                 {16, 3.0},  {32, 1.5},   {64, 0.8},   {128, 0.4},
                                 {256, 0.2}, {512, 0.07}, {1024, 0.03}};

}  // namespace

const std::vector<SharingMixEntry>& SharingMix() {
  // Weng et al. (USENIX ATC 2023) on Alibaba's 2023 openb GPU trace: most GPU pods ask for part
  // of one GPU, and multi-GPU pods are a thin tail. These shares are a rounded stand-in for that
  // shape: 55% of pods below one GPU, 30% one GPU, 15% two to eight.
  static const std::vector<SharingMixEntry> mix = {
      {100, 0, 0.05}, {200, 0, 0.08}, {250, 0, 0.08}, {300, 0, 0.06}, {400, 0, 0.06},
      {500, 0, 0.12}, {600, 0, 0.05}, {700, 0, 0.04}, {750, 0, 0.03}, {800, 0, 0.03},
      {0, 1, 0.25},   {0, 2, 0.07},   {0, 4, 0.05},   {0, 8, 0.03},
  };
  return mix;
}

DurationModel DurationModelOf(SyntheticSpec::Profile p) {
  return p == SyntheticSpec::Profile::kPhilly ? DurationModel{874, 18000}
                                              : DurationModel{206, 6650};
}

Trace GenerateSyntheticTrace(const SyntheticSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  auto uniform = [&] { return std::generate_canonical<double, 53>(rng); };
  auto normal = [&] {  // Box-Muller: the same numbers on every standard library
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  };
  const DurationModel dm = DurationModelOf(spec.profile);
  // Log-normal: median = e^mu, mean = e^(mu + sigma^2 / 2).
  const double mu = std::log(dm.median_seconds);
  const double sigma = std::sqrt(2 * std::log(dm.mean_seconds / dm.median_seconds));

  std::vector<GpuBucket> mix;
  double mix_total = 0;
  for (const GpuBucket& b : kGpuMix)
    if (b.gpus <= spec.max_gpus) {
      mix.push_back(b);
      mix_total += b.weight;
    }
  // Teams submit unevenly: weights 1, 1/2, 1/3, ...
  std::vector<double> team_weight;
  double team_total = 0;
  for (int32_t t = 0; t < std::max(1, spec.teams); ++t) {
    team_weight.push_back(1.0 / (t + 1));
    team_total += team_weight.back();
  }

  Trace trace;
  trace.jobs.reserve(static_cast<size_t>(spec.jobs));
  // Diurnal arrivals by thinning a Poisson process: rate(t) = base * (1 + 0.5 sin(...)), peaking
  // in the afternoon.
  const double span_s = std::max(1.0, static_cast<double>(spec.span.count()) / 1000.0);
  const double base = static_cast<double>(spec.jobs) / span_s;
  const double peak = base * 1.5;
  double t = 0;
  for (int64_t i = 0; i < spec.jobs; ++i) {
    while (true) {
      t += -std::log(1.0 - uniform()) / peak;
      const double phase = 2 * std::numbers::pi * (t - 6 * 3600.0) / 86400.0;
      if (uniform() * peak <= base * (1 + 0.5 * std::sin(phase))) break;
    }
    TraceJob j;
    j.id = "job-" + std::to_string(i);
    double pick = uniform() * team_total;
    int32_t team = 0;
    while (team + 1 < static_cast<int32_t>(team_weight.size()) && pick > team_weight[team]) {
      pick -= team_weight[team];
      ++team;
    }
    j.group = "team-" + std::to_string(team);
    j.queue = j.group;
    j.user = j.group + "-user-" + std::to_string(static_cast<int>(uniform() * 8));
    const double r = uniform();
    j.submit = Time(static_cast<int64_t>(t * 1000));
    const double seconds = std::clamp(std::exp(mu + sigma * normal()), 1.0, 60.0 * 86400.0);
    j.duration = Duration(static_cast<int64_t>(seconds * 1000));
    if (spec.profile == SyntheticSpec::Profile::kOpenb) {
      // One pod, a share of a GPU or whole GPUs from the sharing mix.
      double g = uniform();
      const SharingMixEntry* e = &SharingMix().back();
      for (const SharingMixEntry& m : SharingMix()) {
        if (g < m.share) {
          e = &m;
          break;
        }
        g -= m.share;
      }
      j.priority = r < spec.reserved_fraction ? 150 : (r < spec.reserved_fraction + 0.3 ? 50 : 10);
      j.gpus_per_pod = e->gpus;
      j.gpu_milli_per_pod = e->gpu_milli;
      j.cpu_milli_per_pod = int64_t{4000} * std::max(1, e->gpus);
      j.memory_bytes_per_pod = (int64_t{32} << 30) * std::max(1, e->gpus);
      trace.jobs.push_back(std::move(j));
      continue;
    }
    double g = uniform() * mix_total;
    int32_t gpus = mix.back().gpus;
    for (const GpuBucket& b : mix) {
      if (g < b.weight) {
        gpus = b.gpus;
        break;
      }
      g -= b.weight;
    }
    // Reserved work is production work that fits in a team's quota: the small jobs.
    const bool may_reserve = gpus <= std::max(1, spec.max_gpus / 32);
    j.priority = may_reserve && r < spec.reserved_fraction
                     ? 150
                     : (r < spec.reserved_fraction + 0.3 ? 50 : 10);
    j.pods = gpus <= 8 ? 1 : gpus / 8;
    j.gpus_per_pod = gpus <= 8 ? gpus : 8;
    j.cpu_milli_per_pod = int64_t{4000} * j.gpus_per_pod;
    j.memory_bytes_per_pod = (int64_t{32} << 30) * j.gpus_per_pod;
    trace.jobs.push_back(std::move(j));
  }
  return trace;
}

}  // namespace chamber::sim
