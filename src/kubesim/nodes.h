// Fake GPU nodes: Node objects that look like registered, Ready GPU machines, for a control
// plane without kubelets. They carry the label chamber.io/fake-node=true, which is how the
// simulator and DeleteFakeNodes find them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/types.h"

namespace chamber::kubesim {

inline constexpr char kFakeNodeLabel[] = "chamber.io/fake-node";
inline constexpr char kFakeNodeSelector[] = "chamber.io/fake-node=true";
inline constexpr char kGpuResource[] = "nvidia.com/gpu";
inline constexpr char kGpuProductLabel[] = "nvidia.com/gpu.product";

// A pool of identical nodes named "<prefix>-<first_index>" ... "<prefix>-<first_index+count-1>".
struct NodePoolSpec {
  int count = 1;
  int first_index = 0;
  std::string prefix = "fake-gpu";
  int gpus = 8;
  std::string gpu_model = "NVIDIA-H100-80GB-HBM3";
  std::string cpu = "96";      // a Kubernetes quantity
  std::string memory = "1Ti";  // a Kubernetes quantity
  int pods = 110;
  std::map<std::string, std::string> labels;  // extra labels, e.g. topology.kubernetes.io/zone
  std::vector<kube::Taint> taints;
  // Extended resources it advertises besides its GPUs, e.g. MIG devices of the NVIDIA device
  // plugin's mixed strategy: {"nvidia.com/mig-1g.10gb", "7"}.
  std::map<std::string, std::string> resources;
};

// Checks counts, names and quantities; errors name the field.
Status Validate(const NodePoolSpec& spec);

// "key=value" (a label). Errors name `what` (e.g. "--label").
Result<std::pair<std::string, std::string>> ParseLabel(std::string_view text,
                                                       std::string_view what);
// "key[=value]:Effect", Effect one of NoSchedule, PreferNoSchedule, NoExecute.
Result<kube::Taint> ParseTaint(std::string_view text, std::string_view what);

std::string FakeNodeName(const NodePoolSpec& spec, int index);
// The InternalIP of node number `index` (10.64.0.0/10, one address per index).
std::string FakeNodeAddress(int index);

// The Node object (metadata, spec and status) for node number `index` of the pool.
kube::Json FakeNodeObject(const NodePoolSpec& spec, int index);

struct NodeWriteStats {
  int created = 0;
  int existing = 0;  // AlreadyExists: left as they are
  int deleted = 0;
  double seconds = 0;
};

// Creates the pool's nodes with `threads` parallel writers. Each node is created with its
// status; when the server dropped the status on create it is written through nodes/status.
// The not-ready taint the API server adds to new nodes is removed, as the node lifecycle
// controller would once a kubelet reports Ready. Nodes that already exist are counted, not
// changed. The first error stops the writers.
Result<NodeWriteStats> CreateFakeNodes(kube::Client& client, const NodePoolSpec& spec,
                                       int threads = 16);

// Deletes every node labelled chamber.io/fake-node=true and matching `extra_selector` (a label
// selector, "" for all fake nodes). NotFound counts as deleted.
Result<NodeWriteStats> DeleteFakeNodes(kube::Client& client, int threads = 16,
                                       const std::string& extra_selector = "");

}  // namespace chamber::kubesim
