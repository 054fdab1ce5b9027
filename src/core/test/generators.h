// RapidCheck generators shared by the engine's property tests. Each pick goes through
// RapidCheck, so failing cases shrink.
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

#include "core/test/snapshot_builder.h"

namespace chamber::core::testing {

inline int Pick(int lo, int hi) { return *rc::gen::inRange(lo, hi + 1); }  // inclusive
// True with the given probability; shrinks towards false, the usual case.
inline bool Chance(int percent) { return *rc::gen::inRange(0, 100) >= 100 - percent; }
template <typename T>
T OneOf(std::vector<T> values) {
  return values[static_cast<size_t>(Pick(0, static_cast<int>(values.size()) - 1))];
}

// min_nodes to max_nodes nodes of 0 to 8 GPUs in up to three blocks over two zones, some in
// multi-node NVLink domains, some with two NVLink islands, an unhealthy GPU, a cordon, a taint
// or a pool label.
inline void GenNodes(SnapshotBuilder& b, int min_nodes, int max_nodes) {
  const int n = Pick(min_nodes, max_nodes);
  const int blocks = Pick(1, 3);
  for (int i = 0; i < n; ++i) {
    const int gpus = OneOf<int>({0, 1, 2, 4, 8, 8, 8});
    auto node = b.Node("n" + std::to_string(i), gpus, Chance(20) ? "A100" : "H100");
    node.Cpu(Pick(8, 128) * 1000).Memory(Pick(32, 1024) * kGi).MaxPods(Pick(2, 110));
    node.Block("b" + std::to_string(Pick(0, blocks - 1))).Zone("z" + std::to_string(Pick(0, 1)));
    if (Chance(15)) node.Nvlink("d" + std::to_string(Pick(0, 1)));
    if (gpus == 8 && Chance(50)) node.Islands({0, 0, 0, 0, 1, 1, 1, 1});
    if (gpus > 0 && Chance(15)) node.Unhealthy({Pick(0, gpus - 1)});
    if (Chance(5)) node.Cordon();
    if (Chance(10)) node.Taint("dedicated", "infer");
    if (Chance(30)) node.Label("pool", Chance(50) ? "a" : "b");
  }
}

}  // namespace chamber::core::testing
