// Agent reports (health/health_controller.h, ParseAgentReportText): the body of POST
// /api/v1/agent/reports, which every node's agent sends to chamberd. Properties: an error names
// the report's field ("report.gpus[0].uuid: ...") or says the JSON is not valid; a report that
// reads names its node, and every label it keeps carries the agent's prefix.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fuzz/fuzz_check.h"
#include "health/health_controller.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<chamber::health::AgentReport> report =
      chamber::health::ParseAgentReportText(fuzz::Text(data, size));
  if (!report.ok()) {
    fuzz::CheckError(report.status(), "report");
    return 0;
  }
  fuzz::Check(!report->node.empty(), "a report without a node");
  if (report->labels) {
    for (const auto& [key, value] : *report->labels) {
      fuzz::Check(key.rfind(chamber::health::kAgentLabelPrefix, 0) == 0,
                  "a kept label without the agent's prefix", key);
    }
  }
  return 0;
}
