// Durations and RFC 3339 times as Chamber reads and writes them: one parser and one formatter
// each, used by the configuration files, the simulator's traces, the Kubernetes client, the API
// and the logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace chamber {

// Durations: "250ms", "30s", "5m", "1h30m", "2d", "0". A bare number ("90", "1.5") is seconds.
// Negative durations are rejected; the error quotes the text and shows the forms.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);
// The shortest form ParseDuration reads back: "1h30m", "250ms", "0s".
std::string FormatDuration(std::chrono::milliseconds d);

// How many digits of the second a formatted time carries.
enum class TimeFraction {
  kNone,              // 2026-01-02T03:04:05Z (Kubernetes Time)
  kMillis,            // 2026-01-02T03:04:05.000Z (logs)
  kMicros,            // 2026-01-02T03:04:05.000000Z (Kubernetes MicroTime)
  kMillisWhenNonZero  // 2026-01-02T03:04:05Z, or 2026-01-02T03:04:05.120Z (the API)
};

// RFC 3339 in UTC. Digits the fraction does not show are dropped (the time rounds down).
std::string FormatRfc3339(std::chrono::system_clock::time_point t,
                          TimeFraction fraction = TimeFraction::kNone);
// The same for milliseconds since the Unix epoch.
std::string FormatRfc3339Ms(int64_t unix_ms,
                            TimeFraction fraction = TimeFraction::kMillisWhenNonZero);

// RFC 3339 with a time zone: "2026-01-02T03:04:05Z", "...05.123456Z", "...05+02:00". Fractions
// keep microseconds; a leap second (:60) reads as the second after :59; years are those the
// system clock holds (1677 to 2262). The error quotes the
// text: "\"x\" is not an RFC 3339 time (like 2026-01-02T03:04:05Z)".
Result<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text);

}  // namespace chamber
