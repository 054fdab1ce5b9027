// The one logging setup. Binaries call Setup once at start; everything else logs through
// spdlog's default logger (spdlog::info, spdlog::warn, ...). The engine core does not log.
#pragma once

#include <memory>
#include <string>

#include <spdlog/formatter.h>

#include "common/status.h"

namespace chamber::logging {

struct LogOptions {
  std::string level = "info";  // trace, debug, info, warn, error, critical or off
  bool json = false;           // one JSON object per line instead of text
};

// Points spdlog's default logger at stderr with the chosen level and format. Returns
// InvalidArgument, naming the level, when the level is unknown; the logger is unchanged then.
Status Setup(const LogOptions& options);

// The line format Setup installs. Text: "2025-01-31T12:00:00.123+00:00 info [chamber] message".
// JSON: {"time":"2025-01-31T12:00:00.123Z","level":"info","logger":"chamber","msg":"message"}.
std::unique_ptr<spdlog::formatter> MakeFormatter(bool json);

}  // namespace chamber::logging
