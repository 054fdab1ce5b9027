// Runs the CLI in-process, as `chamber <args>` with the given subcommands, and captures what it
// prints and its exit code.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "cli/command.h"

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

}  // namespace chamber::cli::testing
