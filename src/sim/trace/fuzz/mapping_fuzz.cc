// Trace mapping rules (sim/trace/trace.h, ParseMappingRules): the YAML of `chamber sim
// --mapping`. Property: an error names the file.
#include <cstddef>
#include <cstdint>

#include "common/fuzz/fuzz_check.h"
#include "sim/trace/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<chamber::sim::MappingRules> rules =
      chamber::sim::ParseMappingRules(fuzz::Text(data, size), "mapping.yaml");
  if (!rules.ok()) fuzz::CheckError(rules.status(), "mapping.yaml");
  return 0;
}
