// One workload-trace format (sim/trace/trace.h), chosen at build time by
// CHAMBER_FUZZ_TRACE_FORMAT (a TraceFormat enumerator): the readers of `chamber sim --trace`.
// Each input is read twice, failing on the first bad line and skipping bad lines. Properties:
// an error names the file; a trace that reads, written as Chamber CSV (WriteChamberCsv), reads
// back to the same jobs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fuzz/fuzz_check.h"
#include "sim/trace/trace.h"

namespace {

using chamber::Result;
using chamber::sim::Trace;
using chamber::sim::TraceFormat;
using chamber::sim::TraceJob;
using chamber::sim::TraceReadOptions;
namespace fuzz = chamber::fuzz;

constexpr std::string_view kSource = "trace.in";

void CheckRoundTrip(const Trace& trace) {
  const std::string csv = chamber::sim::WriteChamberCsv(trace.jobs);
  Result<Trace> back =
      chamber::sim::ParseTrace(csv, "written.csv", TraceFormat::kChamberCsv, TraceReadOptions{});
  fuzz::Check(back.ok(), "the written trace does not read back",
              csv + (back.ok() ? std::string() : "\n" + back.status().message()));
  fuzz::Check(back->jobs.size() == trace.jobs.size(), "the written trace has other jobs", csv);
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    // Chamber CSV keeps the queue and priority the mapping chose; its queue column is read as
    // the group, and it has no QoS column.
    TraceJob want = trace.jobs[i];
    want.group = want.queue;
    want.qos.clear();
    fuzz::Check(back->jobs[i] == want, "a job changes when written and read back",
                "job " + want.id + " in\n" + csv);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::Text(data, size);
  for (const bool skip : {false, true}) {
    TraceReadOptions options;
    options.skip_bad_lines = skip;
    Result<Trace> trace =
        chamber::sim::ParseTrace(text, kSource, TraceFormat::CHAMBER_FUZZ_TRACE_FORMAT, options);
    if (!trace.ok()) {
      fuzz::CheckError(trace.status(), kSource);
      continue;
    }
    fuzz::Check(trace->skipped_lines == 0 || skip, "lines skipped without skip_bad_lines");
    CheckRoundTrip(*trace);
  }
  return 0;
}
