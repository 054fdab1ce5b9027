// Kubernetes labels, as the API server takes them: what a node's labels and selectors may hold.
#pragma once

#include <string_view>

namespace chamber {

// A label value: empty, or at most 63 of A-Z a-z 0-9 '-' '_' '.', beginning and ending with a
// letter or digit.
bool IsLabelValue(std::string_view value);

// A label key: a name (a non-empty label value) after an optional prefix and '/', the prefix a
// DNS subdomain of at most 253 of a-z 0-9 '-' '.', beginning and ending with a letter or digit.
bool IsLabelKey(std::string_view key);

}  // namespace chamber
