// Queues from YAML, in the shape of the Queue custom resource's spec (queues.chamber.io
// v1alpha1). Accepted forms: Queue objects (one per document, or a List of them), or a plain
// `queues:` list whose entries carry `name` beside the spec fields.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/yaml_reader.h"
#include "core/model.h"

namespace chamber::core::io {

// Reads spec fields (parent, priority, queueing, resources) of `node` into `q`. With
// `extra_key`, that key (e.g. "name") is allowed beside them.
Status ParseQueueSpec(const YamlReader& y, const YAML::Node& node, const std::string& path,
                      Queue* q, std::string_view extra_key = {});

Result<std::vector<Queue>> ParseQueues(std::string_view text, std::string_view source);
Result<std::vector<Queue>> LoadQueuesFile(const std::string& path);

}  // namespace chamber::core::io
