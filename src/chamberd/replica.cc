#include "chamberd/replica.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>

#include <spdlog/spdlog.h>

#include "chamberd/health_listener.h"
#include "chamberd/lead.h"
#include "chamberd/leader_label.h"
#include "chamberd/webhook.h"
#include "common/prometheus_text.h"
#include "daemon/history_replication.h"

namespace chamber::chamberd {
namespace {

// How long a standby's readiness waits for its first copy of the leader's history.
constexpr std::chrono::seconds kHistoryCopyReadyGrace{30};

// The health listener (--health-listen; empty: none). `elector` is null without leader
// election: then /healthz is always 200 and /readyz follows `serving` alone. `history_copy`,
// when set, says why a standby is not ready yet for its history ("" once it is).
Result<std::unique_ptr<HealthListener>> StartHealthListener(
    const Flags& f, const kube::RestConfig& rest, const kube::LeaderElector* elector,
    const std::atomic<bool>& serving, const Webhook* webhook,
    std::function<std::string()> history_copy = nullptr) {
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
  // Every replica's own: whether it leads, and what its webhook answered (the leader's API
  // serves the fleet's metrics).
  checks.metrics = [elector, &serving, webhook]() -> std::string {
    prometheus::TextWriter w;
    w.Family("chamber_replica_leader",
             "1 while this replica leads and serves the API, 0 while it stands by.",
             prometheus::MetricType::kGauge);
    w.Sample((elector == nullptr || elector->IsLeader()) && serving.load() ? 1 : 0);
    if (webhook != nullptr) webhook->WriteMetrics(w);
    return w.Take();
  };
  auto listener = std::make_unique<HealthListener>(std::move(checks));
  CHAMBER_RETURN_IF_ERROR(listener->Start(listen.first, listen.second));
  spdlog::info("serving /healthz and /readyz on {}:{}", listen.first, listener->port());
  return listener;
}

}  // namespace

int RunReplica(Flags& f, const core::EngineConfig& engine, const kube::RestConfig& rest,
               kube::Client* client, std::unique_ptr<fleet::HistoryStore> history,
               kube::CancellationToken stop) {
  std::atomic<bool> serving{false};
  const char* pod_namespace = std::getenv("POD_NAMESPACE");
  const std::string own_namespace = !f.pod_namespace.empty()   ? f.pod_namespace
                                    : pod_namespace != nullptr ? pod_namespace
                                                               : rest.namespace_name;
  f.pod_namespace = own_namespace;  // where Lead() makes its reservation pods
  if (f.pod_name.empty() && std::getenv("POD_NAME") != nullptr)
    f.pod_name = std::getenv("POD_NAME");
  // Set while the elector exists: the label says "true" only while this replica leads.
  std::atomic<const kube::LeaderElector*> leader_elector{nullptr};
  std::unique_ptr<LeaderLabeler> labeler;
  if (!f.pod_name.empty()) {
    labeler = std::make_unique<LeaderLabeler>(
        client, LeaderLabeler::Options{.pod_namespace = own_namespace, .pod_name = f.pod_name},
        [&serving, &leader_elector] {
          const kube::LeaderElector* e = leader_elector.load();
          return serving.load() && (e == nullptr || e->IsLeader());
        });
    labeler->Start();
  }
  // The webhook answers on every replica from here to the end, whoever leads.
  auto webhook = StartWebhook(f, rest, own_namespace);
  if (!webhook.ok()) {
    std::cerr << "chamberd: " << webhook.status().message() << "\n";
    if (labeler) labeler->Stop();
    return 2;
  }
  auto serving_changed = [&labeler] {
    if (labeler) labeler->Poke();
  };
  if (!f.leader_elect) {
    auto health = StartHealthListener(f, rest, nullptr, serving, webhook->get());
    if (!health.ok()) {
      std::cerr << "chamberd: " << health.status().message() << "\n";
      return 2;
    }
    // No other replica writes: the fence never falls, and a stop finishes the cycle in flight.
    Status s = Lead(f, engine, client, std::move(history), kube::CancellationToken(), stop, {},
                    serving, serving_changed);
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
    // Unique to this process: a restarted container has the same hostname and often the same
    // pid (1), and a process taking its predecessor's identity would also take its leader term,
    // which the API server's fence tells deposed leaders by.
    std::random_device random;
    f.identity = fmt::format("{}_{}_{:08x}", host, getpid(), random());
  }
  le.identity = f.identity;
  // While standby, the leader's history is copied into this replica's file, with this
  // replica's own credentials (the leader accepts them through --replica-user).
  std::unique_ptr<daemon::HistoryFollower> follower;
  if (history && !f.history_follow_url.empty()) {
    auto tokens = std::make_shared<kube::TokenSource>(rest.token, rest.token_file);
    follower = std::make_unique<daemon::HistoryFollower>(
        history.get(),
        daemon::HttpHistoryFetch(
            f.history_follow_url, [tokens] { return tokens->Token(); }, f.history_follow_ca_file),
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
    // The elector is set before it runs; its term is the Lease as this replica took it.
    const kube::LeaderElector* e = leader_elector.load();
    const LeaderTerm term{le.lease_namespace + "/" + le.lease_name, e ? e->term() : ""};
    lead_status = Lead(f, engine, client, std::move(history), leading, leading, term, serving,
                       serving_changed);
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
  auto elector = kube::LeaderElector::Create(client, le);
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
  auto health = StartHealthListener(f, rest, elector->get(), serving, webhook->get(), history_copy);
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

}  // namespace chamber::chamberd
