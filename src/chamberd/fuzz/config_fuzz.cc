// The configuration file (docs/configuration.md) as chamberd reads it: parsed once
// (common/config_file.h), then the engine's fields (core/io/config_yaml.h), the `health:`
// section (health/health_controller.h) and the `pricing:` section (backend/kube/gpu_pricing.h).
// Properties: every error names the file; each section read writes out as YAML that reads back
// to the same section.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/kube/gpu_pricing.h"
#include "common/config_file.h"
#include "common/fuzz/fuzz_check.h"
#include "core/io/config_yaml.h"
#include "health/health_controller.h"

namespace {

constexpr std::string_view kSource = "chamber.yaml";

// `read` parses a whole file's text; `to_yaml` writes what it read.
template <typename Read, typename ToYaml>
void CheckRoundTrip(const chamber::ConfigFile& file, Read read, ToYaml to_yaml,
                    std::string_view section) {
  namespace fuzz = chamber::fuzz;
  auto first = read(file);
  if (!first.ok()) {
    fuzz::CheckError(first.status(), kSource);
    return;
  }
  const std::string yaml = to_yaml(*first);
  chamber::Result<chamber::ConfigFile> again = chamber::ConfigFile::Parse(yaml, "written.yaml");
  fuzz::Check(again.ok(), "the written configuration does not parse", yaml);
  auto second = read(*again);
  fuzz::Check(second.ok(), "the written configuration does not read back",
              std::string(section) + ":\n" + yaml +
                  (second.ok() ? std::string() : "\n" + second.status().message()));
  fuzz::Check(to_yaml(*second) == yaml, "the configuration changes on a round trip", yaml);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<chamber::ConfigFile> file =
      chamber::ConfigFile::Parse(fuzz::Text(data, size), std::string(kSource));
  if (!file.ok()) {
    fuzz::CheckError(file.status(), kSource);
    return 0;
  }
  CheckRoundTrip(
      *file, [](const chamber::ConfigFile& f) { return chamber::core::io::ReadEngineConfig(f); },
      [](const auto& c) { return chamber::core::io::EngineConfigToYaml(c); }, "engine");
  CheckRoundTrip(
      *file, [](const chamber::ConfigFile& f) { return chamber::health::ReadHealthConfig(f); },
      [](const auto& c) { return chamber::health::HealthConfigToYaml(c); }, "health");
  CheckRoundTrip(
      *file, [](const chamber::ConfigFile& f) { return chamber::backend::ReadPricingConfig(f); },
      [](const auto& c) { return chamber::backend::PricingConfigToYaml(c); }, "pricing");
  return 0;
}
