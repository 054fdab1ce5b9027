// A CSV tokenizer for trace files (RFC 4180 plus the habits of real files): quoted fields with
// commas, doubled quotes and line breaks; CRLF or LF line ends; blank lines and a UTF-8 byte order
// mark ignored; spaces around unquoted fields trimmed. Fields are views into the text (or into a
// scratch buffer for fields with doubled quotes), so a row costs no allocation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace chamber::sim::trace_internal {

struct CsvField {
  std::string_view value;
  size_t offset = 0;  // byte offset in the text where the field starts
};

struct TextPosition {
  int64_t line = 1;    // 1-based
  int64_t column = 1;  // 1-based, in characters (UTF-8 code points)
};

class CsvReader {
 public:
  explicit CsvReader(std::string_view text);

  enum class Next { kRecord, kEnd, kError };
  // Reads the next record that is not blank. On kError, error() says why and error_offset()
  // where; the reader has moved past the broken line, so reading can go on.
  Next Read(std::vector<CsvField>* fields);

  const std::string& error() const { return error_; }
  size_t error_offset() const { return error_offset_; }
  // Where the last record ends (before its line break): the place to report missing fields.
  size_t record_end() const { return record_end_; }
  int64_t record_line() const { return record_line_; }

  // Line and column of a byte offset within the last record read.
  TextPosition Locate(size_t offset) const;

 private:
  Next Fail(std::string why, size_t at);
  void SkipBlankLines();

  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 1;  // line of pos_
  size_t record_start_ = 0;
  int64_t record_line_ = 1;
  size_t record_end_ = 0;
  std::string scratch_;
  std::string error_;
  size_t error_offset_ = 0;
};

// Line and column of `offset` in `text`, counting from `start` (a line start on line `line`).
TextPosition LocateIn(std::string_view text, size_t start, int64_t line, size_t offset);

// A CSV header matched against a format's columns.
struct CsvColumn {
  std::string_view name;
  bool required = false;
};

class CsvHeader {
 public:
  // Reads the header line. Unknown columns are an error when `strict`, else ignored.
  static Result<CsvHeader> Read(CsvReader* reader, std::string_view source,
                                std::span<const CsvColumn> columns, bool strict);

  // Field index of format column `col`, or -1 when the header lacks it.
  int FieldOf(size_t col) const { return field_of_[col]; }
  size_t num_fields() const { return num_fields_; }
  std::span<const CsvColumn> columns() const { return columns_; }

 private:
  std::span<const CsvColumn> columns_;
  std::vector<int> field_of_;
  size_t num_fields_ = 0;
};

// One record, seen through the header.
class CsvRow {
 public:
  CsvRow(const CsvReader& reader, const CsvHeader& header, std::string_view source,
         const std::vector<CsvField>& fields)
      : reader_(reader), header_(header), source_(source), fields_(fields) {}

  bool Has(size_t col) const { return header_.FieldOf(col) >= 0; }
  // The column's value; empty when the header lacks the column.
  std::string_view Get(size_t col) const {
    const int f = header_.FieldOf(col);
    return f < 0 ? std::string_view() : fields_[static_cast<size_t>(f)].value;
  }
  int64_t line() const { return reader_.record_line(); }
  // "SOURCE:LINE:COLUMN: column NAME: why", at the field's start (the record's start when the
  // header lacks the column).
  Status Error(size_t col, std::string_view why) const;

 private:
  const CsvReader& reader_;
  const CsvHeader& header_;
  std::string_view source_;
  const std::vector<CsvField>& fields_;
};

// Positions of offsets in one text, in time linear in the text when the offsets mostly grow (a
// one-line JSON file of 100 MB reports each bad job without rescanning from the start).
class Locator {
 public:
  explicit Locator(std::string_view text) : text_(text) {}
  TextPosition Locate(size_t offset);

 private:
  std::string_view text_;
  size_t offset_ = 0;
  TextPosition at_;
};

// Located error in the house format: "SOURCE:LINE:COLUMN: WHAT".
Status ErrorAt(std::string_view source, TextPosition at, std::string_view what);

}  // namespace chamber::sim::trace_internal
