// Durations and RFC 3339 times (common/time.h): the configuration files, traces, the Kubernetes
// client and the API's time parameters read them. Properties: an error quotes the text; what
// parses, formats to text that parses back to the same value.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fuzz/fuzz_check.h"
#include "common/time.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using chamber::Result;
  namespace fuzz = chamber::fuzz;
  const std::string_view text = fuzz::Text(data, size);

  Result<std::chrono::milliseconds> d = chamber::ParseDuration(text);
  if (d.ok()) {
    fuzz::Check(d->count() >= 0, "a negative duration");
    const std::string formatted = chamber::FormatDuration(*d);
    Result<std::chrono::milliseconds> back = chamber::ParseDuration(formatted);
    fuzz::Check(back.ok() && *back == *d, "FormatDuration's text does not read back", formatted);
  } else {
    fuzz::CheckError(d.status(), text);
  }

  Result<std::chrono::system_clock::time_point> t = chamber::ParseRfc3339(text);
  if (t.ok()) {
    const std::string formatted = chamber::FormatRfc3339(*t, chamber::TimeFraction::kMicros);
    Result<std::chrono::system_clock::time_point> back = chamber::ParseRfc3339(formatted);
    fuzz::Check(back.ok() && *back == std::chrono::floor<std::chrono::microseconds>(*t),
                "FormatRfc3339's text does not read back", formatted);
  } else {
    fuzz::CheckError(t.status(), text);
  }
  return 0;
}
