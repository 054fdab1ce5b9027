// Chamber's trace format as JSON lines: one flat object a line, the CSV columns in camelCase.
//
// Lines go through nlohmann's SAX interface into one reused set of value slots, not through a
// DOM: building a std::map per line cost most of the time of a million-line read.
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/gpu_share_ask.h"
#include "common/quantity.h"
#include "sim/trace/fields.h"
#include "sim/trace/reader.h"

namespace chamber::sim::trace_internal {
namespace {

using nlohmann::json;

enum Key : size_t {
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
  kNumKeys,
};

constexpr std::string_view kKeys[kNumKeys] = {
    "id",           "queue",     "user",       "priority",         "submitTime",
    "duration",     "pods",      "gpusPerPod", "gpuMilliPerPod",   "cpuPerPod",
    "memoryPerPod", "gpuModels", "migProfile", "migDevicesPerPod", "gpuMemoryPerPod",
};

// One top-level value of a line, as the SAX events gave it.
struct Value {
  enum class Kind { kAbsent, kNull, kBool, kInt, kUnsigned, kFloat, kString, kStrings };
  Kind kind = Kind::kAbsent;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string s;                  // kString; the literal of a kFloat
  std::vector<std::string> list;  // kStrings: an array of strings
  bool given() const { return kind != Kind::kAbsent && kind != Kind::kNull; }

  std::string_view type_name() const {
    switch (kind) {
      case Kind::kAbsent:
      case Kind::kNull:
        return "null";
      case Kind::kBool:
        return "boolean";
      case Kind::kInt:
      case Kind::kUnsigned:
      case Kind::kFloat:
        return "number";
      case Kind::kString:
        return "string";
      case Kind::kStrings:
        return "array";
    }
    return "value";
  }
};

// Receives the SAX events of one line. A problem stops the parse and is kept in error_key() and
// error() (or parse_error_at() for bad JSON).
class LineHandler {
 public:
  void Reset() {
    for (Value& v : values_) v.kind = Value::Kind::kAbsent;
    depth_ = 0;
    current_ = kNumKeys;
    error_.clear();
    error_key_.clear();
    parse_error_at_ = std::string::npos;
  }

  const Value& operator[](Key k) const { return values_[k]; }
  const std::string& error() const { return error_; }
  const std::string& error_key() const { return error_key_; }
  size_t parse_error_at() const { return parse_error_at_; }

  // nlohmann::json_sax interface.
  bool null() { return Scalar(Value::Kind::kNull); }
  bool boolean(bool) { return Scalar(Value::Kind::kBool); }
  bool number_integer(json::number_integer_t v) {
    if (!Scalar(Value::Kind::kInt)) return false;
    values_[current_].i = v;
    return true;
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (!Scalar(Value::Kind::kUnsigned)) return false;
    values_[current_].u = v;
    return true;
  }
  bool number_float(json::number_float_t v, const json::string_t& literal) {
    if (!Scalar(Value::Kind::kFloat)) return false;
    values_[current_].d = v;
    values_[current_].s = literal;
    return true;
  }
  bool string(json::string_t& v) {
    if (depth_ == 2 && current_ < kNumKeys) {  // an element of a top-level array
      values_[current_].list.push_back(std::move(v));
      return true;
    }
    if (!Scalar(Value::Kind::kString)) return false;
    values_[current_].s = std::move(v);
    return true;
  }
  bool binary(json::binary_t&) { return Fail("", "unexpected binary value"); }
  bool start_object(size_t) {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    return Fail(Name(), "expected a string, number or list of strings, got object");
  }
  bool end_object() {
    depth_ = 0;
    return true;
  }
  bool key(json::string_t& k) {
    for (size_t i = 0; i < kNumKeys; ++i) {
      if (kKeys[i] == k) {
        if (values_[i].kind != Value::Kind::kAbsent) return Fail(k, "appears twice");
        current_ = i;
        return true;
      }
    }
    std::string known;
    for (std::string_view name : kKeys) known += (known.empty() ? "" : ", ") + std::string(name);
    return Fail(k, "unknown field (known: " + known + ")");
  }
  bool start_array(size_t) {
    if (depth_ == 0) return Fail("", "expected a JSON object, got array");
    if (depth_ == 1) {
      depth_ = 2;
      values_[current_].kind = Value::Kind::kStrings;
      values_[current_].list.clear();
      return true;
    }
    return Fail(Name(), "expected a list of strings");
  }
  bool end_array() {
    depth_ = 1;
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    parse_error_at_ = position;
    error_ = Reason(e.what());
    return false;
  }

 private:
  std::string Name() const { return current_ < kNumKeys ? std::string(kKeys[current_]) : ""; }

  bool Scalar(Value::Kind kind) {
    if (depth_ == 0) {
      Value v;
      v.kind = kind;
      return Fail("", "expected a JSON object, got " + std::string(v.type_name()));
    }
    if (depth_ == 2) return Fail(Name(), "expected a list of strings");
    values_[current_].kind = kind;
    return true;
  }

  bool Fail(std::string_view key, std::string why) {
    error_key_ = key;
    error_ = std::move(why);
    return false;
  }

  // nlohmann's message without its "[json.exception...] parse error at line 1, column 5: ".
  static std::string Reason(std::string_view what) {
    const size_t column = what.find("column ");
    const size_t colon = what.find(": ", column == std::string_view::npos ? 0 : column);
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
    return "invalid JSON: " + std::string(what);
  }

  Value values_[kNumKeys];
  int depth_ = 0;
  size_t current_ = kNumKeys;
  std::string error_;
  std::string error_key_;
  size_t parse_error_at_ = std::string::npos;
};

// Errors on one line, placed at the field's key when the key can be found.
class LineErrors {
 public:
  LineErrors(std::string_view text, size_t start, size_t end, int64_t line, std::string_view source)
      : text_(text), start_(start), end_(end), line_(line), source_(source) {}

  Status Field(std::string_view key, std::string_view why) const {
    if (key.empty()) return AtByte(0, why);
    const std::string quoted = "\"" + std::string(key) + "\"";
    const size_t at = text_.substr(start_, end_ - start_).find(quoted);
    return ErrorAt(source_, LocateIn(text_, start_, line_, start_ + (at == npos ? 0 : at)),
                   "field " + std::string(key) + ": " + std::string(why));
  }
  Status AtByte(size_t byte, std::string_view why) const {
    return ErrorAt(source_, LocateIn(text_, start_, line_, std::min(start_ + byte, end_)), why);
  }

 private:
  static constexpr size_t npos = std::string_view::npos;
  std::string_view text_;
  size_t start_;
  size_t end_;
  int64_t line_;
  std::string_view source_;
};

Result<int64_t> Int(const Value& v, int64_t min, int64_t max) {
  int64_t out = 0;
  switch (v.kind) {
    case Value::Kind::kInt:
      out = v.i;
      break;
    case Value::Kind::kUnsigned:
      if (v.u > static_cast<uint64_t>(max)) {
        return Status::InvalidArgument(std::to_string(v.u) + " is too large");
      }
      out = static_cast<int64_t>(v.u);
      break;
    case Value::Kind::kFloat:
      if (!std::isfinite(v.d) || v.d != std::floor(v.d) || std::abs(v.d) > 9e15) {
        return Status::InvalidArgument("expected an integer, got " + v.s);
      }
      out = static_cast<int64_t>(v.d);
      break;
    case Value::Kind::kString:
      return ParseInteger(v.s, min, max);
    default:
      return Status::InvalidArgument("expected an integer, got " + std::string(v.type_name()));
  }
  if (out < min || out > max) {
    return Status::InvalidArgument(std::to_string(out) + " is out of range [" +
                                   std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return out;
}

double Number(const Value& v) {
  return v.kind == Value::Kind::kInt        ? static_cast<double>(v.i)
         : v.kind == Value::Kind::kUnsigned ? static_cast<double>(v.u)
                                            : v.d;
}

bool IsNumber(const Value& v) {
  return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kUnsigned ||
         v.kind == Value::Kind::kFloat;
}

// Seconds as a number, or a string as ParseTimeMs / ParseSecondsMs read it.
Result<int64_t> Seconds(const Value& v, bool is_time) {
  if (v.kind == Value::Kind::kString) return is_time ? ParseTimeMs(v.s) : ParseSecondsMs(v.s);
  if (!IsNumber(v)) {
    return Status::InvalidArgument("expected seconds, got " + std::string(v.type_name()));
  }
  if (v.kind == Value::Kind::kInt || v.kind == Value::Kind::kUnsigned) {
    const bool in_range = v.kind == Value::Kind::kInt ? v.i >= 0 && v.i <= kMaxMillis / 1000
                                                      : v.u <= kMaxMillis / 1000;
    if (!in_range) return Status::InvalidArgument("seconds out of range");
    return (v.kind == Value::Kind::kInt ? v.i : static_cast<int64_t>(v.u)) * 1000;
  }
  if (!std::isfinite(v.d) || v.d < 0 || v.d * 1000 > static_cast<double>(kMaxMillis)) {
    return Status::InvalidArgument("seconds out of range");
  }
  return static_cast<int64_t>(std::llround(v.d * 1000));
}

// A Kubernetes quantity string, or a number (cores for CPU, bytes for memory).
Result<int64_t> Quantity(const Value& v, bool cpu) {
  int64_t out = 0;
  if (v.kind == Value::Kind::kString) {
    Result<int64_t> r = cpu ? ParseCpuMilli(v.s) : ParseBytes(v.s);
    if (!r.ok()) return r;
    out = *r;
  } else if (IsNumber(v)) {
    const double d = Number(v) * (cpu ? 1000 : 1);
    if (!std::isfinite(d) || std::abs(d) > 9e18) {
      return Status::InvalidArgument("quantity out of range");
    }
    out = static_cast<int64_t>(std::llround(d));
  } else {
    return Status::InvalidArgument("expected a quantity, got " + std::string(v.type_name()));
  }
  if (out < 0) return Status::InvalidArgument("must not be negative");
  return out;
}

Status ToJob(const LineHandler& h, const LineErrors& at, ParsedJob* out) {
  TraceJob& job = out->job;
  const auto text = [&](Key k, std::string* dst) -> Status {
    const Value& v = h[k];
    if (!v.given()) return Status::Ok();
    if (v.kind == Value::Kind::kString) {
      *dst = v.s;
    } else if (v.kind == Value::Kind::kInt) {
      *dst = std::to_string(v.i);  // numeric ids
    } else if (v.kind == Value::Kind::kUnsigned) {
      *dst = std::to_string(v.u);
    } else {
      return at.Field(kKeys[k], "expected a string, got " + std::string(v.type_name()));
    }
    return Status::Ok();
  };
  const auto integer = [&](Key k, int64_t min, int64_t max, auto* dst) -> Status {
    const Value& v = h[k];
    if (!v.given()) return Status::Ok();
    Result<int64_t> r = Int(v, min, max);
    if (!r.ok()) return at.Field(kKeys[k], r.status().message());
    *dst = static_cast<std::remove_pointer_t<decltype(dst)>>(*r);
    return Status::Ok();
  };

  CHAMBER_RETURN_IF_ERROR(text(kId, &job.id));
  if (job.id.empty()) return at.Field("id", "is required and must not be empty");
  CHAMBER_RETURN_IF_ERROR(text(kQueue, &job.group));
  CHAMBER_RETURN_IF_ERROR(text(kUser, &job.user));
  if (h[kPriority].given()) {
    int32_t p = 0;
    CHAMBER_RETURN_IF_ERROR(integer(kPriority, std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max(), &p));
    out->priority = p;
  }
  for (const Key k : {kSubmit, kDuration}) {
    if (!h[k].given()) return at.Field(kKeys[k], "is required");
    Result<int64_t> ms = Seconds(h[k], k == kSubmit);
    if (!ms.ok()) return at.Field(kKeys[k], ms.status().message());
    (k == kSubmit ? job.submit : job.duration) = Duration(*ms);
  }
  constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();
  CHAMBER_RETURN_IF_ERROR(integer(kPods, 1, kMaxCount, &job.pods));
  CHAMBER_RETURN_IF_ERROR(integer(kGpus, 0, kMaxCount, &job.gpus_per_pod));
  CHAMBER_RETURN_IF_ERROR(integer(kGpuMilli, 0, 1000, &job.gpu_milli_per_pod));
  for (const Key k : {kCpu, kMemory}) {
    if (!h[k].given()) continue;
    Result<int64_t> q = Quantity(h[k], k == kCpu);
    if (!q.ok()) return at.Field(kKeys[k], q.status().message());
    (k == kCpu ? job.cpu_milli_per_pod : job.memory_bytes_per_pod) = *q;
  }
  if (const Value& models = h[kModels]; models.kind == Value::Kind::kString) {
    job.gpu_models = SplitModels(models.s);
  } else if (models.kind == Value::Kind::kStrings) {
    std::string joined;
    for (const std::string& m : models.list) joined += m + "|";
    job.gpu_models = SplitModels(joined);
  } else if (models.given()) {
    return at.Field("gpuModels",
                    "expected a list of strings, got " + std::string(models.type_name()));
  }
  if (const Value& mig = h[kMigProfile]; mig.given() && mig.kind != Value::Kind::kString) {
    return at.Field(kKeys[kMigProfile], "expected a string, got " + std::string(mig.type_name()));
  }
  CHAMBER_RETURN_IF_ERROR(text(kMigProfile, &job.mig_profile));
  CHAMBER_RETURN_IF_ERROR(integer(kMigDevices, 0, kMaxCount, &job.mig_devices_per_pod));
  if (const Value& mem = h[kGpuMemory]; mem.given()) {
    // MiB as an integer, or a string as the annotation takes it ("20Gi", "20480").
    Result<int64_t> mib = Status::InvalidArgument(
        "expected MiB or a quantity such as \"20Gi\", got " + std::string(mem.type_name()));
    if (mem.kind == Value::Kind::kString) mib = gpu_share::ParseGpuMemoryMib(mem.s);
    if (mem.kind == Value::Kind::kInt || mem.kind == Value::Kind::kUnsigned)
      mib = gpu_share::ParseGpuMemoryMib(mem.kind == Value::Kind::kInt ? std::to_string(mem.i)
                                                                       : std::to_string(mem.u));
    if (!mib.ok()) return at.Field(kKeys[kGpuMemory], mib.status().message());
    job.gpu_memory_mib_per_pod = *mib;
  }
  std::string_view field;
  if (Status s = CheckShape(&job, &field,
                            {"pods", "gpusPerPod", "gpuMilliPerPod", "migProfile",
                             "migDevicesPerPod", "gpuMemoryPerPod"});
      !s.ok()) {
    return at.Field(field, s.message());
  }
  return Status::Ok();
}

}  // namespace

Status ParseChamberJsonl(std::string_view text, JobSink* sink) {
  LineHandler handler;
  size_t pos = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  int64_t line = 1;
  for (; pos < text.size(); ++line) {
    const size_t start = pos;
    const size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (end > start && text[end - 1] == '\r') --end;
    const std::string_view body = text.substr(start, end - start);
    if (Trim(body).empty()) continue;
    const LineErrors at(text, start, end, line, sink->source());
    handler.Reset();
    Status s;
    try {
      if (json::sax_parse(body.begin(), body.end(), &handler)) {
        ParsedJob job;
        s = ToJob(handler, at, &job);
        if (s.ok()) {
          if (const std::optional<int64_t> first = sink->SeenAt(job.job.id)) {
            s = at.Field("id", "duplicate id " + Quote(job.job.id) + " (first on line " +
                                   std::to_string(*first) + ")");
          } else {
            sink->Add(std::move(job), line);
            continue;
          }
        }
      } else if (handler.parse_error_at() != std::string::npos) {
        const size_t byte = handler.parse_error_at();
        s = at.AtByte(byte > 0 ? byte - 1 : 0, handler.error());
      } else {
        s = at.Field(handler.error_key(), handler.error());
      }
    } catch (const json::exception& e) {  // not expected from SAX parsing; never let it out
      s = at.AtByte(0, std::string("invalid JSON: ") + e.what());
    }
    CHAMBER_RETURN_IF_ERROR(sink->Reject(std::move(s)));
  }
  return Status::Ok();
}

}  // namespace chamber::sim::trace_internal
