// What a live cluster's GPUs cost: the `pricing:` section of chamberd's configuration file
// (docs/fleet.md#prices-on-a-live-cluster), and the fleet pools it makes of the nodes.
//
// A node's GPUs are priced by the first rule that matches them: the rule's GPU model (if it
// names one) is the node's, and every label of its node selector is on the node with that value.
// A rule that does not set a pricing type takes it from the well-known capacity-type labels of
// its selector, else of the node (Karpenter, EKS, GKE, AKS), else on-demand. GPUs no rule
// matches cost `defaultPricePerGpuHour`, with the pricing type from the node's labels.
//
// Nodes whose GPUs share a model, pricing type, price and rule name form one pool, named
// "<model>/<pricing>" ("NVIDIA-H100-80GB-HBM3/spot"), or "<model>/<pricing>/<rule name>" for a
// named rule. Where an earlier rule (the default counts as the last) with the same name, or
// none, could give GPUs of that model and pricing type another price, the later one's pool
// carries "@<price>" too. The names depend on the configuration alone, never on which nodes
// exist, so they are stable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "fleet/fleet_model.h"

namespace chamber {
class ConfigFile;  // common/config_file.h
}  // namespace chamber

namespace chamber::backend {

using NodeLabels = std::vector<std::pair<std::string, std::string>>;

struct PriceRule {
  std::string name;                       // "": unnamed; else part of the pool name
  std::string gpu_model;                  // "": any model
  NodeLabels node_selector;               // every label must be on the node, equal
  std::optional<fleet::Pricing> pricing;  // empty: from the node's capacity-type labels
  double price_per_gpu_hour = 0;
};

struct PricingConfig {
  std::string currency = "USD";
  double default_price_per_gpu_hour = 0;  // GPUs no rule matches
  std::vector<PriceRule> rules;           // first match wins
};

// The pricing type the node's well-known labels say, if any: karpenter.sh/capacity-type
// (spot, on-demand, reserved), eks.amazonaws.com/capacityType (SPOT, ON_DEMAND,
// CAPACITY_BLOCK = reserved), cloud.google.com/gke-spot and cloud.google.com/gke-preemptible
// ("true" = spot), kubernetes.azure.com/scalesetpriority (spot, regular = on-demand). Values
// are compared without regard to case; the first label present in that order decides.
std::optional<fleet::Pricing> DetectPricing(const NodeLabels& labels);

// Parses "on-demand", "spot" or "reserved".
std::optional<fleet::Pricing> ParsePricing(std::string_view text);

struct NodePrice {
  int32_t rule = -1;  // index into PricingConfig::rules; -1: the default price
  fleet::Pricing pricing = fleet::Pricing::kOnDemand;
  double price_per_gpu_hour = 0;
};

// How the GPUs of a node with this model and these labels are priced.
NodePrice PriceNode(const PricingConfig& config, std::string_view gpu_model,
                    const NodeLabels& labels);

struct PoolAssignment {
  std::vector<fleet::PoolInput> pools;
  std::vector<int32_t> node_pool;  // per node: index into pools; -1 for a node without GPUs
};

// The fleet pools of these nodes. A node's model is its first GPU's, "gpu" when unknown. The
// pools of `known` (an earlier assignment's) come first, in their order and whether or not any
// node is still in them, so that a pool keeps its index (the daemon's per-pool totals follow
// it); new pools follow, sorted by name.
PoolAssignment AssignPools(const PricingConfig& config, const std::vector<core::Node>& nodes,
                           const std::vector<fleet::PoolInput>& known = {});

// Reads the configuration file's `pricing:` section (other sections are left to their readers);
// `found`, when given, says whether the file has one. Errors name file, line, column and field.
Result<PricingConfig> ReadPricingConfig(const ConfigFile& file, bool* found = nullptr);
// The same from a configuration file's text; `source` names it in errors.
Result<PricingConfig> ParsePricingConfig(std::string_view text, std::string_view source,
                                         bool* found = nullptr);
// The section as YAML, as `chamber config check` prints it.
std::string PricingConfigToYaml(const PricingConfig& c);

}  // namespace chamber::backend
