// `chamber soak`: many simulated hours of the demo's fleet through the real daemon loop, history
// store and API server, as fast as the machine runs them, sampling the process (cli/soak.h).
#include <malloc.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/simulated_fleet.h"
#include "cli/soak.h"
#include "common/proc_status.h"
#include "daemon/http_server.h"
#include "fleet/fleet_model.h"

namespace chamber::cli {
namespace {

// CPU time of the calling thread, in milliseconds.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct SoakOptions {
  int64_t gpus = 10000;
  double hours = 24;
  double step_seconds = 60;
  double sample_minutes = 30;
  uint64_t seed = 1;
  double load = 2;
  double steady_max_hours = 4;  // 0: the demo's own workload
  SoakLimits limits;
  std::string config;
  std::string data_dir;
  std::string json;
  std::string svg;
};

// Bytes malloc has handed out and not taken back: from its arenas, and mapped on their own (the
// large blocks).
double HeapMib() {
#if defined(__GLIBC__)
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1024 * 1024);
#else
  return 0;
#endif
}

int64_t OpenFiles() {
  std::error_code ec;
  int64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

double FileMib(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<double>(size) / (1024 * 1024);
}

Status WriteOut(const std::string& flag, const std::string& path, const std::string& text) {
  std::ofstream f(path);
  if (!(f << text) || !f.flush()) return Status::InvalidArgument(flag + ": cannot write " + path);
  return Status::Ok();
}

Status RunSoak(const SoakOptions& o) {
  if (!(o.hours > 0)) return Status::InvalidArgument("--hours must be positive");
  if (!(o.step_seconds > 0)) return Status::InvalidArgument("--step must be positive");
  if (!(o.sample_minutes > 0)) return Status::InvalidArgument("--sample-minutes must be positive");
  if (!(o.steady_max_hours >= 0))
    return Status::InvalidArgument("--steady-max-hours must be 0 or more");
  if (o.limits.warmup_hours < 0 || o.limits.warmup_hours >= o.hours)
    return Status::InvalidArgument("--warmup-hours must be 0 or more and less than --hours");
  CHAMBER_RETURN_IF_ERROR(CheckFleetGpus(o.gpus));

  CHAMBER_ASSIGN_OR_RETURN(const core::EngineConfig engine, LoadEngineConfig(o.config));
  CHAMBER_ASSIGN_OR_RETURN(const DataDir data_dir, DataDir::Prepare(o.data_dir, "chamber-soak"));
  const std::string history_path = data_dir.history_path();

  SimulatedFleetOptions fleet_options;
  fleet_options.gpus = o.gpus;
  fleet_options.seed = o.seed;
  fleet_options.load = o.load;
  fleet_options.step = core::Duration(static_cast<int64_t>(o.step_seconds * 1000));
  fleet_options.engine = engine;
  fleet_options.history_path = history_path;
  fleet_options.steady_max_duration =
      core::Duration(static_cast<int64_t>(o.steady_max_hours * 3.6e6));
  // The simulated hours end about now, as the demo's warm-up does.
  const int64_t span_ms = static_cast<int64_t>(o.hours * 3.6e6);
  fleet_options.start_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count() -
                                span_ms;
  CHAMBER_ASSIGN_OR_RETURN(SimulatedFleet fleet, BuildSimulatedFleet(fleet_options));
  daemon::Daemon& d = *fleet.daemon;

  // The API server runs throughout, and every sample reads the main resources through it.
  daemon::ServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  server_options.anonymous = true;
  daemon::ApiServer server(d, nullptr, server_options);
  CHAMBER_RETURN_IF_ERROR(server.Start());
  ApiClientOptions client;
  client.server = "http://127.0.0.1:" + std::to_string(server.port());

  std::cout << "Soak: " << fleet.gpus << " simulated GPUs" << fleet.pools << "\n  "
            << Number(o.hours) << " simulated hours in cycles of " << Number(o.step_seconds)
            << " s, sampled every " << Number(o.sample_minutes) << " simulated minutes; the first "
            << Number(o.limits.warmup_hours) << " h are the warm-up\n"
            << std::endl;
  const std::vector<std::string> header = {
      "hours",   "cycles",     "running",     "pending",      "heap mib",
      "rss mib", "open files", "history mib", "cycle p50 ms", "cycle p95 ms"};
  std::vector<std::vector<std::string>> rows;
  std::vector<SoakSample> samples;
  std::vector<double> tick_ms;
  const double sample_hours = o.sample_minutes / 60;
  double next_sample = 0;
  const auto begin = std::chrono::steady_clock::now();
  for (double hours = 0; hours < o.hours;) {
    // The cycle's CPU time on this thread, which runs it: a machine busy with other work must
    // not read as an engine growing slower.
    const double t0 = ThreadCpuMs();
    CHAMBER_RETURN_IF_ERROR(d.Tick());
    tick_ms.push_back(ThreadCpuMs() - t0);
#if defined(__GLIBC__)
    malloc_trim(0);  // as chamberd does after every cycle (chamberd/lead.cc)
#endif
    const auto state = d.state();
    hours = static_cast<double>(state->time_ms - fleet_options.start_unix_ms) / 3.6e6;
    if (hours + 1e-9 < next_sample && hours < o.hours) continue;
    next_sample += sample_hours;
    for (const char* path :
         {"/api/v1/fleet", "/api/v1/queues", "/api/v1/workloads?limit=100", "/api/v1/health",
          "/api/v1/cost", "/api/v1/history?metric=utilization&scope=cluster"}) {
      CHAMBER_RETURN_IF_ERROR(ApiGet(client, path).status());
    }
    SoakSample s;
    s.hours = hours;
    s.cycles = state->cycles;
    s.rss_mib = static_cast<double>(ProcStatusKib(0, "VmRSS:")) / 1024;
    s.heap_mib = HeapMib();
    s.open_files = OpenFiles();
    s.history_mib = FileMib(history_path) + FileMib(history_path + "-wal");
    s.running = state->view.running_workloads;
    s.pending = state->view.queue.pending_workloads;
    s.cycle_ms_p50 = fleet::Percentile(tick_ms, 0.5);
    s.cycle_ms_p95 = fleet::Percentile(tick_ms, 0.95);
    tick_ms.clear();
    samples.push_back(s);
    rows.push_back({Number(s.hours), std::to_string(s.cycles), std::to_string(s.running),
                    std::to_string(s.pending), Number(s.heap_mib), Number(s.rss_mib),
                    std::to_string(s.open_files), Number(s.history_mib, 2),
                    Number(s.cycle_ms_p50, 2), Number(s.cycle_ms_p95, 2)});
  }
  server.Stop();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  PrintTable(std::cout, header, rows);

  const std::vector<SoakCheck> checks = JudgeSoak(samples, o.limits);
  std::cout << "\n"
            << Number(o.hours) << " simulated hours in " << Number(wall) << " s of wall time\n";
  bool ok = true;
  for (const SoakCheck& c : checks) {
    std::cout << (c.ok ? "ok     " : "FAILED ") << c.name << ": " << c.detail << "\n";
    ok = ok && c.ok;
  }
  const nlohmann::json options = {{"gpus", fleet.gpus},
                                  {"hours", o.hours},
                                  {"stepSeconds", o.step_seconds},
                                  {"sampleMinutes", o.sample_minutes},
                                  {"warmupHours", o.limits.warmup_hours},
                                  {"seed", o.seed},
                                  {"load", o.load},
                                  {"steadyMaxHours", o.steady_max_hours},
                                  {"wallSeconds", wall}};
  if (!o.json.empty())
    CHAMBER_RETURN_IF_ERROR(
        WriteOut("--json", o.json, SoakJson(samples, checks, options).dump(2) + "\n"));
  if (!o.svg.empty()) {
    const std::string title = "chamber soak: " + std::to_string(fleet.gpus) + " GPUs, " +
                              Number(o.hours) + " simulated hours";
    CHAMBER_RETURN_IF_ERROR(
        WriteOut("--svg", o.svg, SoakSvg(samples, o.limits.warmup_hours, title)));
  }
  if (!ok) return Status::FailedPrecondition("the soak's checks failed (see above)");
  return Status::Ok();
}

}  // namespace

void RegisterSoakCommand(CommandRegistry& registry) {
  auto o = std::make_shared<SoakOptions>();
  CLI::App* cmd = registry.Add(
      "soak",
      "Run the demo's simulated fleet for many simulated hours as fast as it goes and check that "
      "memory, open files and cycle time stay flat",
      [o] { return RunSoak(*o); });
  cmd->add_option("--gpus", o->gpus, "About this many GPUs in the simulated cluster")
      ->capture_default_str();
  cmd->add_option("--hours", o->hours, "Simulated hours to run")->capture_default_str();
  cmd->add_option("--step", o->step_seconds, "Simulated seconds per scheduling cycle")
      ->capture_default_str();
  cmd->add_option("--sample-minutes", o->sample_minutes,
                  "Simulated minutes between samples of the process")
      ->capture_default_str();
  cmd->add_option("--warmup-hours", o->limits.warmup_hours,
                  "Simulated hours not judged: the fleet fills and caches grow")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the simulated workload and faults")
      ->capture_default_str();
  cmd->add_option("--load", o->load, "Multiplies the amount of simulated work")
      ->capture_default_str();
  cmd->add_option("--steady-max-hours", o->steady_max_hours,
                  "The demo's jobs at an even pace, none longer than this many hours, so that the "
                  "work held settles (0: the demo's own workload, which follows the day)")
      ->capture_default_str();
  cmd->add_option("--max-heap-growth", o->limits.max_heap_growth,
                  "Heap growth after the warm-up that the work held does not explain, as a "
                  "fraction of the mean heap")
      ->capture_default_str();
  cmd->add_option("--max-rss-growth", o->limits.max_rss_growth, "The same for resident memory")
      ->capture_default_str();
  cmd->add_option("--max-open-files-growth", o->limits.max_open_files_growth,
                  "Most open files after the warm-up over the number at its end")
      ->capture_default_str();
  cmd->add_option("--max-cycle-growth", o->limits.max_cycle_growth,
                  "The same for the cycle time (p50 of each sample)")
      ->capture_default_str();
  cmd->add_option("--config", o->config, "The engine's YAML configuration (docs/configuration.md)");
  cmd->add_option("--data-dir", o->data_dir,
                  "Directory for the history database (default: a temporary one)");
  cmd->add_option("--json", o->json, "Write the samples and the checks as JSON to this file");
  cmd->add_option("--svg", o->svg, "Write a plot of memory and cycle time to this SVG file");
}

}  // namespace chamber::cli
