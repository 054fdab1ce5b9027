// Snapshots from YAML (docs/engine.md, "Snapshot files"): what `chamber schedule` reads, and
// the form of the built-in example.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "core/model.h"

namespace chamber::core::io {

Result<Snapshot> ParseSnapshot(std::string_view text, std::string_view source);
Result<Snapshot> LoadSnapshotFile(const std::string& path);

}  // namespace chamber::core::io
