#include "cli/command.h"

namespace {

// Every subcommand is registered here, in the order `chamber --help` lists them.
void RegisterCommands(chamber::cli::CommandRegistry& commands) {
  chamber::cli::RegisterDemoCommand(commands);
  chamber::cli::RegisterSoakCommand(commands);
  chamber::cli::RegisterStatusCommand(commands);
  chamber::cli::RegisterNodesCommand(commands);
  chamber::cli::RegisterCostCommand(commands);
  chamber::cli::RegisterQueuesCommand(commands);
  chamber::cli::RegisterWorkloadsCommand(commands);
  chamber::cli::RegisterWhyCommand(commands);
  chamber::cli::RegisterHealthCommand(commands);
  chamber::cli::RegisterScheduleCommand(commands);
  chamber::cli::RegisterSimCommand(commands);
  chamber::cli::RegisterConfigCommand(commands);
  chamber::cli::RegisterBenchCommand(commands);
}

}  // namespace

int main(int argc, char** argv) { return chamber::cli::Run(argc, argv, RegisterCommands); }
