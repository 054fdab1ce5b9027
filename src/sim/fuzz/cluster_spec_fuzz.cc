// Simulated clusters (sim/cluster_spec.h, ParseClusterSpec): the YAML of `chamber sim
// --cluster`. Properties: an error names the file; pools that read have a name, no negative node
// or GPU count, no more GPUs in MIG mode than the node has and a layout of known profiles, at
// most kMaxMigProfiles in all.
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
    fuzz::Check(p.mig_gpus >= 0 && p.mig_gpus <= p.gpus_per_node,
                "more GPUs in MIG mode than the node has", p.name);
    fuzz::Check(p.mig_gpus == 0 || !p.mig_devices.empty(), "GPUs in MIG mode without devices",
                p.name);
  }
  const auto profiles = spec->MigProfiles();
  fuzz::Check(profiles.size() <= static_cast<size_t>(chamber::core::kMaxMigProfiles),
              "more MIG profiles than a snapshot holds");
  for (const chamber::core::MigResource& m : profiles)
    fuzz::Check(m.milli > 0 && m.milli <= 1000, "a MIG profile charged outside (0, 1000]", m.name);
  return 0;
}
