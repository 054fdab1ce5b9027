// The REST API's query parameters (daemon/api_params.h): a query string, parsed by cpp-httplib
// as the server parses a request's, then read as GET /api/v1/workloads, /api/v1/history and
// /api/v1/history/replication read theirs. Properties: an error names the parameter; what reads
// keeps the documented bounds (a limit of at least 1, from not after to, a step of at least 0).
#include <httplib.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fuzz/fuzz_check.h"
#include "daemon/api_params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  namespace daemon = chamber::daemon;
  httplib::Params params;
  httplib::detail::parse_query_text(std::string(fuzz::Text(data, size)), params);

  chamber::Result<daemon::WorkloadFilter> w = daemon::ParseWorkloadQuery(params);
  if (!w.ok()) {
    fuzz::CheckError(w.status(), "parameter ");
  } else {
    fuzz::Check(w->limit >= 1, "a workload limit below 1");
  }

  chamber::Result<daemon::HistoryQuery> h = daemon::ParseHistoryQuery(params, 1790000000);
  if (!h.ok()) {
    fuzz::CheckError(h.status(), "parameter ");
  } else {
    fuzz::Check(h->from <= h->to, "a history query whose from is after its to");
    fuzz::Check(h->step >= 0, "a negative history step");
  }

  chamber::Result<daemon::ReplicationQuery> r = daemon::ParseReplicationQuery(params);
  if (!r.ok()) {
    fuzz::CheckError(r.status(), "parameter ");
  } else {
    fuzz::Check(r->limit >= 1 && r->limit <= 100000, "a replication limit out of bounds");
  }
  return 0;
}
