// SenseTime Helios (S-Lab-System-Group/HeliosData) cluster_log.csv:
//   job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
// Times are "YYYY-MM-DD HH:MM:SS" wall-clock strings (epoch seconds are accepted too); duration
// is the run time in seconds (end_time - start_time); queue is the job's queueing delay in
// seconds, not a queue name, and is not read.
#include <limits>

#include "sim/trace/fields.h"
#include "sim/trace/reader.h"

namespace chamber::sim::trace_internal {
namespace {

enum Col : size_t {
  kJobId,
  kUser,
  kVc,
  kGpuNum,
  kCpuNum,
  kNodeNum,
  kState,
  kSubmit,
  kStart,
  kEnd,
  kDuration,
  kQueue,
};

constexpr CsvColumn kColumns[] = {
    {"job_id", true}, {"user"},     {"vc"},       {"gpu_num", true},
    {"cpu_num"},      {"node_num"}, {"state"},    {"submit_time", true},
    {"start_time"},   {"end_time"}, {"duration"}, {"queue"},
};

constexpr int64_t kMaxCount = 1'000'000;

Result<int64_t> OptionalInt(const CsvRow& row, size_t col, int64_t if_missing) {
  const std::string_view v = row.Get(col);
  if (IsMissing(v)) return if_missing;
  Result<int64_t> r = ParseInteger(v, 0, kMaxCount);
  if (!r.ok()) return row.Error(col, r.status().message());
  return r;
}

Status HeliosRowToJob(const CsvRow& row, ParsedJob* out) {
  TraceJob& job = out->job;
  job.id = std::string(row.Get(kJobId));
  if (job.id.empty()) return row.Error(kJobId, "must not be empty");
  job.user = std::string(row.Get(kUser));
  job.group = std::string(row.Get(kVc));

  Result<int64_t> gpus = ParseInteger(row.Get(kGpuNum), 0, kMaxCount);
  if (!gpus.ok()) return row.Error(kGpuNum, gpus.status().message());
  CHAMBER_ASSIGN_OR_RETURN(const int64_t nodes, OptionalInt(row, kNodeNum, 1));
  CHAMBER_ASSIGN_OR_RETURN(const int64_t cpus, OptionalInt(row, kCpuNum, 0));
  // gpu_num and cpu_num count the whole job; spread them evenly over its nodes, rounding up.
  const int64_t pods = std::max<int64_t>(nodes, 1);
  job.pods = static_cast<int32_t>(pods);
  job.gpus_per_pod = static_cast<int32_t>((*gpus + pods - 1) / pods);
  job.cpu_milli_per_pod = (cpus * 1000 + pods - 1) / pods;

  Result<int64_t> submit = ParseTimeMs(row.Get(kSubmit));
  if (!submit.ok()) return row.Error(kSubmit, submit.status().message());
  job.submit = Time(*submit);

  if (const std::string_view d = row.Get(kDuration); !IsMissing(d)) {
    Result<int64_t> ms = ParseSecondsMs(d);
    if (!ms.ok()) return row.Error(kDuration, ms.status().message());
    job.duration = Duration(*ms);
  } else {
    // No duration column or value: end_time - start_time.
    if (IsMissing(row.Get(kStart)) || IsMissing(row.Get(kEnd))) {
      return row.Error(kDuration, "missing, and start_time and end_time do not give one");
    }
    Result<int64_t> start = ParseTimeMs(row.Get(kStart));
    if (!start.ok()) return row.Error(kStart, start.status().message());
    Result<int64_t> end = ParseTimeMs(row.Get(kEnd));
    if (!end.ok()) return row.Error(kEnd, end.status().message());
    if (*end < *start) return row.Error(kEnd, "is before start_time");
    job.duration = Duration(*end - *start);
  }
  return Status::Ok();
}

}  // namespace

Status ParseHelios(std::string_view text, JobSink* sink) {
  CsvReader reader(text);
  CHAMBER_ASSIGN_OR_RETURN(CsvHeader header,
                           CsvHeader::Read(&reader, sink->source(), kColumns, /*strict=*/false));
  return ForEachCsvRow(
      &reader, header, sink->source(),
      [&](const CsvRow& row) -> Status {
        ParsedJob job;
        CHAMBER_RETURN_IF_ERROR(HeliosRowToJob(row, &job));
        return AddCsvJob(sink, row, kJobId, std::move(job));
      },
      [&](Status s) { return sink->Reject(std::move(s)); });
}

}  // namespace chamber::sim::trace_internal
