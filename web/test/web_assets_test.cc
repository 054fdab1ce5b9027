#include "web_assets.h"

#include <string>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chamber::web {
namespace {

// The path in index.html's attribute `attribute="/assets/...ext"`, e.g. the script's.
std::string AssetNamedIn(std::string_view html, std::string_view attribute, std::string_view ext) {
  const std::string prefix = std::string(attribute) + "=\"/assets/";
  size_t begin = html.find(prefix);
  if (begin == std::string_view::npos) return "";
  begin += prefix.size() - std::string_view("/assets/").size();
  const size_t end = html.find('"', begin);
  std::string path(html.substr(begin, end - begin));
  return path.ends_with(ext) ? path : "";
}

TEST(WebAssetsTest, RootServesIndexHtml) {
  const Asset* root = FindAsset("/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root, FindAsset("/index.html"));
  EXPECT_EQ(root->content_type, "text/html; charset=utf-8");
  EXPECT_FALSE(root->gzip);
  EXPECT_NE(root->body.find("<div id=\"app\">"), std::string_view::npos);
}

TEST(WebAssetsTest, IndexNamesTheScriptAndStylesheetWithContentHashes) {
  const Asset* index = FindAsset("/index.html");
  ASSERT_NE(index, nullptr);
  const std::string script = AssetNamedIn(index->body, "src", ".js");
  const std::string style = AssetNamedIn(index->body, "href", ".css");
  EXPECT_THAT(script, testing::MatchesRegex("/assets/app-[A-Z0-9]+\\.js"));
  EXPECT_THAT(style, testing::MatchesRegex("/assets/app-[A-Z0-9]+\\.css"));
  const Asset* js = FindAsset(script);
  ASSERT_NE(js, nullptr) << script;
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_GT(js->body.size(), 10000U);
  const Asset* css = FindAsset(style);
  ASSERT_NE(css, nullptr) << style;
  EXPECT_EQ(css->content_type, "text/css; charset=utf-8");
  EXPECT_GT(css->body.size(), 1000U);
  EXPECT_EQ(AssetCount(), 3U);
}

TEST(WebAssetsTest, BytesSurviveEmbedding) {
  // The whole file, including bytes that need escaping in C++ ('"', '\\', newlines).
  const Asset* index = FindAsset("/index.html");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->body.substr(0, 15), "<!doctype html>");
  EXPECT_EQ(index->body.back(), '\n');
  EXPECT_EQ(index->body.find('\0'), std::string_view::npos);
}

TEST(WebAssetsTest, UnknownPathsAreAbsent) {
  EXPECT_EQ(FindAsset("/nope.js"), nullptr);
  EXPECT_EQ(FindAsset("/assets/"), nullptr);
  EXPECT_EQ(FindAsset("/api/v1/fleet"), nullptr);
  EXPECT_EQ(FindAsset("index.html"), nullptr);
}

}  // namespace
}  // namespace chamber::web
