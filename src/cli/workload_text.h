// Text for `chamber queues`, `chamber workloads` and `chamber why`, built from the JSON answers
// of GET /api/v1/queues, /api/v1/workloads and /api/v1/workloads/{namespace}/{name}
// (docs/openapi.yaml). Pure functions, so the wording is tested without a server.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace chamber::cli {

// The queues of a /api/v1/queues answer in tree order: each parent followed by its children
// (in the answer's order), with their depth. A queue whose parent is missing, or that sits in a
// parent cycle, is listed at depth 0.
std::vector<std::pair<size_t, int>> QueueTreeOrder(const nlohmann::json& queues);

// The rows of `chamber queues`: QUEUE (indented two spaces per level), PARENT, QUOTA, LIMIT,
// ALLOCATED, FAIR-SHARE, BORROWED, LENT, PENDING, RUNNING, and of the last hour WAIT-P50 and
// WAIT-P95 ("-" when nothing started), PREEMPT-1H and LOST-GPUH-1H (GPU-hours lost).
inline const std::vector<std::string> kQueueColumns = {
    "QUEUE", "PARENT",  "QUOTA",   "LIMIT",    "ALLOCATED", "FAIR-SHARE", "BORROWED",
    "LENT",  "PENDING", "RUNNING", "WAIT-P50", "WAIT-P95",  "PREEMPT-1H", "LOST-GPUH-1H"};
std::vector<std::vector<std::string>> QueueRows(const nlohmann::json& queues);

// Seconds from `from` to `to`, two RFC 3339 times; 0 when either does not parse.
double SecondsBetween(const std::string& from, const std::string& to);

// One row of `chamber workloads` for a Workload object at `now`: NAME, QUEUE, STATE, GPUS,
// PRIORITY, AGE, LOST-GPUH (GPU-hours its preemptions lost; "-" when never preempted), REASON.
inline const std::vector<std::string> kWorkloadColumns = {
    "NAME", "QUEUE", "STATE", "GPUS", "PRIORITY", "AGE", "LOST-GPUH", "REASON"};
std::vector<std::string> WorkloadRow(const nlohmann::json& workload, const std::string& now);

// `chamber why`: the explanation of a /api/v1/workloads/{namespace}/{name} answer, one
// statement per line, ending in a newline.
std::string ExplainWorkload(const nlohmann::json& detail);

// `s` percent-encoded for a URL path segment or query value (unreserved characters kept).
std::string UrlEncode(const std::string& s);

}  // namespace chamber::cli
