// `chamber bench engine`: full scheduling cycles over a synthetic fleet (core/bench/synthetic.h),
// timed from outside the engine. Prints cycle-time percentiles, placements per second and where
// the time goes; docs/benchmarks.md explains the figures and how they were measured.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/bench/synthetic.h"
#include "core/engine.h"

namespace chamber::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchEngineOptions {
  core::SyntheticSpec spec;
  int32_t cycles = 20;
  std::string output = "table";
};

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Nearest-rank percentile of `sorted` (ascending, non-empty).
double Percentile(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

struct CycleCounts {
  int64_t bound_pods = 0;  // bound or resumed
  int64_t binds = 0;       // workloads
  int64_t preemptions = 0;
  int64_t pending = 0;
  core::CycleStats stats;
};

CycleCounts Count(const core::CycleResult& r) {
  CycleCounts c;
  for (const core::BindDecision& b : r.binds) c.bound_pods += static_cast<int64_t>(b.pods.size());
  for (const core::ResumeDecision& b : r.resumes)
    c.bound_pods += static_cast<int64_t>(b.pods.size());
  c.binds = static_cast<int64_t>(r.binds.size() + r.resumes.size());
  c.preemptions = static_cast<int64_t>(r.preemptions.size());
  c.pending = static_cast<int64_t>(r.pending.size());
  c.stats = r.stats;
  return c;
}

// Runs `cycles` cycles over `snapshot` and returns each one's time in ms, ascending. The result
// is freed inside the timed region, as a caller of the engine pays for that too.
std::vector<double> TimeCycles(const core::Engine& engine, const core::Snapshot& snapshot,
                               int32_t cycles, CycleCounts* counts) {
  std::vector<double> ms;
  for (int32_t i = 0; i < cycles; ++i) {
    const Clock::time_point start = Clock::now();
    {
      const core::CycleResult result = engine.Schedule(snapshot);
      if (i == 0 && counts != nullptr) *counts = Count(result);
    }
    ms.push_back(MsSince(start));
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

Status RunBenchEngine(const BenchEngineOptions& o) {
  if (const std::string problem = core::ValidateSyntheticSpec(o.spec); !problem.empty())
    return Status::InvalidArgument(problem);
  if (o.cycles < 1) return Status::InvalidArgument("--cycles must be at least 1");

  Clock::time_point start = Clock::now();
  const core::Snapshot snapshot = core::MakeSyntheticCluster(o.spec);
  const double build_ms = MsSince(start);
  int64_t running_pods = 0;
  int64_t waiting_pods = 0;
  for (const core::Workload& w : snapshot.workloads)
    (w.state == core::WorkloadState::kRunning ? running_pods : waiting_pods) += w.TotalPods();

  const core::Engine engine;
  CycleCounts counts;
  const std::vector<double> cycle_ms = TimeCycles(engine, snapshot, o.cycles, &counts);
  std::vector<double> rates;
  for (double ms : cycle_ms) rates.push_back(static_cast<double>(counts.bound_pods) / ms * 1e3);
  std::sort(rates.begin(), rates.end());

  // Where the time goes, from outside: the same snapshot with nothing waiting costs what every
  // cycle pays before admission (validation, holdings, fair share, queue status); the rest of a
  // full cycle is admitting, placing, preempting and explaining the waiting work.
  core::Snapshot base = snapshot;
  std::erase_if(base.workloads,
                [](const core::Workload& w) { return w.state == core::WorkloadState::kPending; });
  const std::vector<double> base_ms = TimeCycles(engine, base, o.cycles, nullptr);

  const double p50 = Percentile(cycle_ms, 50);
  const double base_p50 = Percentile(base_ms, 50);
  const double admission_ms = std::max(0.0, p50 - base_p50);
  const double placements_per_s = Percentile(rates, 50);

  if (o.output == "json") {
    nlohmann::json j = {
        {"spec",
         {{"nodes", o.spec.nodes},
          {"gpus_per_node", o.spec.gpus_per_node},
          {"pods", o.spec.pods},
          {"gang_size", o.spec.gang_size},
          {"gpus_per_pod", o.spec.gpus_per_pod},
          {"queues", o.spec.queues},
          {"running_fraction", o.spec.running_fraction},
          {"churn", o.spec.churn},
          {"shares", o.spec.shares},
          {"seed", o.spec.seed}}},
        {"running_pods", running_pods},
        {"waiting_pods", waiting_pods},
        {"snapshot_build_ms", build_ms},
        {"cycles", o.cycles},
        {"cycle_ms",
         {{"p50", p50},
          {"p95", Percentile(cycle_ms, 95)},
          {"p99", Percentile(cycle_ms, 99)},
          {"min", cycle_ms.front()},
          {"max", cycle_ms.back()}}},
        {"placements_per_second_median", placements_per_s},
        {"bound_pods", counts.bound_pods},
        {"bound_workloads", counts.binds},
        {"preemptions", counts.preemptions},
        {"pending_workloads", counts.pending},
        {"breakdown_ms_p50",
         {{"cycle_with_nothing_waiting", base_p50}, {"admission", admission_ms}}},
        {"engine_stats",
         {{"workloads_considered", counts.stats.workloads_considered},
          {"placement_attempts", counts.stats.placement_attempts},
          {"placement_cache_hits", counts.stats.placement_cache_hits},
          {"preemption_searches", counts.stats.preemption_searches},
          {"indexed_preemption_searches", counts.stats.indexed_preemption_searches}}},
    };
    std::cout << j.dump(2) << "\n";
    return Status::Ok();
  }

  const core::SyntheticSpec& s = o.spec;
  std::cout << fmt::format(
      "{} nodes x {} GPUs, {} queues; {} pods ({} running, {} waiting) in workloads of {} x {} "
      "GPU{}; {}; seed {}\n\n",
      s.nodes, s.gpus_per_node, s.queues, running_pods + waiting_pods, running_pods, waiting_pods,
      s.gang_size, s.gpus_per_pod,
      !s.shares ? ""
      : s.churn && s.gang_size == 1 && s.gpus_per_pod == 1
          ? " (running and waiting: shares of one GPU)"
          : " (waiting: shares of one GPU)",
      s.churn ? "churn (lenders reclaim)" : "steady", s.seed);
  auto row = [](const std::string& label, const std::string& value) {
    std::cout << fmt::format("{:<34} {}\n", label, value);
  };
  row("snapshot build", fmt::format("{:.1f} ms", build_ms));
  row("cycles", std::to_string(o.cycles));
  row("cycle time p50 / p95 / p99",
      fmt::format("{:.1f} / {:.1f} / {:.1f} ms", p50, Percentile(cycle_ms, 95),
                  Percentile(cycle_ms, 99)));
  row("placements/s (median)", fmt::format("{:.0f}", placements_per_s));
  row("bound", fmt::format("{} pods in {} workloads", counts.bound_pods, counts.binds));
  row("preemptions", std::to_string(counts.preemptions));
  row("pending", fmt::format("{} workloads", counts.pending));
  std::cout << "\nwhere the time goes (p50)\n";
  auto share = [&](double ms) { return p50 > 0 ? 100.0 * ms / p50 : 0.0; };
  row("  cycle with nothing waiting",
      fmt::format("{:.1f} ms  {:.0f}%", base_p50, share(std::min(base_p50, p50))));
  row("  admission of waiting work",
      fmt::format("{:.1f} ms  {:.0f}%", admission_ms, share(admission_ms)));
  row("  workloads considered", std::to_string(counts.stats.workloads_considered));
  row("  placement attempts / cache hits",
      fmt::format("{} / {}", counts.stats.placement_attempts, counts.stats.placement_cache_hits));
  row("  preemption searches / indexed", fmt::format("{} / {}", counts.stats.preemption_searches,
                                                     counts.stats.indexed_preemption_searches));
  return Status::Ok();
}

}  // namespace

void RegisterBenchCommand(CommandRegistry& registry) {
  CLI::App* group = registry.root().add_subcommand("bench", "Benchmarks");
  auto o = std::make_shared<BenchEngineOptions>();
  CLI::App* cmd =
      registry.Add(*group, "engine", "Time full scheduling cycles over a synthetic cluster",
                   [o] { return RunBenchEngine(*o); });
  cmd->add_option("--nodes", o->spec.nodes, "Nodes")->capture_default_str();
  cmd->add_option("--gpus-per-node", o->spec.gpus_per_node, "GPUs per node")->capture_default_str();
  cmd->add_option("--pods", o->spec.pods, "Pods, running plus waiting")->capture_default_str();
  cmd->add_option("--gang-size", o->spec.gang_size, "Pods per workload (1: single pods)")
      ->capture_default_str();
  cmd->add_option("--gpus-per-pod", o->spec.gpus_per_pod, "GPUs per pod")->capture_default_str();
  cmd->add_option("--queues", o->spec.queues, "Team queues (leaves; 10 per department)")
      ->capture_default_str();
  cmd->add_option("--running-fraction", o->spec.running_fraction,
                  "Share of workloads already running")
      ->capture_default_str();
  cmd->add_flag("--churn", o->spec.churn,
                "Queues below quota wait while others borrow, so the cycle must reclaim");
  cmd->add_flag("--shares", o->spec.shares,
                "Waiting pods ask for a share of one GPU (0.1 to 0.7) instead of whole GPUs; with "
                "--churn, running pods hold shares too, so that shares reclaim shares");
  cmd->add_option("--nvlink-domain-nodes", o->spec.nvlink_domain_nodes,
                  "Nodes per multi-node NVLink domain (0: none)")
      ->capture_default_str();
  cmd->add_option("--cycles", o->cycles, "Cycles to time")->capture_default_str();
  cmd->add_option("--seed", o->spec.seed, "Generator seed")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

}  // namespace chamber::cli
