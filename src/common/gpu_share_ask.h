// How a pod asks for a share of one GPU, and how it is given the GPU chamberd chose
// (docs/sharing.md, "Asking for a share"). Read by chamberd's snapshot builder, which schedules
// the share, and by its admission webhook, which gives the pod's containers the environment
// that names the device; both must read the same annotations the same way.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace chamber::gpu_share {

// On the pod (or its template), written by its author: a fraction of one GPU's compute ("0.5",
// "0.25", "250m": thousandths exactly) and an amount of its memory ("10240": MiB, as KAI
// Scheduler reads it; or a quantity, "10Gi"). A pod asking this way requests no nvidia.com/gpu.
inline constexpr char kFractionKey[] = "chamber.io/gpu-fraction";
inline constexpr char kMemoryKey[] = "chamber.io/gpu-memory";

// Written by chamberd through the binding, read by the containers through the Downward API:
// the chosen GPU's UUID (or its NVML index where the node's agent has not reported UUIDs), and
// the MPS limits of the share (thread percentage, pinned device memory "0=<MiB>MB").
inline constexpr char kVisibleDevicesKey[] = "chamber.io/visible-devices";
inline constexpr char kMpsThreadsKey[] = "chamber.io/mps-active-thread-percentage";
inline constexpr char kMpsMemoryKey[] = "chamber.io/mps-pinned-memory-limit";

// Written by the admission webhook on a share's pod whose containers it gave that environment
// (value kEnvGiven); chamberd binds no share without it, so that no share's container starts
// seeing every GPU of its node (CUDA images set NVIDIA_VISIBLE_DEVICES=all).
inline constexpr char kEnvKey[] = "chamber.io/gpu-env";
inline constexpr char kEnvGiven[] = "downward-api";

// The environment a share's containers get, each from the annotation beside it.
struct EnvFromAnnotation {
  const char* name;
  const char* annotation;
};
inline constexpr EnvFromAnnotation kShareEnv[] = {
    {"NVIDIA_VISIBLE_DEVICES", kVisibleDevicesKey},
    {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", kMpsThreadsKey},
    {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", kMpsMemoryKey},
};

struct Ask {
  int64_t gpu_milli = 0;       // 1..999; 0: none asked (a share of memory alone, or no share)
  int64_t gpu_memory_mib = 0;  // 0: none asked
  bool asked() const { return gpu_milli > 0 || gpu_memory_mib > 0; }
  bool memory_alone() const { return gpu_milli == 0 && gpu_memory_mib > 0; }
};

// Reads the two annotations of a pod that requests `whole_gpus` of nvidia.com/gpu. Neither
// present: an empty Ask. An error names the annotation and its value and says what is wanted,
// e.g. `annotation chamber.io/gpu-fraction: "1.5" is not below one GPU (ask for whole GPUs with
// nvidia.com/gpu)`.
Result<Ask> ReadAsk(const std::map<std::string, std::string>& annotations, int64_t whole_gpus);

// An amount of GPU memory as a share asks for it: MiB as a plain number ("10240", as KAI
// Scheduler reads its gpu-memory), or a quantity that comes to whole MiB ("10Gi"). Errors quote
// the text and say what is wanted: `"1.5Mi" is not a whole number of MiB`. The trace readers of
// the simulator read a share's GPU memory with it too.
Result<int64_t> ParseGpuMemoryMib(std::string_view text);

// The part of a GPU of `gpu_memory_mib` that a share of `memory_mib` alone holds and is charged
// (docs/sharing.md, "A share of memory alone"): thousandths, rounded up, 1..999; 0 when either
// is not positive.
int64_t MemoryShareMilli(int64_t memory_mib, int64_t gpu_memory_mib);

// What chamberd writes for a share placed on the GPU named `device` (a UUID or an index).
std::map<std::string, std::string> BindAnnotations(const Ask& ask, const std::string& device);

}  // namespace chamber::gpu_share
