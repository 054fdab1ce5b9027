#include "common/json_reader.h"

#include <gtest/gtest.h>

namespace chamber {
namespace {

using Json = nlohmann::json;

TEST(JsonReaderTest, ReadsTypedMembers) {
  const Json j = Json::parse(R"({"s": "x", "i": -3, "u": 7, "d": 1.5, "b": true, "o": {},
                                 "l": [1, 2], "ss": ["a", "b"], "m": {"k": "v"}, "n": null})");
  const JsonReader r;
  std::string s;
  int i = 0;
  unsigned u = 0;
  double d = 0;
  bool b = false;
  const Json* o = nullptr;
  const Json* l = nullptr;
  std::vector<std::string> ss;
  std::vector<int> is;
  std::map<std::string, std::string> m;
  ASSERT_TRUE(r.String(j, "s", "", &s).ok());
  ASSERT_TRUE(r.Integer(j, "i", "", &i).ok());
  ASSERT_TRUE(r.Integer(j, "u", "", &u).ok());
  ASSERT_TRUE(r.Number(j, "d", "", &d).ok());
  ASSERT_TRUE(r.Bool(j, "b", "", &b).ok());
  ASSERT_TRUE(r.Object(j, "o", "", &o).ok());
  ASSERT_TRUE(r.Array(j, "l", "", &l).ok());
  ASSERT_TRUE(r.Strings(j, "ss", "", &ss).ok());
  ASSERT_TRUE(r.Integers(j, "l", "", &is).ok());
  ASSERT_TRUE(r.StringMap(j, "m", "", &m).ok());
  EXPECT_EQ(s, "x");
  EXPECT_EQ(i, -3);
  EXPECT_EQ(u, 7u);
  EXPECT_EQ(d, 1.5);
  EXPECT_TRUE(b);
  EXPECT_NE(o, nullptr);
  EXPECT_EQ(l->size(), 2u);
  EXPECT_EQ(ss, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(is, (std::vector<int>{1, 2}));
  EXPECT_EQ(m.at("k"), "v");
}

TEST(JsonReaderTest, AbsentAndNullLeaveTheValue) {
  const Json j = Json::parse(R"({"n": null})");
  const JsonReader r;
  std::string s = "kept";
  std::optional<int> opt;
  const Json* o = &j;
  ASSERT_TRUE(r.String(j, "n", "", &s).ok());
  ASSERT_TRUE(r.String(j, "absent", "", &s).ok());
  ASSERT_TRUE(r.Integer(j, "n", "", &opt).ok());
  ASSERT_TRUE(r.Object(j, "n", "", &o).ok());
  EXPECT_EQ(s, "kept");
  EXPECT_FALSE(opt.has_value());
  EXPECT_EQ(o, nullptr);
  // Members of something that is not an object read as absent.
  ASSERT_TRUE(r.String(Json::array(), "s", "", &s).ok());
}

TEST(JsonReaderTest, ErrorsNameThePath) {
  const Json j = Json::parse(R"({"spec": {"name": 3, "flag": "yes", "list": {}, "n": "1"}})");
  const JsonReader pod("Pod ml/train-0");
  std::string s;
  Status st = pod.String(j["spec"], "name", "spec", &s);
  EXPECT_EQ(st.message(), "Pod ml/train-0: field spec.name: expected a string");
  bool b = false;
  st = JsonReader().Bool(j["spec"], "flag", "report.gpus[0]", &b);
  EXPECT_EQ(st.message(), "report.gpus[0].flag: expected true or false");
  const Json* l = nullptr;
  EXPECT_EQ(JsonReader().Array(j["spec"], "list", "", &l).message(), "list: expected a list");
  int i = 0;
  EXPECT_EQ(JsonReader().Integer(j["spec"], "n", "spec", &i).message(),
            "spec.n: expected an integer");
}

TEST(JsonReaderTest, IntegersKeepToTheirType) {
  const Json j = Json::parse(
      R"({"neg": -1, "big": 5000000000, "huge": 18446744073709551615, "f": 1.5, "list": [1, -2]})");
  const JsonReader r;
  unsigned u = 0;
  EXPECT_EQ(r.Integer(j, "neg", "", &u).message(), "neg: expected an unsigned integer");
  EXPECT_EQ(r.Integer(j, "big", "", &u).message(), "big: out of range");
  int i = 0;
  EXPECT_EQ(r.Integer(j, "big", "", &i).message(), "big: out of range");
  EXPECT_EQ(r.Integer(j, "f", "", &i).message(), "f: expected an integer");
  // Above int64's range, a signed read refuses instead of wrapping to a negative number.
  int64_t i64 = 0;
  EXPECT_EQ(r.Integer(j, "huge", "", &i64).message(), "huge: out of range");
  uint64_t u64 = 0;
  ASSERT_TRUE(r.Integer(j, "huge", "", &u64).ok());
  EXPECT_EQ(u64, UINT64_MAX);
  std::vector<int> ints;
  ASSERT_TRUE(r.Integers(j, "list", "", &ints).ok());
  EXPECT_EQ(ints, (std::vector<int>{1, -2}));
}

}  // namespace
}  // namespace chamber
