// chamberd: the scheduler and queue manager on Kubernetes (docs/scheduling.md).
//
// With leader election (the default) every replica campaigns for the Lease; the leader builds
// its state from the API server, schedules every cycle and serves the API and dashboard. A
// leader that loses the Lease stops writing at once and exits, so that it restarts as a
// candidate with nothing cached. Every healthy replica is ready; the serving leader labels its
// own pod chamber.io/leader=true (--pod-name), which the Service selects (leader_label.h).
// With --data-dir every replica keeps a history file of its own; a standby copies the leader's
// into it (--history-follow-url, history_replication.h) and writes on from there once it leads.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "common/config_file.h"
#include "common/log.h"
#include "common/version.h"
#include "controller/health_listener.h"
#include "controller/health_service.h"
#include "controller/kube_backend.h"
#include "controller/leader_label.h"
#include "core/io/config_yaml.h"
#include "daemon/auth.h"
#include "daemon/daemon.h"
#include "daemon/history_replication.h"
#include "daemon/http_server.h"
#include "fleet/history_store.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_election.h"

namespace chamber::controller {
namespace {

// How long a standby's readiness waits for its first copy of the leader's history.
constexpr std::chrono::seconds kHistoryCopyReadyGrace{30};

const kube::ResourceType kTokenReviews{"authentication.k8s.io", "v1", "tokenreviews", "TokenReview",
                                       false};

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
  PricingConfig pricing;                   // the config file's `pricing:` section
  bool anonymous = false;
  bool leader_elect = true;
  std::string lease_namespace;
  std::string lease_name = "chamber-scheduler";
  std::string identity;
  std::string pod_name;  // this replica's pod, for the leader label ("": no label)
  std::string pod_namespace;
  double lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  std::string scheduler_name = kDefaultSchedulerName;
  double qps = 200;
  int burst = 400;
  int writers = 16;
  double usage_write_period_s = 60;  // Queue status.decayedUsage
  std::string data_dir;
  int history_step_s = 60;         // the history's fine step
  std::string history_follow_url;  // the leader's API, copied from while standby
  double history_follow_period_s = 5;
  std::string log_level = "info";
  bool log_json = false;
};

// The configuration file, read once; the engine, the health controller and the fleet pools each
// take their part of it.
Status ReadConfig(Flags* f, core::EngineConfig* engine) {
  if (f->config.empty()) return Status::Ok();
  CHAMBER_ASSIGN_OR_RETURN(const ConfigFile file, ConfigFile::Load(f->config));
  CHAMBER_ASSIGN_OR_RETURN(*engine, core::io::ReadEngineConfig(file));
  CHAMBER_ASSIGN_OR_RETURN(f->health, health::ReadHealthConfig(file));
  CHAMBER_ASSIGN_OR_RETURN(f->pricing, ReadPricingConfig(file));
  return Status::Ok();
}

Result<std::pair<std::string, int>> ParseListen(const std::string& text,
                                                const std::string& flag = "--listen") {
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

std::unique_ptr<daemon::Authenticator> MakeAuth(const Flags& f, kube::Client* client,
                                                Status* error) {
  auto chain = std::make_unique<daemon::ChainAuthenticator>();
  if (!f.token_file.empty()) {
    auto file = daemon::TokenFileAuthenticator::Load(f.token_file);
    if (!file.ok()) {
      *error = file.status();
      return nullptr;
    }
    chain->Add(std::move(*file));
  }
  if (f.token_review) {
    // Kubernetes credentials work too: the API server says who a token belongs to.
    chain->Add(std::make_unique<daemon::TokenReviewAuthenticator>(
        [client](std::string_view token) -> Result<daemon::ReviewedUser> {
          kube::Json review = {{"apiVersion", "authentication.k8s.io/v1"},
                               {"kind", "TokenReview"},
                               {"spec", {{"token", std::string(token)}}}};
          CHAMBER_ASSIGN_OR_RETURN(kube::Json out, client->Create(kTokenReviews, "", review));
          return daemon::ParseTokenReview(out);
        },
        daemon::TokenReviewAuthenticator::Options{.admin_groups = f.admin_groups,
                                                  .read_groups = f.viewer_groups,
                                                  .agent_users = f.agent_users,
                                                  .agent_groups = f.agent_groups,
                                                  .replica_users = f.replica_users}));
  }
  return chain;
}

// Leads until `leading` is cancelled: informers, scheduling cycles, the API, and the history
// (`history`, null for none). `serving` is true while the API is served (the informers have
// synced): /readyz and the leader label; `serving_changed` runs after it changes.
Status Lead(const Flags& f, const core::EngineConfig& engine, kube::Client* client,
            std::unique_ptr<fleet::HistoryStore> history, const kube::CancellationToken& leading,
            std::atomic<bool>& serving, const std::function<void()>& serving_changed) {
  KubeBackendOptions bo;
  bo.scheduler_name = f.scheduler_name;
  bo.writers = f.writers;
  bo.writes_allowed = [leading] { return !leading.cancelled(); };
  bo.pricing = f.pricing;
  bo.usage_half_life = engine.usage_half_life;
  bo.usage_write_every =
      std::chrono::milliseconds(static_cast<int64_t>(f.usage_write_period_s * 1000));
  spdlog::info("leading: listing and watching the cluster");
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<KubeBackend> backend,
                           KubeBackend::Create(client, std::move(bo)));
  KubeBackend* kb = backend.get();  // owned by the daemon below
  daemon::DaemonOptions options;
  options.engine = engine;
  options.tick = engine.cycle_period;
  options.fleet.currency = f.pricing.currency;
  daemon::Daemon d(std::move(backend), options, std::move(history));

  CHAMBER_ASSIGN_OR_RETURN(auto listen, ParseListen(f.listen));
  daemon::ServerOptions so;
  so.host = listen.first;
  so.port = listen.second;
  so.anonymous = f.anonymous;
  // The health controller: agent reports in (the API), fences out (Node objects).
  std::shared_ptr<health::HealthService> health_service;
  if (f.health.enabled) {
    health::HealthService::Options ho;
    ho.config = f.health;
    ho.writes_allowed = [leading] { return !leading.cancelled(); };
    health_service = std::make_shared<health::HealthService>(
        std::move(ho),
        std::make_unique<health::HealthWriter>(
            client, [kb](const std::string& n) { return kb->NodeNamed(n); }),
        [kb] { return kb->AllNodes(); });
    // The agents' reports also carry each GPU's utilization: the fleet model's "used".
    std::weak_ptr<health::HealthService> usage(health_service);
    kb->SetGpuUsageSource([usage] {
      std::shared_ptr<health::HealthService> h = usage.lock();
      return h ? h->GpuUsage() : AgentGpuUsage();
    });
    // Incidents carry their evidence to the fleet view, and learn which workloads they requeued.
    kb->SetGpuFaultSource([usage] {
      std::shared_ptr<health::HealthService> h = usage.lock();
      return h ? h->GpuFaults() : GpuFaultsByNode();
    });
    kb->SetFaultRequeueSink([usage](const std::vector<FaultRequeue>& requeued) {
      if (std::shared_ptr<health::HealthService> h = usage.lock()) h->RecordRequeued(requeued);
    });
    health_service->Start();
    so.health = health_service;
  }
  Status auth_error;
  std::shared_ptr<daemon::Authenticator> auth;
  if (!f.anonymous) {
    auth = MakeAuth(f, client, &auth_error);
    CHAMBER_RETURN_IF_ERROR(auth_error);
  }
  daemon::ApiServer server(d, auth, so);
  CHAMBER_RETURN_IF_ERROR(server.Start());
  spdlog::info("serving the API and dashboard on {}:{}", so.host, server.port());
  serving = true;
  serving_changed();

  auto next = std::chrono::steady_clock::now();
  KubeBackendStats before = kb->stats();
  while (!leading.cancelled()) {
    if (Status st = d.Tick(); !st.ok()) spdlog::warn("scheduling cycle: {}", st.ToString());
    // A line per cycle that changed something: what it took to decide and to write.
    const KubeBackendStats after = kb->stats();
    const int64_t binds = after.binds - before.binds,
                  preempted = after.suspends + after.evictions - before.suspends - before.evictions,
                  resumed = after.resumes - before.resumes;
    spdlog::log(binds + preempted + resumed > 0 ? spdlog::level::info : spdlog::level::debug,
                "cycle: snapshot={:.1f}ms engine={:.1f}ms cpu={:.1f}ms apply={:.1f}ms bound={} "
                "preempted={} resumed={} workloads={} nodes={} derived={} reused={}",
                kb->last_refresh_ms(), d.state()->cycle_ms,
                kb->last_refresh_cpu_ms() + d.state()->cycle_cpu_ms, kb->last_apply_ms(), binds,
                preempted, resumed, kb->built().snapshot.workloads.size(),
                kb->built().snapshot.nodes.size(), kb->last_derived(), kb->last_reused());
    before = after;
    next += options.tick;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;
    leading.WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(next - now));
  }
  serving = false;
  serving_changed();
  if (health_service) health_service->Stop();
  d.Shutdown();
  server.Stop();
  return Status::Ok();
}

// The health listener (--health-listen; empty: none). `elector` is null without leader
// election: then /healthz is always 200 and /readyz follows `serving` alone. `history_copy`,
// when set, says why a standby is not ready yet for its history ("" once it is).
Result<std::unique_ptr<HealthListener>> StartHealthListener(
    const Flags& f, const kube::RestConfig& rest, const kube::LeaderElector* elector,
    const std::atomic<bool>& serving, std::function<std::string()> history_copy = nullptr) {
  if (f.health_listen.empty()) return std::unique_ptr<HealthListener>();
  CHAMBER_ASSIGN_OR_RETURN(auto listen, ParseListen(f.health_listen, "--health-listen"));
  using std::chrono::milliseconds;
  const milliseconds retry(static_cast<int64_t>(f.retry_period_s * 1000));
  // Stuck: no Lease attempt for 5 retry periods, or one that outlived its two requests'
  // time-outs (a read, then a create or update).
  const milliseconds idle_limit = 5 * retry;
  const milliseconds attempt_limit = 2 * (rest.connect_timeout + rest.request_timeout) + retry;
  const auto since = std::chrono::steady_clock::now();
  HealthChecks checks;
  checks.live = [elector, since, idle_limit, attempt_limit]() -> std::string {
    if (elector == nullptr) return "";
    return ElectionLiveness(elector->activity(), since, std::chrono::steady_clock::now(),
                            idle_limit, attempt_limit);
  };
  // A standby is ready once it has made a Lease attempt, and copied the leader's history once:
  // it can take over, and a rollout that stops the leader next loses no history. The Service
  // finds the leader by its pod label, not by readiness.
  checks.ready = [elector, &serving, history_copy]() -> std::string {
    if (elector != nullptr && !elector->IsLeader()) {
      if (elector->activity().finished == std::chrono::steady_clock::time_point{})
        return "starting: no Lease attempt has finished yet";
      return history_copy ? history_copy() : "";
    }
    if (!serving) return "starting: waiting for the informers to sync";
    return "";
  };
  checks.role = [elector]() -> std::string {
    if (elector == nullptr || elector->IsLeader()) return "leader";
    const std::string leader = elector->leader();
    return leader.empty() ? "standby: no leader yet" : "standby: leader is " + leader;
  };
  auto listener = std::make_unique<HealthListener>(std::move(checks));
  CHAMBER_RETURN_IF_ERROR(listener->Start(listen.first, listen.second));
  spdlog::info("serving /healthz and /readyz on {}:{}", listen.first, listener->port());
  return listener;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{"chamberd: Chamber's scheduler and queue manager on Kubernetes"};
  app.set_version_flag("--version", "chamberd " CHAMBER_VERSION " (" CHAMBER_GIT_COMMIT ")",
                       "Print the version and exit");
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
  app.add_flag("--leader-elect,!--no-leader-elect", f.leader_elect,
               "campaign for the Lease; only the leader schedules")
      ->capture_default_str();
  app.add_option("--lease-namespace", f.lease_namespace,
                 "namespace of the Lease (default: the pod's namespace, --pod-namespace)");
  app.add_option("--lease-name", f.lease_name, "name of the Lease")->capture_default_str();
  app.add_option("--identity", f.identity, "this replica's name in the Lease (default: hostname)");
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
  app.add_option("--history-follow-period", f.history_follow_period_s,
                 "seconds between copies of the leader's history")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_flag("--log-json", f.log_json, "log lines as JSON");
  CLI11_PARSE(app, argc, argv);

  logging::LogOptions lo;
  lo.level = f.log_level;
  lo.json = f.log_json;
  if (Status s = logging::Setup(lo); !s.ok()) {
    std::cerr << "chamberd: " << s.message() << "\n";
    return 2;
  }
  core::EngineConfig engine;
  if (Status s = ReadConfig(&f, &engine); !s.ok()) {
    std::cerr << "chamberd: " << s.message() << "\n";
    return 2;
  }
  if (f.pricing.rules.empty() && f.pricing.default_price_per_gpu_hour == 0)
    spdlog::info("pricing: no GPU prices (the config file's pricing: section); every cost reads 0");
  else
    spdlog::info("pricing: {} rules; GPUs no rule matches cost {} {} per GPU-hour",
                 f.pricing.rules.size(), f.pricing.default_price_per_gpu_hour, f.pricing.currency);
  if (!f.history_follow_url.empty()) {
    const size_t scheme = f.history_follow_url.find("://");
    const std::string rest_of =
        scheme == std::string::npos ? "" : f.history_follow_url.substr(scheme + 3);
    const size_t slash = rest_of.find('/');
    if (!f.history_follow_url.starts_with("http://") || rest_of.empty() ||
        (slash != std::string::npos && slash + 1 != rest_of.size())) {
      std::cerr << "chamberd: --history-follow-url " << f.history_follow_url
                << ": expected http://HOST:PORT, the leader's API without a path\n";
      return 2;
    }
    if (slash != std::string::npos) f.history_follow_url.pop_back();
  }
  // Every replica keeps a history file of its own, opened before the election: a standby copies
  // the leader's history into it, a leader writes its own.
  std::unique_ptr<fleet::HistoryStore> history;
  if (!f.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.data_dir, ec);
    if (ec) {
      std::cerr << "chamberd: --data-dir " << f.data_dir << ": " << ec.message() << "\n";
      return 2;
    }
    fleet::HistoryOptions ho;
    ho.fine_step_seconds = f.history_step_s;
    auto h =
        fleet::HistoryStore::Open((std::filesystem::path(f.data_dir) / "history.db").string(), ho);
    if (!h.ok()) {
      std::cerr << "chamberd: " << h.status().message() << "\n";
      return 2;
    }
    history = std::move(*h);
  }
  auto rest = f.kubeconfig.empty() ? kube::LoadDefaultConfig() : kube::LoadKubeconfig(f.kubeconfig);
  if (!rest.ok()) {
    std::cerr << "chamberd: " << rest.status().message() << "\n";
    return 2;
  }
  rest->qps = f.qps;
  rest->burst = f.burst;
  rest->user_agent = "chamberd";
  auto client = kube::Client::Create(*rest);
  if (!client.ok()) {
    std::cerr << "chamberd: " << client.status().message() << "\n";
    return 2;
  }

  // SIGINT and SIGTERM end the process cleanly: stop writing, release the Lease.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  kube::CancellationToken stop;
  std::jthread waiter([signals, stop] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: stopping", sig);
    stop.Cancel();
  });
  waiter.detach();

  std::atomic<bool> serving{false};
  const char* pod_namespace = std::getenv("POD_NAMESPACE");
  const std::string own_namespace = !f.pod_namespace.empty()   ? f.pod_namespace
                                    : pod_namespace != nullptr ? pod_namespace
                                                               : rest->namespace_name;
  if (f.pod_name.empty() && std::getenv("POD_NAME") != nullptr)
    f.pod_name = std::getenv("POD_NAME");
  // Set while the elector exists: the label says "true" only while this replica leads.
  std::atomic<const kube::LeaderElector*> leader_elector{nullptr};
  std::unique_ptr<LeaderLabeler> labeler;
  if (!f.pod_name.empty()) {
    labeler = std::make_unique<LeaderLabeler>(
        client->get(),
        LeaderLabeler::Options{.pod_namespace = own_namespace, .pod_name = f.pod_name},
        [&serving, &leader_elector] {
          const kube::LeaderElector* e = leader_elector.load();
          return serving.load() && (e == nullptr || e->IsLeader());
        });
    labeler->Start();
  }
  auto serving_changed = [&labeler] {
    if (labeler) labeler->Poke();
  };
  if (!f.leader_elect) {
    auto health = StartHealthListener(f, *rest, nullptr, serving);
    if (!health.ok()) {
      std::cerr << "chamberd: " << health.status().message() << "\n";
      return 2;
    }
    Status s = Lead(f, engine, client->get(), std::move(history), stop, serving, serving_changed);
    if (!s.ok()) spdlog::error("{}", s.message());
    if (labeler) labeler->Stop();
    return s.ok() ? 0 : 1;
  }
  kube::LeaderElectionConfig le;
  le.lease_namespace = !f.lease_namespace.empty() ? f.lease_namespace : own_namespace;
  le.lease_name = f.lease_name;
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  le.lease_duration = ms(f.lease_duration_s);
  le.renew_deadline = ms(f.renew_deadline_s);
  le.retry_period = ms(f.retry_period_s);
  if (le.renew_deadline >= le.lease_duration || le.retry_period >= le.renew_deadline) {
    std::cerr << "chamberd: need --retry-period < --renew-deadline < --lease-duration\n";
    return 2;
  }
  if (f.identity.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    f.identity = std::string(host) + "_" + std::to_string(getpid());
  }
  le.identity = f.identity;
  // While standby, the leader's history is copied into this replica's file, with this
  // replica's own credentials (the leader accepts them through --replica-user).
  std::unique_ptr<daemon::HistoryFollower> follower;
  if (history && !f.history_follow_url.empty()) {
    auto tokens = std::make_shared<kube::TokenSource>(rest->token, rest->token_file);
    follower = std::make_unique<daemon::HistoryFollower>(
        history.get(),
        daemon::HttpHistoryFetch(f.history_follow_url, [tokens] { return tokens->Token(); }),
        daemon::HistoryFollower::Options{.period = std::chrono::milliseconds(static_cast<int64_t>(
                                             f.history_follow_period_s * 1000))});
    follower->Start();
    spdlog::info("history: copying the leader's history from {} every {} s while standby",
                 f.history_follow_url, f.history_follow_period_s);
  }
  Status lead_status;
  le.on_started_leading = [&](kube::CancellationToken leading) {
    spdlog::info("{} became the leader", f.identity);
    // The leader writes the history from here on; the copy stops first.
    if (follower) {
      follower->Stop();
      spdlog::info("history: stopped copying after {} rows in {} rounds; writing on from there",
                   follower->rows_copied(), follower->rounds());
    }
    lead_status =
        Lead(f, engine, client->get(), std::move(history), leading, serving, serving_changed);
    // The label goes before the Lease does, so the Service stops routing here first.
    if (labeler) {
      if (Status s = labeler->Step(); !s.ok()) spdlog::warn("{}", s.message());
    }
    if (!lead_status.ok()) {
      spdlog::error("{}", lead_status.message());
      stop.Cancel();  // give the Lease up: another replica may do better
    }
  };
  le.on_new_leader = [&](const std::string& id) {
    if (id != f.identity) spdlog::info("the leader is {}", id);
  };
  auto elector = kube::LeaderElector::Create(client->get(), le);
  if (!elector.ok()) {
    std::cerr << "chamberd: " << elector.status().message() << "\n";
    return 2;
  }
  // A standby that cannot reach the leader (none yet, or it is unreachable) is ready after a
  // grace anyway, and keeps trying.
  std::function<std::string()> history_copy;
  if (follower) {
    const auto since = std::chrono::steady_clock::now();
    history_copy = [&follower, since]() -> std::string {
      if (follower->rounds() > 0 ||
          std::chrono::steady_clock::now() - since > kHistoryCopyReadyGrace)
        return "";
      return "starting: copying the leader's history";
    };
  }
  auto health = StartHealthListener(f, *rest, elector->get(), serving, history_copy);
  if (!health.ok()) {
    std::cerr << "chamberd: " << health.status().message() << "\n";
    return 2;
  }
  leader_elector = elector->get();
  spdlog::info("{} campaigning for lease {}/{}", f.identity, le.lease_namespace, le.lease_name);
  (*elector)->Run(stop);
  if (labeler) labeler->Stop();
  if (!lead_status.ok()) return 1;
  if (!stop.cancelled()) {
    spdlog::error("leadership lost; exiting so that a fresh start rebuilds the state");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace chamber::controller

int main(int argc, char** argv) { return chamber::controller::Main(argc, argv); }
