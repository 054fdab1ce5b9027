// Kubeconfig files (kube/config.h, ParseKubeconfig): what chamberd, the CLI and the tests read
// from KUBECONFIG. Relative certificate and token paths resolve against a directory that does
// not exist, so no input reads a file. Properties: an error names the file; a configuration
// that reads names a server.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fuzz/fuzz_check.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  const std::string text(fuzz::Text(data, size));
  chamber::Result<chamber::kube::RestConfig> config =
      chamber::kube::ParseKubeconfig(text, "kubeconfig", "/nonexistent/chamber-fuzz");
  if (!config.ok()) {
    fuzz::CheckError(config.status(), "kubeconfig");
    return 0;
  }
  fuzz::Check(!config->server.empty(), "a configuration without a server");
  return 0;
}
