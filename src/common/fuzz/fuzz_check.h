// What the libFuzzer harnesses (src/*/fuzz/) share: a property check that aborts with a message
// (libFuzzer saves the input; the corpus replay test fails), and the rule every parser's errors
// keep.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/status.h"

namespace chamber::fuzz {

[[noreturn]] inline void Fail(std::string_view what, std::string_view detail) {
  const std::string report =
      "fuzz property failed: " + std::string(what) + "\n  " + std::string(detail) + "\n";
  std::fputs(report.c_str(), stderr);
  std::abort();
}

inline void Check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) Fail(what, detail);
}

// An error must say what is wrong and where: a message that is not empty and names the input
// (`place`: the source name the harness passed, or a field path).
inline void CheckError(const Status& s, std::string_view place) {
  Check(!s.ok(), "expected an error");
  Check(!s.message().empty(), "an error without a message");
  Check(s.message().find(place) != std::string::npos, "the error does not name the place",
        std::string(s.message()) + " (expected it to name \"" + std::string(place) + "\")");
}

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace chamber::fuzz
