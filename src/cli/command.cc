#include "cli/command.h"

#include <exception>
#include <iostream>
#include <string>

#include "common/log.h"
#include "common/version.h"

namespace chamber::cli {

CLI::App* CommandRegistry::Add(CLI::App& parent, const std::string& name,
                               const std::string& description, RunFn run) {
  CLI::App* command = parent.add_subcommand(name, description);
  commands_.emplace_back(command, std::move(run));
  return command;
}

namespace {

int Depth(const CLI::App* app) {
  int depth = 0;
  for (; app->get_parent() != nullptr; app = app->get_parent()) ++depth;
  return depth;
}

// The most deeply nested subcommand on the command line: "bench" for `chamber bench`,
// "engine" for `chamber bench engine`.
const CLI::App& DeepestParsed(const CLI::App& app) {
  const CLI::App* current = &app;
  while (!current->get_subcommands().empty()) current = current->get_subcommands().front();
  return *current;
}

}  // namespace

const RunFn* CommandRegistry::Selected() const {
  const RunFn* selected = nullptr;
  int selected_depth = -1;
  for (const auto& [command, run] : commands_) {
    if (command->parsed() && Depth(command) > selected_depth) {
      selected = &run;
      selected_depth = Depth(command);
    }
  }
  return selected;
}

int Run(int argc, const char* const* argv, const RegisterFn& register_commands) {
  CLI::App app{"Chamber: GPU fleet scheduling for Kubernetes.", "chamber"};
  app.set_version_flag("--version", "chamber " CHAMBER_VERSION " (" CHAMBER_GIT_COMMIT ")",
                       "Print the version and exit");
  app.require_subcommand(0, 1);

  logging::LogOptions log_options;
  app.add_option("--log-level", log_options.level,
                 "Log level: trace, debug, info, warn, error, critical or off")
      ->capture_default_str();

  CommandRegistry registry(app);
  register_commands(registry);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == static_cast<int>(CLI::ExitCodes::Success) ? kExitOk : kExitUsage;
  }

  if (const Status status = logging::Setup(log_options); !status.ok()) {
    std::cerr << "chamber: --log-level: " << status.message() << "\n";
    return kExitUsage;
  }

  const RunFn* run = registry.Selected();
  if (run == nullptr) {
    std::cerr << DeepestParsed(app).help();
    return kExitUsage;
  }
  Status status;
  try {
    status = (*run)();
  } catch (const std::exception& e) {
    // Commands return Status; an exception reaching here is a bug, reported rather than aborted.
    status = Status::Internal(e.what());
  }
  if (!status.ok()) {
    std::cerr << "chamber: " << status.ToString() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace chamber::cli
