#include "common/json_reader.h"

#include <cmath>
#include <cstdint>

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

TEST(JsonReaderTest, ElementPaths) {
  EXPECT_EQ(JsonReader::Element("rows", 3), "rows[3]");
  EXPECT_EQ(JsonReader::Element(JsonReader::Element("rows", 3), 2), "rows[3][2]");
  EXPECT_EQ(JsonReader::Element(JsonReader::Join("report", "gpus"), 0), "report.gpus[0]");
  EXPECT_EQ(JsonReader::Join(JsonReader::Element("gpus", 1), "xid"), "gpus[1].xid");
}

TEST(JsonReaderTest, ReadsTypedValues) {
  const Json row = Json::parse(R"(["x", -3, 7, 1.5, true, {}, [1]])");
  const JsonReader r;
  std::string s;
  int i = 0;
  unsigned u = 0;
  double d = 0;
  bool b = false;
  ASSERT_TRUE(r.StringValue(row[0], "row[0]", &s).ok());
  ASSERT_TRUE(r.IntegerValue(row[1], "row[1]", &i).ok());
  ASSERT_TRUE(r.IntegerValue(row[2], "row[2]", &u).ok());
  ASSERT_TRUE(r.NumberValue(row[3], "row[3]", &d).ok());
  ASSERT_TRUE(r.BoolValue(row[4], "row[4]", &b).ok());
  EXPECT_TRUE(r.ObjectValue(row[5], "row[5]").ok());
  EXPECT_TRUE(r.ArrayValue(row[6], "row[6]").ok());
  EXPECT_TRUE(r.ArrayValue(row, "row").ok());
  EXPECT_EQ(s, "x");
  EXPECT_EQ(i, -3);
  EXPECT_EQ(u, 7u);
  EXPECT_EQ(d, 1.5);
  EXPECT_TRUE(b);
  // An integer is a number too.
  ASSERT_TRUE(r.NumberValue(row[1], "row[1]", &d).ok());
  EXPECT_EQ(d, -3);
}

TEST(JsonReaderTest, ValueErrorsNameThePath) {
  const Json rows = Json::parse(R"([["m", "s", 60, 1.0, 1], [3, "s", "60", "x", 1.5], null])");
  const JsonReader r;
  const std::string at = JsonReader::Element("rows", 1);
  std::string s;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  EXPECT_EQ(r.StringValue(rows[1][0], JsonReader::Element(at, 0), &s).message(),
            "rows[1][0]: expected a string");
  EXPECT_EQ(r.IntegerValue(rows[1][2], JsonReader::Element(at, 2), &i).message(),
            "rows[1][2]: expected an integer");
  EXPECT_EQ(r.IntegerValue(rows[1][4], JsonReader::Element(at, 4), &i).message(),
            "rows[1][4]: expected an integer");
  EXPECT_EQ(r.NumberValue(rows[1][3], JsonReader::Element(at, 3), &d).message(),
            "rows[1][3]: expected a number");
  EXPECT_EQ(r.BoolValue(rows[1][1], JsonReader::Element(at, 1), &b).message(),
            "rows[1][1]: expected true or false");
  EXPECT_EQ(r.ObjectValue(rows[1], at).message(), "rows[1]: expected an object");
  EXPECT_EQ(r.ArrayValue(rows[0][0], "rows[0][0]").message(), "rows[0][0]: expected a list");
  // Null is a value of the wrong type, not an absent one.
  EXPECT_EQ(r.StringValue(rows[2], "rows[2]", &s).message(), "rows[2]: expected a string");
  EXPECT_EQ(r.ArrayValue(rows[2], "rows[2]").message(), "rows[2]: expected a list");
  // With a `where`, as the member reads.
  EXPECT_EQ(JsonReader("Pod ml/train-0").StringValue(rows[1][0], "spec.args[0]", &s).message(),
            "Pod ml/train-0: field spec.args[0]: expected a string");
}

TEST(JsonReaderTest, IntegerValuesKeepToTheirType) {
  const Json l = Json::parse(R"([-1, 5000000000, 18446744073709551615, 255, 256])");
  const JsonReader r;
  unsigned u = 0;
  EXPECT_EQ(r.IntegerValue(l[0], "l[0]", &u).message(), "l[0]: expected an unsigned integer");
  EXPECT_EQ(r.IntegerValue(l[1], "l[1]", &u).message(), "l[1]: out of range");
  int i = 0;
  EXPECT_EQ(r.IntegerValue(l[1], "l[1]", &i).message(), "l[1]: out of range");
  int64_t i64 = 0;
  EXPECT_EQ(r.IntegerValue(l[2], "l[2]", &i64).message(), "l[2]: out of range");
  uint64_t u64 = 0;
  ASSERT_TRUE(r.IntegerValue(l[2], "l[2]", &u64).ok());
  EXPECT_EQ(u64, UINT64_MAX);
  uint8_t u8 = 0;
  ASSERT_TRUE(r.IntegerValue(l[3], "l[3]", &u8).ok());
  EXPECT_EQ(u8, 255);
  EXPECT_EQ(r.IntegerValue(l[4], "l[4]", &u8).message(), "l[4]: out of range");
  EXPECT_EQ(u8, 255);
  int8_t i8 = 0;
  EXPECT_EQ(r.IntegerValue(l[4], "l[4]", &i8).message(), "l[4]: out of range");
  ASSERT_TRUE(r.IntegerValue(l[0], "l[0]", &i8).ok());
  EXPECT_EQ(i8, -1);
}

TEST(JsonReaderTest, NumbersAreFinite) {
  const JsonReader r;
  double d = 2;
  EXPECT_EQ(r.NumberValue(Json(std::nan("")), "x", &d).message(), "x: expected a number");
  EXPECT_EQ(r.NumberValue(Json(INFINITY), "x", &d).message(), "x: expected a number");
  EXPECT_EQ(r.NumberValue(Json(true), "x", &d).message(), "x: expected a number");
  EXPECT_EQ(d, 2);
}

}  // namespace
}  // namespace chamber

namespace chamber {
namespace {

TEST(JsonReaderTest, ElementValuesNameTheirElementOnlyInAnError) {
  const JsonReader r("batch");
  const nlohmann::json row = nlohmann::json::parse(R"(["gpu", 7, 2.5, true, "x"])");
  std::string s;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  ASSERT_TRUE(r.ElementValue(row[0], "rows[1]", 0, &s).ok());
  ASSERT_TRUE(r.ElementValue(row[1], "rows[1]", 1, &i).ok());
  ASSERT_TRUE(r.ElementValue(row[2], "rows[1]", 2, &d).ok());
  ASSERT_TRUE(r.ElementValue(row[3], "rows[1]", 3, &b).ok());
  EXPECT_EQ(s, "gpu");
  EXPECT_EQ(i, 7);
  EXPECT_DOUBLE_EQ(d, 2.5);
  EXPECT_TRUE(b);
  EXPECT_EQ(r.ElementValue(row[4], "rows[1]", 4, &i).message(),
            "batch: field rows[1][4]: expected an integer");
  EXPECT_EQ(r.ElementValue(row[1], "rows[1]", 1, &s).message(),
            "batch: field rows[1][1]: expected a string");
  int32_t small = 0;
  const nlohmann::json big = int64_t{5'000'000'000};
  EXPECT_EQ(r.ElementValue(big, "a", 0, &small).message(), "batch: field a[0]: out of range");
}

}  // namespace
}  // namespace chamber
