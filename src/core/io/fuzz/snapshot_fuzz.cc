// Snapshot files (core/io/snapshot_yaml.h): what `chamber schedule` reads. Property: an error
// names the file.
#include <cstddef>
#include <cstdint>

#include "common/fuzz/fuzz_check.h"
#include "core/io/snapshot_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<chamber::core::Snapshot> s =
      chamber::core::io::ParseSnapshot(fuzz::Text(data, size), "snapshot.yaml");
  if (!s.ok()) fuzz::CheckError(s.status(), "snapshot.yaml");
  return 0;
}
