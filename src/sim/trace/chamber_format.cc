// Chamber's own trace format as CSV, and the CSV writer (chamber_jsonl.cc reads JSON lines).
#include <limits>
#include <string>

#include "common/gpu_share_ask.h"
#include "common/quantity.h"
#include "sim/trace/fields.h"
#include "sim/trace/reader.h"

namespace chamber::sim::trace_internal {
namespace {

enum Col : size_t {
  kId,
  kQueue,
  kUser,
  kPriority,
  kSubmit,
  kDuration,
  kPods,
  kGpus,
  kGpuMilli,
  kCpu,
  kMemory,
  kModels,
  kMigProfile,
  kMigDevices,
  kGpuMemory,
};

constexpr CsvColumn kColumns[] = {
    {"id", true},
    {"queue"},
    {"user"},
    {"priority"},
    {"submit_time", true},
    {"duration", true},
    {"pods"},
    {"gpus_per_pod"},
    {"gpu_milli_per_pod"},
    {"cpu_per_pod"},
    {"memory_per_pod"},
    {"gpu_models"},
    {"mig_profile"},
    {"mig_devices_per_pod"},
    {"gpu_memory_per_pod"},
};

constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();

// Reads an optional integer column into `*out` (left alone when empty).
template <typename T>
Status IntColumn(const CsvRow& row, size_t col, int64_t min, int64_t max, T* out) {
  const std::string_view v = row.Get(col);
  if (v.empty()) return Status::Ok();
  Result<int64_t> r = ParseInteger(v, min, max);
  if (!r.ok()) return row.Error(col, r.status().message());
  *out = static_cast<T>(*r);
  return Status::Ok();
}

Status CsvRowToJob(const CsvRow& row, ParsedJob* out) {
  TraceJob& job = out->job;
  const std::string_view id = row.Get(kId);
  if (id.empty()) return row.Error(kId, "must not be empty");
  job.id = std::string(id);
  job.group = std::string(row.Get(kQueue));
  job.user = std::string(row.Get(kUser));
  if (!row.Get(kPriority).empty()) {
    int32_t p = 0;
    CHAMBER_RETURN_IF_ERROR(IntColumn(row, kPriority, std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int32_t>::max(), &p));
    out->priority = p;
  }
  Result<int64_t> submit = ParseTimeMs(row.Get(kSubmit));
  if (!submit.ok()) return row.Error(kSubmit, submit.status().message());
  job.submit = Time(*submit);
  Result<int64_t> duration = ParseSecondsMs(row.Get(kDuration));
  if (!duration.ok()) return row.Error(kDuration, duration.status().message());
  job.duration = Duration(*duration);
  CHAMBER_RETURN_IF_ERROR(IntColumn(row, kPods, 1, kMaxCount, &job.pods));
  CHAMBER_RETURN_IF_ERROR(IntColumn(row, kGpus, 0, kMaxCount, &job.gpus_per_pod));
  CHAMBER_RETURN_IF_ERROR(IntColumn(row, kGpuMilli, 0, 1000, &job.gpu_milli_per_pod));
  if (const std::string_view cpu = row.Get(kCpu); !cpu.empty()) {
    Result<int64_t> v = ParseCpuMilli(cpu);
    if (!v.ok()) return row.Error(kCpu, v.status().message());
    if (*v < 0) return row.Error(kCpu, "must not be negative");
    job.cpu_milli_per_pod = *v;
  }
  if (const std::string_view mem = row.Get(kMemory); !mem.empty()) {
    Result<int64_t> v = ParseBytes(mem);
    if (!v.ok()) return row.Error(kMemory, v.status().message());
    if (*v < 0) return row.Error(kMemory, "must not be negative");
    job.memory_bytes_per_pod = *v;
  }
  job.gpu_models = SplitModels(row.Get(kModels));
  job.mig_profile = std::string(row.Get(kMigProfile));
  CHAMBER_RETURN_IF_ERROR(IntColumn(row, kMigDevices, 0, kMaxCount, &job.mig_devices_per_pod));
  if (const std::string_view mem = row.Get(kGpuMemory); !mem.empty()) {
    Result<int64_t> v = gpu_share::ParseGpuMemoryMib(mem);
    if (!v.ok()) return row.Error(kGpuMemory, v.status().message());
    job.gpu_memory_mib_per_pod = *v;
  }
  std::string_view field;
  if (Status s = CheckShape(&job, &field,
                            {"pods", "gpus_per_pod", "gpu_milli_per_pod", "mig_profile",
                             "mig_devices_per_pod", "gpu_memory_per_pod"});
      !s.ok()) {
    for (size_t c = 0; c < std::size(kColumns); ++c) {
      if (kColumns[c].name == field) return row.Error(c, s.message());
    }
    return s;
  }
  return Status::Ok();
}

void AppendCsvField(std::string_view v, std::string* out) {
  const bool quote = v.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!v.empty() && (v.front() == ' ' || v.front() == '\t' || v.back() == ' ' ||
                                     v.back() == '\t'));
  if (!quote) {
    out->append(v);
    return;
  }
  out->push_back('"');
  for (char c : v) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

Status ParseChamberCsv(std::string_view text, JobSink* sink) {
  CsvReader reader(text);
  CHAMBER_ASSIGN_OR_RETURN(CsvHeader header,
                           CsvHeader::Read(&reader, sink->source(), kColumns, /*strict=*/true));
  return ForEachCsvRow(
      &reader, header, sink->source(),
      [&](const CsvRow& row) -> Status {
        ParsedJob job;
        CHAMBER_RETURN_IF_ERROR(CsvRowToJob(row, &job));
        return AddCsvJob(sink, row, kId, std::move(job));
      },
      [&](Status s) { return sink->Reject(std::move(s)); });
}

}  // namespace chamber::sim::trace_internal

namespace chamber::sim {

std::string WriteChamberCsv(const std::vector<TraceJob>& jobs) {
  using trace_internal::AppendCsvField;
  using trace_internal::FormatSeconds;
  std::string out =
      "id,queue,user,priority,submit_time,duration,pods,gpus_per_pod,gpu_milli_per_pod,"
      "cpu_per_pod,memory_per_pod,gpu_models,mig_profile,mig_devices_per_pod,gpu_memory_per_pod\n";
  out.reserve(out.size() + jobs.size() * 96);
  for (const TraceJob& j : jobs) {
    AppendCsvField(j.id, &out);
    out += ',';
    AppendCsvField(j.queue, &out);
    out += ',';
    AppendCsvField(j.user, &out);
    out += ',';
    out += std::to_string(j.priority);
    out += ',';
    out += FormatSeconds(j.submit.count());
    out += ',';
    out += FormatSeconds(j.duration.count());
    out += ',';
    out += std::to_string(j.pods);
    out += ',';
    out += std::to_string(j.gpus_per_pod);
    out += ',';
    if (j.gpu_milli_per_pod != 0) out += std::to_string(j.gpu_milli_per_pod);
    out += ',';
    if (j.cpu_milli_per_pod != 0) out += std::to_string(j.cpu_milli_per_pod) + "m";
    out += ',';
    if (j.memory_bytes_per_pod != 0) out += std::to_string(j.memory_bytes_per_pod);
    out += ',';
    std::string models;
    for (const std::string& m : j.gpu_models) models += (models.empty() ? "" : "|") + m;
    AppendCsvField(models, &out);
    out += ',';
    AppendCsvField(j.mig_profile, &out);
    out += ',';
    if (j.mig_devices_per_pod != 0) out += std::to_string(j.mig_devices_per_pod);
    out += ',';
    if (j.gpu_memory_mib_per_pod != 0) out += std::to_string(j.gpu_memory_mib_per_pod);
    out += '\n';
  }
  return out;
}

}  // namespace chamber::sim
