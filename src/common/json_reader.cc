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

const JsonReader::Json* JsonReader::Find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Status JsonReader::String(const Json& obj, std::string_view key, std::string_view path,
                          std::string* out) const {
  const Json* v = Find(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return Error(Join(path, key), "expected a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status JsonReader::Number(const Json& obj, std::string_view key, std::string_view path,
                          double* out) const {
  const Json* v = Find(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number() || !std::isfinite(v->get<double>()))
    return Error(Join(path, key), "expected a number");
  *out = v->get<double>();
  return Status::Ok();
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
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return Error(Join(path, key), "expected true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status JsonReader::Object(const Json& obj, std::string_view key, std::string_view path,
                          const Json** out) const {
  *out = Find(obj, key);
  if (*out != nullptr && !(*out)->is_object()) return Error(Join(path, key), "expected an object");
  return Status::Ok();
}

Status JsonReader::Array(const Json& obj, std::string_view key, std::string_view path,
                         const Json** out) const {
  *out = Find(obj, key);
  if (*out != nullptr && !(*out)->is_array()) return Error(Join(path, key), "expected a list");
  return Status::Ok();
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
      return Error(Join(path, key) + "[" + std::to_string(i) + "]", *bad);
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
    if (!v.is_string()) return Error(Join(Join(path, key), k), "expected a string");
    (*out)[k] = v.get<std::string>();
  }
  return Status::Ok();
}

}  // namespace chamber
