#include "core/resources.h"

#include <algorithm>
#include <cstdint>

namespace chamber::core {

std::string_view ResourceName(Resource r) {
  switch (r) {
    case Resource::kGpu:
      return "gpu";
    case Resource::kCpu:
      return "cpu";
    case Resource::kMemory:
      return "memory";
  }
  return "unknown";
}

Resources Min(const Resources& a, const Resources& b) {
  Resources out;
  for (int i = 0; i < kNumResources; ++i) out.v[i] = std::min(a.v[i], b.v[i]);
  return out;
}

Resources Max(const Resources& a, const Resources& b) {
  Resources out;
  for (int i = 0; i < kNumResources; ++i) out.v[i] = std::max(a.v[i], b.v[i]);
  return out;
}

std::string FormatQuantity(Resource r, int64_t q) {
  switch (r) {
    case Resource::kGpu:
      return FormatGpus(q) + " gpu";
    case Resource::kCpu:
      if (q % 1000 == 0) return std::to_string(q / 1000) + " cpu";
      return std::to_string(q) + "m cpu";
    case Resource::kMemory: {
      static constexpr std::pair<int64_t, const char*> kUnits[] = {{int64_t{1} << 40, "Ti"},
                                                                   {int64_t{1} << 30, "Gi"},
                                                                   {int64_t{1} << 20, "Mi"},
                                                                   {int64_t{1} << 10, "Ki"}};
      for (const auto& [size, suffix] : kUnits)
        if (q != 0 && q % size == 0) return std::to_string(q / size) + suffix + " memory";
      return std::to_string(q) + " memory";
    }
  }
  return std::to_string(q);
}

std::string FormatGpus(int64_t milli) {
  const bool negative = milli < 0;
  const uint64_t m = negative ? 0 - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  const auto per_gpu = static_cast<uint64_t>(kMilliPerGpu);
  std::string out = (negative ? "-" : "") + std::to_string(m / per_gpu);
  const uint64_t frac = m % per_gpu;
  if (frac == 0) return out;
  std::string digits = std::to_string(frac);
  digits.insert(0, 3 - digits.size(), '0');
  while (digits.back() == '0') digits.pop_back();
  return out + "." + digits;
}

std::string FormatResources(const Resources& r) {
  std::string out;
  for (Resource res : kAllResources) {
    if (r[res] == 0) continue;
    if (!out.empty()) out += ", ";
    out += FormatQuantity(res, r[res]);
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace chamber::core
