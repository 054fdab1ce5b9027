#include "common/gpu_share_ask.h"

#include <algorithm>

#include "common/quantity.h"

namespace chamber::gpu_share {
namespace {

constexpr int64_t kMib = 1024 * 1024;

Status Bad(const char* key, const std::string& value, const std::string& why) {
  return Status::InvalidArgument(std::string("annotation ") + key + ": \"" + value + "\" " + why);
}

Status BadMemory(std::string_view text, const std::string& why) {
  return Status::InvalidArgument("\"" + std::string(text) + "\" " + why);
}

}  // namespace

Result<int64_t> ParseGpuMemoryMib(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
  if (plain) {
    if (text.size() > 12) return BadMemory(text, "is more MiB than any GPU has");
    const int64_t mib = std::stoll(std::string(text));
    if (mib <= 0) return BadMemory(text, "is not a positive amount of MiB");
    return mib;
  }
  Result<int64_t> bytes = ParseBytes(text);
  if (!bytes.ok())
    return BadMemory(text,
                     "is not an amount of GPU memory (MiB as a plain number, or a quantity such as "
                     "10Gi)");
  if (*bytes <= 0) return BadMemory(text, "is not a positive amount of memory");
  if (*bytes % kMib != 0) return BadMemory(text, "is not a whole number of MiB");
  return *bytes / kMib;
}

Result<Ask> ReadAsk(const std::map<std::string, std::string>& annotations, int64_t whole_gpus) {
  Ask ask;
  const auto fraction = annotations.find(kFractionKey);
  const auto memory = annotations.find(kMemoryKey);
  if (fraction != annotations.end()) {
    const std::string& text = fraction->second;
    Result<int64_t> milli = ParseGpuMilli(text, 1);
    if (!milli.ok())
      return Bad(kFractionKey, text,
                 "is not a fraction of one GPU (use forms like 0.5, 0.25 or 250m; at most 3 "
                 "decimals)");
    if (*milli == 0) return Bad(kFractionKey, text, "is not above zero");
    if (*milli >= 1000)
      return Bad(kFractionKey, text,
                 "is not below one GPU (ask for whole GPUs with nvidia.com/gpu)");
    ask.gpu_milli = *milli;
  }
  if (memory != annotations.end()) {
    Result<int64_t> mib = ParseGpuMemoryMib(memory->second);
    if (!mib.ok())
      return Status::InvalidArgument(std::string("annotation ") + kMemoryKey + ": " +
                                     mib.status().message());
    ask.gpu_memory_mib = *mib;
  }
  if (ask.asked() && whole_gpus > 0) {
    const auto& [key, value] = fraction != annotations.end() ? *fraction : *memory;
    return Status::InvalidArgument("requests nvidia.com/gpu: " + std::to_string(whole_gpus) +
                                   " and annotation " + key + ": \"" + value +
                                   "\"; a pod asks for whole GPUs or a share of one, not both");
  }
  return ask;
}

int64_t MemoryShareMilli(int64_t memory_mib, int64_t gpu_memory_mib) {
  if (memory_mib <= 0 || gpu_memory_mib <= 0) return 0;
  if (memory_mib >= gpu_memory_mib) return 999;
  // memory_mib < gpu_memory_mib, and below 2^44 (ReadAsk's amounts): no product overflows.
  const int64_t scaled = memory_mib * 1000;
  const int64_t milli = scaled / gpu_memory_mib + (scaled % gpu_memory_mib != 0 ? 1 : 0);
  return std::clamp<int64_t>(milli, 1, 999);
}

std::map<std::string, std::string> BindAnnotations(const Ask& ask, const std::string& device) {
  std::map<std::string, std::string> out = {
      {kVisibleDevicesKey, device},
      // MPS counts threads in percent: a share of 250 thousandths gets 25%, at least 1%.
      {kMpsThreadsKey, std::to_string(std::max<int64_t>(1, (ask.gpu_milli + 9) / 10))}};
  if (ask.gpu_memory_mib > 0) out[kMpsMemoryKey] = "0=" + std::to_string(ask.gpu_memory_mib) + "MB";
  return out;
}

}  // namespace chamber::gpu_share
