// Alibaba cluster-trace-gpu-v2023 (alibaba/clusterdata), the "openb" traces of the FGD paper:
//   openb_pod_list_*.csv  name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//                         creation_time,deletion_time,scheduled_time
//   openb_node_list_*.csv sn,cpu_milli,memory_mib,gpu,model
// Times are integer seconds from the trace's start; scheduled_time is empty for pods that never
// ran; gpu_spec and model are empty (or "nan") when there is no constraint / no GPU.
#include <limits>
#include <unordered_map>

#include "common/file.h"
#include "sim/trace/fields.h"
#include "sim/trace/reader.h"

namespace chamber::sim::trace_internal {
namespace {

enum PodCol : size_t {
  kName,
  kCpuMilli,
  kMemoryMib,
  kNumGpu,
  kGpuMilli,
  kGpuSpec,
  kQos,
  kPodPhase,
  kCreation,
  kDeletion,
  kScheduled,
};

constexpr CsvColumn kPodColumns[] = {
    {"name", true},
    {"cpu_milli"},
    {"memory_mib"},
    {"num_gpu"},
    {"gpu_milli"},
    {"gpu_spec"},
    {"qos"},
    {"pod_phase"},
    {"creation_time", true},
    {"deletion_time", true},
    {"scheduled_time"},
};

enum NodeCol : size_t { kSn, kNodeCpuMilli, kNodeMemoryMib, kGpu, kModel };

constexpr CsvColumn kNodeColumns[] = {
    {"sn", true}, {"cpu_milli"}, {"memory_mib"}, {"gpu"}, {"model"},
};

constexpr int64_t kMaxMilli = 1'000'000'000;  // a million cores
constexpr int64_t kMaxMib = 1'000'000'000;    // about a petabyte
constexpr int64_t kMiB = 1 << 20;

Result<int64_t> IntOr0(const CsvRow& row, size_t col, int64_t max) {
  const std::string_view v = row.Get(col);
  if (IsMissing(v)) return int64_t{0};
  Result<int64_t> r = ParseInteger(v, 0, max);
  if (!r.ok()) return row.Error(col, r.status().message());
  return r;
}

Result<int64_t> Seconds(const CsvRow& row, size_t col) {
  Result<int64_t> r = ParseSecondsMs(row.Get(col));
  if (!r.ok()) return row.Error(col, r.status().message());
  return r;
}

Status PodRowToJob(const CsvRow& row, ParsedJob* out) {
  TraceJob& job = out->job;
  job.id = std::string(row.Get(kName));
  if (job.id.empty()) return row.Error(kName, "must not be empty");
  CHAMBER_ASSIGN_OR_RETURN(job.cpu_milli_per_pod, IntOr0(row, kCpuMilli, kMaxMilli));
  CHAMBER_ASSIGN_OR_RETURN(const int64_t mib, IntOr0(row, kMemoryMib, kMaxMib));
  job.memory_bytes_per_pod = mib * kMiB;
  CHAMBER_ASSIGN_OR_RETURN(const int64_t gpus, IntOr0(row, kNumGpu, 1024));
  CHAMBER_ASSIGN_OR_RETURN(const int64_t milli, IntOr0(row, kGpuMilli, 1000));
  // gpu_milli is the share of each GPU: 1000 (or 0) means whole GPUs; below 1000 only a
  // single-GPU pod can share its GPU.
  if (gpus == 0 && milli != 0) {
    return row.Error(kGpuMilli, "is " + std::to_string(milli) + " but num_gpu is 0");
  }
  if (milli == 0 || milli == 1000) {
    job.gpus_per_pod = static_cast<int32_t>(gpus);
  } else if (gpus == 1) {
    job.gpu_milli_per_pod = static_cast<int32_t>(milli);
  } else {
    return row.Error(kGpuMilli,
                     "a GPU share below 1000 needs num_gpu 1, got num_gpu " + std::to_string(gpus));
  }
  job.gpu_models = SplitModels(row.Get(kGpuSpec));
  job.qos = std::string(row.Get(kQos));
  job.group = job.qos;

  CHAMBER_ASSIGN_OR_RETURN(const int64_t created, Seconds(row, kCreation));
  CHAMBER_ASSIGN_OR_RETURN(const int64_t deleted, Seconds(row, kDeletion));
  int64_t started = created;
  if (!IsMissing(row.Get(kScheduled))) {
    CHAMBER_ASSIGN_OR_RETURN(started, Seconds(row, kScheduled));
    if (started < created) return row.Error(kScheduled, "is before creation_time");
  }
  if (deleted < started) {
    return row.Error(kDeletion, IsMissing(row.Get(kScheduled)) ? "is before creation_time"
                                                               : "is before scheduled_time");
  }
  job.submit = Time(created);
  job.duration = Duration(deleted - started);
  return Status::Ok();
}

}  // namespace

Status ParseOpenb(std::string_view text, JobSink* sink) {
  CsvReader reader(text);
  CHAMBER_ASSIGN_OR_RETURN(CsvHeader header,
                           CsvHeader::Read(&reader, sink->source(), kPodColumns, /*strict=*/false));
  return ForEachCsvRow(
      &reader, header, sink->source(),
      [&](const CsvRow& row) -> Status {
        ParsedJob job;
        CHAMBER_RETURN_IF_ERROR(PodRowToJob(row, &job));
        return AddCsvJob(sink, row, kName, std::move(job));
      },
      [&](Status s) { return sink->Reject(std::move(s)); });
}

}  // namespace chamber::sim::trace_internal

namespace chamber::sim {

Result<std::vector<OpenbNode>> ParseOpenbNodes(std::string_view text, std::string_view source) {
  namespace ti = trace_internal;
  ti::CsvReader reader(text);
  CHAMBER_ASSIGN_OR_RETURN(
      ti::CsvHeader header,
      ti::CsvHeader::Read(&reader, source, ti::kNodeColumns, /*strict=*/false));
  std::vector<OpenbNode> nodes;
  std::unordered_map<std::string, int64_t> lines;
  CHAMBER_RETURN_IF_ERROR(ti::ForEachCsvRow(
      &reader, header, source,
      [&](const ti::CsvRow& row) -> Status {
        OpenbNode n;
        n.name = std::string(row.Get(ti::kSn));
        if (n.name.empty()) return row.Error(ti::kSn, "must not be empty");
        if (const auto [it, added] = lines.emplace(n.name, row.line()); !added) {
          return row.Error(ti::kSn, "duplicate node " + ti::Quote(n.name) + " (first on line " +
                                        std::to_string(it->second) + ")");
        }
        CHAMBER_ASSIGN_OR_RETURN(n.cpu_milli, ti::IntOr0(row, ti::kNodeCpuMilli, ti::kMaxMilli));
        CHAMBER_ASSIGN_OR_RETURN(const int64_t mib,
                                 ti::IntOr0(row, ti::kNodeMemoryMib, ti::kMaxMib));
        n.memory_bytes = mib * ti::kMiB;
        CHAMBER_ASSIGN_OR_RETURN(const int64_t gpus, ti::IntOr0(row, ti::kGpu, 1024));
        n.gpus = static_cast<int32_t>(gpus);
        if (!ti::IsMissing(row.Get(ti::kModel))) n.model = std::string(row.Get(ti::kModel));
        nodes.push_back(std::move(n));
        return Status::Ok();
      },
      [](Status s) { return s; }));
  return nodes;
}

Result<std::vector<OpenbNode>> ReadOpenbNodes(const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseOpenbNodes(text, path);
}

}  // namespace chamber::sim
