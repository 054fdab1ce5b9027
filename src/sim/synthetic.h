// A seeded synthetic workload, calibrated to published statistics of production GPU clusters:
// heavy-tailed (log-normal) durations with the median and mean of the Helios or Philly traces,
// a GPU-count mix dominated by 1-GPU jobs with a tail of 8- to 1,024-GPU gangs, diurnal
// arrivals, and several teams and priorities. The openb profile draws GPU-sharing pods instead:
// most ask for a fraction of one GPU, with a tail of whole- and multi-GPU pods (SharingMix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/trace/trace.h"

namespace chamber::sim {

struct SyntheticSpec {
  enum class Profile { kHelios, kPhilly, kOpenb };
  Profile profile = Profile::kHelios;
  int64_t jobs = 10'000;
  Duration span{std::chrono::hours(24 * 7)};  // submissions spread over this time
  int32_t teams = 4;                          // queues team-0 ... team-(N-1)
  int32_t max_gpus = 1024;                    // the largest gang drawn
  double reserved_fraction = 0.1;  // jobs at priority 150 (only jobs of max_gpus / 32 or fewer)
  uint64_t seed = 1;
};

// Durations' log-normal parameters per profile: Helios median 206 s, mean 6,650 s; Philly
// median 874 s, mean 18,000 s. The openb profile takes Helios's.
struct DurationModel {
  double median_seconds;
  double mean_seconds;
};
DurationModel DurationModelOf(SyntheticSpec::Profile p);

Trace GenerateSyntheticTrace(const SyntheticSpec& spec);

// The openb profile's request mix, per pod: the request shapes of the pods of Alibaba's openb
// trace (docs/simulator.md), each a share of one GPU in thousandths, whole GPUs or no GPU, with
// the pod's CPU and memory, and how many of the trace's pods ask for it.
struct SharingMixEntry {
  int32_t gpu_milli = 0;  // 1..999, or 0 for whole GPUs or none
  int32_t gpus = 0;       // 0 with gpu_milli 0: no GPU
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t pods = 0;
};
const std::vector<SharingMixEntry>& SharingMix();
int64_t SharingMixPods();  // the sum of the entries' pods

}  // namespace chamber::sim
