// Where the API server is and how to authenticate to it: kubeconfig files (KUBECONFIG may name
// several, merged as client-go merges them) and the in-cluster service-account config.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace chamber::kube {

// A resolved configuration: everything the transport needs, certificates already read into
// memory as PEM.
struct RestConfig {
  std::string server;  // "https://10.0.0.1:6443"
  std::string ca_pem;  // empty: the system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;       // a static bearer token
  std::string token_file;  // re-read as it rotates; takes over from `token` when set
  std::string namespace_name = "default";
  std::string source;  // what it came from, for error messages ("kubeconfig /a:context x")

  // Client-side rate limit (client-go's defaults) and timeouts.
  double qps = 5;
  int burst = 10;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{60'000};
  std::string user_agent = "chamber";
};

// Loads kubeconfig files. `paths` is a KUBECONFIG value (paths separated by ':'); files that do
// not exist are skipped unless none exists. Merging follows client-go: for clusters, users and
// contexts the first file that defines a name wins, and so does the first current-context.
// `context` overrides current-context when not empty. Relative file paths inside a kubeconfig
// are resolved against that file's directory.
Result<RestConfig> LoadKubeconfig(const std::string& paths, const std::string& context = "");

// Parses one kubeconfig document. `source` names it in errors; `base_dir` resolves relative
// certificate and token paths.
Result<RestConfig> ParseKubeconfig(const std::string& text, const std::string& source,
                                   const std::string& base_dir = ".",
                                   const std::string& context = "");

// Paths of the in-cluster config; tests point them elsewhere.
struct InClusterPaths {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// The config of a pod's service account: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT
// name the server, the mounted token file authenticates (it is re-read as it rotates).
Result<RestConfig> InClusterConfig(const InClusterPaths& paths = {});

// $KUBECONFIG, else ~/.kube/config, else the in-cluster config.
Result<RestConfig> LoadDefaultConfig();

// The bearer token to send, re-read from its file at most every `refresh` (client-go re-reads
// once a minute) and at once after Invalidate() (called on a 401). Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string static_token, std::string token_file,
              std::chrono::milliseconds refresh = std::chrono::seconds(60));

  // The current token ("" when there is none). Fails when the token file cannot be read.
  Result<std::string> Token();
  // Forces the next Token() to re-read the file. Returns false when there is no file to re-read.
  bool Invalidate();
  bool has_file() const { return !file_.empty(); }

 private:
  const std::string static_token_;
  const std::string file_;
  const std::chrono::milliseconds refresh_;
  std::mutex mu_;
  std::string cached_;
  bool have_token_ = false;
  std::optional<std::chrono::steady_clock::time_point> read_at_;
};

// Standard base64 (RFC 4648), as kubeconfig *-data fields use it. Whitespace is ignored.
Result<std::string> Base64Decode(std::string_view text);
std::string Base64Encode(std::string_view bytes);

}  // namespace chamber::kube
