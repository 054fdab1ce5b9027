// `chamber config`: show the engine configuration's defaults, or check a configuration file.
#include <iostream>
#include <memory>
#include <string>

#include "backend/kube/gpu_pricing.h"
#include "cli/command.h"
#include "common/config_file.h"
#include "core/io/config_yaml.h"
#include "health/health_controller.h"

namespace chamber::cli {

void RegisterConfigCommand(CommandRegistry& registry) {
  CLI::App* group = registry.root().add_subcommand("config", "Engine configuration");
  group->require_subcommand(1);
  registry.Add(*group, "defaults", "Print every configuration field with its default", [] {
    std::cout << core::io::EngineConfigToYaml(core::EngineConfig{});
    return Status::Ok();
  });
  auto path = std::make_shared<std::string>();
  CLI::App* check = registry.Add(
      *group, "check", "Validate a configuration file and print it with defaults filled in",
      [path]() -> Status {
        CHAMBER_ASSIGN_OR_RETURN(const ConfigFile file, ConfigFile::Load(*path));
        CHAMBER_ASSIGN_OR_RETURN(core::EngineConfig c, core::io::ReadEngineConfig(file));
        // chamberd's health controller reads the `health:` section (docs/health.md).
        bool health = false;
        CHAMBER_ASSIGN_OR_RETURN(health::HealthControllerConfig h,
                                 health::ReadHealthConfig(file, &health));
        // ... and its fleet pools the `pricing:` section (docs/fleet.md).
        bool pricing = false;
        CHAMBER_ASSIGN_OR_RETURN(backend::PricingConfig p,
                                 backend::ReadPricingConfig(file, &pricing));
        std::cout << core::io::EngineConfigToYaml(c);
        if (health) std::cout << health::HealthConfigToYaml(h);
        if (pricing) std::cout << backend::PricingConfigToYaml(p);
        return Status::Ok();
      });
  check->add_option("file", *path, "Configuration YAML")->required();
}

}  // namespace chamber::cli
