#include "cli/simulated_fleet.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "backend/sim/demo_cluster.h"
#include "cli/api_client.h"
#include "common/config_file.h"
#include "core/io/config_yaml.h"
#include "fleet/history_store.h"

namespace chamber::cli {

Result<core::EngineConfig> LoadEngineConfig(const std::string& path) {
  if (path.empty()) return core::EngineConfig{};
  CHAMBER_ASSIGN_OR_RETURN(const ConfigFile file, ConfigFile::Load(path));
  return core::io::ReadEngineConfig(file);
}

Result<DataDir> DataDir::Prepare(const std::string& dir, const std::string& prefix) {
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data()))
      return Status::Unavailable("cannot create a temporary directory for the history");
    return DataDir(tmpl, true);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--data-dir " + dir + ": " + ec.message());
  return DataDir(dir, false);
}

DataDir::~DataDir() {
  if (!temporary_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string DataDir::history_path() const {
  return (std::filesystem::path(path_) / "history.db").string();
}

Status CheckFleetGpus(int64_t gpus) {
  if (gpus >= kMinFleetGpus && gpus <= kMaxFleetGpus) return Status::Ok();
  return Status::InvalidArgument("--gpus must be " + std::to_string(kMinFleetGpus) + ".." +
                                 std::to_string(kMaxFleetGpus) + ", got " + std::to_string(gpus));
}

Result<SimulatedFleet> BuildSimulatedFleet(const SimulatedFleetOptions& o) {
  CHAMBER_RETURN_IF_ERROR(CheckFleetGpus(o.gpus));
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<fleet::HistoryStore> history,
                           fleet::HistoryStore::Open(o.history_path));

  backend::DemoClusterOptions cluster;
  cluster.seed = o.seed;
  cluster.load = o.load;
  cluster.scale = backend::DemoScaleForGpus(o.gpus);
  cluster.step = o.step;
  cluster.start_unix_ms = o.start_unix_ms;
  backend::SimulatedBackendOptions backend_options = backend::DemoCluster(cluster);
  backend_options.engine = o.engine;
  if (o.steady_max_duration > core::Duration::zero()) {
    std::vector<sim::TraceJob>& jobs = backend_options.trace.jobs;
    std::stable_sort(jobs.begin(), jobs.end(), [](const sim::TraceJob& a, const sim::TraceJob& b) {
      return a.submit < b.submit;
    });
    const sim::Time first = jobs.empty() ? sim::Time{} : jobs.front().submit;
    const sim::Duration span = jobs.empty() ? sim::Duration{} : jobs.back().submit - first;
    const auto n = static_cast<int64_t>(jobs.size());
    for (int64_t i = 0; i < n; ++i) {
      sim::TraceJob& j = jobs[static_cast<size_t>(i)];
      j.submit = first + span * i / std::max<int64_t>(1, n - 1);
      j.duration = std::min<sim::Duration>(j.duration, o.steady_max_duration);
    }
  }

  SimulatedFleet out;
  for (const sim::NodePool& p : backend_options.cluster.pools) {
    out.gpus += int64_t{p.count} * p.gpus_per_node;
    out.pools += "\n  " + p.name + ": " + std::to_string(p.count) + " nodes x " +
                 std::to_string(p.gpus_per_node) + " " + p.gpu_model + ", " +
                 std::string(sim::PricingTypeName(p.pricing)) + " at " +
                 Money(p.price_per_gpu_hour, "USD") + " per GPU-hour";
  }
  for (const core::Queue& q : backend_options.queues)
    out.teams += (out.teams.empty() ? "" : ", ") + q.name;
  out.jobs = backend_options.trace.jobs.size();
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<backend::SimulatedBackend> backend,
                           backend::SimulatedBackend::Create(std::move(backend_options)));
  out.backend = backend.get();

  daemon::DaemonOptions daemon_options;
  daemon_options.tick = o.tick;
  daemon_options.engine = o.engine;
  out.daemon =
      std::make_unique<daemon::Daemon>(std::move(backend), daemon_options, std::move(history));
  return out;
}

}  // namespace chamber::cli
