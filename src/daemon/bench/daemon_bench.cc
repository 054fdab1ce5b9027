// chamberd at 10,000 GPUs: one daemon tick (engine cycle, fleet model, publication), and
// GET /api/v1/gpus through the real server, served fresh (first request after a tick, which
// serializes the heatmap) and cached (later requests on the same state).
//
//   build/release/src/daemon/daemon_bench
#include <httplib.h>

#include <benchmark/benchmark.h>

#include "backend/sim/demo_cluster.h"
#include "daemon/http_server.h"

namespace chamber::daemon {
namespace {

using backend::DemoCluster;
using backend::DemoClusterOptions;
using backend::SimulatedBackend;

// The demo cluster scaled 38x: 1,444 nodes, 10,032 GPUs, 456,000 jobs over a week; each tick
// moves simulated time on by 5 minutes.
struct Fleet10k {
  Fleet10k() {
    DemoClusterOptions o;
    o.scale = 38;
    o.step = std::chrono::minutes(5);  // warm-up reaches the first day's busy hours
    o.start_unix_ms = 1'790'000'040'000;
    auto backend = std::move(SimulatedBackend::Create(DemoCluster(o))).value();
    daemon = std::make_unique<Daemon>(std::move(backend), DaemonOptions{}, nullptr);
    for (int i = 0; i < 150; ++i) (void)daemon->Tick();  // 12.5 simulated hours
    ServerOptions so;
    so.port = 0;
    so.anonymous = true;
    so.rate_limit.rate = 0;  // measures the server, not its limiter
    server = std::make_unique<ApiServer>(*daemon, nullptr, so);
    (void)server->Start();
  }
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<ApiServer> server;
};

Fleet10k& Shared() {
  static Fleet10k f;
  return f;
}

void BM_DaemonTick10k(benchmark::State& state) {
  Fleet10k& f = Shared();
  double engine_ms = 0;
  for (auto _ : state) {
    (void)f.daemon->Tick();
    engine_ms += f.daemon->state()->cycle_ms;
  }
  const auto s = f.daemon->state();
  state.counters["gpus"] = s->view.gpus.capacity;
  state.counters["workloads"] = static_cast<double>(s->input.workloads.size());
  state.counters["engine_ms"] = engine_ms / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DaemonTick10k)->Unit(benchmark::kMillisecond)->Iterations(40);

void BM_ApiGpus10k(benchmark::State& state) {
  Fleet10k& f = Shared();
  const bool fresh = state.range(0) == 1;
  httplib::Client c("127.0.0.1", f.server->port());
  size_t bytes = 0;
  for (auto _ : state) {
    if (fresh) {
      state.PauseTiming();
      (void)f.daemon->Tick();
      state.ResumeTiming();
    }
    auto r = c.Get("/api/v1/gpus");
    if (!r || r->status != 200) state.SkipWithError("request failed");
    bytes = r ? r->body.size() : 0;
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ApiGpus10k)
    ->Arg(1)
    ->Arg(0)
    ->ArgName("fresh")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace
}  // namespace chamber::daemon
