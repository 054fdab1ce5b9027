// What every trace reader shares: the job list being built, the bookkeeping of skipped lines,
// and the final pass (shift to 0, mapping, sort). Each format is one Parse* function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/trace/csv.h"
#include "sim/trace/trace.h"

namespace chamber::sim::trace_internal {

// A job as read, before the shift and the mapping.
struct ParsedJob {
  TraceJob job;
  std::optional<int32_t> priority;  // the trace's own priority, if it has one
};

class JobSink {
 public:
  JobSink(std::string_view source, const TraceReadOptions& options)
      : source_(source), options_(options) {}

  std::string_view source() const { return source_; }

  // A malformed line (or Philly job): under skip_bad_lines it is counted and OK comes back,
  // else the error itself.
  Status Reject(Status error);

  // Line of an earlier job with this id, if any.
  std::optional<int64_t> SeenAt(const std::string& id) const;
  void Add(ParsedJob job, int64_t line);
  // Room for about `jobs` jobs (a reader's estimate, e.g. its line count).
  void Reserve(size_t jobs);

  // Shifts times so the first submit is 0, applies the mapping rules, sorts by (submit, id).
  Trace Finish() &&;

 private:
  // Index of the job with `id` (hash `hash`), if any.
  std::optional<size_t> Find(std::string_view id, uint64_t hash) const;
  void Insert(uint64_t hash, size_t job);
  static uint32_t Tag(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }

  std::string_view source_;
  const TraceReadOptions& options_;
  std::vector<TraceJob> jobs_;
  std::vector<std::optional<int32_t>> priorities_;  // the trace's own, per job
  std::vector<int64_t> lines_;                      // line of each job
  // Open-addressing hash index of the ids: (high bits of the hash, job index + 1); index 0
  // marks an empty slot. A std::unordered_map<std::string, ...> spent most of the time of a
  // million-line read in allocation and pointer chasing; 8-byte slots keep the misses few.
  struct Slot {
    uint32_t hash = 0;
    uint32_t index = 0;
  };
  std::vector<Slot> slots_;
  int64_t skipped_ = 0;
  std::vector<std::string> examples_;
};

// Reads every record of a CSV body, calling `row_fn` for each; malformed records (broken
// quoting, wrong field count, or an error from `row_fn`) go through `reject`.
Status ForEachCsvRow(CsvReader* reader, const CsvHeader& header, std::string_view source,
                     const std::function<Status(const CsvRow&)>& row_fn,
                     const std::function<Status(Status)>& reject);

// Adds a CSV job, failing on an id seen before. `id_col` is the id's format column.
Status AddCsvJob(JobSink* sink, const CsvRow& row, size_t id_col, ParsedJob job);

Status ParseChamberCsv(std::string_view text, JobSink* sink);
Status ParseChamberJsonl(std::string_view text, JobSink* sink);
Status ParseHelios(std::string_view text, JobSink* sink);
Status ParsePhilly(std::string_view text, JobSink* sink);
Status ParseOpenb(std::string_view text, JobSink* sink);

// A format's names of the fields CheckShape checks, for its messages.
struct ShapeFields {
  std::string_view pods, gpus, milli, mig_profile, mig_devices, gpu_memory;
};

// Checks pods, GPU counts, GPU fractions, a share's GPU memory and MIG devices; normalises a whole
// GPU given as 1000 milli, and a MIG profile without a device count to one device. Returns the
// reason and the offending field (`*field` is one of `names`).
Status CheckShape(TraceJob* job, std::string_view* field, const ShapeFields& names);

}  // namespace chamber::sim::trace_internal
