// The engine's part of the configuration file (docs/configuration.md), read by chamberd,
// `chamber sim`, `chamber demo` and `chamber schedule` alike.
#pragma once

#include <string>
#include <string_view>

#include "common/config_file.h"
#include "common/status.h"
#include "core/config.h"

namespace chamber::core::io {

// The engine's fields: the file's top level (`health:` and `pricing:` are chamberd's sections,
// left to their readers). An empty file means every default.
Result<EngineConfig> ReadEngineConfig(const ConfigFile& file);
// The same from YAML text; `source` names it in errors ("chamber.yaml:3:5: field ...").
Result<EngineConfig> ParseEngineConfig(std::string_view text, std::string_view source);
// The configuration as YAML, every field spelled out (`chamber config defaults`).
std::string EngineConfigToYaml(const EngineConfig& config);

}  // namespace chamber::core::io
