// Alibaba openb node lists (sim/trace/trace.h, ParseOpenbNodes): the CSV that `chamber sim
// --cluster nodes.csv` builds its cluster from. Properties: an error names the file; nodes that
// read have a name and no negative capacity.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/fuzz/fuzz_check.h"
#include "sim/trace/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<std::vector<chamber::sim::OpenbNode>> nodes =
      chamber::sim::ParseOpenbNodes(fuzz::Text(data, size), "nodes.csv");
  if (!nodes.ok()) {
    fuzz::CheckError(nodes.status(), "nodes.csv");
    return 0;
  }
  for (const chamber::sim::OpenbNode& n : *nodes) {
    fuzz::Check(!n.name.empty(), "a node without a name");
    fuzz::Check(n.cpu_milli >= 0 && n.memory_bytes >= 0 && n.gpus >= 0, "a negative capacity",
                n.name);
  }
  return 0;
}
