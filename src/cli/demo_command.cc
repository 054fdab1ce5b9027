// `chamber demo`: chamberd on an in-process simulated cluster. The daemon loop, the engine, the
// fleet model, the history store and the API server are the real ones; only the cluster is
// simulated (src/backend/sim/demo_cluster.h), in accelerated time.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "backend/sim/demo_cluster.h"
#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/simulated_fleet.h"
#include "common/config_file.h"
#include "core/io/config_yaml.h"
#include "daemon/http_server.h"

namespace chamber::cli {
namespace {

// Warm-up cycles: the demo's own up to 2,000 GPUs; on larger clusters longer ones (up to 5
// simulated minutes), so that warming up 10,000 GPUs takes about as long as 264.
core::Duration WarmupStep(core::Duration step, int64_t gpus) {
  const int64_t factor = (gpus + 1999) / 2000;
  const core::Duration longest = std::max<core::Duration>(step, std::chrono::minutes(5));
  return std::clamp<core::Duration>(step * factor, step, longest);
}

struct DemoOptions {
  int port = 8080;
  int64_t gpus = backend::kDemoClusterGpus;
  uint64_t seed = 1;
  double speed = 60;
  double load = 2;          // enough work that queues form and preemption shows
  double duration = 0;      // seconds; 0: until interrupted
  double warmup_hours = 8;  // simulated before serving, so the first screen shows a busy fleet
  std::string data_dir;
  std::string config;  // the engine's YAML configuration, as chamberd and `chamber sim` read it
  int tick_ms = 500;
};

Status RunDemo(const DemoOptions& o) {
  if (o.speed <= 0) return Status::InvalidArgument("--speed must be positive");
  if (o.tick_ms <= 0) return Status::InvalidArgument("--tick-ms must be positive");
  if (o.port < 0 || o.port > 65535) return Status::InvalidArgument("--port must be 0..65535");
  if (o.warmup_hours < 0 || o.warmup_hours > 24 * 7)
    return Status::InvalidArgument("--warmup must be 0..168 hours");
  CHAMBER_RETURN_IF_ERROR(CheckFleetGpus(o.gpus));

  CHAMBER_ASSIGN_OR_RETURN(const core::EngineConfig engine, LoadEngineConfig(o.config));

  // Signals go to the one thread that waits for them; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  CHAMBER_ASSIGN_OR_RETURN(const DataDir data_dir, DataDir::Prepare(o.data_dir, "chamber-demo"));
  const std::string history_path = data_dir.history_path();

  SimulatedFleetOptions fleet_options;
  fleet_options.gpus = o.gpus;
  fleet_options.seed = o.seed;
  fleet_options.load = o.load;
  fleet_options.step = core::Duration(static_cast<int64_t>(o.tick_ms * o.speed));
  fleet_options.tick = std::chrono::milliseconds(o.tick_ms);
  fleet_options.engine = engine;
  fleet_options.history_path = history_path;
  // The warm-up hours lie in the past, so the cluster's clock reaches the present when the
  // dashboard opens and the history already holds them.
  const auto warmup = std::chrono::milliseconds(static_cast<int64_t>(o.warmup_hours * 3.6e6));
  fleet_options.start_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch() - warmup)
                                    .count();
  CHAMBER_ASSIGN_OR_RETURN(SimulatedFleet fleet, BuildSimulatedFleet(fleet_options));
  daemon::Daemon& d = *fleet.daemon;
  backend::SimulatedBackend& simulated = *fleet.backend;
  const int64_t gpus = fleet.gpus;
  // The API has a fleet to show from the first request: a busy one after the warm-up.
  const core::Duration warmup_step = WarmupStep(fleet_options.step, gpus);
  const int64_t warmup_ticks = std::max<int64_t>(1, warmup / warmup_step);
  if (warmup_ticks > 1) {
    std::cout << "Simulating the last " << Number(o.warmup_hours) << " hours of the cluster..."
              << std::flush;
  }
  const auto warmup_begin = std::chrono::steady_clock::now();
  simulated.set_step(warmup_step);
  for (int64_t i = 0; i < warmup_ticks; ++i) CHAMBER_RETURN_IF_ERROR(d.Tick());
  simulated.set_step(fleet_options.step);
  if (warmup_ticks > 1) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_begin).count();
    std::cout << " done in " << Number(seconds) << " s (" << warmup_ticks << " cycles)"
              << std::endl;
  }

  daemon::ServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.port = o.port;
  server_options.anonymous = true;
  daemon::ApiServer server(d, nullptr, server_options);
  CHAMBER_RETURN_IF_ERROR(server.Start());

  std::cout << "Chamber demo: a simulated cluster of " << gpus << " GPUs" << fleet.pools << "\n"
            << "  teams: " << fleet.teams << "; " << fleet.jobs
            << " synthetic jobs over a simulated week, at " << Number(o.speed) << "x speed"
            << " (seed " << o.seed << "), with occasional GPU faults\n"
            << "Engine configuration: "
            << (o.config.empty() ? std::string("the defaults (chamber config defaults)") : o.config)
            << "\n"
            << "Listening on 127.0.0.1 only, without authentication (demo mode): no token "
               "needed.\n"
            << "Dashboard: http://127.0.0.1:" << server.port() << "\n"
            << "History:   " << history_path << (data_dir.temporary() ? " (removed at exit)" : "")
            << "\n"
            << "Press Ctrl-C to stop." << std::endl;

  std::jthread loop([&d](std::stop_token stop) { d.Run(stop); });
  const auto begin = std::chrono::steady_clock::now();
  while (true) {
    timespec wait{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      std::cout << "\nStopping." << std::endl;
      break;
    }
    if (o.duration > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() >=
            o.duration)
      break;
  }
  loop.request_stop();
  loop.join();
  server.Stop();
  const auto state = d.state();
  std::cout << "Ran " << state->cycles << " scheduling cycles over "
            << DurationText(static_cast<double>(state->time_ms - fleet_options.start_unix_ms) /
                            1000)
            << " of simulated time." << std::endl;
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  return Status::Ok();
}

}  // namespace

void RegisterDemoCommand(CommandRegistry& registry) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd = registry.Add(
      "demo", "Run Chamber on a simulated GPU cluster and serve the dashboard on 127.0.0.1",
      [o] { return RunDemo(*o); });
  cmd->add_option("--port", o->port, "Port on 127.0.0.1 (0: any free port)")->capture_default_str();
  cmd->add_option("--gpus", o->gpus,
                  "About this many GPUs in the simulated cluster: pools, team quotas and work grow "
                  "in proportion (" +
                      std::to_string(kMinFleetGpus) + ".." + std::to_string(kMaxFleetGpus) + ")")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the simulated workload and faults")
      ->capture_default_str();
  cmd->add_option("--speed", o->speed, "Simulated seconds per wall-clock second")
      ->capture_default_str();
  cmd->add_option("--load", o->load, "Multiplies the amount of simulated work")
      ->capture_default_str();
  cmd->add_option("--duration", o->duration, "Stop after this many seconds (0: at Ctrl-C)")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup_hours,
                  "Simulated hours run before serving, so the dashboard opens on a busy fleet "
                  "with history")
      ->capture_default_str();
  cmd->add_option("--data-dir", o->data_dir,
                  "Directory for the history database (default: a temporary one)");
  cmd->add_option("--config", o->config,
                  "The engine's YAML configuration, as chamberd and `chamber sim` read it "
                  "(docs/configuration.md; cyclePeriod gives way to --tick-ms)");
  cmd->add_option("--tick-ms", o->tick_ms, "Wall-clock milliseconds between scheduling cycles")
      ->capture_default_str();
}

}  // namespace chamber::cli
