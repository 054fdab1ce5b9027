// What the health controller's end-to-end tests share (health_e2e_test, chart_e2e_test): a
// fake-NVML scenario of a two-GPU node, the fences chamberd writes on a Node, and a token of
// the agent's service account bound to a pod on a node, as the kubelet projects one.
#pragma once

#include <chrono>
#include <string>

#include "backend/kube/snapshot_builder.h"
#include "kube/client.h"

namespace chamber::chamberd::e2e {

inline double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A two-GPU node for the fake NVML: NVLink, ECC, no MIG, 50% utilization; `events` are its
// injected faults ({"t": seconds after NVML's init, "gpu": index, "xid": n}).
inline kube::Json Scenario(kube::Json events, kube::Json nvlink_errors_gpu1 = nullptr) {
  kube::Json gpus = kube::Json::array();
  for (int i = 0; i < 2; ++i) {
    kube::Json g = {{"uuid", "GPU-e2e-" + std::to_string(i)},
                    {"name", "NVIDIA H100 80GB HBM3"},
                    {"memory_total_mib", 81559},
                    {"pci_bus_id", i == 0 ? "00000000:18:00.0" : "00000000:2A:00.0"},
                    {"pcie_max_width", 16},
                    {"pcie_max_gen", 5},
                    {"nvlinks", 4},
                    {"ecc", true},
                    {"metrics", {{"utilization", 50}, {"power_w", 400}, {"temperature_c", 50}}}};
    if (i == 1 && !nvlink_errors_gpu1.is_null()) g["metrics"]["nvlink_errors"] = nvlink_errors_gpu1;
    gpus.push_back(std::move(g));
  }
  return {{"driver_version", "550.54.15"},
          {"cuda_driver_version", 12040},
          {"gpus", gpus},
          {"events", std::move(events)}};
}

// The node carries the health controller's taint chamber.io/gpu-unhealthy.
inline bool Tainted(const kube::Json& node) {
  for (const kube::Json& t : node["spec"].value("taints", kube::Json::array()))
    if (t.value("key", "") == "chamber.io/gpu-unhealthy") return true;
  return false;
}

// The fenced GPUs' indices the health controller annotates ("" when none).
inline std::string UnhealthyGpus(const kube::Json& node) {
  return node["metadata"]
      .value("annotations", kube::Json::object())
      .value(backend::keys::kUnhealthyGpus, "");
}

// The node's ChamberGPUHealthy condition; null when absent.
inline kube::Json Condition(const kube::Json& node) {
  for (const kube::Json& c : node["status"].value("conditions", kube::Json::array()))
    if (c.value("type", "") == "ChamberGPUHealthy") return c;
  return nullptr;
}

// A token of service account `account` (in `ns`) bound to a new pod `pod` on `node`: what the
// kubelet projects into an agent's pod, whose TokenReview names the node.
inline Result<std::string> PodBoundToken(kube::Client& client, const std::string& ns,
                                         const std::string& account, const std::string& pod,
                                         const std::string& node) {
  kube::Json p = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", pod}}},
      {"spec",
       {{"nodeName", node},
        {"serviceAccountName", account},
        {"containers", kube::Json::array({{{"name", "agent"}, {"image", "chamber-agent"}}})}}}};
  CHAMBER_ASSIGN_OR_RETURN(kube::Json created, client.Create(kube::resources::kPods, ns, p));
  return client.CreateToken(
      ns, account, 3600,
      {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", pod}, {"uid", created["metadata"]["uid"]}});
}

}  // namespace chamber::chamberd::e2e
