#include "core/mig_profile.h"

#include <charconv>

#include "core/model.h"

namespace chamber::core {

int32_t MigProfileMilli(std::string_view profile) {
  int slices = 0, memory = 0;
  const char* end = profile.data() + profile.size();
  auto [g, e1] = std::from_chars(profile.data(), end, slices);
  if (e1 != std::errc() || slices < 1 || slices > 8 || end - g < 4 || g[0] != 'g' || g[1] != '.')
    return 0;
  auto [gb, e2] = std::from_chars(g + 2, end, memory);
  if (e2 != std::errc() || memory < 1 || end - gb < 2 || gb[0] != 'g' || gb[1] != 'b') return 0;
  const bool a30 = (slices == 1 && memory == 6) || (slices == 2 && memory == 12) ||
                   (slices == 4 && memory == 24);
  return MigDeviceMilli(slices, a30 ? 4 : 7);
}

}  // namespace chamber::core
