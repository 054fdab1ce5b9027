#include "sim/trace/trace.h"

#include <algorithm>
#include <fstream>

#include "common/file.h"
#include "sim/trace/reader.h"

namespace chamber::sim {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Chamber CSV or JSONL by extension, else by the file's first non-blank byte ('{': JSONL).
TraceFormat ChamberFormatOf(std::string_view path) {
  if (EndsWith(path, ".csv")) return TraceFormat::kChamberCsv;
  if (EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson") || EndsWith(path, ".json")) {
    return TraceFormat::kChamberJsonl;
  }
  std::ifstream in{std::string(path), std::ios::binary};
  char c = 0;
  while (in.get(c)) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{' ? TraceFormat::kChamberJsonl : TraceFormat::kChamberCsv;
  }
  return TraceFormat::kChamberCsv;  // unreadable or empty: ReadTrace reports it
}

}  // namespace

Result<TraceFormat> ParseTraceFormat(std::string_view name, std::string_view path) {
  if (name == "chamber") return ChamberFormatOf(path);
  if (name == "chamber-csv") return TraceFormat::kChamberCsv;
  if (name == "chamber-jsonl") return TraceFormat::kChamberJsonl;
  if (name == "helios") return TraceFormat::kHelios;
  if (name == "philly") return TraceFormat::kPhilly;
  if (name == "openb") return TraceFormat::kOpenb;
  return Status::InvalidArgument("unknown trace format \"" + std::string(name) +
                                 "\" (known: chamber, chamber-csv, chamber-jsonl, helios, "
                                 "philly, openb)");
}

Result<Trace> ParseTrace(std::string_view text, std::string_view source, TraceFormat format,
                         const TraceReadOptions& options) {
  trace_internal::JobSink sink(source, options);
  if (format != TraceFormat::kPhilly) {  // one job a line
    sink.Reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  }
  switch (format) {
    case TraceFormat::kChamberCsv:
      CHAMBER_RETURN_IF_ERROR(trace_internal::ParseChamberCsv(text, &sink));
      break;
    case TraceFormat::kChamberJsonl:
      CHAMBER_RETURN_IF_ERROR(trace_internal::ParseChamberJsonl(text, &sink));
      break;
    case TraceFormat::kHelios:
      CHAMBER_RETURN_IF_ERROR(trace_internal::ParseHelios(text, &sink));
      break;
    case TraceFormat::kPhilly:
      CHAMBER_RETURN_IF_ERROR(trace_internal::ParsePhilly(text, &sink));
      break;
    case TraceFormat::kOpenb:
      CHAMBER_RETURN_IF_ERROR(trace_internal::ParseOpenb(text, &sink));
      break;
  }
  return std::move(sink).Finish();
}

Result<Trace> ReadTrace(const std::string& path, TraceFormat format,
                        const TraceReadOptions& options) {
  CHAMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseTrace(text, path, format, options);
}

}  // namespace chamber::sim
