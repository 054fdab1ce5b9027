# Turns every file under DIST into OUTPUT, a C++ source that defines the table of
# chamber::web::internal::kAssets (embed/web_assets_table.h): path, content type and bytes.
#   cmake -DDIST=<bundle dir> -DOUTPUT=<file.cc> -P embed_assets.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT DIST OR NOT OUTPUT)
  message(FATAL_ERROR "embed_assets.cmake needs -DDIST=<dir> and -DOUTPUT=<file.cc>")
endif()
if(NOT IS_DIRECTORY "${DIST}")
  message(FATAL_ERROR "embed_assets.cmake: bundle directory ${DIST} does not exist")
endif()

function(content_type_of path out)
  string(REGEX MATCH "\\.[^./]*$" ext "${path}")
  string(TOLOWER "${ext}" ext)
  set(type "application/octet-stream")
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js" OR ext STREQUAL ".mjs")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".json" OR ext STREQUAL ".map")
    set(type "application/json")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  elseif(ext STREQUAL ".png")
    set(type "image/png")
  elseif(ext STREQUAL ".ico")
    set(type "image/x-icon")
  elseif(ext STREQUAL ".woff2")
    set(type "font/woff2")
  elseif(ext STREQUAL ".txt")
    set(type "text/plain; charset=utf-8")
  endif()
  set(${out} "${type}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${DIST}" "${DIST}/*")
list(SORT files)  # FindAsset searches the table by binary search on the path.
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "embed_assets.cmake: bundle directory ${DIST} is empty")
endif()

string(REPEAT "." 128 line_pattern)
set(data "")
set(table "")
set(index 0)
foreach(file IN LISTS files)
  file(READ "${DIST}/${file}" hex HEX)
  file(SIZE "${DIST}/${file}" size)
  # Every byte becomes \xNN, 32 bytes to a line; each escape is followed by a backslash or a
  # quote, so no hex escape runs into the next character.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
  string(REGEX REPLACE "(${line_pattern})"
         "\\1\"\n    \"" escaped "${escaped}")
  string(APPEND data "// /${file}: ${size} bytes\nconstexpr char kFile${index}[] =\n    \"${escaped}\";\n\n")
  content_type_of("${file}" type)
  string(APPEND table
         "    {\"/${file}\", {\"${type}\", std::string_view(kFile${index}, ${size}), false}},\n")
  math(EXPR index "${index} + 1")
endforeach()

set(source "// Generated from the dashboard bundle by web/cmake/embed_assets.cmake; do not edit.
#include <cstddef>
#include <string_view>

#include \"web_assets_table.h\"

namespace chamber::web::internal {
namespace {

${data}}  // namespace

const AssetEntry kAssets[] = {
${table}};
const std::size_t kAssetCount = ${count};

}  // namespace chamber::web::internal
")
file(WRITE "${OUTPUT}.tmp" "${source}")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
