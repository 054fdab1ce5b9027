// Resource quantities in fixed point: GPUs in thousandths (GPU-equivalents: a pod holding half
// of one GPU's compute counts 500, one holding two whole GPUs 2000), CPU in millicores, memory in
// bytes. Integer arithmetic only, so sums and differences never drift however often they are
// applied.
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

// Thousandths of a GPU in one GPU.
inline constexpr int64_t kMilliPerGpu = 1000;
// `n` whole GPUs in the unit of Resource::kGpu.
constexpr int64_t Gpus(int64_t n) { return n * kMilliPerGpu; }

// A vector of quantities, one per Resource. Units: thousandths of a GPU, CPU millicores, memory
// bytes.
struct Resources {
  std::array<int64_t, kNumResources> v{};

  // `gpus` whole GPUs.
  static constexpr Resources Of(int64_t gpus, int64_t cpu_milli, int64_t memory_bytes) {
    return OfMilli(Gpus(gpus), cpu_milli, memory_bytes);
  }
  static constexpr Resources OfMilli(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_bytes) {
    Resources r;
    r.v = {gpu_milli, cpu_milli, memory_bytes};
    return r;
  }

  constexpr int64_t& operator[](Resource r) { return v[static_cast<int>(r)]; }
  constexpr int64_t operator[](Resource r) const { return v[static_cast<int>(r)]; }
  int64_t gpu_milli() const { return (*this)[Resource::kGpu]; }
  // Whole GPUs, rounded down: what a request of whole GPUs asks for.
  int64_t whole_gpus() const { return gpu_milli() / kMilliPerGpu; }
  // A request for a share of one GPU: less than one GPU's compute, more than none.
  bool gpu_share() const { return gpu_milli() > 0 && gpu_milli() < kMilliPerGpu; }
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

// "8 gpu", "0.5 gpu", "4000m cpu", "16Gi memory" style rendering for messages.
std::string FormatQuantity(Resource r, int64_t q);
std::string FormatResources(const Resources& r);
// Thousandths of a GPU as GPUs, exactly: "8", "0.5", "2.125", "-1.25".
std::string FormatGpus(int64_t milli);
// Thousandths of a GPU as a number of GPUs, for JSON and metrics.
inline double GpusOf(int64_t milli) {
  return static_cast<double>(milli) / static_cast<double>(kMilliPerGpu);
}

}  // namespace chamber::core
