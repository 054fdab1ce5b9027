// The dashboard bundle, compiled into the binary. web/CMakeLists.txt builds the bundle with npm
// and esbuild, then generates the table of files that FindAsset searches.
#pragma once

#include <cstddef>
#include <string_view>

namespace chamber::web {

struct Asset {
  std::string_view content_type;
  std::string_view body;
  // True when body is gzip-compressed (the server then sends Content-Encoding: gzip).
  bool gzip = false;
};

// path as requested, e.g. "/index.html", "/assets/app.js"; "/" means "/index.html". nullptr when
// the bundle has no such file.
const Asset* FindAsset(std::string_view path);

// Number of files in the bundle.
std::size_t AssetCount();

}  // namespace chamber::web
