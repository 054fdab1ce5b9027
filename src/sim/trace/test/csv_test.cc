#include "sim/trace/csv.h"

#include <gtest/gtest.h>

namespace chamber::sim::trace_internal {
namespace {

// Every record of `text` as values, and "!<line>:<col> <why>" for broken ones.
std::vector<std::vector<std::string>> Records(std::string_view text) {
  CsvReader reader(text);
  std::vector<std::vector<std::string>> out;
  std::vector<CsvField> fields;
  while (true) {
    const CsvReader::Next next = reader.Read(&fields);
    if (next == CsvReader::Next::kEnd) break;
    if (next == CsvReader::Next::kError) {
      const TextPosition at = reader.Locate(reader.error_offset());
      out.push_back(
          {"!" + std::to_string(at.line) + ":" + std::to_string(at.column) + " " + reader.error()});
      continue;
    }
    std::vector<std::string> values;
    for (const CsvField& f : fields) values.emplace_back(f.value);
    out.push_back(values);
  }
  return out;
}

using Rows = std::vector<std::vector<std::string>>;

TEST(CsvTest, PlainRecordsAndTrailingNewline) {
  EXPECT_EQ(Records("a,b,c\n1,2,3\n"), (Rows{{"a", "b", "c"}, {"1", "2", "3"}}));
  EXPECT_EQ(Records("a,b,c\n1,2,3"), (Rows{{"a", "b", "c"}, {"1", "2", "3"}}));
  EXPECT_EQ(Records(""), Rows{});
  EXPECT_EQ(Records("a,,\n"), (Rows{{"a", "", ""}}));
}

TEST(CsvTest, CrlfBlankLinesAndByteOrderMark) {
  EXPECT_EQ(Records("\xEF\xBB\xBF"
                    "a,b\r\n\r\n  \r\n1,2\r\n\n"),
            (Rows{{"a", "b"}, {"1", "2"}}));
  // A CR inside a field (not before a line break) is data.
  EXPECT_EQ(Records("a\rb,c\n"), (Rows{{"a\rb", "c"}}));
}

TEST(CsvTest, QuotedFields) {
  EXPECT_EQ(Records("\"a,b\",\"say \"\"hi\"\"\",\"\"\n"), (Rows{{"a,b", "say \"hi\"", ""}}));
  EXPECT_EQ(Records("\"two\nlines\",x\r\ny,z\n"), (Rows{{"two\nlines", "x"}, {"y", "z"}}));
  EXPECT_EQ(Records("\"end\"\r\n"), (Rows{{"end"}}));
  EXPECT_EQ(Records(" \"padded\" , b \n"), (Rows{{"padded", "b"}}));
  EXPECT_EQ(Records("\"\"\"\"\n"), (Rows{{"\""}}));
  // A quote inside an unquoted field is kept as is.
  EXPECT_EQ(Records("ab\"c,d\n"), (Rows{{"ab\"c", "d"}}));
}

TEST(CsvTest, BrokenQuotingIsReportedAndReadingGoesOn) {
  EXPECT_EQ(Records("a,b\n1,\"x\"y,3\n4,5\n"),
            (Rows{{"a", "b"}, {"!2:6 unexpected text after a closing quote"}, {"4", "5"}}));
  EXPECT_EQ(Records("a,b\n1,\"open\n"), (Rows{{"a", "b"}, {"!2:3 unterminated quoted field"}}));
}

TEST(CsvTest, PositionsCountCharactersAndLines) {
  const std::string text = "h1,h2\n\"multi\nline\",\xC3\xBC\xC3\xBC,x\n";
  CsvReader reader(text);
  std::vector<CsvField> fields;
  ASSERT_EQ(reader.Read(&fields), CsvReader::Next::kRecord);
  ASSERT_EQ(reader.Read(&fields), CsvReader::Next::kRecord);
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(reader.record_line(), 2);
  const TextPosition second = reader.Locate(fields[1].offset);
  EXPECT_EQ(second.line, 3);
  EXPECT_EQ(second.column, 7);  // after `line",`
  const TextPosition third = reader.Locate(fields[2].offset);
  EXPECT_EQ(third.line, 3);
  EXPECT_EQ(third.column, 10);  // "üü," is three characters, five bytes
}

TEST(CsvTest, HeaderErrors) {
  static constexpr CsvColumn kCols[] = {{"id", true}, {"x"}};
  {
    CsvReader r("");
    EXPECT_EQ(CsvHeader::Read(&r, "t.csv", kCols, true).status().message(),
              "t.csv:1:1: missing header line (expected columns id,x)");
  }
  {
    CsvReader r("id,y\n");
    EXPECT_EQ(CsvHeader::Read(&r, "t.csv", kCols, true).status().message(),
              "t.csv:1:4: column y: unknown column (known: id,x)");
    CsvReader lenient("id,y\n");
    EXPECT_TRUE(CsvHeader::Read(&lenient, "t.csv", kCols, false).ok());
  }
  {
    CsvReader r("id,x,id\n");
    EXPECT_EQ(CsvHeader::Read(&r, "t.csv", kCols, true).status().message(),
              "t.csv:1:6: column id: appears twice in the header");
  }
  {
    CsvReader r("x\n");
    EXPECT_EQ(CsvHeader::Read(&r, "t.csv", kCols, true).status().message(),
              "t.csv:1:2: column id: missing from the header (expected columns id,x)");
  }
}

}  // namespace
}  // namespace chamber::sim::trace_internal
