// Kubernetes resource quantities, as pods, nodes, Queues, snapshots and traces write them.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace chamber {

// CPU in millicores: "500m" -> 500, "2" -> 2000, "1.5" -> 1500, "1k" -> 1000000, "1e3" -> 1000000.
Result<int64_t> ParseCpuMilli(std::string_view text);
// Every other resource (memory, nvidia.com/gpu, ...) as a whole count: "16Gi", "1G", "1.5Ti",
// "8", "1e3". Decimal (k, M, G, T, P) and binary (Ki, Mi, Gi, Ti, Pi) suffixes.
Result<int64_t> ParseBytes(std::string_view text);
// GPUs in thousandths, exactly: "8" -> 8000, "2.5" -> 2500, "0.125" -> 125, "500m" -> 500. No
// sign, no exponent, at most 3 decimals (a thousandth of a GPU is the finest amount), at most
// `max_gpus` GPUs (at most 9 * 10^15, so that its thousandths fit).
Result<int64_t> ParseGpuMilli(std::string_view text, int64_t max_gpus);

}  // namespace chamber
