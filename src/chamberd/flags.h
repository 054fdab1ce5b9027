// chamberd's command line and configuration file: the flags, and each component's section of
// the file read once (docs/install.md lists the flags, docs/configuration.md the file).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "backend/kube/gpu_pricing.h"
#include "backend/kube/kube_backend.h"
#include "common/status.h"
#include "core/config.h"
#include "health/health_controller.h"

namespace chamber::chamberd {

struct Flags {
  std::string kubeconfig;
  std::string config;
  std::string listen = "0.0.0.0:8080";
  std::string health_listen = "0.0.0.0:8081";  // /healthz and /readyz on every replica
  std::string token_file;
  bool token_review = true;
  std::vector<std::string> admin_groups{"chamber:admins", "system:masters"};
  std::vector<std::string> viewer_groups{"chamber:viewers"};
  std::vector<std::string> agent_users, agent_groups;  // may only post agent reports
  std::vector<std::string> replica_users;  // may only read the history's replication stream
  health::HealthControllerConfig health;   // the config file's `health:` section
  backend::PricingConfig pricing;          // the config file's `pricing:` section
  bool anonymous = false;
  // The API's limits (docs/api.md#limits): body bytes, requests a second and burst per client,
  // seconds a socket read or write may wait, seconds an idle kept-alive connection stays open.
  size_t api_max_body = size_t{1} << 20;
  double api_rate = 50, api_burst = 200;
  double api_read_timeout_s = 10, api_write_timeout_s = 10;
  int api_idle_timeout_s = 5;
  // TLS for the API (PEM): both set, it serves HTTPS only; read at start, not reloaded.
  std::string tls_cert_file, tls_key_file;
  // The admission webhook (docs/admission.md): served on every replica when the certificate is
  // set; HTTPS only. Pods in these namespaces and in chamberd's own are never changed.
  std::string webhook_listen = "0.0.0.0:9443";
  std::string webhook_tls_cert_file, webhook_tls_key_file;
  std::vector<std::string> webhook_exclude_namespaces{"kube-system"};
  double webhook_budget_s = 4;  // reading a pod's owners; the API server waits timeoutSeconds
  bool leader_elect = true;
  std::string lease_namespace;
  std::string lease_name = "chamber-scheduler";
  std::string identity;
  std::string pod_name;  // this replica's pod, for the leader label ("": no label)
  std::string pod_namespace;
  double lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  std::string scheduler_name = backend::kDefaultSchedulerName;
  double qps = 200;
  int burst = 400;
  int writers = 16;
  double usage_write_period_s = 60;  // Queue status.decayedUsage
  // A share over its GPU memory this long is deleted; 0: never (docs/sharing.md).
  double share_memory_grace_s = 60;
  // Reservation pods for shares, in chamberd's namespace (docs/sharing.md).
  bool gpu_reservations = true;
  double gpu_reservation_grace_s = 10;
  std::string gpu_reservation_image = "registry.k8s.io/pause:3.10";
  std::string data_dir;
  int history_step_s = 60;         // the history's fine step
  std::string history_follow_url;  // the leader's API, copied from while standby
  double history_follow_period_s = 5;
  std::string history_follow_ca_file;  // PEM CA bundle for an https:// history_follow_url
  std::string log_level = "info";
  bool log_json = false;
};

// Adds every flag to `app`, bound to the fields of `f`.
void AddFlags(CLI::App& app, Flags& f);

// Reads --config once: the engine's configuration into `engine`, the health controller's and the
// pricing sections into `f`. No file: the defaults.
Status ReadConfig(Flags* f, core::EngineConfig* engine);

// Checks the parsed flags that CLI11 cannot: --history-follow-url is http(s)://HOST:PORT (a
// trailing slash is dropped); --tls-cert-file and --tls-key-file come together, hold a PEM
// certificate and its key, and so do --webhook-tls-cert-file and --webhook-tls-key-file;
// --history-follow-ca-file holds a certificate. Errors name the flag.
Status CheckFlags(Flags* f);

// HOST:PORT of a listen flag (`flag` names it in the error).
Result<std::pair<std::string, int>> ParseListen(const std::string& text,
                                                const std::string& flag = "--listen");

}  // namespace chamber::chamberd
