// The simulated cluster: node pools described in YAML, or an Alibaba openb node list CSV.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace chamber::sim {

enum class PricingType { kOnDemand, kSpot, kReserved };
std::string_view PricingTypeName(PricingType p);

struct NodePool {
  std::string name;
  int32_t count = 1;
  int32_t gpus_per_node = 8;
  std::string gpu_model;
  int64_t gpu_memory_bytes = 0;
  int64_t cpu_milli = 0;     // 0: unlimited for scheduling purposes
  int64_t memory_bytes = 0;  // 0: unlimited for scheduling purposes
  std::string zone;
  int32_t nodes_per_block = 0;          // > 0: nodes are grouped into blocks (racks) of this size
  int32_t nodes_per_nvlink_domain = 0;  // > 0: multi-node NVLink domains of this size
  double price_per_gpu_hour = 0;
  PricingType pricing = PricingType::kOnDemand;
  std::vector<core::Taint> taints;
  std::vector<std::pair<std::string, std::string>> labels;
  // The last `mig_gpus` GPUs of each node are in MIG mode, each divided into `mig_devices`
  // (profile, count), as the device plugin's mixed strategy advertises them: the node's MIG
  // devices, not those GPUs.
  int32_t mig_gpus = 0;
  std::vector<std::pair<std::string, int32_t>> mig_devices;
};

struct ClusterSpec {
  std::vector<NodePool> pools;
  int64_t TotalGpus() const;  // every GPU, in MIG mode or not
  // The MIG profiles the pools' layouts name, in name order, with their charge: the snapshot's
  // `mig_profiles`, which BuildNodes' nodes index.
  std::vector<core::MigResource> MigProfiles() const;
  int64_t MigGpus() const;  // GPUs in MIG mode
};

// YAML: `pools: [{name, count, gpusPerNode, gpuModel, gpuMemory, cpu, memory, zone,
// nodesPerBlock, nodesPerNvlinkDomain, price: {perGpuHour, type}, taints, labels,
// mig: {gpus, devices: {<profile>: <count>}}}]`. A MIG layout must be one the GPU model has
// (core/gpu_share.h's tables: A100 40GB and 80GB, H100 80GB) and fit on one GPU.
Result<ClusterSpec> ParseClusterSpec(std::string_view text, std::string_view source);
// A path ending in .csv is read as an openb node list (sn,cpu_milli,memory_mib,gpu,model), one
// pool per node; anything else as YAML.
Result<ClusterSpec> LoadClusterSpec(const std::string& path);

// Nodes named <pool>-<i>, with GPUs, topology, taints and labels (label chamber.io/pool); GPUs in
// MIG mode as the node's MIG devices, indexed by spec.MigProfiles().
std::vector<core::Node> BuildNodes(const ClusterSpec& spec);

}  // namespace chamber::sim
