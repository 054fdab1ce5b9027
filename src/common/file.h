// Whole-file reads for configuration files, snapshots, traces and kubeconfigs.
#pragma once

#include <string>

#include "common/status.h"

namespace chamber {

// Reads a whole file; the error names the path and the system's reason
// ("chamber.yaml: No such file or directory").
Result<std::string> ReadFile(const std::string& path);

}  // namespace chamber
