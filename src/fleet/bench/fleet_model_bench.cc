// The fleet model's last-hour figures (waits, preemptions, lost GPU-hours per cluster, pool and
// queue), which chamberd computes every cycle: `range(0)` starts and a fifth as many
// preemptions in the window, over 105 queues (5 departments of 20 teams) and 3 pools.
#include <string>

#include <benchmark/benchmark.h>

#include "fleet/fleet_model.h"

namespace chamber::fleet {
namespace {

FleetInput Window(int64_t starts) {
  FleetInput in;
  in.now = 10'000'000'000;
  in.pools = {{"h100", "H100", Pricing::kOnDemand, 3.9},
              {"a100", "A100", Pricing::kReserved, 1.6},
              {"l40s", "L40S", Pricing::kSpot, 0.75}};
  for (int d = 0; d < 5; ++d) {
    QueueInput dept;
    dept.name = "dept-" + std::to_string(d);
    in.queues.push_back(dept);
    for (int t = 0; t < 20; ++t) {
      QueueInput team;
      team.name = dept.name + "-team-" + std::to_string(t);
      team.parent = dept.name;
      in.queues.push_back(team);
    }
  }
  uint64_t x = 1;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  };
  auto team = [&] {
    return "dept-" + std::to_string(next() % 5) + "-team-" + std::to_string(next() % 20);
  };
  for (int64_t i = 0; i < starts; ++i)
    in.recent_starts.push_back({in.now - static_cast<TimeMs>(next() % 3'600'000),
                                static_cast<double>(next() % 7200), team(),
                                static_cast<int32_t>(next() % 3)});
  for (int64_t i = 0; i < starts / 5; ++i) {
    const PreemptionRecord p{in.now - static_cast<TimeMs>(next() % 3'600'000),
                             "w-" + std::to_string(i),
                             team(),
                             static_cast<int32_t>(next() % 3),
                             static_cast<PreemptionReason>(next() % kPreemptionReasons),
                             static_cast<double>(next() % 100) / 10};
    in.recent_preemptions.push_back(p);
    AddPreemption(in.preemption_totals, p);
  }
  return in;
}

void BM_RecentFigures(benchmark::State& state) {
  const FleetInput in = Window(state.range(0));
  const FleetOptions options;
  for (auto _ : state) {
    FleetView v = ComputeFleet(in, options);
    benchmark::DoNotOptimize(v.recent.wait_p95_seconds);
  }
  state.counters["starts"] = static_cast<double>(state.range(0));
}
// 5,400: chamber demo --gpus 10000's hourly average; 20,000 for a busier fleet.
BENCHMARK(BM_RecentFigures)->Arg(5400)->Arg(20000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace chamber::fleet
