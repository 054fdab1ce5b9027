// Queue files (core/io/queue_yaml.h): Queue objects, a List of them, or a `queues:` list, as
// `chamber sim` and `chamber schedule` read them. Properties: an error names the file; queues
// that parse have a name, quotas that are not negative, limits (when set) not below the quota,
// and weights that are numbers not below 0.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/fuzz/fuzz_check.h"
#include "core/io/queue_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<std::vector<chamber::core::Queue>> queues =
      chamber::core::io::ParseQueues(fuzz::Text(data, size), "queues.yaml");
  if (!queues.ok()) {
    fuzz::CheckError(queues.status(), "queues.yaml");
    return 0;
  }
  for (const chamber::core::Queue& q : *queues) {
    fuzz::Check(!q.name.empty(), "a queue without a name");
    for (const chamber::core::QueueResource& r : q.resources) {
      fuzz::Check(r.quota >= 0, "a negative quota", q.name);
      fuzz::Check(r.limit == chamber::core::kUnlimited || r.limit >= r.quota,
                  "a limit below the quota", q.name);
      fuzz::Check(r.over_quota_weight >= 0, "a negative or NaN over-quota weight", q.name);
    }
  }
  return 0;
}
