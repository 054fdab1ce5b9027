// What the API server tests serve: a daemon over the demo cluster, one cycle run, and a health
// service without a cluster behind it.
#pragma once

#include <memory>
#include <utility>

#include <gtest/gtest.h>

#include "backend/sim/demo_cluster.h"
#include "daemon/daemon.h"
#include "health/health_service.h"

namespace chamber::daemon::test_support {

// The demo cluster (seed 3, no GPU faults) under a daemon that has run one cycle.
inline std::unique_ptr<Daemon> OneCycleDemoDaemon() {
  backend::DemoClusterOptions o;
  o.seed = 3;
  o.gpu_mtbf_hours = 0;
  auto b = std::move(backend::SimulatedBackend::Create(backend::DemoCluster(o))).value();
  auto daemon = std::make_unique<Daemon>(std::move(b), DaemonOptions{}, nullptr);
  EXPECT_TRUE(daemon->Tick().ok());
  return daemon;
}

inline std::shared_ptr<health::HealthService> BareHealthService() {
  return std::make_shared<health::HealthService>(health::HealthService::Options{}, nullptr,
                                                 nullptr);
}

}  // namespace chamber::daemon::test_support
