// The engine configuration file (docs/configuration.md), read by chamberd, `chamber sim` and
// `chamber demo` alike.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "core/config.h"

namespace chamber::core::io {

// Parses YAML text; `source` names it in errors ("chamber.yaml:3:5: field ...").
Result<EngineConfig> ParseEngineConfig(std::string_view text, std::string_view source);
Result<EngineConfig> LoadEngineConfigFile(const std::string& path);
// The configuration as YAML, every field spelled out (`chamber config defaults`).
std::string EngineConfigToYaml(const EngineConfig& config);

}  // namespace chamber::core::io
