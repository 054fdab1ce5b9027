// Typed reads of JSON object members, and of values such as a list's elements, with errors that
// name the path: "Pod ml/train-0: field spec.nodeName: expected a string" (with a `where`), or
// "report.incidents[0].evidence[0].xid: expected an unsigned integer" (without). nlohmann-json
// throws on a wrong type; these never do. The words match YamlReader's (common/yaml_reader.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace chamber {

class JsonReader {
 public:
  using Json = nlohmann::json;

  // `where` names the object in errors ("Pod ml/train-0"); empty, errors start at the path.
  explicit JsonReader(std::string where = {}) : where_(std::move(where)) {}

  Status Error(std::string_view path, std::string_view what) const;
  // "a.b" from "a" and "b"; "b" from "" and "b".
  static std::string Join(std::string_view path, std::string_view key);
  // "a[3]" from "a" and 3: the path of a list's element.
  static std::string Element(std::string_view path, size_t index);
  // The member `key` of `obj`: null when it is absent or JSON null, or `obj` is not an object.
  static const Json* Find(const Json& obj, std::string_view key);

  // Each reads the member `key` of `obj` (at `path`) into `*out`; an absent or null member
  // leaves `*out` as it is.
  Status String(const Json& obj, std::string_view key, std::string_view path,
                std::string* out) const;
  // Integers of `Int`'s range; for an unsigned `Int`, no negative numbers.
  template <typename Int>
  Status Integer(const Json& obj, std::string_view key, std::string_view path, Int* out) const;
  template <typename Int>
  Status Integer(const Json& obj, std::string_view key, std::string_view path,
                 std::optional<Int>* out) const;
  // A finite number.
  Status Number(const Json& obj, std::string_view key, std::string_view path, double* out) const;
  Status Number(const Json& obj, std::string_view key, std::string_view path,
                std::optional<double>* out) const;
  Status Bool(const Json& obj, std::string_view key, std::string_view path, bool* out) const;
  // The member itself, null when absent; it must be an object (a list).
  Status Object(const Json& obj, std::string_view key, std::string_view path,
                const Json** out) const;
  Status Array(const Json& obj, std::string_view key, std::string_view path,
               const Json** out) const;
  // A list of strings (integers), appended to `*out`.
  Status Strings(const Json& obj, std::string_view key, std::string_view path,
                 std::vector<std::string>* out) const;
  Status Integers(const Json& obj, std::string_view key, std::string_view path,
                  std::vector<int>* out) const;
  // An object of strings, added to `*out`.
  Status StringMap(const Json& obj, std::string_view key, std::string_view path,
                   std::map<std::string, std::string>* out) const;

  // Each reads the value `v` itself (a list's element, say), at `path`, into `*out`, with the
  // member reads' rules and words; null is of the wrong type here.
  Status StringValue(const Json& v, std::string_view path, std::string* out) const;
  template <typename Int>
  Status IntegerValue(const Json& v, std::string_view path, Int* out) const;
  Status NumberValue(const Json& v, std::string_view path, double* out) const;
  Status BoolValue(const Json& v, std::string_view path, bool* out) const;
  // Checks that `v` is an object (a list).
  Status ObjectValue(const Json& v, std::string_view path) const;
  Status ArrayValue(const Json& v, std::string_view path) const;
  // The same for element `index` of the list at `list`: its path ("rows[3]") is made only for
  // an error, so that reading the elements of a long list allocates nothing for them.
  template <typename T>
  Status ElementValue(const Json& v, std::string_view list, size_t index, T* out) const {
    Status s = ValueAt(v, std::string_view(), out);
    return s.ok() ? s : ValueAt(v, Element(list, index), out);
  }

 private:
  Status ValueAt(const Json& v, std::string_view path, std::string* out) const {
    return StringValue(v, path, out);
  }
  Status ValueAt(const Json& v, std::string_view path, double* out) const {
    return NumberValue(v, path, out);
  }
  Status ValueAt(const Json& v, std::string_view path, bool* out) const {
    return BoolValue(v, path, out);
  }
  template <typename Int>
  requires std::is_integral_v<Int> Status ValueAt(const Json& v, std::string_view path, Int* out)
  const { return IntegerValue(v, path, out); }

  // The checks behind both kinds of read: each reads `v` into `*out` (where there is one), or
  // gives the reason it cannot. A member read joins its path only for an error.
  static std::optional<std::string_view> ToString(const Json& v, std::string* out);
  template <typename Int>
  static std::optional<std::string_view> ToInt(const Json& v, Int* out);
  static std::optional<std::string_view> ToNumber(const Json& v, double* out);
  static std::optional<std::string_view> ToBool(const Json& v, bool* out);
  static std::optional<std::string_view> IsObject(const Json& v);
  static std::optional<std::string_view> IsArray(const Json& v);

  // `bad`, a reason from the checks above, as an error at `path` (at the member `key` of
  // `path`); Ok when there is none.
  Status Check(std::optional<std::string_view> bad, std::string_view path) const;
  Status Check(std::optional<std::string_view> bad, std::string_view path,
               std::string_view key) const;

  std::string where_;
};

template <typename Int>
std::optional<std::string_view> JsonReader::ToInt(const Json& v, Int* out) {
  static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>);
  if constexpr (std::is_unsigned_v<Int>) {
    if (!v.is_number_unsigned()) return "expected an unsigned integer";
    const uint64_t x = v.get<uint64_t>();
    if (x > std::numeric_limits<Int>::max()) return "out of range";
    *out = static_cast<Int>(x);
  } else {
    if (!v.is_number_integer()) return "expected an integer";
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<Int>::max()))
      return "out of range";
    const int64_t x = v.get<int64_t>();
    if (x < std::numeric_limits<Int>::min() || x > std::numeric_limits<Int>::max())
      return "out of range";
    *out = static_cast<Int>(x);
  }
  return std::nullopt;
}

template <typename Int>
Status JsonReader::Integer(const Json& obj, std::string_view key, std::string_view path,
                           Int* out) const {
  const Json* v = Find(obj, key);
  return v == nullptr ? Status::Ok() : Check(ToInt(*v, out), path, key);
}

template <typename Int>
Status JsonReader::Integer(const Json& obj, std::string_view key, std::string_view path,
                           std::optional<Int>* out) const {
  if (Find(obj, key) == nullptr) return Status::Ok();
  Int v{};
  CHAMBER_RETURN_IF_ERROR(Integer(obj, key, path, &v));
  *out = v;
  return Status::Ok();
}

template <typename Int>
Status JsonReader::IntegerValue(const Json& v, std::string_view path, Int* out) const {
  return Check(ToInt(v, out), path);
}

}  // namespace chamber
