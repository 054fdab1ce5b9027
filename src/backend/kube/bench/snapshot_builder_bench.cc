// Kubernetes objects to the engine's snapshot (the first half of chamberd's cycle), and the
// whole decision (snapshot plus engine), at the size of the scheduler benchmark: 5,000 nodes
// with 8 GPUs and 10,000 single-GPU pods, pending or half of them bound.
#include <benchmark/benchmark.h>

#include "backend/kube/snapshot_builder.h"
#include "core/engine.h"

namespace chamber::backend {
namespace {

using kube::Json;

// "p-00042": pods in the order of their names, as an informer lists them.
std::string PodName(int p) {
  std::string n = std::to_string(p);
  return "p-" + std::string(n.size() < 6 ? 6 - n.size() : 0, '0') + n;
}

enum class Stage { kPending, kBound, kRunning };

// Pod `p` of the fleet: pending; bound by chamber to a node and GPU slot (the binding's
// annotation, the API server's PodScheduled condition); or running there.
Json PodJson(int p, Stage stage, int nodes) {
  Json container = {{"name", "main"},
                    {"image", "trainer"},
                    {"resources",
                     {{"requests", {{"cpu", "100m"}, {"memory", "256Mi"}, {"nvidia.com/gpu", "1"}}},
                      {"limits", {{"nvidia.com/gpu", "1"}}}}}};
  Json j = {
      {"metadata",
       {{"name", PodName(p)},
        {"namespace", "bench"},
        {"uid", "pod-" + std::to_string(p)},
        {"labels", {{"chamber.io/queue", "bench"}}},
        {"creationTimestamp", "2026-11-30T10:00:00Z"}}},
      {"spec",
       {{"schedulerName", "chamber"}, {"priority", 0}, {"containers", Json::array({container})}}},
      {"status", {{"phase", "Pending"}}}};
  if (stage == Stage::kPending) return j;
  j["spec"]["nodeName"] = "gpu-" + std::to_string(p / 8 % nodes);
  j["metadata"]["annotations"] = {{"chamber.io/gpu-indices", std::to_string(p % 8)}};
  j["metadata"]["resourceVersion"] = stage == Stage::kBound ? "2" : "3";
  const Json scheduled = {
      {"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", "2026-11-30T10:00:30Z"}};
  j["status"] = {{"phase", "Pending"}, {"conditions", Json::array({scheduled})}};
  if (stage == Stage::kRunning) {
    j["status"]["phase"] = "Running";
    j["status"]["startTime"] = "2026-11-30T10:01:00Z";
  }
  return j;
}

ClusterObjects Fleet(int nodes, int pods, int bound) {
  ClusterObjects in;
  for (int n = 0; n < nodes; ++n) {
    Json j = {{"metadata",
               {{"name", "gpu-" + std::to_string(n)},
                {"uid", "node-" + std::to_string(n)},
                {"labels",
                 {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                  {"kubernetes.io/hostname", "gpu-" + std::to_string(n)},
                  {"topology.kubernetes.io/zone", "zone-" + std::to_string(n % 3)},
                  {"chamber.io/block", "block-" + std::to_string(n / 32)}}}}},
              {"spec", Json::object()},
              {"status",
               {{"allocatable",
                 {{"cpu", "96"}, {"memory", "1Ti"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    in.nodes.push_back(std::make_shared<const kube::Node>(kube::Node::FromJson(j).value()));
  }
  for (int p = 0; p < pods; ++p)
    in.pods.push_back(std::make_shared<const kube::Pod>(
        kube::Pod::FromJson(PodJson(p, p < bound ? Stage::kRunning : Stage::kPending, nodes))
            .value()));
  core::Queue q;
  q.name = "bench";
  q.res(core::Resource::kGpu).quota = core::Gpus(int64_t{nodes} * 8);
  in.queues.push_back(q);
  return in;
}

BuildOptions Options() {
  BuildOptions o;
  o.now = core::Time(1'796'030'000'000);
  return o;
}

void BM_BuildSnapshot(benchmark::State& state) {
  const ClusterObjects in =
      Fleet(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
            static_cast<int>(state.range(2)));
  const BuildOptions o = Options();
  for (auto _ : state) benchmark::DoNotOptimize(BuildSnapshot(in, o));
}
BENCHMARK(BM_BuildSnapshot)
    ->Args({5000, 10000, 0})
    ->Args({5000, 10000, 5000})
    ->Unit(benchmark::kMillisecond);

// One cycle's build, entered with the timing paused: as in chamberd, the last snapshot lends
// its memory to the build (timed) and is freed between cycles (not timed).
void TimedBuild(benchmark::State& state, const ClusterObjects& in, BuildOptions* o,
                BuiltSnapshot* last, BuiltSnapshot* retired) {
  *retired = std::move(*last);
  o->recycle = retired;
  state.ResumeTiming();
  *last = BuildSnapshot(in, *o);
  state.PauseTiming();
  *retired = BuiltSnapshot{};
  state.ResumeTiming();
}

void CountReuse(benchmark::State& state, const BuildCache& cache) {
  state.counters["derived"] = static_cast<double>(cache.last_derived());
  state.counters["reused"] = static_cast<double>(cache.last_reused());
}

// As chamberd builds it: with the cache of the previous cycle, while `changed` pods per cycle are
// replaced by new objects (as the informer does when a pod is bound or its status moves), so
// those are derived again: in the build, or (`prepared`) ahead of it, between cycles, as
// chamberd does (BuildCache::Prepare, not timed).
void BM_BuildSnapshotCached(benchmark::State& state) {
  ClusterObjects in = Fleet(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                            static_cast<int>(state.range(2)));
  const size_t changed = static_cast<size_t>(state.range(3));
  const bool prepared = state.range(4) != 0;
  BuildCache cache;
  BuildOptions o = Options();
  o.cache = &cache;
  BuiltSnapshot last = BuildSnapshot(in, o), retired;
  size_t next = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < changed; ++i, ++next)
      in.pods[next % in.pods.size()] =
          std::make_shared<const kube::Pod>(*in.pods[next % in.pods.size()]);
    if (prepared) cache.Prepare(in, o);
    TimedBuild(state, in, &o, &last, &retired);
  }
  CountReuse(state, cache);
}
BENCHMARK(BM_BuildSnapshotCached)
    ->Args({5000, 10000, 0, 0, 0})
    ->Args({5000, 10000, 5000, 0, 0})
    ->Args({5000, 10000, 5000, 500, 0})
    ->Args({5000, 10000, 5000, 500, 1})
    ->Args({5000, 10000, 10000, 0, 0})
    ->Args({5000, 10000, 10000, 10000, 0})
    ->Args({5000, 10000, 10000, 10000, 1})
    ->Unit(benchmark::kMillisecond);

// The cycle after a mass bind, chamberd's slowest: the last build saw every pod pending, and
// each has since been replaced by its running self (node, GPU slot annotation, status and
// resourceVersion), derived in the build (`prepared` 0) or ahead of it (1), or ahead of it
// after its bound but not yet running self was derived ahead too (2), as in chamberd, where
// the binds take many preparing rounds.
void BM_BuildSnapshotAfterBind(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0)), pods = static_cast<int>(state.range(1));
  const int64_t prepared = state.range(2);
  ClusterObjects in = Fleet(nodes, pods, 0);
  std::vector<kube::Pod> pending, bound, running;
  for (int p = 0; p < pods; ++p) {
    pending.push_back(kube::Pod::FromJson(PodJson(p, Stage::kPending, nodes)).value());
    bound.push_back(kube::Pod::FromJson(PodJson(p, Stage::kBound, nodes)).value());
    running.push_back(kube::Pod::FromJson(PodJson(p, Stage::kRunning, nodes)).value());
  }
  BuildCache cache;
  BuildOptions o = Options();
  o.cache = &cache;
  BuiltSnapshot last, retired;
  for (auto _ : state) {
    state.PauseTiming();
    for (int p = 0; p < pods; ++p) in.pods[p] = std::make_shared<const kube::Pod>(pending[p]);
    retired = std::move(last);
    o.recycle = &retired;
    last = BuildSnapshot(in, o);
    if (prepared == 2) {
      for (int p = 0; p < pods; ++p) in.pods[p] = std::make_shared<const kube::Pod>(bound[p]);
      cache.Prepare(in, o);
    }
    for (int p = 0; p < pods; ++p) in.pods[p] = std::make_shared<const kube::Pod>(running[p]);
    if (prepared > 0) cache.Prepare(in, o);
    TimedBuild(state, in, &o, &last, &retired);
  }
  CountReuse(state, cache);
}
BENCHMARK(BM_BuildSnapshotAfterBind)
    ->Args({5000, 10000, 0})
    ->Args({5000, 10000, 1})
    ->Args({5000, 10000, 2})
    ->Unit(benchmark::kMillisecond);

// What chamberd decides in one cycle: the snapshot (from the previous cycle's cache, lent the
// previous snapshot's memory) and the engine over it.
void BM_Decide(benchmark::State& state) {
  const ClusterObjects in =
      Fleet(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
            static_cast<int>(state.range(2)));
  BuildCache cache;
  BuildOptions o = Options();
  o.cache = &cache;
  const core::Engine engine;
  BuiltSnapshot last = BuildSnapshot(in, o), retired;
  for (auto _ : state) {
    state.PauseTiming();
    retired = std::move(last);
    o.recycle = &retired;
    state.ResumeTiming();
    last = BuildSnapshot(in, o);
    benchmark::DoNotOptimize(engine.Schedule(last.snapshot));
    state.PauseTiming();
    retired = BuiltSnapshot{};  // chamberd frees it between cycles
    state.ResumeTiming();
  }
}
BENCHMARK(BM_Decide)
    ->Args({5000, 10000, 0})
    ->Args({5000, 10000, 5000})
    ->Args({5000, 10000, 10000})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace chamber::backend
