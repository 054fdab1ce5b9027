#include "common/yaml_reader.h"

#include <gtest/gtest.h>

namespace chamber {
namespace {

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

// Found by the config fuzz harness: a NUL inside a string read as a value that, written out
// again, read back as another one.
TEST(YamlReader, ControlCharactersAreRefusedWhereTheyStand) {
  YamlReader y("f.yaml");
  const std::string text("a: 1\nb: x\0y\n", 12);
  Result<YAML::Node> one = y.Load(text);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().message(), "f.yaml:2:5: control character 0x00 is not allowed in YAML");
  Result<std::vector<YAML::Node>> all = y.LoadAll("a: 1\n---\nb: \x7f\n");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().message(), "f.yaml:3:4: control character 0x7f is not allowed in YAML");
  // Tabs and CRLF line ends are text.
  Result<YAML::Node> crlf = y.Load("a: \"x\ty\"\r\nb: 2\r\n");
  ASSERT_TRUE(crlf.ok()) << crlf.status().message();
  EXPECT_EQ((*crlf)["a"].Scalar(), "x\ty");
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

TEST(YamlReader, TypedReadsUseTheSharedParsers) {
  YamlReader y("f.yaml");
  Result<YAML::Node> root = y.Load("d: 1h30m\ncpu: 500m\nmem: 1Gi\nbad: 5 minutes\n");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(y.Dur((*root)["d"], "d")->count(), 5'400'000);
  EXPECT_EQ(*y.CpuMilli((*root)["cpu"], "cpu"), 500);
  EXPECT_EQ(*y.Bytes((*root)["mem"], "mem"), int64_t{1} << 30);
  Result<std::chrono::milliseconds> bad = y.Dur((*root)["bad"], "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "f.yaml:4:6: field bad: \"5 minutes\" is not a duration (use forms like 250ms, 30s, "
            "5m, 1h30m)");
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

}  // namespace
}  // namespace chamber
