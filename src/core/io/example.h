// The built-in example snapshot (examples/example_cluster.yaml), compiled into the binary so
// that `chamber schedule --example` needs no files.
#pragma once

#include <string_view>

namespace chamber::core::io {

std::string_view ExampleSnapshotYaml();

}  // namespace chamber::core::io
