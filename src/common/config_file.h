// Chamber's configuration file (docs/configuration.md): one YAML map whose top-level keys are
// the engine's fields and the sections of chamberd's components (`health:`, `pricing:`). It is
// read and parsed once; each component then reads its part from it, with errors that name the
// file, line, column and field.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "common/yaml_reader.h"

namespace chamber {

class ConfigFile {
 public:
  // No file: every component takes its defaults.
  ConfigFile() : reader_("(defaults)") {}

  // Reads and parses `path`; a syntax error names the file, line and column.
  static Result<ConfigFile> Load(const std::string& path);
  // Parses `text`; `source` names it in errors ("chamber.yaml:3:5: field ...").
  static Result<ConfigFile> Parse(std::string_view text, std::string source);

  // The whole document: a null node for an empty file.
  const YAML::Node& root() const { return root_; }
  // The `key:` section of the top-level map: a null node when the file has none or it is empty.
  // `found`, when given, says whether the key is there.
  YAML::Node Section(const std::string& key, bool* found = nullptr) const;
  // Typed reads whose errors name this file.
  const YamlReader& reader() const { return reader_; }

 private:
  ConfigFile(YamlReader reader, YAML::Node root)
      : reader_(std::move(reader)), root_(std::move(root)) {}

  YamlReader reader_;
  YAML::Node root_;
};

}  // namespace chamber
