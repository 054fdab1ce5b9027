// Parsers for single trace fields: integers, seconds, timestamps, GPU model lists. They return
// only the reason ("\"x\" is not an integer"); the reader adds file, line, column and name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace chamber::sim::trace_internal {

// Times beyond this many milliseconds (about 31,700 years) are rejected, so sums and shifts of
// two of them never overflow.
inline constexpr int64_t kMaxMillis = 1'000'000'000'000'000;

// An integer in [min, max]. "8.0" is accepted as 8 (pandas writes integral columns with NaNs so).
Result<int64_t> ParseInteger(std::string_view text, int64_t min, int64_t max);

// A non-negative number of seconds ("12", "12.5") or a duration ("1h30m", "250ms"), in ms.
Result<int64_t> ParseSecondsMs(std::string_view text);

// A point in time, in ms: "YYYY-MM-DD HH:MM:SS" (or with a 'T', fractional seconds, a trailing
// 'Z'), read as UTC without time zone or DST adjustment; otherwise seconds as ParseSecondsMs.
Result<int64_t> ParseTimeMs(std::string_view text);

// Seconds since 1970-01-01 of "YYYY-MM-DD HH:MM:SS[.fff][Z]" (or 'T' for the space), in ms.
Result<int64_t> ParseDateTimeMs(std::string_view text);

// Whether `text` looks like the start of a date-time ("2020-06-09 ...").
bool LooksLikeDateTime(std::string_view text);

// A value the public traces use for "nothing here": "", "nan", "NaN", "None", "null".
bool IsMissing(std::string_view text);

// "V100M16|V100M32|V100M32" -> {"V100M16", "V100M32"}: split at '|', trimmed, missing entries
// (IsMissing: "", "null", ...) and repeats dropped; a missing value gives no models.
std::vector<std::string> SplitModels(std::string_view text);

// Seconds with up to three decimals, as WriteChamberCsv writes them: 1500 -> "1.5".
std::string FormatSeconds(int64_t ms);

std::string_view Trim(std::string_view text);

// `text` quoted for an error message, shortened when long: "\"abc\"".
std::string Quote(std::string_view text);

}  // namespace chamber::sim::trace_internal
