// Shared helpers of the trace tests.
#pragma once

#include <string>

#include "sim/trace/trace.h"

namespace chamber::sim::testing {

inline std::string DataPath(const std::string& name) {
  return std::string(CHAMBER_TRACE_TEST_DATA) + "/" + name;
}

inline TraceReadOptions Skipping() {
  TraceReadOptions o;
  o.skip_bad_lines = true;
  return o;
}

}  // namespace chamber::sim::testing
