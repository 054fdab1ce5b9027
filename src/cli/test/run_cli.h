// Runs the CLI in-process, as `chamber <args>` with the given subcommands, and captures what it
// prints and its exit code; and the demo's simulated cluster behind a real API server on a
// loopback port for the commands to talk to.
#pragma once

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "backend/sim/demo_cluster.h"
#include "backend/sim/sim_backend.h"
#include "cli/command.h"
#include "daemon/http_server.h"

namespace chamber::cli::testing {

struct Output {
  int code = 0;
  std::string out;
  std::string err;
};

inline Output RunCli(std::vector<std::string> args, const RegisterFn& commands) {
  args.insert(args.begin(), "chamber");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  auto logger = spdlog::default_logger();
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Output o;
  o.code = Run(static_cast<int>(argv.size()), argv.data(), commands);
  std::cout.flush();
  o.out = ::testing::internal::GetCapturedStdout();
  o.err = ::testing::internal::GetCapturedStderr();
  spdlog::set_default_logger(logger);  // the CLI sets up its own
  return o;
}

// `name` in the temporary directory, prefixed with the running test's name: ctest runs each
// test as its own process, in parallel.
inline std::string TestPath(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "/" + test->test_suite_name() + "." + test->name() + "-" + name;
}

// The demo cluster (seed 11, no GPU faults, `load`) after 200 cycles, served with one read
// token. Call from SetUpTestSuite; ASSERTs end it early on failure.
inline void StartDemoApi(double load, const std::string& token,
                         std::unique_ptr<daemon::Daemon>* daemon,
                         std::unique_ptr<daemon::ApiServer>* server) {
  backend::DemoClusterOptions o;
  o.seed = 11;
  o.start_unix_ms = 1'790'000'040'000;
  o.gpu_mtbf_hours = 0;
  o.load = load;
  auto backend = std::move(backend::SimulatedBackend::Create(backend::DemoCluster(o))).value();
  *daemon = std::make_unique<daemon::Daemon>(std::move(backend), daemon::DaemonOptions{}, nullptr);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE((*daemon)->Tick().ok());
  auto tokens = daemon::TokenFileAuthenticator::Parse(token + " read\n", "t");
  daemon::ServerOptions so;
  so.port = 0;
  *server = std::make_unique<daemon::ApiServer>(
      **daemon, std::shared_ptr<daemon::Authenticator>(std::move(tokens).value()), so);
  ASSERT_TRUE((*server)->Start().ok());
}

}  // namespace chamber::cli::testing
