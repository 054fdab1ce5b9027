// How bad a GPU's state is: the agent classifies with it and reports it by name, and chamberd's
// health controller reads it back (docs/health.md).
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>

namespace chamber {

// healthy: nothing wrong. degraded: slower or suspect, keep scheduling. unhealthy: fence the
// GPU (no new work). fatal: fence and evict what runs there (NoExecute).
enum class GpuSeverity { kHealthy = 0, kDegraded = 1, kUnhealthy = 2, kFatal = 3 };

inline constexpr std::string_view kGpuSeverityNames[] = {"healthy", "degraded", "unhealthy",
                                                         "fatal"};

inline std::string_view SeverityName(GpuSeverity s) {
  const auto i = static_cast<size_t>(s);
  return i < std::size(kGpuSeverityNames) ? kGpuSeverityNames[i] : "unknown";
}

// The severity a report names; nullopt for any other text.
inline std::optional<GpuSeverity> SeverityNamed(std::string_view name) {
  for (size_t i = 0; i < std::size(kGpuSeverityNames); ++i)
    if (kGpuSeverityNames[i] == name) return static_cast<GpuSeverity>(i);
  return std::nullopt;
}

}  // namespace chamber
