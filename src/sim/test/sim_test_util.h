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
