// The REST API's query parameters (docs/api.md), read into what each endpoint asks for. Pure:
// the server (http_server.cc) hands over the parameters cpp-httplib parsed from the query
// string, and answers 400 with the error's message. A parameter given twice counts once, the
// first time, as cpp-httplib's get_param_value reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"

namespace chamber::daemon {

// A request's query parameters, as cpp-httplib gives them (httplib::Params).
using QueryParams = std::multimap<std::string, std::string>;

// Parses a time parameter: Unix seconds or RFC 3339 ("2026-01-31T12:00:00Z", offsets allowed),
// within the years 1677 to 2262 either way.
Result<int64_t> ParseTimeParam(const std::string& value);

// GET /api/v1/workloads: queue, state, limit.
struct WorkloadFilter {
  std::optional<std::string> queue;
  std::optional<std::string> state;
  size_t limit = 1000;
};
Result<WorkloadFilter> ParseWorkloadQuery(const QueryParams& params);

// GET /api/v1/history with a metric: metric, scope (default "cluster"), from and to (Unix
// seconds or RFC 3339; `to` defaults to `default_to`, `from` to an hour before `to`), step
// (seconds, 0: the store's own).
struct HistoryQuery {
  std::string metric;
  std::string scope = "cluster";
  int64_t from = 0;
  int64_t to = 0;
  int64_t step = 0;
};
Result<HistoryQuery> ParseHistoryQuery(const QueryParams& params, int64_t default_to);

// GET /api/v1/history/replication: resolution (fine or coarse), since (a row id), limit (1 to
// 100000, default 5000).
struct ReplicationQuery {
  bool coarse = false;
  int64_t since = 0;
  int64_t limit = 5000;
};
Result<ReplicationQuery> ParseReplicationQuery(const QueryParams& params);

}  // namespace chamber::daemon
