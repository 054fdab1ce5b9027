// MIG profiles by name, as the NVIDIA device plugin names its resources (nvidia.com/mig-<profile>)
// and GPU feature discovery its labels: what a device of a profile is charged.
#pragma once

#include <cstdint>
#include <string_view>

namespace chamber::core {

// The charge of a device of MIG profile `profile` ("3g.40gb", "1g.10gb+me"), thousandths of a
// GPU: its compute slices (the number before "g") over its GPU's, 4 on an A30 (whose profiles are
// 1g.6gb, 2g.12gb and 4g.24gb) and 7 on every other MIG GPU (A100, H100, H200), rounded down
// (MigDeviceMilli); 0 when the name is not a profile's.
int32_t MigProfileMilli(std::string_view profile);

}  // namespace chamber::core
