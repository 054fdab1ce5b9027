#include "chamberd/lead.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

#include "backend/kube/kube_backend.h"
#include "daemon/auth.h"
#include "daemon/daemon.h"
#include "daemon/http_server.h"
#include "health/health_service.h"

namespace chamber::chamberd {
namespace {

using backend::AgentGpuUsage;
using backend::FaultRequeue;
using backend::GpuFaultsByNode;
using backend::KubeBackend;
using backend::KubeBackendOptions;
using backend::KubeBackendStats;

const kube::ResourceType kTokenReviews{"authentication.k8s.io", "v1", "tokenreviews", "TokenReview",
                                       false};

// The API's authentication: the token file's tokens, then Kubernetes tokens by TokenReview.
Result<std::shared_ptr<daemon::Authenticator>> MakeAuth(const Flags& f, kube::Client* client) {
  auto chain = std::make_shared<daemon::ChainAuthenticator>();
  if (!f.token_file.empty()) {
    CHAMBER_ASSIGN_OR_RETURN(auto file, daemon::TokenFileAuthenticator::Load(f.token_file));
    chain->Add(std::move(file));
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
  return std::shared_ptr<daemon::Authenticator>(std::move(chain));
}

}  // namespace

Status Lead(const Flags& f, const core::EngineConfig& engine, kube::Client* client,
            std::unique_ptr<fleet::HistoryStore> history, const kube::CancellationToken& leading,
            const kube::CancellationToken& stop, const LeaderTerm& term, std::atomic<bool>& serving,
            const std::function<void()>& serving_changed) {
  KubeBackendOptions bo;
  bo.scheduler_name = f.scheduler_name;
  bo.writers = f.writers;
  bo.writes_allowed = [leading] { return !leading.cancelled(); };
  bo.leader_lease = term.lease;
  bo.leader_term = term.term;
  if (!term.term.empty())
    spdlog::info("leading in term {} of lease {}: binds carry it for the API server's fence",
                 term.term, term.lease);
  bo.pricing = f.pricing;
  bo.usage_half_life = engine.usage_half_life;
  bo.usage_write_every =
      std::chrono::milliseconds(static_cast<int64_t>(f.usage_write_period_s * 1000));
  bo.share_memory_grace =
      std::chrono::milliseconds(static_cast<int64_t>(f.share_memory_grace_s * 1000));
  if (f.gpu_reservations) {
    bo.reservation_namespace = f.pod_namespace;
    bo.reservation_image = f.gpu_reservation_image;
    bo.reservations.grace =
        std::chrono::milliseconds(static_cast<int64_t>(f.gpu_reservation_grace_s * 1000));
  }
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
  so.max_body_bytes = f.api_max_body;
  so.rate_limit.rate = f.api_rate;
  so.rate_limit.burst = f.api_burst;
  so.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.api_read_timeout_s * 1000));
  so.write_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.api_write_timeout_s * 1000));
  so.idle_timeout = std::chrono::seconds(f.api_idle_timeout_s);
  so.tls_cert_file = f.tls_cert_file;
  so.tls_key_file = f.tls_key_file;
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
    // And which GPUs the device plugin gave which pods, read from the kubelet by the agents.
    kb->SetDeviceAssignmentSource([usage] {
      std::shared_ptr<health::HealthService> h = usage.lock();
      return h ? h->DeviceAssignments() : backend::DeviceAssignments();
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
  std::shared_ptr<daemon::Authenticator> auth;
  if (!f.anonymous) {
    CHAMBER_ASSIGN_OR_RETURN(auth, MakeAuth(f, client));
  }
  daemon::ApiServer server(d, auth, so);
  CHAMBER_RETURN_IF_ERROR(server.Start());
  spdlog::info("serving the API and dashboard on {}://{}:{}",
               so.tls_cert_file.empty() ? "http" : "https", so.host, server.port());
  serving = true;
  serving_changed();

  KubeBackendStats before = kb->stats();
  daemon::Daemon::LoopHooks hooks;
  hooks.wait_until = [&stop](std::chrono::steady_clock::time_point deadline) {
    const auto now = std::chrono::steady_clock::now();
    if (deadline > now)
      stop.WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    return !stop.cancelled();
  };
  // A line per cycle that changed something: what it took to decide and to write.
  hooks.after_tick = [&](const Status&) {
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
#if defined(__GLIBC__)
    // Each cycle frees what the last one built (a snapshot, a fleet state); glibc keeps those
    // pages resident unless asked to return them. About a millisecond at 100,000 pods
    // (chamberd_memory_bench).
    malloc_trim(0);
#endif
  };
  if (!stop.cancelled()) d.Run(hooks);
  serving = false;
  serving_changed();
  if (health_service) health_service->Stop();
  d.Shutdown();
  server.Stop();
  return Status::Ok();
}

}  // namespace chamber::chamberd
