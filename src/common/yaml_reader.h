// Typed reads from YAML with errors that name the place: "queues.yaml:4:9: field
// queues[0].resources.gpu.quota: must not be negative". yaml-cpp throws; this is where its
// exceptions stop.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace chamber {

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  // Parses one document, or every document of a stream.
  Result<YAML::Node> Load(std::string_view text) const;
  Result<std::vector<YAML::Node>> LoadAll(std::string_view text) const;

  // An error at `node` about field `path`.
  Status Error(const YAML::Node& node, std::string_view path, std::string_view what) const;

  // Fails on a key outside `allowed` (catches typos such as "qouta").
  Status CheckKeys(const YAML::Node& map, std::string_view path,
                   std::initializer_list<std::string_view> allowed) const;
  Status ExpectMap(const YAML::Node& node, std::string_view path) const;
  Status ExpectList(const YAML::Node& node, std::string_view path) const;

  Result<std::string> String(const YAML::Node& node, std::string_view path) const;
  Result<int64_t> Int(const YAML::Node& node, std::string_view path) const;
  Result<double> Double(const YAML::Node& node, std::string_view path) const;
  Result<bool> Bool(const YAML::Node& node, std::string_view path) const;
  // Durations as ParseDuration (common/time.h) reads them; quantities as common/quantity.h.
  Result<std::chrono::milliseconds> Dur(const YAML::Node& node, std::string_view path) const;
  Result<int64_t> CpuMilli(const YAML::Node& node, std::string_view path) const;
  Result<int64_t> Bytes(const YAML::Node& node, std::string_view path) const;
  Result<int64_t> GpuMilli(const YAML::Node& node, std::string_view path, int64_t max_gpus) const;
  Result<std::vector<std::pair<std::string, std::string>>> StringMap(const YAML::Node& node,
                                                                     std::string_view path) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

}  // namespace chamber
