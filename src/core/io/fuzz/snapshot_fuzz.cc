// Snapshot files (core/io/snapshot_yaml.h): what `chamber schedule` reads. Properties: an error
// names the file; a snapshot that reads names at most kMaxMigProfiles MIG profiles, each charged
// within (0, 1000], and every pod set's MIG ask names one of them with its charge, beside no GPU.
#include <cstddef>
#include <cstdint>

#include "common/fuzz/fuzz_check.h"
#include "core/io/snapshot_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<chamber::core::Snapshot> s =
      chamber::core::io::ParseSnapshot(fuzz::Text(data, size), "snapshot.yaml");
  if (!s.ok()) {
    fuzz::CheckError(s.status(), "snapshot.yaml");
    return 0;
  }
  namespace core = chamber::core;
  fuzz::Check(s->mig_profiles.size() <= static_cast<size_t>(core::kMaxMigProfiles),
              "more MIG profiles than a snapshot holds");
  for (const core::MigResource& m : s->mig_profiles)
    fuzz::Check(m.milli > 0 && m.milli <= 1000, "a MIG profile charged outside (0, 1000]", m.name);
  for (const core::Workload& w : s->workloads)
    for (const core::PodSet& ps : w.pod_sets) {
      if (ps.mig.profile < 0) continue;
      fuzz::Check(ps.mig.any() && static_cast<size_t>(ps.mig.profile) < s->mig_profiles.size(),
                  "a MIG ask of no profile", w.name);
      fuzz::Check(ps.mig.milli == s->mig_profiles[static_cast<size_t>(ps.mig.profile)].milli &&
                      ps.request.gpu_milli() == 0,
                  "a MIG ask charged other than its profile, or beside GPUs", w.name);
    }
  return 0;
}
