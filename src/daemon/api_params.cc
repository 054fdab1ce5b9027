#include "daemon/api_params.h"

#include <charconv>
#include <chrono>

#include "common/time.h"

namespace chamber::daemon {
namespace {

// The first value of `name`, as httplib::Request::get_param_value reads it.
const std::string* Param(const QueryParams& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

Result<int64_t> ParseInt(const std::string& name, const std::string& value) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || p != value.data() + value.size())
    return Status::InvalidArgument("parameter " + name + ": \"" + value + "\" is not an integer");
  return v;
}

}  // namespace

Result<int64_t> ParseTimeParam(const std::string& value) {
  if (value.empty()) return Status::InvalidArgument("empty time");
  if (value.find_first_not_of("-0123456789") == std::string::npos) {
    CHAMBER_ASSIGN_OR_RETURN(int64_t seconds, ParseInt("time", value));
    // The times RFC 3339 text may name (the system clock's, years 1677 to 2262): callers do
    // arithmetic on them (the history's default start is an hour before its end).
    constexpr int64_t kMaxSeconds = 9'223'372'036;
    if (seconds < -kMaxSeconds || seconds > kMaxSeconds)
      return Status::InvalidArgument("\"" + value +
                                     "\" is out of range: Unix seconds from -9223372036 to "
                                     "9223372036 (the years 1677 to 2262)");
    return seconds;
  }
  Result<std::chrono::system_clock::time_point> t = ParseRfc3339(value);
  if (!t.ok())
    return Status::InvalidArgument("\"" + value +
                                   "\" is neither Unix seconds nor an RFC 3339 time (like "
                                   "2026-01-02T03:04:05Z)");
  return std::chrono::floor<std::chrono::seconds>(t->time_since_epoch()).count();
}

Result<WorkloadFilter> ParseWorkloadQuery(const QueryParams& params) {
  WorkloadFilter f;
  if (const std::string* q = Param(params, "queue")) f.queue = *q;
  if (const std::string* state = Param(params, "state")) {
    f.state = *state;
    if (*f.state != "pending" && *f.state != "running" && *f.state != "preempting" &&
        *f.state != "suspended")
      return Status::InvalidArgument("parameter state: \"" + *f.state +
                                     "\" is not one of pending, running, preempting, suspended");
  }
  if (const std::string* l = Param(params, "limit")) {
    CHAMBER_ASSIGN_OR_RETURN(int64_t limit, ParseInt("limit", *l));
    if (limit < 1) return Status::InvalidArgument("parameter limit: must be at least 1");
    f.limit = static_cast<size_t>(limit);
  }
  return f;
}

Result<HistoryQuery> ParseHistoryQuery(const QueryParams& params, int64_t default_to) {
  HistoryQuery q;
  if (const std::string* m = Param(params, "metric")) q.metric = *m;
  if (const std::string* s = Param(params, "scope")) q.scope = *s;
  q.to = default_to;
  if (const std::string* to = Param(params, "to")) {
    Result<int64_t> t = ParseTimeParam(*to);
    if (!t.ok()) return Status::InvalidArgument("parameter to: " + t.status().message());
    q.to = *t;
  }
  q.from = q.to - 3600;
  if (const std::string* from = Param(params, "from")) {
    Result<int64_t> f = ParseTimeParam(*from);
    if (!f.ok()) return Status::InvalidArgument("parameter from: " + f.status().message());
    q.from = *f;
  }
  if (const std::string* step = Param(params, "step")) {
    CHAMBER_ASSIGN_OR_RETURN(q.step, ParseInt("step", *step));
    if (q.step < 1) return Status::InvalidArgument("parameter step: must be at least 1");
  }
  if (q.to < q.from) return Status::InvalidArgument("parameter to: before from");
  return q;
}

Result<ReplicationQuery> ParseReplicationQuery(const QueryParams& params) {
  ReplicationQuery q;
  if (const std::string* r = Param(params, "resolution")) {
    if (*r == "coarse") {
      q.coarse = true;
    } else if (*r != "fine") {
      return Status::InvalidArgument("parameter resolution: \"" + *r +
                                     "\" is not one of fine, coarse");
    }
  }
  if (const std::string* s = Param(params, "since")) {
    CHAMBER_ASSIGN_OR_RETURN(q.since, ParseInt("since", *s));
  }
  if (const std::string* l = Param(params, "limit")) {
    CHAMBER_ASSIGN_OR_RETURN(q.limit, ParseInt("limit", *l));
    if (q.limit < 1 || q.limit > 100000)
      return Status::InvalidArgument("parameter limit: must be 1 to 100000");
  }
  return q;
}

}  // namespace chamber::daemon
