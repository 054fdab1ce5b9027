// chamberd's HTTP server (cpp-httplib): the REST API under /api/v1 (docs/openapi.yaml), server-
// sent events at /api/v1/events, Prometheus /metrics, /healthz and the dashboard's static files.
//
// Authentication: every /api/ path and /metrics needs `Authorization: Bearer <token>` (or, for
// clients that cannot set headers such as a browser's EventSource, `?access_token=<token>`);
// admin paths need an admin token; agent tokens may only POST /api/v1/agent/reports, replica
// tokens only GET /api/v1/history/replication (history_replication.h). /healthz and
// the dashboard's files (which hold no data) answer without one. With `anonymous` set no token is
// needed and every caller is admin: the demo, which listens on 127.0.0.1 only.
//
// Limits (docs/api.md#limits): a request body over max_body_bytes is refused with 413, a body
// without a Content-Length with 411; each client (a token's principal, else the remote address)
// has a token bucket (rate_limiter.h) and is refused with 429 and Retry-After when it is empty;
// /healthz, the dashboard's files and replica tokens are never limited. A connection that sends
// nothing for read_timeout is answered 400, and closed after idle_timeout. Every refusal is a
// JSON error and is counted on /metrics (chamber_api_refused_requests_total{reason}).
//
// TLS: with ServerOptions::tls_cert_file and tls_key_file the server speaks HTTPS only; a plain
// HTTP request to its port fails the handshake (docs/api.md#tls).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/api_params.h"  // ParseTimeParam
#include "daemon/auth.h"
#include "daemon/daemon.h"
#include "daemon/health_api.h"
#include "daemon/rate_limiter.h"

namespace chamber::daemon {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see ApiServer::port)
  bool anonymous = false;
  size_t max_event_clients = 64;
  std::chrono::milliseconds keepalive{15000};  // event-stream comment when nothing changed
  // The largest request body taken. An agent report of an 8-GPU node with MIG devices, pods and
  // 32 closed incidents is about 150 KB; nothing else sends more than a few bytes.
  size_t max_body_bytes = size_t{1} << 20;
  RateLimit rate_limit;  // per client; rate <= 0: none
  // Per socket read or write: a client that sends (or takes) nothing for this long is answered
  // and dropped. idle_timeout: how long a kept-alive connection may wait for its next request.
  std::chrono::milliseconds read_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  std::chrono::seconds idle_timeout{5};
  // TLS (PEM files): with both set the API serves HTTPS only. Start fails, naming the flag and
  // file, when either file is missing or invalid or the key is not the certificate's. Files
  // replaced later (a renewed Secret) are served from the next handshake on; a replaced pair
  // that does not hold leaves the last good one in service (tls::ServingCertificate).
  std::string tls_cert_file;
  std::string tls_key_file;
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
  // How often a renewed TLS certificate was taken into service (0 without TLS).
  int certificate_reloads() const;
  // Event-stream clients connected now.
  int event_clients() const { return event_clients_.load(); }
  // "METHOD pattern" of every route the server registers, in registration order (after Start).
  std::vector<std::string> routes() const;

 private:
  std::atomic<int> event_clients_{0};
  int port_ = 0;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chamber::daemon
