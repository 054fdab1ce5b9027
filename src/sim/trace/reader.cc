#include "sim/trace/reader.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "core/mig_profile.h"
#include "core/model.h"
#include "sim/trace/fields.h"

namespace chamber::sim::trace_internal {

Status JobSink::Reject(Status error) {
  if (!options_.skip_bad_lines) return error;
  ++skipped_;
  if (examples_.size() < kMaxSkippedExamples) examples_.push_back(error.message());
  return Status::Ok();
}

std::optional<size_t> JobSink::Find(std::string_view id, uint64_t hash) const {
  if (slots_.empty()) return std::nullopt;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot slot = slots_[i];
    if (slot.index == 0) return std::nullopt;
    if (slot.hash == Tag(hash) && jobs_[slot.index - 1].id == id) return slot.index - 1;
  }
}

std::optional<int64_t> JobSink::SeenAt(const std::string& id) const {
  const std::optional<size_t> i = Find(id, std::hash<std::string_view>()(id));
  if (!i) return std::nullopt;
  return lines_[*i];
}

void JobSink::Add(ParsedJob job, int64_t line) {
  const uint64_t hash = std::hash<std::string_view>()(job.job.id);
  jobs_.push_back(std::move(job.job));
  priorities_.push_back(job.priority);
  lines_.push_back(line);
  // Keep the table at most half full; a slot's position is rebuilt from its job's id.
  if (jobs_.size() * 2 > slots_.size()) {
    slots_.assign(std::max<size_t>(slots_.size() * 2, 1024), Slot{});
    for (size_t j = 0; j + 1 < jobs_.size(); ++j)
      Insert(std::hash<std::string_view>()(jobs_[j].id), j);
  }
  Insert(hash, jobs_.size() - 1);
}

void JobSink::Insert(uint64_t hash, size_t job) {
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].index != 0) i = (i + 1) & mask;
  slots_[i] = {Tag(hash), static_cast<uint32_t>(job + 1)};
}

void JobSink::Reserve(size_t jobs) {
  jobs_.reserve(jobs);
  priorities_.reserve(jobs);
  lines_.reserve(jobs);
  if (jobs_.empty() && jobs * 2 > slots_.size()) {
    size_t size = 1024;
    while (size < jobs * 2) size *= 2;
    slots_.assign(size, Slot{});
  }
}

Trace JobSink::Finish() && {
  Trace trace;
  trace.skipped_lines = skipped_;
  trace.skipped_examples = std::move(examples_);
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const TraceJob& j : jobs_) first = std::min(first, j.submit.count());
  for (size_t i = 0; i < jobs_.size(); ++i) {
    jobs_[i].submit -= Time(first);
    ApplyMappingRules(options_.rules, priorities_[i], &jobs_[i]);
  }
  // Sort small (submit, index) pairs, then put each job in its place by following the
  // permutation's cycles: a job (over 200 bytes) moves about once instead of log n times.
  std::vector<std::pair<int64_t, size_t>> order(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i) order[i] = {jobs_[i].submit.count(), i};
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return jobs_[a.second].id < jobs_[b.second].id;
  });
  std::vector<bool> placed(jobs_.size());
  for (size_t start = 0; start < jobs_.size(); ++start) {
    if (placed[start] || order[start].second == start) continue;
    TraceJob held = std::move(jobs_[start]);
    size_t to = start;
    while (order[to].second != start) {
      jobs_[to] = std::move(jobs_[order[to].second]);
      placed[to] = true;
      to = order[to].second;
    }
    jobs_[to] = std::move(held);
    placed[to] = true;
  }
  trace.jobs = std::move(jobs_);
  return trace;
}

Status ForEachCsvRow(CsvReader* reader, const CsvHeader& header, std::string_view source,
                     const std::function<Status(const CsvRow&)>& row_fn,
                     const std::function<Status(Status)>& reject) {
  std::vector<CsvField> fields;
  while (true) {
    const CsvReader::Next next = reader->Read(&fields);
    if (next == CsvReader::Next::kEnd) return Status::Ok();
    if (next == CsvReader::Next::kError) {
      CHAMBER_RETURN_IF_ERROR(
          reject(ErrorAt(source, reader->Locate(reader->error_offset()), reader->error())));
      continue;
    }
    if (fields.size() != header.num_fields()) {
      const size_t at = fields.size() > header.num_fields() ? fields[header.num_fields()].offset
                                                            : reader->record_end();
      CHAMBER_RETURN_IF_ERROR(
          reject(ErrorAt(source, reader->Locate(at),
                         "expected " + std::to_string(header.num_fields()) +
                             " fields as in the header, found " + std::to_string(fields.size()))));
      continue;
    }
    const Status s = row_fn(CsvRow(*reader, header, source, fields));
    if (!s.ok()) CHAMBER_RETURN_IF_ERROR(reject(s));
  }
}

Status AddCsvJob(JobSink* sink, const CsvRow& row, size_t id_col, ParsedJob job) {
  if (const std::optional<int64_t> first = sink->SeenAt(job.job.id)) {
    return row.Error(id_col, "duplicate id " + Quote(job.job.id) + " (first on line " +
                                 std::to_string(*first) + ")");
  }
  sink->Add(std::move(job), row.line());
  return Status::Ok();
}

namespace {

// As the device plugin names its resources (nvidia.com/mig-<profile>): "3g.40gb", with an
// attribute suffix such as "+me".
bool IsMigProfileName(std::string_view name) {
  if (core::MigProfileMilli(name) <= 0) return false;
  const std::string_view suffix = name.substr(name.find("gb") + 2);
  if (suffix.empty()) return true;
  if (suffix.size() < 2 || suffix[0] != '+') return false;
  for (char c : suffix.substr(1))
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.')) return false;
  return true;
}

}  // namespace

Status CheckShape(TraceJob* job, std::string_view* field, const ShapeFields& names) {
  if (job->pods < 1) {
    *field = names.pods;
    return Status::InvalidArgument("must be at least 1, got " + std::to_string(job->pods));
  }
  if (job->gpus_per_pod < 0) {
    *field = names.gpus;
    return Status::InvalidArgument("must not be negative, got " +
                                   std::to_string(job->gpus_per_pod));
  }
  if (job->gpu_milli_per_pod < 0 || job->gpu_milli_per_pod > 1000) {
    *field = names.milli;
    return Status::InvalidArgument("must be between 0 and 1000, got " +
                                   std::to_string(job->gpu_milli_per_pod));
  }
  if (job->gpu_milli_per_pod == 1000 && job->gpus_per_pod == 0) {
    job->gpus_per_pod = 1;  // a whole GPU
    job->gpu_milli_per_pod = 0;
  } else if (job->gpu_milli_per_pod == 1000) {
    job->gpu_milli_per_pod = 0;
  } else if (job->gpu_milli_per_pod > 0 && job->gpus_per_pod > 0) {
    *field = names.milli;
    return Status::InvalidArgument("a GPU fraction (" + std::to_string(job->gpu_milli_per_pod) +
                                   ") is for pods with less than one GPU, but " +
                                   std::string(names.gpus) + " is " +
                                   std::to_string(job->gpus_per_pod));
  }
  if (job->gpu_memory_mib_per_pod < 0) {
    *field = names.gpu_memory;
    return Status::InvalidArgument("must not be negative, got " +
                                   std::to_string(job->gpu_memory_mib_per_pod));
  }
  if (job->gpu_memory_mib_per_pod > 0 && job->gpus_per_pod > 0) {
    *field = names.gpu_memory;
    return Status::InvalidArgument(
        "GPU memory (" + std::to_string(job->gpu_memory_mib_per_pod) +
        " MiB) is asked for by a share of one GPU, but " + std::string(names.gpus) + " is " +
        std::to_string(job->gpus_per_pod) + " (a pod with whole GPUs has all of their memory)");
  }
  if (job->mig_profile.empty()) {
    if (job->mig_devices_per_pod != 0) {
      *field = names.mig_devices;
      return Status::InvalidArgument(
          "asks for " + std::to_string(job->mig_devices_per_pod) +
          (job->mig_devices_per_pod == 1 ? " MIG device" : " MIG devices") +
          " of no profile: " + std::string(names.mig_profile) + " is empty");
    }
    return Status::Ok();
  }
  if (!IsMigProfileName(job->mig_profile)) {
    *field = names.mig_profile;
    return Status::InvalidArgument(Quote(job->mig_profile) +
                                   " is not a MIG profile (e.g. 1g.10gb, 3g.40gb, 1g.10gb+me)");
  }
  if (job->mig_devices_per_pod == 0) job->mig_devices_per_pod = 1;
  if (job->mig_devices_per_pod < 1 || job->mig_devices_per_pod > core::kMaxMigDevices) {
    *field = names.mig_devices;
    return Status::InvalidArgument("must be between 1 and " + std::to_string(core::kMaxMigDevices) +
                                   ", got " + std::to_string(job->mig_devices_per_pod));
  }
  if (job->gpus_per_pod > 0 || job->gpu_milli_per_pod > 0 || job->gpu_memory_mib_per_pod > 0) {
    *field = names.mig_profile;
    if (job->gpu_memory_mib_per_pod > 0 && job->gpus_per_pod == 0 && job->gpu_milli_per_pod == 0)
      return Status::InvalidArgument(
          "a pod asks for MIG devices or for a share of a GPU, not both: " +
          std::string(names.gpu_memory) + " is " + std::to_string(job->gpu_memory_mib_per_pod) +
          " MiB");
    return Status::InvalidArgument(
        "a pod asks for MIG devices or for GPUs, not both: " +
        std::string(job->gpus_per_pod > 0 ? names.gpus : names.milli) + " is " +
        std::to_string(job->gpus_per_pod > 0 ? job->gpus_per_pod : job->gpu_milli_per_pod));
  }
  return Status::Ok();
}

}  // namespace chamber::sim::trace_internal
