// Synthetic clusters for benchmarks and load tests: a seeded, deterministic generator of engine
// snapshots shaped like a large GPU fleet.
//
// The cluster:
//   - `nodes` nodes of `gpus_per_node` GPUs each, in blocks of `nodes_per_block` nodes, blocks
//     spread evenly over `zones` zones and, optionally, multi-node NVLink domains of
//     `nvlink_domain_nodes` nodes inside each block. Every block has one GPU model, drawn from
//     `gpu_models` models (H100, A100, H200 in weights 5:3:2). CPU and memory are sized so that
//     GPUs always run out first.
//   - `queues` team queues (the leaves) under departments of `teams_per_department` teams each.
//     GPU quotas split the cluster's capacity exactly (departments, then their teams, by random
//     weights); a third of the teams have a limit of twice their quota.
//   - `pods` pods in workloads of `gang_size` pods (gang_size 1: single pods), each pod asking
//     for `gpus_per_pod` GPUs; `pinned_model_fraction` of workloads name the GPU model they need.
//     `running_fraction` of the workloads run, placed on free GPUs as a scheduler would have
//     placed them (a gang on one node when one of a few random picks has room), never more than
//     the cluster holds; the rest wait, submitted in the last hour.
//
// Two load shapes:
//   - steady (churn = false): running work sits within every queue's quota, and waiting work is
//     never of a higher priority than the running work of its queue, so a cycle places what fits
//     and explains the rest without preempting (unless fair share lets a queue borrow early).
//   - churn (churn = true): even-numbered teams ("lenders") run a quarter of their quota, the
//     odd-numbered ("borrowers", without limits) run the rest of the running work, far beyond
//     their quota; all waiting work belongs to lenders and is within their quota, so once free
//     capacity is gone the cycle must reclaim from borrowers. Choose `running_fraction` so the
//     running work nearly fills the cluster (pods * running_fraction ~ nodes * gpus_per_node).
//
// Priorities: running work is priority 50 (a borrower's in churn mode: 0 or 50), or reserved
// (priority 100) when within quota; waiting work is 0 or 50, and in churn mode also reserved.
//
// Randomness comes from std::mt19937_64 seeded with `seed` and turned into numbers by hand (not
// std::*_distribution, whose output differs between standard libraries), so a spec gives the
// same snapshot everywhere.
#pragma once

#include <cstdint>
#include <string>

#include "core/model.h"

namespace chamber::core {

struct SyntheticSpec {
  int32_t nodes = 1000;
  int32_t gpus_per_node = 8;
  int32_t nodes_per_block = 32;
  int32_t zones = 3;
  int32_t nvlink_domain_nodes = 0;  // 0: no multi-node NVLink domains
  int32_t gpu_models = 3;           // 1 to 3

  int32_t queues = 50;  // team (leaf) queues
  int32_t teams_per_department = 10;

  int32_t pods = 10000;  // running plus waiting; rounded down to whole workloads
  int32_t gang_size = 1;
  int32_t gpus_per_pod = 1;
  double running_fraction = 0.5;
  double pinned_model_fraction = 0.2;
  bool churn = false;
  // Waiting pods ask for a share of one GPU instead (a tenth to seven tenths, most below a half,
  // as the fragmentation literature's production traces have them), with an eighth of a one-GPU
  // pod's CPU and memory. Running work stays whole GPUs, except in churn mode with single pods
  // of one GPU: there each GPU a running workload would hold is filled with shares of its team,
  // each a running workload of its own, so that waiting shares reclaim shares.
  bool shares = false;

  uint64_t seed = 1;
};

// Why the spec cannot be generated (a count out of range), or an empty string.
std::string ValidateSyntheticSpec(const SyntheticSpec& spec);

// The snapshot the spec describes. The spec must be valid (ValidateSyntheticSpec).
Snapshot MakeSyntheticCluster(const SyntheticSpec& spec);

}  // namespace chamber::core
