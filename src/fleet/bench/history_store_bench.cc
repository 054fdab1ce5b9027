// History store write and read rates: a tick of samples per write, one series per read.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <benchmark/benchmark.h>

#include "fleet/history_store.h"

namespace chamber::fleet {
namespace {

std::string TempDb(const char* name) {
  auto p = std::filesystem::temp_directory_path() /
           (std::string("chamber-bench-") + name + "-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  return p.string();
}

// One daemon tick: `range(0)` series written in one transaction.
void BM_HistoryWrite(benchmark::State& state) {
  const std::string path = TempDb("write");
  auto store = std::move(HistoryStore::Open(path)).value();
  std::vector<HistorySample> samples;
  for (int64_t i = 0; i < state.range(0); ++i)
    samples.push_back({"metric_" + std::to_string(i % 12), "scope_" + std::to_string(i / 12), 1});
  int64_t t = 0;
  for (auto _ : state) {
    if (!store->Write(t, samples).ok()) state.SkipWithError("write failed");
    t += 15;
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  store.reset();
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}
BENCHMARK(BM_HistoryWrite)->Arg(50)->Arg(500);

// Reading a day of one-minute points (1,440) of one series.
void BM_HistoryReadDay(benchmark::State& state) {
  const std::string path = TempDb("read");
  auto store = std::move(HistoryStore::Open(path)).value();
  for (int64_t t = 0; t < 86400; t += 60)
    (void)store->Write(t, {{"utilization", "cluster", double(t % 7)}, {"x", "cluster", 1}});
  for (auto _ : state) {
    auto r = store->Read("utilization", "cluster", 0, 86400);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 1440);
  store.reset();
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}
BENCHMARK(BM_HistoryReadDay);

}  // namespace
}  // namespace chamber::fleet
