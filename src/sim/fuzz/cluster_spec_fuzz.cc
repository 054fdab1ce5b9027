// Simulated clusters (sim/cluster_spec.h, ParseClusterSpec): the YAML of `chamber sim
// --cluster`. Properties: an error names the file; pools that read have a name, no negative node
// or GPU count.
#include <cstddef>
#include <cstdint>

#include "common/fuzz/fuzz_check.h"
#include "sim/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<chamber::sim::ClusterSpec> spec =
      chamber::sim::ParseClusterSpec(fuzz::Text(data, size), "cluster.yaml");
  if (!spec.ok()) {
    fuzz::CheckError(spec.status(), "cluster.yaml");
    return 0;
  }
  for (const chamber::sim::NodePool& p : spec->pools) {
    fuzz::Check(!p.name.empty(), "a pool without a name");
    fuzz::Check(p.count >= 0 && p.gpus_per_node >= 0, "a negative node or GPU count", p.name);
  }
  return 0;
}
