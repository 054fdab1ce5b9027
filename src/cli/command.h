// The chamber command line: a root CLI11 app with global flags, and subcommands that each live
// in their own src/cli/<name>_command.cc and register themselves through a Register function.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace chamber::cli {

// Process exit codes of the chamber binary.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,  // the command ran and failed
  kExitUsage = 2,    // bad flags or arguments; nothing ran
};

// What a subcommand does once flags are parsed and logging is set up. Output goes to stdout;
// a non-OK Status is printed to stderr as "chamber: <status>" and exits with kExitFailure.
using RunFn = std::function<Status()>;

// Collects the subcommands and their run functions.
class CommandRegistry {
 public:
  explicit CommandRegistry(CLI::App& root) : root_(root) {}

  CLI::App& root() { return root_; }

  // Adds subcommand `name` under `parent` (the root or a command group such as "bench") and
  // returns it so the caller can declare its flags. `run` executes when it is selected.
  CLI::App* Add(CLI::App& parent, const std::string& name, const std::string& description,
                RunFn run);
  CLI::App* Add(const std::string& name, const std::string& description, RunFn run) {
    return Add(root_, name, description, std::move(run));
  }

  // The run function of the subcommand selected by the parsed command line, or null if none.
  const RunFn* Selected() const;

 private:
  CLI::App& root_;
  std::vector<std::pair<CLI::App*, RunFn>> commands_;
};

// Registers every subcommand; defined in main.cc.
using RegisterFn = std::function<void(CommandRegistry&)>;

// Parses the command line, sets up logging and runs the selected subcommand. Returns the exit
// code. With no subcommand it prints help to stderr and returns kExitUsage.
int Run(int argc, const char* const* argv, const RegisterFn& register_commands);

// One Register function per subcommand file, called from main.cc.
void RegisterScheduleCommand(CommandRegistry& registry);
void RegisterConfigCommand(CommandRegistry& registry);
void RegisterSimCommand(CommandRegistry& registry);
void RegisterBenchCommand(CommandRegistry& registry);
void RegisterDemoCommand(CommandRegistry& registry);
void RegisterSoakCommand(CommandRegistry& registry);
void RegisterStatusCommand(CommandRegistry& registry);
void RegisterNodesCommand(CommandRegistry& registry);
void RegisterCostCommand(CommandRegistry& registry);
void RegisterQueuesCommand(CommandRegistry& registry);
void RegisterWorkloadsCommand(CommandRegistry& registry);
void RegisterWhyCommand(CommandRegistry& registry);
void RegisterHealthCommand(CommandRegistry& registry);

}  // namespace chamber::cli
