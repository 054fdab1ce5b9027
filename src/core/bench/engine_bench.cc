// Full scheduling cycles over synthetic fleets (see synthetic.h for their shape), of whole-GPU
// pods and, in BM_ScheduleShares, of waiting pods that ask for shares of one GPU.
//
// Arguments: nodes (8 GPUs each), pods (running plus waiting), gang size (pods of 1 GPU per
// workload), churn (0: steady load, 1: lenders reclaim from borrowers). Steady cases run half the
// pods; churn cases run 80%, which fills the cluster when pods = 10 x nodes.
//
// Counters, per cycle: binds (pods placed), preemptions, pending (workloads still waiting), and
// placements/s: pods placed per second of cycle time. The Time column is the cycle time. The
// snapshot is built once per case, outside the timed loop; freeing the cycle's result is inside
// it, since a caller pays for that too.
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <benchmark/benchmark.h>

#include "core/bench/synthetic.h"
#include "core/engine.h"

namespace chamber::core {
namespace {

SyntheticSpec SpecFor(const benchmark::State& state, bool shares) {
  SyntheticSpec spec;
  spec.nodes = static_cast<int32_t>(state.range(0));
  spec.pods = static_cast<int32_t>(state.range(1));
  spec.gang_size = static_cast<int32_t>(state.range(2));
  spec.churn = state.range(3) != 0;
  spec.shares = shares;
  spec.running_fraction = spec.churn ? 0.8 : spec.shares ? 0.1 : 0.5;
  return spec;
}

// Snapshots outlive one run of a case: repetitions and the iteration-count probe call the
// benchmark function again, and building 150k workloads takes longer than a cycle.
const Snapshot& CachedSnapshot(const SyntheticSpec& spec) {
  static std::map<std::tuple<int32_t, int32_t, int32_t, bool, bool>, std::unique_ptr<Snapshot>>
      cache;
  auto& slot = cache[{spec.nodes, spec.pods, spec.gang_size, spec.churn, spec.shares}];
  if (!slot) slot = std::make_unique<Snapshot>(MakeSyntheticCluster(spec));
  return *slot;
}

void Schedule(benchmark::State& state, bool shares) {
  const Snapshot& snapshot = CachedSnapshot(SpecFor(state, shares));
  const Engine engine;
  int64_t binds = 0;
  int64_t preemptions = 0;
  int64_t pending = 0;
  for (auto _ : state) {
    CycleResult result = engine.Schedule(snapshot);
    binds = 0;
    for (const BindDecision& b : result.binds) binds += static_cast<int64_t>(b.pods.size());
    for (const ResumeDecision& r : result.resumes) binds += static_cast<int64_t>(r.pods.size());
    preemptions = static_cast<int64_t>(result.preemptions.size());
    pending = static_cast<int64_t>(result.pending.size());
    benchmark::DoNotOptimize(result);
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["binds"] = static_cast<double>(binds);
  state.counters["preemptions"] = static_cast<double>(preemptions);
  state.counters["pending"] = static_cast<double>(pending);
  state.counters["placements/s"] =
      benchmark::Counter(static_cast<double>(binds) * iterations, benchmark::Counter::kIsRate);
}

void BM_Schedule(benchmark::State& state) { Schedule(state, false); }
// Waiting pods ask for shares of one GPU (SyntheticSpec::shares). Steady: a tenth of the pods run,
// on whole GPUs. Churn: the running 80% are shares too, several on each GPU, and the waiting
// lenders' shares reclaim shares. placements/s is the rate of shares placed (docs/sharing.md,
// "In the engine").
void BM_ScheduleShares(benchmark::State& state) { Schedule(state, true); }

// {nodes, pods, gang size, churn}. MinTime keeps the largest cases to a few iterations, so the
// default run of the binary stays within a few minutes on one core; the churn cases at 10,000
// nodes are the slowest, the reclaim-heaviest (every waiting lender reclaims: about half a
// second per cycle for single pods, a second for 8-pod gangs; see docs/benchmarks.md).
BENCHMARK(BM_Schedule)
    ->ArgNames({"nodes", "pods", "gang", "churn"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Args({1000, 10000, 1, 0})
    ->Args({5000, 50000, 1, 0})
    ->Args({10000, 150000, 1, 0})
    ->Args({1000, 10000, 8, 0})
    ->Args({5000, 50000, 8, 0})
    ->Args({10000, 150000, 8, 0})
    ->Args({1000, 10000, 1, 1})
    ->Args({5000, 50000, 1, 1})
    ->Args({10000, 100000, 1, 1})
    ->Args({1000, 10000, 8, 1})
    ->Args({5000, 50000, 8, 1})
    ->Args({10000, 100000, 8, 1});

BENCHMARK(BM_ScheduleShares)
    ->ArgNames({"nodes", "pods", "gang", "churn"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Args({1000, 20000, 1, 0})
    ->Args({5000, 100000, 1, 0})
    ->Args({5000, 100000, 4, 0})
    ->Args({1000, 10000, 1, 1})
    ->Args({5000, 50000, 1, 1});

}  // namespace
}  // namespace chamber::core
