#include "sim/policy.h"

#include <memory>

#include "core/placement_baselines.h"

namespace chamber::sim {

const std::vector<std::string_view>& PolicyNames() {
  static const std::vector<std::string_view> kNames = {"chamber", "fifo", "kube-default",
                                                       "drf",     "las",  "quota"};
  return kNames;
}

std::string_view PolicyDescription(std::string_view name) {
  if (name == "chamber")
    return "fair share, gangs, topology bin packing, reclaim and priority preemption";
  if (name == "fifo") return "one strict FIFO queue, first fit, gangs, no preemption";
  if (name == "kube-default") return "pods one by one, least allocated, no gangs, no quotas";
  if (name == "drf") return "dominant resource fairness across queues, no quotas, no preemption";
  if (name == "las") return "Tiresias-style least attained service with preemption, one queue";
  if (name == "quota")
    return "Kueue-style nominal quota, borrowing and reclaim, FIFO across queues";
  return "";
}

int32_t AttainedServicePriority(double gpu_hours) {
  if (gpu_hours < 1) return 90;
  if (gpu_hours < 16) return 60;
  if (gpu_hours < 256) return 30;
  return 0;
}

Result<SimPolicy> MakePolicy(std::string_view name, const core::EngineConfig& base) {
  SimPolicy p;
  p.name = std::string(name);
  p.config = base;
  p.policies = core::DefaultPolicies();
  if (name == "chamber") return p;
  if (name == "fifo") {
    p.one_queue = true;
    p.ignore_priority = true;
    p.config.default_queueing = core::QueueingStrategy::kStrictFifo;
    p.config.reclaim_enabled = false;
    p.config.priority_preemption_enabled = false;
    p.policies.placement = std::make_shared<core::FirstFitPlacement>();
    return p;
  }
  if (name == "kube-default") {
    p.one_queue = true;
    p.per_pod = true;
    p.config.default_queueing = core::QueueingStrategy::kBestEffort;
    p.config.reclaim_enabled = false;
    p.config.priority_preemption_enabled = false;
    p.policies.placement = std::make_shared<core::LeastAllocatedPlacement>();
    return p;
  }
  if (name == "drf") {
    p.quotas = false;
    p.ignore_priority = true;
    p.config.queue_order = core::QueueOrder::kDominantShare;
    p.config.reclaim_enabled = false;
    p.config.priority_preemption_enabled = false;
    return p;
  }
  if (name == "las") {
    p.one_queue = true;
    p.attained_service = true;
    p.config.reclaim_enabled = false;
    p.config.priority_preemption_enabled = true;
    return p;
  }
  if (name == "quota") {
    p.config.queue_order = core::QueueOrder::kOldestHead;
    p.config.usage_half_life = core::Duration(0);
    return p;
  }
  std::string known;
  for (std::string_view n : PolicyNames()) known += (known.empty() ? "" : ", ") + std::string(n);
  return Status::InvalidArgument("unknown policy \"" + std::string(name) + "\" (known: " + known +
                                 ")");
}

}  // namespace chamber::sim
