// Resource quantities in fixed point: whole GPUs, CPU in millicores, memory in bytes.
// Integer arithmetic only, so sums and differences never drift however often they are applied.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace chamber::core {

enum class Resource : int { kGpu = 0, kCpu = 1, kMemory = 2 };
inline constexpr int kNumResources = 3;
inline constexpr std::array<Resource, kNumResources> kAllResources = {
    Resource::kGpu, Resource::kCpu, Resource::kMemory};

std::string_view ResourceName(Resource r);  // "gpu", "cpu", "memory"

// A vector of quantities, one per Resource. Units: GPUs, CPU millicores, memory bytes.
struct Resources {
  std::array<int64_t, kNumResources> v{};

  static constexpr Resources Of(int64_t gpu, int64_t cpu_milli, int64_t memory_bytes) {
    Resources r;
    r.v = {gpu, cpu_milli, memory_bytes};
    return r;
  }

  constexpr int64_t& operator[](Resource r) { return v[static_cast<int>(r)]; }
  constexpr int64_t operator[](Resource r) const { return v[static_cast<int>(r)]; }
  int64_t gpu() const { return (*this)[Resource::kGpu]; }
  int64_t cpu_milli() const { return (*this)[Resource::kCpu]; }
  int64_t memory_bytes() const { return (*this)[Resource::kMemory]; }

  constexpr Resources& operator+=(const Resources& o) {
    for (int i = 0; i < kNumResources; ++i) v[i] += o.v[i];
    return *this;
  }
  constexpr Resources& operator-=(const Resources& o) {
    for (int i = 0; i < kNumResources; ++i) v[i] -= o.v[i];
    return *this;
  }
  friend constexpr Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend constexpr Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend constexpr Resources operator*(Resources a, int64_t k) {
    for (auto& x : a.v) x *= k;
    return a;
  }
  friend constexpr bool operator==(const Resources&, const Resources&) = default;

  // True when every quantity is at most the other's.
  constexpr bool FitsIn(const Resources& o) const {
    for (int i = 0; i < kNumResources; ++i)
      if (v[i] > o.v[i]) return false;
    return true;
  }
  constexpr bool AnyNegative() const {
    for (auto x : v)
      if (x < 0) return true;
    return false;
  }
  constexpr bool IsZero() const { return v == std::array<int64_t, kNumResources>{}; }
};

Resources Min(const Resources& a, const Resources& b);
Resources Max(const Resources& a, const Resources& b);

// A limit of -1 means "no limit"; stored as this sentinel.
inline constexpr int64_t kUnlimited = -1;

// "8 gpu", "4000m cpu", "16Gi memory" style rendering for messages.
std::string FormatQuantity(Resource r, int64_t q);
std::string FormatResources(const Resources& r);

}  // namespace chamber::core
