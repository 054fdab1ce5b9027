#include "core/io/yaml_reader.h"

#include <gtest/gtest.h>

namespace chamber::core::io {
namespace {

TEST(Quantities, CpuMillicores) {
  EXPECT_EQ(*ParseCpuMilli("4"), 4000);
  EXPECT_EQ(*ParseCpuMilli("500m"), 500);
  EXPECT_EQ(*ParseCpuMilli("1.5"), 1500);
  Result<int64_t> bad = ParseCpuMilli("4 cores");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown CPU unit"), std::string::npos);
  EXPECT_FALSE(ParseCpuMilli("").ok());
}

TEST(Quantities, MemoryBytes) {
  EXPECT_EQ(*ParseBytes("16Gi"), int64_t{16} << 30);
  EXPECT_EQ(*ParseBytes("1G"), 1'000'000'000);
  EXPECT_EQ(*ParseBytes("1.5Ki"), 1536);
  EXPECT_EQ(*ParseBytes("512"), 512);
  EXPECT_FALSE(ParseBytes("16GB").ok());
  EXPECT_FALSE(ParseBytes("1e400Gi").ok());
}

TEST(Durations, ParseAndFormat) {
  EXPECT_EQ(ParseDuration("250ms")->count(), 250);
  EXPECT_EQ(ParseDuration("30s")->count(), 30'000);
  EXPECT_EQ(ParseDuration("1h30m")->count(), 5'400'000);
  EXPECT_EQ(ParseDuration("90")->count(), 90'000);
  EXPECT_EQ(ParseDuration("0")->count(), 0);
  EXPECT_FALSE(ParseDuration("5 minutes").ok());
  EXPECT_FALSE(ParseDuration("-5").ok());
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_EQ(FormatDuration(Duration(5'400'000)), "1h30m");
  EXPECT_EQ(FormatDuration(Duration(250)), "250ms");
  EXPECT_EQ(FormatDuration(Duration(0)), "0s");
}

TEST(YamlReader, ErrorsNamePlaceAndField) {
  YamlReader y("f.yaml");
  Result<YAML::Node> root = y.Load("a:\n  b: eight\n");
  ASSERT_TRUE(root.ok());
  Result<int64_t> v = y.Int((*root)["a"]["b"], "a.b");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "f.yaml:2:6: field a.b: expected an integer, got \"eight\"");
}

TEST(YamlReader, SyntaxErrorNamesLine) {
  YamlReader y("f.yaml");
  Result<YAML::Node> root = y.Load("a: [1, 2\nb: 3\n");
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().message().rfind("f.yaml:", 0), 0u) << root.status().message();
}

// Found by ParserFuzz.QueueReaderNeverCrashes: yaml-cpp's LoadAll never returned on this text.
TEST(YamlReader, LoadAllEndsOnAStreamTheParserNeverFinishes) {
  YamlReader y("f.yaml");
  Result<std::vector<YAML::Node>> docs =
      y.LoadAll(",ueues:\n  - name: research\n    resources: {g\"pu: {quota: 24}, cpu: 1}\n");
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.status().message(),
            "f.yaml: not valid YAML: the parser finds more documents than the text has lines");
}

TEST(YamlReader, LoadAllReadsEveryDocument) {
  YamlReader y("f.yaml");
  Result<std::vector<YAML::Node>> docs = y.LoadAll("a: 1\n---\nb: 2\n---\n---\nc: 3\n");
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  ASSERT_EQ(docs->size(), 4u);
  EXPECT_EQ((*docs)[0]["a"].as<int>(), 1);
  EXPECT_TRUE((*docs)[2].IsNull());
  EXPECT_EQ((*docs)[3]["c"].as<int>(), 3);
}

TEST(YamlReader, UnknownKeyIsRejected) {
  YamlReader y("f.yaml");
  Result<YAML::Node> root = y.Load("qouta: 3\n");
  ASSERT_TRUE(root.ok());
  Status st = y.CheckKeys(*root, "", {"quota", "limit"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("field qouta: unknown field (known: quota, limit)"),
            std::string::npos)
      << st.message();
}

TEST(QuantityTest, AcceptsTheDecimalExponentForm) {
  EXPECT_EQ(*ParseCpuMilli("1e3"), 1'000'000);
  EXPECT_EQ(*ParseCpuMilli("2.5E-1"), 250);
  EXPECT_EQ(*ParseBytes("1e3"), 1000);
  EXPECT_EQ(*ParseBytes("1E+6"), 1'000'000);
  EXPECT_EQ(*ParseBytes("1Gi"), int64_t{1} << 30);  // units are untouched
  EXPECT_FALSE(ParseBytes("1e").ok());
  EXPECT_FALSE(ParseBytes("1e3x").ok());
  EXPECT_FALSE(ParseBytes("1e30").ok());
}

}  // namespace
}  // namespace chamber::core::io
