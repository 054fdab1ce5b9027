#include "chamberd/flags.h"

#include "common/config_file.h"
#include "common/tls.h"
#include "core/io/config_yaml.h"

namespace chamber::chamberd {

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)");
  app.add_option("--config", f.config, "the engine's YAML configuration (docs/configuration.md)");
  app.add_option("--listen", f.listen, "HOST:PORT for the API, dashboard and /metrics")
      ->capture_default_str();
  app.add_option("--health-listen", f.health_listen,
                 "HOST:PORT for /healthz and /readyz, served by every replica (empty: none)")
      ->capture_default_str();
  app.add_option("--token-file", f.token_file, "API tokens: lines of `<token> <role> [name]`");
  app.add_flag("--token-review,!--no-token-review", f.token_review,
               "accept Kubernetes tokens through TokenReview")
      ->capture_default_str();
  app.add_option("--admin-group", f.admin_groups,
                 "Kubernetes groups whose tokens may use the admin API (repeatable)")
      ->capture_default_str();
  app.add_option("--viewer-group", f.viewer_groups,
                 "Kubernetes groups whose tokens may read the API (repeatable)")
      ->capture_default_str();
  app.add_option("--agent-user", f.agent_users,
                 "Kubernetes users whose tokens may post agent reports, and nothing else "
                 "(repeatable; e.g. system:serviceaccount:chamber:chamber-agent)");
  app.add_option("--replica-user", f.replica_users,
                 "Kubernetes users whose tokens may only read the history's replication stream "
                 "(repeatable; chamberd's own service account, for its standby replicas)");
  app.add_option("--agent-group", f.agent_groups,
                 "Kubernetes groups whose tokens may post agent reports, and nothing else "
                 "(repeatable)");
  app.add_flag("--anonymous", f.anonymous, "no authentication: every caller is admin (testing)");
  app.add_option("--api-max-body", f.api_max_body,
                 "largest request body in bytes; larger ones are refused with 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  app.add_option("--api-rate", f.api_rate,
                 "API requests a second per client (token, else address), sustained; over it "
                 "429 with Retry-After (<= 0: no limit)")
      ->capture_default_str();
  app.add_option("--api-burst", f.api_burst, "API requests a client may send at once")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  app.add_option("--api-read-timeout", f.api_read_timeout_s,
                 "seconds the API waits on a client that sends nothing before it drops it")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--api-write-timeout", f.api_write_timeout_s,
                 "seconds the API waits on a client that takes nothing before it drops it")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--api-idle-timeout", f.api_idle_timeout_s,
                 "seconds an idle kept-alive API connection stays open")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--tls-cert-file", f.tls_cert_file,
                 "PEM certificate (chain) for the API; with --tls-key-file the API serves HTTPS "
                 "only. A renewed certificate (the files replaced) is served from the next "
                 "handshake on");
  app.add_option("--tls-key-file", f.tls_key_file,
                 "PEM private key of --tls-cert-file (not encrypted)");
  app.add_option("--webhook-listen", f.webhook_listen,
                 "HOST:PORT of the mutating admission webhook (HTTPS), served by every replica "
                 "when --webhook-tls-cert-file is set (docs/admission.md)")
      ->capture_default_str();
  app.add_option("--webhook-tls-cert-file", f.webhook_tls_cert_file,
                 "PEM certificate (chain) of the admission webhook; unset: no webhook. "
                 "Followed as it is renewed: a replaced file is served from the next handshake");
  app.add_option("--webhook-tls-key-file", f.webhook_tls_key_file,
                 "PEM private key of --webhook-tls-cert-file (not encrypted)");
  app.add_option("--webhook-exclude-namespace", f.webhook_exclude_namespaces,
                 "namespaces whose pods the webhook never changes, besides chamberd's own "
                 "(repeatable)")
      ->capture_default_str();
  app.add_option("--webhook-owner-budget", f.webhook_budget_s,
                 "seconds the webhook may spend reading a pod's owners and namespace before it "
                 "refuses the pod (its creator retries); keep it under the webhook's "
                 "timeoutSeconds")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 29.0));
  app.add_flag("--leader-elect,!--no-leader-elect", f.leader_elect,
               "campaign for the Lease; only the leader schedules")
      ->capture_default_str();
  app.add_option("--lease-namespace", f.lease_namespace,
                 "namespace of the Lease (default: the pod's namespace, --pod-namespace)");
  app.add_option("--lease-name", f.lease_name, "name of the Lease")->capture_default_str();
  app.add_option("--identity", f.identity,
                 "this replica's name in the Lease, unique to the process (default: "
                 "<hostname>_<pid>_<random>)");
  app.add_option("--pod-name", f.pod_name,
                 "this replica's pod, labelled chamber.io/leader=true while it leads and serves "
                 "(default: $POD_NAME; empty: no label)");
  app.add_option("--pod-namespace", f.pod_namespace,
                 "this replica's namespace (default: $POD_NAMESPACE, else the kubeconfig's)");
  app.add_option("--lease-duration", f.lease_duration_s,
                 "seconds a Lease not renewed stays with its holder")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--renew-deadline", f.renew_deadline_s,
                 "seconds the leader keeps trying to renew before it stops leading")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--retry-period", f.retry_period_s, "seconds between Lease attempts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--scheduler-name", f.scheduler_name, "pods with this spec.schedulerName are ours")
      ->capture_default_str();
  app.add_option("--kube-api-qps", f.qps, "client rate limit (<= 0: none)")->capture_default_str();
  app.add_option("--kube-api-burst", f.burst, "client burst")->capture_default_str();
  app.add_option("--writers", f.writers, "parallel API writes within a cycle")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--queue-usage-write-period", f.usage_write_period_s,
                 "seconds between writes of a Queue's status.decayedUsage (with "
                 "fairShare.usageHalfLife set), from which the next leader continues")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--share-memory-grace", f.share_memory_grace_s,
                 "seconds a share of a GPU may hold more GPU memory than it asked for "
                 "(chamber.io/gpu-memory), as its node's agent measures it, before chamberd "
                 "deletes its pod; 0: never delete, only show and log it")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gpu-reservations", f.gpu_reservations,
                 "on nodes whose agent reports pod resources, bind a share only to a GPU that a "
                 "reservation pod of chamberd's (in its namespace) holds from the device plugin")
      ->capture_default_str();
  app.add_option("--gpu-reservation-grace", f.gpu_reservation_grace_s,
                 "seconds a reservation pod with no share on its GPU is kept")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gpu-reservation-image", f.gpu_reservation_image,
                 "the reservation pods' container image (a pause container)")
      ->capture_default_str();
  app.add_option("--data-dir", f.data_dir, "where the utilization history is kept (none: none)");
  app.add_option("--history-step", f.history_step_s,
                 "seconds per fine point of the history; a divisor of 3600, the same on every "
                 "replica")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option(
      "--history-follow-url", f.history_follow_url,
      "while standby, copy the leader's history from this base URL of its API (the "
      "chart's chamberd Service, e.g. http://chamber.chamber-system.svc:80; empty: none)");
  app.add_option("--history-follow-ca-file", f.history_follow_ca_file,
                 "PEM CA bundle the leader's certificate must chain to, for an https:// "
                 "--history-follow-url (default: the system's trust store); the host name is "
                 "checked");
  app.add_option("--history-follow-period", f.history_follow_period_s,
                 "seconds between copies of the leader's history")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_flag("--log-json", f.log_json, "log lines as JSON");
}

Status ReadConfig(Flags* f, core::EngineConfig* engine) {
  if (f->config.empty()) return Status::Ok();
  CHAMBER_ASSIGN_OR_RETURN(const ConfigFile file, ConfigFile::Load(f->config));
  CHAMBER_ASSIGN_OR_RETURN(*engine, core::io::ReadEngineConfig(file));
  CHAMBER_ASSIGN_OR_RETURN(f->health, health::ReadHealthConfig(file));
  CHAMBER_ASSIGN_OR_RETURN(f->pricing, backend::ReadPricingConfig(file));
  return Status::Ok();
}

Status CheckFlags(Flags* f) {
  if (f->tls_cert_file.empty() != f->tls_key_file.empty())
    return Status::InvalidArgument(f->tls_cert_file.empty()
                                       ? "--tls-key-file needs --tls-cert-file"
                                       : "--tls-cert-file needs --tls-key-file");
  if (!f->tls_cert_file.empty())
    CHAMBER_RETURN_IF_ERROR(tls::CheckCertificateAndKey({"--tls-cert-file", f->tls_cert_file},
                                                        {"--tls-key-file", f->tls_key_file}));
  if (f->webhook_tls_cert_file.empty() != f->webhook_tls_key_file.empty())
    return Status::InvalidArgument(f->webhook_tls_cert_file.empty()
                                       ? "--webhook-tls-key-file needs --webhook-tls-cert-file"
                                       : "--webhook-tls-cert-file needs --webhook-tls-key-file");
  if (!f->webhook_tls_cert_file.empty()) {
    CHAMBER_RETURN_IF_ERROR(
        tls::CheckCertificateAndKey({"--webhook-tls-cert-file", f->webhook_tls_cert_file},
                                    {"--webhook-tls-key-file", f->webhook_tls_key_file}));
    CHAMBER_RETURN_IF_ERROR(ParseListen(f->webhook_listen, "--webhook-listen").status());
  }
  if (!f->history_follow_ca_file.empty())
    CHAMBER_RETURN_IF_ERROR(
        tls::CheckCaFile({"--history-follow-ca-file", f->history_follow_ca_file}));
  if (f->history_follow_url.empty()) return Status::Ok();
  const std::string& url = f->history_follow_url;
  const size_t scheme = url.find("://");
  const std::string rest_of = scheme == std::string::npos ? "" : url.substr(scheme + 3);
  const size_t slash = rest_of.find('/');
  if (!(url.starts_with("http://") || url.starts_with("https://")) || rest_of.empty() ||
      (slash != std::string::npos && slash + 1 != rest_of.size()))
    return Status::InvalidArgument(
        "--history-follow-url " + url +
        ": expected http://HOST:PORT or https://HOST:PORT, the leader's API without a path");
  if (slash != std::string::npos) f->history_follow_url.pop_back();
  return Status::Ok();
}

Result<std::pair<std::string, int>> ParseListen(const std::string& text, const std::string& flag) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument(flag + " " + text + ": expected HOST:PORT, e.g. 0.0.0.0:8080");
  int port = -1;
  try {
    port = std::stoi(text.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535)
    return Status::InvalidArgument(flag + " " + text + ": the port must be 0 to 65535");
  return std::make_pair(text.substr(0, colon), port);
}

}  // namespace chamber::chamberd
