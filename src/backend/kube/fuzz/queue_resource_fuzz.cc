// Queue custom resources as the API server returns them (backend/kube/queue_resource.h): the
// spec into the engine's queue, and status.decayedUsage. Properties: an error names the queue
// or the object; a queue that reads has a name, quotas that are not negative, limits (when set)
// not below the quota, and weights that are numbers not below 0.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/kube/queue_resource.h"
#include "common/fuzz/fuzz_check.h"
#include "core/gpu_model_queues.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  const nlohmann::json object =
      nlohmann::json::parse(fuzz::Text(data, size), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return 0;
  chamber::Result<chamber::core::Queue> q = chamber::backend::QueueFromResource(object);
  if (!q.ok()) {
    const std::string& m = q.status().message();
    fuzz::Check(m.rfind("queue ", 0) == 0 || m.rfind("Queue object: ", 0) == 0,
                "the error does not name the queue", m);
  } else {
    fuzz::Check(!q->name.empty(), "a queue without a name");
    for (const chamber::core::QueueResource& r : q->resources) {
      fuzz::Check(r.quota >= 0, "a negative quota", q->name);
      fuzz::Check(r.limit == chamber::core::kUnlimited || r.limit >= r.quota,
                  "a limit below the quota", q->name);
      fuzz::Check(r.over_quota_weight >= 0, "a negative or NaN over-quota weight", q->name);
    }
    // A list of GPU models that reads is one the engine accepts, and splits into one queue per
    // model, each with the model's quantities.
    fuzz::Check(chamber::core::CheckGpuModels(*q).empty(), "GPU models the engine refuses",
                chamber::core::CheckGpuModels(*q));
    if (!q->gpu_models.empty()) {
      chamber::core::Snapshot s;
      s.queues.push_back(*q);
      s.queues.back().parent.clear();
      chamber::core::SplitGpuModelQueues(s);
      fuzz::Check(s.queues.size() == q->gpu_models.size() + 1 && s.queues[0].gpu_models.empty(),
                  "GPU models not split into one queue each", q->name);
      for (size_t i = 0; i < q->gpu_models.size() && i + 1 < s.queues.size(); ++i)
        fuzz::Check(s.queues[i + 1].res(chamber::core::Resource::kGpu) == q->gpu_models[i].gpu &&
                        s.queues[i + 1].parent == q->name,
                    "a queue per model without its model's quantities", q->name);
    }
  }
  const std::optional<chamber::backend::StoredUsage> usage =
      chamber::backend::DecayedUsageFromResource(object);
  if (usage) {
    fuzz::Check(std::isfinite(usage->gpu_hours) && usage->gpu_hours >= 0,
                "stored usage that is not a finite number of GPU-hours, at least 0");
  }
  return 0;
}
