#include "web_assets.h"

#include <algorithm>

#include "web_assets_table.h"

namespace chamber::web {

const Asset* FindAsset(std::string_view path) {
  if (path.empty() || path == "/") path = "/index.html";
  const internal::AssetEntry* begin = internal::kAssets;
  const internal::AssetEntry* end = internal::kAssets + internal::kAssetCount;
  const auto* it = std::lower_bound(
      begin, end, path,
      [](const internal::AssetEntry& entry, std::string_view key) { return entry.path < key; });
  if (it == end || it->path != path) return nullptr;
  return &it->asset;
}

std::size_t AssetCount() { return internal::kAssetCount; }

}  // namespace chamber::web
