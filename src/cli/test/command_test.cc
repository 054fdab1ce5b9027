#include "cli/command.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

namespace chamber::cli {
namespace {

// Runs the CLI on `args` (without the program name) with the given commands registered.
int RunWith(std::vector<std::string> args, const RegisterFn& register_commands) {
  args.insert(args.begin(), "chamber");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return Run(static_cast<int>(argv.size()), argv.data(), register_commands);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_logger_ = spdlog::default_logger(); }
  void TearDown() override { spdlog::set_default_logger(saved_logger_); }

  // Registers "greet" (flag --name) and the group "bench" with "bench engine"; both record
  // that they ran and return `result`.
  RegisterFn Commands(const Status& result) {
    return [this, result](CommandRegistry& commands) {
      CLI::App* greet = commands.Add("greet", "Greets", [this, result] {
        ran_.push_back("greet " + name_);
        return result;
      });
      greet->add_option("--name", name_);
      CLI::App* bench = commands.root().add_subcommand("bench", "Benchmarks");
      commands.Add(*bench, "engine", "Engine benchmark", [this, result] {
        ran_.emplace_back("bench engine");
        return result;
      });
    };
  }

  std::vector<std::string> ran_;
  std::string name_;

 private:
  std::shared_ptr<spdlog::logger> saved_logger_;
};

TEST_F(CliTest, RunsSelectedCommandWithItsFlags) {
  EXPECT_EQ(RunWith({"greet", "--name", "ada"}, Commands(Status::Ok())), kExitOk);
  EXPECT_EQ(ran_, std::vector<std::string>{"greet ada"});
}

TEST_F(CliTest, RunsNestedCommand) {
  EXPECT_EQ(RunWith({"bench", "engine"}, Commands(Status::Ok())), kExitOk);
  EXPECT_EQ(ran_, std::vector<std::string>{"bench engine"});
}

TEST_F(CliTest, FailedCommandExitsWithFailure) {
  EXPECT_EQ(RunWith({"greet"}, Commands(Status::NotFound("snapshot.json"))), kExitFailure);
  EXPECT_EQ(ran_.size(), 1U);
}

TEST_F(CliTest, ThrowingCommandExitsWithFailure) {
  const RegisterFn throwing = [](CommandRegistry& commands) {
    commands.Add("boom", "Throws", []() -> Status { throw std::runtime_error("boom"); });
  };
  EXPECT_EQ(RunWith({"boom"}, throwing), kExitFailure);
}

TEST_F(CliTest, NoCommandIsUsageError) {
  EXPECT_EQ(RunWith({}, Commands(Status::Ok())), kExitUsage);
  EXPECT_EQ(RunWith({"bench"}, Commands(Status::Ok())), kExitUsage);
  EXPECT_TRUE(ran_.empty());
}

TEST_F(CliTest, UnknownFlagOrCommandIsUsageError) {
  EXPECT_EQ(RunWith({"--frobnicate"}, Commands(Status::Ok())), kExitUsage);
  EXPECT_EQ(RunWith({"frobnicate"}, Commands(Status::Ok())), kExitUsage);
  EXPECT_EQ(RunWith({"greet", "--name"}, Commands(Status::Ok())), kExitUsage);
  EXPECT_TRUE(ran_.empty());
}

TEST_F(CliTest, HelpAndVersionSucceedWithoutRunning) {
  EXPECT_EQ(RunWith({"--help"}, Commands(Status::Ok())), kExitOk);
  EXPECT_EQ(RunWith({"--version"}, Commands(Status::Ok())), kExitOk);
  EXPECT_EQ(RunWith({"greet", "--help"}, Commands(Status::Ok())), kExitOk);
  EXPECT_TRUE(ran_.empty());
}

TEST_F(CliTest, BadLogLevelIsUsageErrorAndRunsNothing) {
  EXPECT_EQ(RunWith({"--log-level", "loud", "greet"}, Commands(Status::Ok())), kExitUsage);
  EXPECT_TRUE(ran_.empty());
}

TEST_F(CliTest, LogLevelConfiguresDefaultLogger) {
  EXPECT_EQ(RunWith({"--log-level", "debug", "greet"}, Commands(Status::Ok())), kExitOk);
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
}

}  // namespace
}  // namespace chamber::cli
