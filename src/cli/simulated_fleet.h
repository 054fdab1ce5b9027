// The simulated fleet behind `chamber demo` and `chamber soak`: the demo cluster
// (backend/sim/demo_cluster.h) at a number of GPUs, under the real daemon loop (engine, fleet
// model, history store), with its clock starting in the past so that a warm-up reaches the
// present.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/sim/sim_backend.h"
#include "common/status.h"
#include "core/config.h"
#include "daemon/daemon.h"

namespace chamber::cli {

// --gpus: the fleet the dashboard is built for (10,000 GPUs) with room to spare; beyond it the
// simulated week's trace alone takes gigabytes.
inline constexpr int64_t kMinFleetGpus = 20;  // one node of each pool
inline constexpr int64_t kMaxFleetGpus = 50000;

struct SimulatedFleetOptions {
  int64_t gpus = 0;
  uint64_t seed = 1;
  double load = 2;
  core::Duration step{std::chrono::seconds(30)};  // simulated time per cycle
  int64_t start_unix_ms = 0;
  std::chrono::milliseconds tick{500};  // wall time between cycles in Daemon::Run
  core::EngineConfig engine;
  std::string history_path;  // the history database, opened or created
  // A steady workload instead of the demo's production-like one: the same jobs, submitted at an
  // even pace over the week (no day and night) and none running longer than this, so that the
  // work the fleet holds settles within about this long. Zero: the demo's workload.
  core::Duration steady_max_duration{0};
};

struct SimulatedFleet {
  std::unique_ptr<daemon::Daemon> daemon;
  backend::SimulatedBackend* backend = nullptr;  // owned by the daemon
  int64_t gpus = 0;                              // as built: pools are whole nodes
  std::string pools;  // one line per pool: "\n  h100: 16 nodes x 8 H100, on-demand at $..."
  std::string teams;  // "llm-training, vision, ..."
  size_t jobs = 0;    // in the simulated week's trace
};

// The engine's configuration from the YAML file at `path` (docs/configuration.md); the
// defaults when `path` is empty.
Result<core::EngineConfig> LoadEngineConfig(const std::string& path);

// The directory of the history database (flag --data-dir): `dir`, created when absent, or a
// new temporary one (`<temp>/<prefix>-XXXXXX`) removed with this object.
class DataDir {
 public:
  static Result<DataDir> Prepare(const std::string& dir, const std::string& prefix);
  DataDir(DataDir&& o) noexcept : path_(std::move(o.path_)), temporary_(o.temporary_) {
    o.temporary_ = false;
  }
  DataDir& operator=(DataDir&&) = delete;
  ~DataDir();
  const std::string& path() const { return path_; }
  bool temporary() const { return temporary_; }
  std::string history_path() const;  // <path>/history.db

 private:
  DataDir(std::string path, bool temporary) : path_(std::move(path)), temporary_(temporary) {}
  std::string path_;
  bool temporary_ = false;
};

// The error for a number of GPUs outside kMinFleetGpus..kMaxFleetGpus (flag --gpus).
Status CheckFleetGpus(int64_t gpus);

// Checks the number of GPUs and builds the fleet.
Result<SimulatedFleet> BuildSimulatedFleet(const SimulatedFleetOptions& options);

}  // namespace chamber::cli
