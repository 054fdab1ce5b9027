// chamberd's HTTP server (cpp-httplib): the REST API under /api/v1 (docs/openapi.yaml), server-
// sent events at /api/v1/events, Prometheus /metrics, /healthz and the dashboard's static files.
//
// Authentication: every /api/ path and /metrics needs `Authorization: Bearer <token>` (or, for
// clients that cannot set headers such as a browser's EventSource, `?access_token=<token>`);
// admin paths need an admin token; agent tokens may only POST /api/v1/agent/reports, replica
// tokens only GET /api/v1/history/replication (history_replication.h). /healthz and
// the dashboard's files (which hold no data) answer without one. With `anonymous` set no token is
// needed and every caller is admin: the demo, which listens on 127.0.0.1 only.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/api_params.h"  // ParseTimeParam
#include "daemon/auth.h"
#include "daemon/daemon.h"
#include "daemon/health_api.h"

namespace chamber::daemon {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see ApiServer::port)
  bool anonymous = false;
  size_t max_event_clients = 64;
  std::chrono::milliseconds keepalive{15000};  // event-stream comment when nothing changed
  // chamberd's health controller (health_api.h); null: no agent reports, no health actions.
  std::shared_ptr<HealthApi> health;
};

class ApiServer {
 public:
  // `auth` may be null only with options.anonymous.
  ApiServer(Daemon& daemon, std::shared_ptr<Authenticator> auth, ServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and starts serving on a thread of its own.
  Status Start();
  // Ends event streams and stops serving; idempotent.
  void Stop();
  int port() const { return port_; }
  // Event-stream clients connected now.
  int event_clients() const { return event_clients_.load(); }

 private:
  std::atomic<int> event_clients_{0};
  int port_ = 0;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chamber::daemon
