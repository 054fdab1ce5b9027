// An immutable string whose copies share one allocation. A GPU's UUID and model are copied from
// the node cache into every snapshot and from the snapshot into every published fleet state;
// at 160,000 GPUs each copy of a std::string costs a heap block, a copy of this a reference
// count.
#pragma once

#include <compare>
#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace chamber {

class SharedString {
 public:
  SharedString() = default;
  // Implicit from a std::string, so that `gpu.uuid = name + "/gpu0"` reads as it would for a
  // std::string. An empty string allocates nothing.
  SharedString(std::string s)  // NOLINT(google-explicit-constructor)
      : value_(s.empty() ? nullptr : std::make_shared<const std::string>(std::move(s))) {}
  explicit SharedString(std::string_view s) : SharedString(std::string(s)) {}
  SharedString(const char* s)  // NOLINT(google-explicit-constructor)
      : SharedString(std::string(s)) {}

  const std::string& str() const { return value_ ? *value_ : Empty(); }
  // Reads as a const std::string& wherever one is expected.
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  std::string_view view() const { return str(); }
  const char* c_str() const { return str().c_str(); }
  bool empty() const { return str().empty(); }
  size_t size() const { return str().size(); }

  friend bool operator==(const SharedString& a, const SharedString& b) {
    return a.value_ == b.value_ || a.str() == b.str();
  }
  friend bool operator==(const SharedString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const SharedString& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const SharedString& a, const char* b) { return a.str() == b; }
  friend std::strong_ordering operator<=>(const SharedString& a, const SharedString& b) {
    return a.str() <=> b.str();
  }
  friend std::strong_ordering operator<=>(const SharedString& a, std::string_view b) {
    return a.view() <=> b;
  }
  friend std::ostream& operator<<(std::ostream& os, const SharedString& s) { return os << s.str(); }

 private:
  static const std::string& Empty() {
    static const std::string kEmpty;
    return kEmpty;
  }

  std::shared_ptr<const std::string> value_;
};

}  // namespace chamber

template <>
struct std::hash<chamber::SharedString> {
  size_t operator()(const chamber::SharedString& s) const noexcept {
    return std::hash<std::string_view>{}(s.view());
  }
};
