// The JSON bodies of the REST API (docs/openapi.yaml), built from a published FleetState, and
// the Prometheus page. Cached() serializes each resource once per state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/time.h"
#include "daemon/api_params.h"  // WorkloadFilter
#include "daemon/daemon.h"
#include "fleet/history_store.h"

namespace chamber::daemon {

// Times go out as FormatRfc3339Ms (common/time.h) writes them: "2026-01-31T12:00:00Z", with
// milliseconds when not whole seconds ("...:00.250Z").

nlohmann::json FleetJson(const FleetState& s);
nlohmann::json NodeJson(const FleetState& s, size_t node);
nlohmann::json NodesJson(const FleetState& s);
nlohmann::json GpusJson(const FleetState& s);
// The document GpusJson(s) describes, written directly: the heatmap of a large fleet is the
// API's biggest answer.
std::string GpusBody(const FleetState& s);
nlohmann::json QueuesJson(const FleetState& s);
nlohmann::json WorkloadsJson(const FleetState& s, const WorkloadFilter& filter);
// What GET /api/v1/workloads/{namespace}/{name} finds for `name`: the workload of that name
// ("namespace/name", or a bare name for workloads without a namespace) or, failing that, the
// workload one of whose pods has that name.
struct WorkloadMatch {
  size_t workload = 0;  // index into s.input.workloads
  std::string pod;      // the pod `name` named; empty when it named the workload
};
std::optional<WorkloadMatch> FindWorkload(const FleetState& s, const std::string& name);
// One workload with what explains its state: pods, pending details, preemptions, and its
// queue's standing (null when the queue is unknown).
nlohmann::json WorkloadDetailJson(const FleetState& s, const WorkloadMatch& match);
nlohmann::json HealthJson(const FleetState& s);
nlohmann::json CostJson(const FleetState& s);
nlohmann::json HistoryJson(const std::string& metric, const std::string& scope, int64_t from,
                           int64_t to, const fleet::HistorySeries& series);
nlohmann::json CatalogueJson(const fleet::HistoryCatalogue& c, const fleet::HistoryOptions& o);

// Prometheus text for /metrics (metric names in docs/fleet.md).
std::string MetricsPage(const FleetState& s);

// The body under `key`, built by `make` the first time it is asked for on this state.
std::shared_ptr<const std::string> Cached(const FleetState& s, const std::string& key,
                                          const std::function<std::string()>& make);

}  // namespace chamber::daemon
