#include "sim/trace/csv.h"

#include <algorithm>
#include <cstring>

namespace chamber::sim::trace_internal {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

TextPosition LocateIn(std::string_view text, size_t start, int64_t line, size_t offset) {
  offset = std::min(offset, text.size());
  start = std::min(start, offset);
  size_t line_start = start;
  for (size_t i = start; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  int64_t column = 1;
  for (size_t i = line_start; i < offset; ++i) {
    // UTF-8 continuation bytes do not start a character.
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++column;
  }
  return {line, column};
}

TextPosition Locator::Locate(size_t offset) {
  offset = std::min(offset, text_.size());
  if (offset < offset_) {
    offset_ = 0;
    at_ = {};
  }
  for (; offset_ < offset; ++offset_) {
    const char c = text_[offset_];
    if (c == '\n') {
      ++at_.line;
      at_.column = 1;
    } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      ++at_.column;
    }
  }
  return at_;
}

Status ErrorAt(std::string_view source, TextPosition at, std::string_view what) {
  std::string m(source);
  m += ':';
  m += std::to_string(at.line);
  m += ':';
  m += std::to_string(at.column);
  m += ": ";
  m += what;
  return Status::InvalidArgument(std::move(m));
}

CsvReader::CsvReader(std::string_view text) : text_(text) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // UTF-8 byte order mark
}

TextPosition CsvReader::Locate(size_t offset) const {
  return LocateIn(text_, record_start_, record_line_, offset);
}

void CsvReader::SkipBlankLines() {
  while (pos_ < text_.size()) {
    size_t i = pos_;
    while (i < text_.size() && (IsBlank(text_[i]) || text_[i] == '\r')) ++i;
    if (i < text_.size() && text_[i] != '\n') return;
    pos_ = i < text_.size() ? i + 1 : i;
    if (i < text_.size()) ++line_;
  }
}

CsvReader::Next CsvReader::Fail(std::string why, size_t at) {
  error_ = std::move(why);
  error_offset_ = at;
  // Resume after the line the error is on.
  const size_t nl = text_.find('\n', at);
  const size_t resume = nl == std::string_view::npos ? text_.size() : nl + 1;
  for (size_t i = pos_; i < resume; ++i) line_ += text_[i] == '\n' ? 1 : 0;
  pos_ = resume;
  return Next::kError;
}

CsvReader::Next CsvReader::Read(std::vector<CsvField>* fields) {
  fields->clear();
  SkipBlankLines();
  if (pos_ >= text_.size()) return Next::kEnd;
  record_start_ = pos_;
  record_line_ = line_;
  scratch_.clear();
  // Fields with doubled quotes live in scratch_, which may move while it grows: keep their
  // offsets and make the views at the end.
  struct Unescaped {
    size_t field, offset, size;
  };
  std::vector<Unescaped> unescaped;
  const size_t n = text_.size();
  size_t p = pos_;
  while (true) {
    const size_t field_start = p;
    size_t q = p;
    while (q < n && IsBlank(text_[q])) ++q;
    if (q < n && text_[q] == '"') {
      const size_t open = q;
      size_t r = q + 1;
      size_t scratch_start = std::string::npos;
      size_t close = std::string_view::npos;
      while (true) {
        const size_t quote = text_.find('"', r);
        if (quote == std::string_view::npos) break;
        if (quote + 1 < n && text_[quote + 1] == '"') {  // a doubled quote: one literal quote
          if (scratch_start == std::string::npos) scratch_start = scratch_.size();
          scratch_.append(text_.data() + r, quote + 1 - r);
          r = quote + 2;
          continue;
        }
        close = quote;
        break;
      }
      if (close == std::string_view::npos) {
        pos_ = p;
        return Fail("unterminated quoted field", open);
      }
      if (scratch_start == std::string::npos) {
        fields->push_back({text_.substr(open + 1, close - open - 1), field_start});
      } else {
        scratch_.append(text_.data() + r, close - r);
        unescaped.push_back({fields->size(), scratch_start, scratch_.size() - scratch_start});
        fields->push_back({std::string_view(), field_start});
      }
      for (size_t i = p; i < close; ++i) line_ += text_[i] == '\n' ? 1 : 0;
      p = close + 1;
      while (p < n && IsBlank(text_[p])) ++p;
      if (p < n && text_[p] == '\r' && (p + 1 == n || text_[p + 1] == '\n')) ++p;
      if (p < n && text_[p] != ',' && text_[p] != '\n') {
        pos_ = p;
        return Fail("unexpected text after a closing quote", p);
      }
    } else {
      size_t end = p;
      while (end < n && text_[end] != ',' && text_[end] != '\n') ++end;
      p = end;
      if (end > field_start && text_[end - 1] == '\r' && (end == n || text_[end] == '\n')) --end;
      size_t begin = field_start;
      while (begin < end && IsBlank(text_[begin])) ++begin;
      while (end > begin && IsBlank(text_[end - 1])) --end;
      fields->push_back({text_.substr(begin, end - begin), field_start});
    }
    if (p < n && text_[p] == ',') {
      ++p;
      continue;
    }
    record_end_ = p;
    if (record_end_ > record_start_ && text_[record_end_ - 1] == '\r') --record_end_;
    if (p < n) {  // a '\n'
      ++p;
      ++line_;
    }
    break;
  }
  pos_ = p;
  for (const Unescaped& u : unescaped) {
    (*fields)[u.field].value = std::string_view(scratch_).substr(u.offset, u.size);
  }
  return Next::kRecord;
}

Result<CsvHeader> CsvHeader::Read(CsvReader* reader, std::string_view source,
                                  std::span<const CsvColumn> columns, bool strict) {
  std::string expected;
  for (const CsvColumn& c : columns)
    expected += (expected.empty() ? "" : ",") + std::string(c.name);
  std::vector<CsvField> fields;
  const CsvReader::Next next = reader->Read(&fields);
  if (next == CsvReader::Next::kEnd) {
    return ErrorAt(source, {1, 1}, "missing header line (expected columns " + expected + ")");
  }
  if (next == CsvReader::Next::kError) {
    return ErrorAt(source, reader->Locate(reader->error_offset()), "header: " + reader->error());
  }
  CsvHeader h;
  h.columns_ = columns;
  h.field_of_.assign(columns.size(), -1);
  h.num_fields_ = fields.size();
  for (size_t f = 0; f < fields.size(); ++f) {
    const std::string_view name = fields[f].value;
    const auto it = std::find_if(columns.begin(), columns.end(),
                                 [&](const CsvColumn& c) { return c.name == name; });
    if (it == columns.end()) {
      if (!strict) continue;
      return ErrorAt(source, reader->Locate(fields[f].offset),
                     "column " + std::string(name) + ": unknown column (known: " + expected + ")");
    }
    const size_t col = static_cast<size_t>(it - columns.begin());
    if (h.field_of_[col] >= 0) {
      return ErrorAt(source, reader->Locate(fields[f].offset),
                     "column " + std::string(name) + ": appears twice in the header");
    }
    h.field_of_[col] = static_cast<int>(f);
  }
  for (size_t col = 0; col < columns.size(); ++col) {
    if (columns[col].required && h.field_of_[col] < 0) {
      return ErrorAt(source, reader->Locate(reader->record_end()),
                     "column " + std::string(columns[col].name) +
                         ": missing from the header (expected columns " + expected + ")");
    }
  }
  return h;
}

Status CsvRow::Error(size_t col, std::string_view why) const {
  const int f = header_.FieldOf(col);
  const TextPosition at = f < 0 ? TextPosition{reader_.record_line(), 1}
                                : reader_.Locate(fields_[static_cast<size_t>(f)].offset);
  std::string what = "column ";
  what += header_.columns()[col].name;
  what += ": ";
  what += why;
  return ErrorAt(source_, at, what);
}

}  // namespace chamber::sim::trace_internal
