#include "common/json_reader.h"

#include <cmath>

namespace chamber {

Status JsonReader::Error(std::string_view path, std::string_view what) const {
  std::string message =
      where_.empty() ? std::string(path) : where_ + ": field " + std::string(path);
  return Status::InvalidArgument(message + ": " + std::string(what));
}

std::string JsonReader::Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

std::string JsonReader::Element(std::string_view path, size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

const JsonReader::Json* JsonReader::Find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<std::string_view> JsonReader::ToString(const Json& v, std::string* out) {
  if (!v.is_string()) return "expected a string";
  *out = v.get<std::string>();
  return std::nullopt;
}

std::optional<std::string_view> JsonReader::ToNumber(const Json& v, double* out) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) return "expected a number";
  *out = v.get<double>();
  return std::nullopt;
}

std::optional<std::string_view> JsonReader::ToBool(const Json& v, bool* out) {
  if (!v.is_boolean()) return "expected true or false";
  *out = v.get<bool>();
  return std::nullopt;
}

std::optional<std::string_view> JsonReader::IsObject(const Json& v) {
  if (!v.is_object()) return "expected an object";
  return std::nullopt;
}

std::optional<std::string_view> JsonReader::IsArray(const Json& v) {
  if (!v.is_array()) return "expected a list";
  return std::nullopt;
}

Status JsonReader::Check(std::optional<std::string_view> bad, std::string_view path) const {
  return bad ? Error(path, *bad) : Status::Ok();
}

Status JsonReader::Check(std::optional<std::string_view> bad, std::string_view path,
                         std::string_view key) const {
  return bad ? Error(Join(path, key), *bad) : Status::Ok();
}

Status JsonReader::String(const Json& obj, std::string_view key, std::string_view path,
                          std::string* out) const {
  const Json* v = Find(obj, key);
  return v == nullptr ? Status::Ok() : Check(ToString(*v, out), path, key);
}

Status JsonReader::Number(const Json& obj, std::string_view key, std::string_view path,
                          double* out) const {
  const Json* v = Find(obj, key);
  return v == nullptr ? Status::Ok() : Check(ToNumber(*v, out), path, key);
}

Status JsonReader::Number(const Json& obj, std::string_view key, std::string_view path,
                          std::optional<double>* out) const {
  if (Find(obj, key) == nullptr) return Status::Ok();
  double v = 0;
  CHAMBER_RETURN_IF_ERROR(Number(obj, key, path, &v));
  *out = v;
  return Status::Ok();
}

Status JsonReader::Bool(const Json& obj, std::string_view key, std::string_view path,
                        bool* out) const {
  const Json* v = Find(obj, key);
  return v == nullptr ? Status::Ok() : Check(ToBool(*v, out), path, key);
}

Status JsonReader::Object(const Json& obj, std::string_view key, std::string_view path,
                          const Json** out) const {
  *out = Find(obj, key);
  return *out == nullptr ? Status::Ok() : Check(IsObject(**out), path, key);
}

Status JsonReader::Array(const Json& obj, std::string_view key, std::string_view path,
                         const Json** out) const {
  *out = Find(obj, key);
  return *out == nullptr ? Status::Ok() : Check(IsArray(**out), path, key);
}

Status JsonReader::Strings(const Json& obj, std::string_view key, std::string_view path,
                           std::vector<std::string>* out) const {
  const Json* v = Find(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_array()) return Error(Join(path, key), "expected a list of strings");
  for (const Json& s : *v) {
    if (!s.is_string()) return Error(Join(path, key), "expected a list of strings");
    out->push_back(s.get<std::string>());
  }
  return Status::Ok();
}

Status JsonReader::Integers(const Json& obj, std::string_view key, std::string_view path,
                            std::vector<int>* out) const {
  const Json* v = Find(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_array()) return Error(Join(path, key), "expected a list of integers");
  for (size_t i = 0; i < v->size(); ++i) {
    int x = 0;
    if (std::optional<std::string_view> bad = ToInt((*v)[i], &x))
      return Error(Element(Join(path, key), i), *bad);
    out->push_back(x);
  }
  return Status::Ok();
}

Status JsonReader::StringMap(const Json& obj, std::string_view key, std::string_view path,
                             std::map<std::string, std::string>* out) const {
  const Json* m = nullptr;
  CHAMBER_RETURN_IF_ERROR(Object(obj, key, path, &m));
  if (m == nullptr) return Status::Ok();
  for (const auto& [k, v] : m->items()) {
    std::string s;
    if (std::optional<std::string_view> bad = ToString(v, &s))
      return Error(Join(Join(path, key), k), *bad);
    (*out)[k] = std::move(s);
  }
  return Status::Ok();
}

Status JsonReader::StringValue(const Json& v, std::string_view path, std::string* out) const {
  return Check(ToString(v, out), path);
}

Status JsonReader::NumberValue(const Json& v, std::string_view path, double* out) const {
  return Check(ToNumber(v, out), path);
}

Status JsonReader::BoolValue(const Json& v, std::string_view path, bool* out) const {
  return Check(ToBool(v, out), path);
}

Status JsonReader::ObjectValue(const Json& v, std::string_view path) const {
  return Check(IsObject(v), path);
}

Status JsonReader::ArrayValue(const Json& v, std::string_view path) const {
  return Check(IsArray(v), path);
}

}  // namespace chamber
