// The health controller as the API server sees it (chamberd's HealthService implements it;
// the demo has none). With one set, the server takes agent reports on
// POST /api/v1/agent/reports, adds the controller's view to GET /api/v1/health under
// "controller", serves the admin action POST /api/v1/health/nodes/{node}/clear and appends the
// controller's metrics to /metrics.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace chamber::daemon {

class HealthApi {
 public:
  virtual ~HealthApi() = default;
  // One agent report (the agent's JSON) from `principal`. InvalidArgument names the bad field
  // (HTTP 400). `bound_node`: the node the sender's token is bound to (a Kubernetes
  // service-account token of a pod, Principal::node); when set, a report for another node is
  // refused with FailedPrecondition (HTTP 403). Called from the server's threads.
  virtual Status PostReport(std::string_view body, const std::string& principal,
                            const std::string& bound_node) = 0;
  virtual nlohmann::json View() = 0;
  // Lifts an operator hold; NotFound for a node no agent reported.
  virtual Status Clear(const std::string& node, const std::string& principal) = 0;
  // Prometheus text (families of their own) appended to /metrics.
  virtual std::string Metrics() = 0;
};

}  // namespace chamber::daemon
