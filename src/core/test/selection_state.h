// What a victim selector reads for a snapshot a test built: the cluster with every running
// workload's placements claimed, the cycle's feasibility cache and what is being released.
#pragma once

#include <optional>

#include <gtest/gtest.h>

#include "core/cluster_state.h"
#include "core/model.h"
#include "core/placement.h"

namespace chamber::core::testing {

struct SelectionState {
  void Load(const Snapshot& s) {
    state.emplace(s);
    for (const Workload& w : s.workloads)
      for (size_t i = 0; i < w.placements.size(); ++i)
        EXPECT_TRUE(state->ClaimExisting(w.placements[i], w.PlacementRequest(i)).ok());
    feas.emplace(*state);
  }

  std::optional<ClusterState> state;
  std::optional<FeasibilityCache> feas;
  CapacityOverlay releasing;
};

}  // namespace chamber::core::testing
