// Small clusters, jobs and policies for the simulator's tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim/cluster_spec.h"
#include "sim/policy.h"
#include "sim/trace/trace.h"

namespace chamber::sim::testing {

// `nodes` nodes of `gpus` H100s each, without CPU or memory limits.
inline std::vector<core::Node> Cluster(int nodes, int gpus) {
  ClusterSpec spec;
  NodePool p;
  p.name = "n";
  p.count = nodes;
  p.gpus_per_node = gpus;
  p.gpu_model = "H100";
  spec.pools.push_back(p);
  return BuildNodes(spec);
}

// One node of `gpus` GPUs of each model, in the order given, each its own pool.
inline std::vector<core::Node> NodePerModel(const std::vector<std::string>& models, int gpus) {
  ClusterSpec spec;
  for (const std::string& model : models) {
    NodePool p;
    p.name = model;
    p.gpus_per_node = gpus;
    p.gpu_model = model;
    spec.pools.push_back(p);
  }
  return BuildNodes(spec);
}

// A queue's quota for one GPU model, in GPUs (`limit` -1: none).
inline core::GpuModelQuota ModelQuota(std::string model, int quota, int limit = -1) {
  core::GpuModelQuota m{std::move(model), {}};
  m.gpu.quota = core::Gpus(quota);
  m.gpu.limit = limit < 0 ? core::kUnlimited : core::Gpus(limit);
  return m;
}

inline TraceJob Job(std::string id, Time submit, Duration duration, int32_t pods, int32_t gpus,
                    std::string queue = "default", int32_t priority = 10) {
  TraceJob j;
  j.id = std::move(id);
  j.submit = submit;
  j.duration = duration;
  j.pods = pods;
  j.gpus_per_pod = gpus;
  j.queue = std::move(queue);
  j.priority = priority;
  return j;
}

inline SimPolicy Policy(const char* name) {
  Result<SimPolicy> p = MakePolicy(name, core::EngineConfig{});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

}  // namespace chamber::sim::testing
