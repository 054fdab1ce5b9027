// Mutation fuzzing for text readers in property tests: the fuzz properties of every parser apply
// byte flips, deletions, insertions of format tokens and duplications to a valid document.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chamber::fuzz {

// Applies `ops` as (kind, position, argument) triples; `tokens` are the format's own pieces
// (separators, quotes, brackets, odd numbers) that insertions draw from.
inline std::string MutateText(std::string text, const std::vector<int>& ops,
                              std::span<const std::string_view> tokens) {
  for (size_t i = 0; i + 2 < ops.size() && !text.empty(); i += 3) {
    const size_t pos = static_cast<size_t>(ops[i + 1]) % text.size();
    const auto arg = static_cast<size_t>(ops[i + 2]);
    switch (ops[i] % 4) {
      case 0:
        text[pos] = static_cast<char>(arg % 256);
        break;
      case 1:
        text.erase(pos, arg % 16);
        break;
      case 2:
        if (!tokens.empty()) text.insert(pos, tokens[arg % tokens.size()]);
        break;
      case 3:
        text.insert(pos, text.substr(pos, arg % 64));
        break;
    }
  }
  return text;
}

}  // namespace chamber::fuzz
