// Kubernetes quantities and amounts of GPUs (common/quantity.h), as pods, nodes, Queues,
// snapshots and traces write them, and a pod's GPU share annotations (common/gpu_share_ask.h).
// Properties: an error quotes the text; a value read back from its plain decimal form is the
// same value; a share is within one GPU.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "common/fuzz/fuzz_check.h"
#include "common/gpu_share_ask.h"
#include "common/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using chamber::Result;
  namespace fuzz = chamber::fuzz;
  const std::string_view text = fuzz::Text(data, size);

  Result<int64_t> bytes = chamber::ParseBytes(text);
  if (bytes.ok()) {
    Result<int64_t> back = chamber::ParseBytes(std::to_string(*bytes));
    fuzz::Check(back.ok() && *back == *bytes, "ParseBytes does not read its value back",
                std::to_string(*bytes));
  } else {
    fuzz::CheckError(bytes.status(), text);
  }

  Result<int64_t> cpu = chamber::ParseCpuMilli(text);
  if (cpu.ok()) {
    Result<int64_t> back = chamber::ParseCpuMilli(std::to_string(*cpu) + "m");
    fuzz::Check(back.ok() && *back == *cpu, "ParseCpuMilli does not read its value back",
                std::to_string(*cpu) + "m");
  } else {
    fuzz::CheckError(cpu.status(), text);
  }

  // GPUs in thousandths, exactly: within the bound, and read back from both of its forms.
  constexpr int64_t kMaxGpus = 1'000'000'000;
  Result<int64_t> gpu = chamber::ParseGpuMilli(text, kMaxGpus);
  if (gpu.ok()) {
    fuzz::Check(*gpu >= 0 && *gpu <= kMaxGpus * 1000, "ParseGpuMilli is out of its bound",
                std::to_string(*gpu));
    const std::string milli = std::to_string(*gpu) + "m";
    const std::string decimal =
        std::to_string(*gpu / 1000) + "." + std::to_string(1000 + *gpu % 1000).substr(1);
    for (const std::string& form : {milli, decimal}) {
      Result<int64_t> back = chamber::ParseGpuMilli(form, kMaxGpus);
      fuzz::Check(back.ok() && *back == *gpu, "ParseGpuMilli does not read its value back", form);
    }
  } else {
    fuzz::CheckError(gpu.status(), text);
  }

  // The text as a share's fraction, as its memory beside a fraction that reads, and as its
  // memory alone.
  namespace gpu_share = chamber::gpu_share;
  const std::string value(text);
  for (const auto& annotations :
       {std::map<std::string, std::string>{{gpu_share::kFractionKey, value}},
        std::map<std::string, std::string>{{gpu_share::kFractionKey, "0.5"},
                                           {gpu_share::kMemoryKey, value}},
        std::map<std::string, std::string>{{gpu_share::kMemoryKey, value}}}) {
    Result<gpu_share::Ask> ask = gpu_share::ReadAsk(annotations, 0);
    if (ask.ok()) {
      const bool fraction = annotations.contains(gpu_share::kFractionKey);
      fuzz::Check(ask->gpu_milli >= (fraction ? 1 : 0) && ask->gpu_milli <= 999 &&
                      ask->gpu_memory_mib >= 0 && ask->asked(),
                  "ReadAsk is out of its bounds", value);
      // Its part of any GPU is a share: 1..999 thousandths.
      if (ask->memory_alone())
        for (int64_t gpu :
             {int64_t{1}, int64_t{40960}, int64_t{81920}, std::numeric_limits<int64_t>::max()}) {
          const int64_t milli = gpu_share::MemoryShareMilli(ask->gpu_memory_mib, gpu);
          fuzz::Check(milli >= 1 && milli <= 999, "MemoryShareMilli is out of its bounds", value);
        }
    } else {
      fuzz::CheckError(ask.status(), "\"" + value + "\"");
    }
  }
  return 0;
}
