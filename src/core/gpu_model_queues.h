// Quotas per GPU model (docs/queues.md, "GPU models"): a leaf queue that lists GPU models, each
// with its own GPU quota, becomes before the cycle the parent of one queue per model. Every
// promise of the queue tree (docs/fairness.md) then holds per model: quota, limit, lending limit,
// reclaim and fair share count the GPUs of that model alone.
#pragma once

#include <string>
#include <string_view>

#include "core/model.h"

namespace chamber::core {

// A queue per model is named "<queue>/<model>" ("research/H100-SXM5-80GB").
inline constexpr char kGpuModelQueueSeparator = '/';

// Splits each leaf queue with GPU model quotas (Queue::gpu_models) into one child queue per
// model, in the order listed: the child has the model's GPU quota, limit, weight and lending
// limit, and the parent's priority, queueing and preemption policy (the first child also its
// decayed usage, which parents add up from their children); the parent keeps its own
// resources (a GPU quota of 0 groups its models: its effective quota is their sum) and loses
// its list. Each workload of such a queue goes to one of its models' queues, and its pods that
// ask for GPUs may then use GPUs of that model only:
//   - running work, to the queue of the model of the node it runs on;
//   - waiting work, to the first model (in the queue's order) that its pods allow and on which
//     its GPUs stay within quota; else the first on which they stay within the model's limit
//     and the cluster has that many GPUs of the model free; else the first within the limit;
//     else the first it allows. Work that allows none of the queue's models waits as an invalid
//     workload, with the models named.
//   - work that asks for no GPU goes to the first model's queue and keeps its pods' models.
// MIG devices count as GPUs of the model of their node's GPUs in MIG mode (Node::mig_model),
// by their charge; a node that does not name it counts for no model.
// A queue that has children, or whose list is invalid, is left as it is: the engine rejects it
// with the reason (QueueTree).
void SplitGpuModelQueues(Snapshot& s);

// What is wrong with a queue's list of GPU models (empty: nothing), naming the field:
// "resources.gpu.models[H100].limit 4 is below quota 8".
std::string CheckGpuModels(const Queue& q);

// The queue that a queue per model belongs to ("research" for "research/H100-SXM5-80GB"); the
// name itself for any other queue.
std::string_view GpuModelQueueOwner(std::string_view name);

}  // namespace chamber::core
