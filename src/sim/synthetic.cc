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
  // The request shapes of the pods of Alibaba's openb_pod_list_default.csv (alibaba/clusterdata,
  // cluster-trace-gpu-v2023; Weng et al., USENIX ATC 2023), each with the number of its pods
  // there: every shape of no GPU, one GPU or a share of one that 20 or more pods ask for, and
  // every multi-GPU shape of 3 or more; 7,728 of the trace's 8,152 pods (6,702 of its 7,064 GPU
  // pods, 1,026 of its 1,088 pods without GPUs).
  // {gpu_milli, gpus, cpu_milli, memory_mib, pods}
  static const std::vector<SharingMixEntry> mix = {
      {0, 0, 8000, 30517, 163},   {0, 0, 12500, 57344, 364},   {0, 0, 15400, 51200, 120},
      {0, 0, 16500, 51200, 95},   {0, 0, 32000, 49152, 284},   {160, 0, 4000, 15258, 53},
      {160, 0, 6000, 22888, 20},  {220, 0, 4000, 15258, 24},   {230, 0, 4000, 22888, 26},
      {230, 0, 4000, 30517, 84},  {320, 0, 1000, 2048, 22},    {320, 0, 4000, 15258, 78},
      {320, 0, 4000, 22888, 111}, {320, 0, 4000, 30517, 43},   {320, 0, 8000, 30517, 72},
      {370, 0, 4152, 10600, 45},  {460, 0, 6000, 6144, 51},    {460, 0, 6000, 12288, 29},
      {470, 0, 8000, 30517, 360}, {470, 0, 11908, 47104, 388}, {550, 0, 4152, 10600, 72},
      {590, 0, 3152, 5600, 75},   {650, 0, 11908, 47104, 237}, {810, 0, 3152, 5600, 1047},
      {810, 0, 4152, 10600, 31},  {0, 1, 3152, 5600, 470},     {0, 1, 4000, 24576, 104},
      {0, 1, 4000, 31250, 40},    {0, 1, 8000, 16384, 104},    {0, 1, 8000, 32768, 55},
      {0, 1, 8200, 33792, 41},    {0, 1, 9810, 41560, 195},    {0, 1, 11300, 49152, 857},
      {0, 1, 11400, 48128, 534},  {0, 1, 11400, 77824, 65},    {0, 1, 11900, 77824, 51},
      {0, 1, 11908, 47104, 153},  {0, 1, 12000, 15360, 44},    {0, 1, 12000, 16384, 99},
      {0, 1, 12000, 24576, 158},  {0, 1, 14200, 58368, 93},    {0, 1, 15200, 80896, 36},
      {0, 1, 15700, 58368, 158},  {0, 1, 16000, 32768, 108},   {0, 1, 16000, 65536, 33},
      {0, 1, 16400, 125952, 27},  {0, 1, 18708, 64512, 255},   {0, 1, 24200, 93184, 84},
      {0, 2, 6000, 65536, 3},     {0, 2, 16200, 66560, 7},     {0, 2, 30200, 160768, 3},
      {0, 4, 32000, 131072, 3},   {0, 4, 32200, 132096, 9},    {0, 4, 60200, 320512, 3},
      {0, 8, 64000, 262144, 3},   {0, 8, 64200, 263168, 18},   {0, 8, 88000, 327680, 18},
      {0, 8, 120000, 737280, 3},
  };
  return mix;
}

int64_t SharingMixPods() {
  int64_t pods = 0;
  for (const SharingMixEntry& e : SharingMix()) pods += e.pods;
  return pods;
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
      int64_t g = static_cast<int64_t>(uniform() * static_cast<double>(SharingMixPods()));
      const SharingMixEntry* e = &SharingMix().back();
      for (const SharingMixEntry& m : SharingMix()) {
        if (g < m.pods) {
          e = &m;
          break;
        }
        g -= m.pods;
      }
      j.priority = r < spec.reserved_fraction ? 150 : (r < spec.reserved_fraction + 0.3 ? 50 : 10);
      j.gpus_per_pod = e->gpus;
      j.gpu_milli_per_pod = e->gpu_milli;
      j.cpu_milli_per_pod = e->cpu_milli;
      j.memory_bytes_per_pod = e->memory_mib << 20;
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
