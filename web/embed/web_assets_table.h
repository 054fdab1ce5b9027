// The table that the generated web_assets_data.cc defines; private to chamber_web_assets.
#pragma once

#include <cstddef>
#include <string_view>

#include "web_assets.h"

namespace chamber::web::internal {

struct AssetEntry {
  std::string_view path;
  Asset asset;
};

// Sorted by path.
extern const AssetEntry kAssets[];
extern const std::size_t kAssetCount;

}  // namespace chamber::web::internal
