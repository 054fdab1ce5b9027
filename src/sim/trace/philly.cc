// Microsoft Philly (msr-fiddle/philly-traces) cluster_job_log: one JSON array of jobs
//   {"status", "vc", "jobid", "user", "submitted_time",
//    "attempts": [{"start_time", "end_time", "detail": [{"ip", "gpus": ["gpu0", ...]}]}]}
// with times as "YYYY-MM-DD HH:MM:SS" and "None" (or null) where a time was not logged.
//
// The array is split into its jobs by a small scanner (strings and nesting only), and each job is
// parsed on its own: a broken job is reported at its own line and can be skipped, and memory
// holds one job's DOM at a time instead of the whole file's.
#include <nlohmann/json.hpp>

#include "common/json_reader.h"
#include "sim/trace/fields.h"
#include "sim/trace/reader.h"

namespace chamber::sim::trace_internal {
namespace {

using nlohmann::json;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Finds the end of the JSON value starting at `begin`: the first ',' or ']' outside strings and
// brackets. Returns text.size() when the text ends first.
size_t ValueEnd(std::string_view text, size_t begin) {
  int64_t depth = 0;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return text.size();
}

class JobError {
 public:
  JobError(std::string_view source, Locator* locator, size_t offset, size_t index)
      : source_(source), locator_(locator), offset_(offset), index_(index) {}

  void set_id(std::string id) { id_ = std::move(id); }

  // "SOURCE:LINE:COL: job INDEX (JOBID): field NAME: why", at the job's opening brace.
  Status Field(std::string_view field, std::string_view why) const {
    std::string what = Prefix();
    if (!field.empty()) {
      what += "field ";
      what += field;
      what += ": ";
    }
    what += why;
    return ErrorAt(source_, locator_->Locate(offset_), what);
  }
  Status AtByte(size_t byte, std::string_view why) const {
    return ErrorAt(source_, locator_->Locate(offset_ + byte), Prefix() + std::string(why));
  }
  // A read of kJob's ("FIELD: why") as this job's error: "SOURCE:LINE:COL: job INDEX (JOBID):
  // field FIELD: why". The job is located only for an error.
  Status Read(Status s) const {
    if (s.ok()) return s;
    return ErrorAt(source_, locator_->Locate(offset_), Prefix() + "field " + s.message());
  }

 private:
  std::string Prefix() const {
    std::string p = "job " + std::to_string(index_);
    if (!id_.empty()) p += " (" + id_ + ")";
    return p + ": ";
  }

  std::string_view source_;
  Locator* locator_;
  size_t offset_;
  size_t index_;
  std::string id_;
};

// A job's members are read with JsonReader (common/json_reader.h), at their path in the job;
// JobError::Read puts the job's place before the path.
const JsonReader kJob;

// The time member `key` of `obj` (at `path`): a date-time string, or "None"/null/absent (nullopt).
Result<std::optional<int64_t>> OptionalTime(const json& obj, std::string_view key,
                                            std::string_view path, const JobError& err) {
  std::string s;
  CHAMBER_RETURN_IF_ERROR(err.Read(kJob.String(obj, key, path, &s)));
  if (IsMissing(s)) return std::optional<int64_t>();
  Result<int64_t> t = ParseTimeMs(s);
  if (!t.ok()) return err.Field(JsonReader::Join(path, key), t.status().message());
  return std::optional<int64_t>(*t);
}

Status JobToTrace(const json& obj, JobError* err, ParsedJob* out) {
  if (!obj.is_object()) {
    return err->Field("", "expected a JSON object, got " + std::string(obj.type_name()));
  }
  TraceJob& job = out->job;
  CHAMBER_RETURN_IF_ERROR(err->Read(kJob.String(obj, "jobid", "", &job.id)));
  if (job.id.empty()) return err->Field("jobid", "missing");
  err->set_id(job.id);
  CHAMBER_RETURN_IF_ERROR(err->Read(kJob.String(obj, "user", "", &job.user)));
  CHAMBER_RETURN_IF_ERROR(err->Read(kJob.String(obj, "vc", "", &job.group)));

  CHAMBER_ASSIGN_OR_RETURN(const std::optional<int64_t> submitted,
                           OptionalTime(obj, "submitted_time", "", *err));
  if (!submitted) return err->Field("submitted_time", "missing");
  job.submit = Time(*submitted);

  const json* attempts = nullptr;
  CHAMBER_RETURN_IF_ERROR(err->Read(kJob.Array(obj, "attempts", "", &attempts)));
  if (attempts == nullptr || attempts->empty()) {
    return err->Field("attempts", "no attempts: the job never ran");
  }
  // GPUs: the largest attempt; pods: the machines of that attempt.
  int64_t gpus = 0;
  int64_t machines = 0;
  std::optional<int64_t> first_start;
  std::optional<int64_t> last_end;
  for (size_t a = 0; a < attempts->size(); ++a) {
    const json& attempt = (*attempts)[a];
    const std::string path = JsonReader::Element("attempts", a);
    CHAMBER_RETURN_IF_ERROR(err->Read(kJob.ObjectValue(attempt, path)));
    CHAMBER_ASSIGN_OR_RETURN(const std::optional<int64_t> start,
                             OptionalTime(attempt, "start_time", path, *err));
    CHAMBER_ASSIGN_OR_RETURN(const std::optional<int64_t> end,
                             OptionalTime(attempt, "end_time", path, *err));
    if (a == 0) first_start = start;
    if (a + 1 == attempts->size()) last_end = end;
    const json* detail = nullptr;
    CHAMBER_RETURN_IF_ERROR(err->Read(kJob.Array(attempt, "detail", path, &detail)));
    if (detail == nullptr) continue;
    int64_t attempt_gpus = 0;
    for (size_t m = 0; m < detail->size(); ++m) {
      const json& machine = (*detail)[m];
      const std::string mpath = JsonReader::Element(JsonReader::Join(path, "detail"), m);
      CHAMBER_RETURN_IF_ERROR(err->Read(kJob.ObjectValue(machine, mpath)));
      const json* list = nullptr;
      CHAMBER_RETURN_IF_ERROR(err->Read(kJob.Array(machine, "gpus", mpath, &list)));
      if (list != nullptr) attempt_gpus += static_cast<int64_t>(list->size());
    }
    if (attempt_gpus > gpus || (attempt_gpus == gpus && machines == 0)) {
      gpus = attempt_gpus;
      machines = static_cast<int64_t>(detail->size());
    }
  }
  if (!first_start) return err->Field("attempts[0].start_time", "missing");
  if (!last_end) {
    return err->Field("attempts[" + std::to_string(attempts->size() - 1) + "].end_time",
                      "missing: the job was still running when the log ended");
  }
  if (*last_end < *first_start) {
    return err->Field("attempts[" + std::to_string(attempts->size() - 1) + "].end_time",
                      "is before attempts[0].start_time");
  }
  if (*first_start < *submitted) {
    return err->Field("attempts[0].start_time", "is before submitted_time");
  }
  job.duration = Duration(*last_end - *first_start);
  const int64_t pods = std::max<int64_t>(machines, 1);
  if (pods > std::numeric_limits<int32_t>::max() || gpus > std::numeric_limits<int32_t>::max()) {
    return err->Field("attempts", "too many machines or GPUs");
  }
  job.pods = static_cast<int32_t>(pods);
  job.gpus_per_pod = static_cast<int32_t>((gpus + pods - 1) / pods);
  return Status::Ok();
}

// nlohmann's message without its "[json.exception...] parse error at line 1, column 5: " part.
std::string JsonReason(const json::exception& e) {
  std::string_view what = e.what();
  const size_t column = what.find("column ");
  const size_t colon = what.find(": ", column == std::string_view::npos ? 0 : column);
  if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  return "invalid JSON: " + std::string(what);
}

}  // namespace

Status ParsePhilly(std::string_view text, JobSink* sink) {
  const std::string_view source = sink->source();
  Locator locator(text);
  size_t pos = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  while (pos < text.size() && IsSpace(text[pos])) ++pos;
  if (pos >= text.size() || text[pos] != '[') {
    return ErrorAt(source, locator.Locate(pos),
                   "expected a JSON array of jobs (Philly cluster_job_log)");
  }
  ++pos;
  for (size_t index = 0;; ++index) {
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
    if (pos >= text.size()) {
      return ErrorAt(source, locator.Locate(pos), "unterminated array: missing ']'");
    }
    if (text[pos] == ']' && index == 0) {
      ++pos;
      break;
    }
    const size_t begin = pos;
    const size_t end = ValueEnd(text, begin);
    const std::string_view body = text.substr(begin, end - begin);
    JobError err(source, &locator, begin, index);
    ParsedJob job;
    Status s;
    if (Trim(body).empty()) {
      s = err.AtByte(0, "expected a job object");
    } else {
      try {
        const json obj = json::parse(body.begin(), body.end());
        s = JobToTrace(obj, &err, &job);
      } catch (const json::parse_error& e) {
        s = err.AtByte(e.byte > 0 ? std::min<size_t>(e.byte - 1, body.size()) : 0, JsonReason(e));
      } catch (const json::exception& e) {
        s = err.AtByte(0, JsonReason(e));
      }
    }
    if (s.ok()) {
      if (const std::optional<int64_t> first = sink->SeenAt(job.job.id)) {
        s = err.Field("jobid", "duplicate id " + Quote(job.job.id) + " (first at job " +
                                   std::to_string(*first) + ")");
      }
    }
    if (s.ok()) {
      sink->Add(std::move(job), static_cast<int64_t>(index));
    } else {
      CHAMBER_RETURN_IF_ERROR(sink->Reject(std::move(s)));
    }
    pos = end;
    if (pos >= text.size()) {
      return ErrorAt(source, locator.Locate(pos), "unterminated array: missing ']'");
    }
    ++pos;
    if (text[pos - 1] == ']') break;
  }
  while (pos < text.size() && IsSpace(text[pos])) ++pos;
  if (pos < text.size()) {
    return ErrorAt(source, locator.Locate(pos), "unexpected text after the array of jobs");
  }
  return Status::Ok();
}

}  // namespace chamber::sim::trace_internal
