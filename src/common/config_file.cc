#include "common/config_file.h"

#include "common/file.h"

namespace chamber {

Result<ConfigFile> ConfigFile::Load(const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

Result<ConfigFile> ConfigFile::Parse(std::string_view text, std::string source) {
  YamlReader reader(std::move(source));
  CHAMBER_ASSIGN_OR_RETURN(YAML::Node root, reader.Load(text));
  return ConfigFile(std::move(reader), std::move(root));
}

YAML::Node ConfigFile::Section(const std::string& key, bool* found) const {
  if (found) *found = false;
  const YAML::Node& root = root_;
  if (root.IsNull() || !root.IsMap() || !root[key]) return YAML::Node(YAML::NodeType::Null);
  if (found) *found = true;
  return root[key];
}

}  // namespace chamber
