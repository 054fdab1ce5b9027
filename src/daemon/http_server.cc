#include "daemon/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/prometheus_text.h"
#include "common/time.h"
#include "common/tls.h"
#include "daemon/api_json.h"
#include "daemon/api_params.h"
#include "daemon/history_replication.h"

#ifdef CHAMBER_HAVE_WEB_ASSETS
#include "web_assets.h"
#endif

namespace chamber::daemon {
namespace {

constexpr const char* kJson = "application/json";

void JsonError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(), kJson);
}

// JSON answers go out through a content provider, which keeps a cached body alive until sent and
// which cpp-httplib never compresses. A set_content() body it would compress for a client that
// accepts Brotli, at Brotli's highest quality: 10 s for a 10,000-GPU fleet's 1.5 MB workload list.
void SendJson(httplib::Response& res, const std::shared_ptr<const std::string>& body) {
  res.set_content_provider(body->size(), kJson,
                           [body](size_t offset, size_t length, httplib::DataSink& sink) {
                             return sink.write(body->data() + offset, length);
                           });
}

void SendJson(httplib::Response& res, std::string body) {
  SendJson(res, std::make_shared<const std::string>(std::move(body)));
}

// Retry-After: whole seconds, at least 1.
std::string RetryAfterSeconds(std::chrono::milliseconds wait) {
  return std::to_string(std::max<int64_t>(1, (wait.count() + 999) / 1000));
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost";
}

// Fallback page when the dashboard bundle is not built into this binary.
constexpr const char* kNoDashboard = R"(<!doctype html>
<html><head><meta charset="utf-8"><title>Chamber</title></head><body>
<h1>Chamber</h1>
<p>This build has no dashboard bundle. The API is available:
<a href="/api/v1/fleet">/api/v1/fleet</a>, <a href="/api/v1/gpus">/api/v1/gpus</a>,
<a href="/api/v1/queues">/api/v1/queues</a>, <a href="/api/v1/workloads">/api/v1/workloads</a>,
<a href="/metrics">/metrics</a>.</p>
</body></html>
)";

}  // namespace

struct ApiServer::Impl {
  Impl(Daemon& d, std::shared_ptr<Authenticator> a, ServerOptions o, std::atomic<int>& c)
      : daemon(d),
        auth(std::move(a)),
        options(std::move(o)),
        event_clients(c),
        limiter(options.rate_limit) {}

  Daemon& daemon;
  std::shared_ptr<Authenticator> auth;
  ServerOptions options;
  std::shared_ptr<tls::ServingCertificate> certificate;  // with TLS; outlives `server`
  std::unique_ptr<httplib::Server> server;               // an SSLServer with TLS; made by Start
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<bool> listen_returned{false};
  std::atomic<int>& event_clients;
  RateLimiter limiter;
  std::vector<std::string> routes;  // "METHOD pattern", as registered

  // Refused requests by reason (/metrics).
  enum Refusal { kUnauthenticated, kForbidden, kRateLimited, kBodyTooLarge, kLengthRequired, kN };
  static constexpr const char* kRefusalNames[kN] = {"unauthenticated", "forbidden", "rate_limited",
                                                    "body_too_large", "length_required"};
  std::atomic<uint64_t> refused[kN] = {};

  void Refuse(httplib::Response& res, Refusal why, int status, const std::string& message) {
    refused[why].fetch_add(1, std::memory_order_relaxed);
    JsonError(res, status, message);
  }

  void Get(const std::string& pattern, httplib::Server::Handler h) {
    routes.push_back("GET " + pattern);
    server->Get(pattern, std::move(h));
  }
  void Post(const std::string& pattern, httplib::Server::Handler h) {
    routes.push_back("POST " + pattern);
    server->Post(pattern, std::move(h));
  }

  // Takes a request from `client`'s bucket; answers 429 and returns false when it is empty.
  bool Admitted(const std::string& client, httplib::Response& res) {
    const RateLimiter::Decision d = limiter.Take(client, RateLimiter::Clock::now());
    if (d.allowed) return true;
    res.set_header("Retry-After", RetryAfterSeconds(d.retry_after));
    Refuse(res, kRateLimited, 429,
           "too many requests from " + client + ": the limit is " +
               prometheus::FormatValue(options.rate_limit.rate) + " a second, in bursts of " +
               prometheus::FormatValue(options.rate_limit.burst) + "; retry after " +
               RetryAfterSeconds(d.retry_after) + " s");
    return false;
  }

  // The rate limiter's key for a caller: the principal's name; an agent's also names its node
  // (the node its token is bound to, else its address), as a fleet's agents may share one
  // identity; callers without a principal are told apart by address.
  static std::string ClientKey(const httplib::Request& req, const Principal* p) {
    if (!p) return "address " + req.remote_addr;
    if (p->role != Role::kAgent) return "\"" + p->name + "\"";
    return "\"" + p->name + "\" on " + (p->node.empty() ? req.remote_addr : p->node);
  }

  // Role check for a request; writes the error response and returns false when refused.
  // `bound_node`: the node the token is bound to (Principal::node). Also takes the request from
  // the caller's rate-limit bucket.
  bool Allowed(const httplib::Request& req, httplib::Response& res, Role need,
               std::string* who = nullptr, std::string* bound_node = nullptr) {
    if (options.anonymous) {
      if (!Admitted(ClientKey(req, nullptr), res)) return false;
      if (who) *who = "anonymous";
      return true;
    }
    std::string token;
    const std::string header = req.get_header_value("Authorization");
    if (header.rfind("Bearer ", 0) == 0) {
      token = header.substr(7);
    } else if (req.has_param("access_token")) {
      token = req.get_param_value("access_token");
    }
    if (token.empty()) {
      if (!Admitted(ClientKey(req, nullptr), res)) return false;
      res.set_header("WWW-Authenticate", "Bearer");
      Refuse(res, kUnauthenticated, 401, "a bearer token is required");
      return false;
    }
    Result<Principal> p = auth ? auth->Authenticate(token) : Status::NotFound("no tokens");
    if (!p.ok()) {
      if (!Admitted(ClientKey(req, nullptr), res)) return false;
      if (p.status().code() == StatusCode::kNotFound) {
        res.set_header("WWW-Authenticate", "Bearer error=\"invalid_token\"");
        Refuse(res, kUnauthenticated, 401, "unknown or rejected token");
      } else {
        JsonError(res, 503, p.status().message());
      }
      return false;
    }
    // A replica is chamberd's own standby copying the history page by page, as fast as this
    // server answers: limiting it would only slow its catch-up.
    if (p->role != Role::kReplica && !Admitted(ClientKey(req, &*p), res)) return false;
    if (need == Role::kAgent) {
      if (p->role != Role::kAgent && p->role != Role::kAdmin) {
        Refuse(res, kForbidden, 403,
               "posting agent reports needs an agent token; \"" + p->name + "\" has role " +
                   std::string(RoleName(p->role)));
        return false;
      }
    } else if (p->role == Role::kAgent) {
      Refuse(res, kForbidden, 403,
             "\"" + p->name + "\" has role agent: it may only post agent reports");
      return false;
    } else if (p->role == Role::kReplica && need != Role::kReplica) {
      Refuse(res, kForbidden, 403,
             "\"" + p->name +
                 "\" has role replica: it may only read the history's replication stream");
      return false;
    } else if (need == Role::kAdmin && p->role != Role::kAdmin) {
      Refuse(res, kForbidden, 403, "this needs an admin token; \"" + p->name + "\" has role read");
      return false;
    }
    if (who) *who = p->name;
    if (bound_node) *bound_node = p->node;
    return true;
  }

  std::shared_ptr<const FleetState> Ready(httplib::Response& res) {
    auto s = daemon.state();
    if (s->version == 0) {
      JsonError(res, 503, "no scheduling cycle has completed yet");
      return nullptr;
    }
    return s;
  }

  // GET handler for a resource serialized once per state.
  void Resource(const std::string& path, std::string (*make)(const FleetState&)) {
    Get(path, [this, path, make](const httplib::Request& req, httplib::Response& res) {
      if (!Allowed(req, res, Role::kRead)) return;
      auto s = Ready(res);
      if (!s) return;
      SendJson(res, Cached(*s, path, [&] { return make(*s); }));
    });
  }

  std::string RefusalMetrics() const {
    prometheus::TextWriter w;
    w.Family("chamber_api_refused_requests_total",
             "API requests refused before their handler ran, by reason.",
             prometheus::MetricType::kCounter);
    for (int r = 0; r < kN; ++r)
      w.Sample({{"reason", kRefusalNames[r]}}, static_cast<double>(refused[r].load()));
    return w.Take();
  }

  // Answers what cpp-httplib refuses itself (413 for a body over the limit, 400 for a malformed
  // or incomplete request, 404 for a method no route takes) with the API's JSON error.
  httplib::Server::HandlerResponse Error(const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413) {
      Refuse(res, kBodyTooLarge, 413,
             "the request body is larger than this server's limit of " +
                 std::to_string(options.max_body_bytes) + " bytes");
    } else if (res.status == 404) {
      JsonError(res, 404, "no such path: " + req.method + " " + req.path);
    } else if (res.status == 400) {
      JsonError(res, 400, "malformed or incomplete request");
    } else {
      JsonError(res, res.status, "HTTP " + std::to_string(res.status));
    }
    return httplib::Server::HandlerResponse::Handled;
  }

  // Before a body is read: cpp-httplib 0.11 limits only bodies that declare their length, and
  // reads others (chunked, or until the connection closes) whole. Such requests are refused
  // unread, and the client is asked to close the connection.
  httplib::Server::HandlerResponse PreRouting(const httplib::Request& req, httplib::Response& res) {
    const bool takes_body =
        req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI";
    if (req.has_header("Transfer-Encoding") || (takes_body && !req.has_header("Content-Length"))) {
      res.set_header("Connection", "close");
      Refuse(res, kLengthRequired, 411,
             "send the request body with a Content-Length (at most " +
                 std::to_string(options.max_body_bytes) + " bytes; 0 for none)");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  }

  void Routes();
  void Events(const httplib::Request& req, httplib::Response& res);
  void History(const httplib::Request& req, httplib::Response& res);
  void HistoryReplication(const httplib::Request& req, httplib::Response& res);
  void Static(const httplib::Request& req, httplib::Response& res);
};

void ApiServer::Impl::Routes() {
  Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Allowed(req, res, Role::kRead)) return;
    auto s = daemon.state();
    auto body = Cached(*s, "/metrics", [&] { return MetricsPage(*s); });
    res.set_content(*body + (options.health ? options.health->Metrics() : "") + RefusalMetrics(),
                    std::string(prometheus::kContentType).c_str());
  });
  Resource("/api/v1/fleet", [](const FleetState& s) { return FleetJson(s).dump(); });
  Resource("/api/v1/nodes", [](const FleetState& s) { return NodesJson(s).dump(); });
  Resource("/api/v1/gpus", [](const FleetState& s) { return GpusBody(s); });
  Resource("/api/v1/queues", [](const FleetState& s) { return QueuesJson(s).dump(); });
  if (options.health) {
    Get("/api/v1/health", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Allowed(req, res, Role::kRead)) return;
      auto s = Ready(res);
      if (!s) return;
      nlohmann::json j = HealthJson(*s);
      j["controller"] = options.health->View();
      SendJson(res, j.dump());
    });
  } else {
    Resource("/api/v1/health", [](const FleetState& s) { return HealthJson(s).dump(); });
  }
  Post("/api/v1/agent/reports", [this](const httplib::Request& req, httplib::Response& res) {
    std::string who, bound_node;
    if (!Allowed(req, res, Role::kAgent, &who, &bound_node)) return;
    if (!options.health) return JsonError(res, 404, "this server runs no health controller");
    Status st = options.health->PostReport(req.body, who, bound_node);
    if (st.code() == StatusCode::kInvalidArgument) return JsonError(res, 400, st.message());
    if (st.code() == StatusCode::kFailedPrecondition)
      return Refuse(res, kForbidden, 403, st.message());
    if (!st.ok()) return JsonError(res, 503, st.message());
    res.status = 202;
    res.set_content(R"({"accepted":true})", kJson);
  });
  Post(R"(/api/v1/health/nodes/([^/]+)/clear)",
       [this](const httplib::Request& req, httplib::Response& res) {
         std::string who;
         if (!Allowed(req, res, Role::kAdmin, &who)) return;
         if (!options.health) return JsonError(res, 404, "this server runs no health controller");
         const std::string node = req.matches[1];
         Status st = options.health->Clear(node, who);
         if (st.code() == StatusCode::kNotFound) return JsonError(res, 404, st.message());
         if (!st.ok()) return JsonError(res, 500, st.message());
         res.set_content(nlohmann::json{{"node", node}, {"cleared", true}}.dump(), kJson);
       });
  Resource("/api/v1/cost", [](const FleetState& s) { return CostJson(s).dump(); });
  Get("/api/v1/workloads", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Allowed(req, res, Role::kRead)) return;
    auto s = Ready(res);
    if (!s) return;
    Result<WorkloadFilter> filter = ParseWorkloadQuery(req.params);
    if (!filter.ok()) return JsonError(res, 400, filter.status().message());
    const WorkloadFilter& f = *filter;
    if (!f.queue && !f.state && !req.has_param("limit")) {
      SendJson(res, Cached(*s, "/api/v1/workloads", [&] { return WorkloadsJson(*s, f).dump(); }));
      return;
    }
    SendJson(res, WorkloadsJson(*s, f).dump());
  });
  // One workload by "namespace/name", by a bare name (workloads without a namespace, as in the
  // demo), or by the name of one of its pods.
  Get(R"(/api/v1/workloads/([^/]+)(?:/([^/]+))?)",
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!Allowed(req, res, Role::kRead)) return;
        auto s = Ready(res);
        if (!s) return;
        std::string name = req.matches[1];
        if (req.matches[2].matched) name += "/" + req.matches[2].str();
        const std::optional<WorkloadMatch> m = FindWorkload(*s, name);
        if (!m) return JsonError(res, 404, "no workload or pod named \"" + name + "\"");
        SendJson(res, WorkloadDetailJson(*s, *m).dump());
      });
  for (const bool cordon : {true, false}) {
    const std::string pattern =
        std::string(R"(/api/v1/nodes/([^/]+)/)") + (cordon ? "cordon" : "uncordon");
    Post(pattern, [this, cordon](const httplib::Request& req, httplib::Response& res) {
      if (!Allowed(req, res, Role::kAdmin)) return;
      const std::string node = req.matches[1];
      Status st = daemon.SetSchedulable(node, !cordon);
      if (st.code() == StatusCode::kNotFound) return JsonError(res, 404, st.message());
      if (!st.ok()) return JsonError(res, 500, st.message());
      // The next cycle publishes the change; the answer shows the node with it made.
      auto s = daemon.state();
      for (size_t n = 0; n < s->input.nodes.size(); ++n) {
        if (s->input.nodes[n].name != node) continue;
        nlohmann::json j = NodeJson(*s, n);
        j["schedulable"] = !cordon;
        return res.set_content(j.dump(), kJson);
      }
      JsonError(res, 404, "no node named \"" + node + "\"");
    });
  }
  Get("/api/v1/history", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Allowed(req, res, Role::kRead)) return;
    History(req, res);
  });
  // Another replica copies the history (history_replication.h); readers may read it too.
  Get("/api/v1/history/replication", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Allowed(req, res, Role::kReplica)) return;
    HistoryReplication(req, res);
  });
  Get("/api/v1/events",
      [this](const httplib::Request& req, httplib::Response& res) { Events(req, res); });
  Get(R"(/api/.*)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Allowed(req, res, Role::kRead)) return;
    JsonError(res, 404, "no such API path: " + req.path);
  });
  Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) { Static(req, res); });
}

void ApiServer::Impl::History(const httplib::Request& req, httplib::Response& res) {
  fleet::HistoryStore* store = daemon.history();
  if (!store) return JsonError(res, 404, "this server keeps no history");
  if (!req.has_param("metric")) {
    Result<fleet::HistoryCatalogue> c = store->Catalogue();
    if (!c.ok()) return JsonError(res, 500, c.status().message());
    return SendJson(res, CatalogueJson(*c, store->options()).dump());
  }
  auto s = daemon.state();
  const int64_t now = s->version > 0 ? s->time_ms / 1000 : static_cast<int64_t>(std::time(nullptr));
  Result<HistoryQuery> q = ParseHistoryQuery(req.params, now);
  if (!q.ok()) return JsonError(res, 400, q.status().message());
  Result<fleet::HistorySeries> series = store->Read(q->metric, q->scope, q->from, q->to, q->step);
  if (!series.ok()) return JsonError(res, 400, series.status().message());
  SendJson(res, HistoryJson(q->metric, q->scope, q->from, q->to, *series).dump());
}

void ApiServer::Impl::HistoryReplication(const httplib::Request& req, httplib::Response& res) {
  fleet::HistoryStore* store = daemon.history();
  if (!store) return JsonError(res, 404, "this server keeps no history");
  Result<ReplicationQuery> q = ParseReplicationQuery(req.params);
  if (!q.ok()) return JsonError(res, 400, q.status().message());
  const fleet::HistoryResolution resolution =
      q->coarse ? fleet::HistoryResolution::kCoarse : fleet::HistoryResolution::kFine;
  Result<fleet::HistoryBatch> batch =
      store->Export(resolution, q->since, static_cast<size_t>(q->limit));
  if (!batch.ok()) return JsonError(res, 500, batch.status().message());
  SendJson(res, HistoryBatchJson(*batch).dump());
}

void ApiServer::Impl::Events(const httplib::Request& req, httplib::Response& res) {
  std::atomic<int>& clients = event_clients;
  if (!Allowed(req, res, Role::kRead)) return;
  if (clients.fetch_add(1) >= static_cast<int>(options.max_event_clients)) {
    clients.fetch_sub(1);
    return JsonError(res, 503, "too many event-stream clients");
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto last = std::make_shared<uint64_t>(0);
  const auto poll = std::min(options.keepalive, std::chrono::milliseconds(1000));
  auto keepalive_due = std::make_shared<std::chrono::steady_clock::time_point>(
      std::chrono::steady_clock::now() + options.keepalive);
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, last, poll, keepalive_due](size_t, httplib::DataSink& sink) {
        if (stopping.load() || daemon.shutting_down()) return false;
        if (!sink.is_writable()) return false;
        auto s = daemon.WaitForUpdate(*last, poll);
        if (stopping.load() || daemon.shutting_down()) return false;
        std::string chunk;
        if (s->version > *last) {
          *last = s->version;
          auto body = Cached(*s, "/api/v1/fleet", [&] { return FleetJson(*s).dump(); });
          chunk = "event: fleet\nid: " + std::to_string(s->version) + "\ndata: " + *body + "\n\n";
        } else if (std::chrono::steady_clock::now() >= *keepalive_due) {
          chunk = ": keep-alive\n\n";
        } else {
          return true;  // nothing to say yet; the next call waits again
        }
        *keepalive_due = std::chrono::steady_clock::now() + options.keepalive;
        return sink.write(chunk.data(), chunk.size());
      },
      [&clients](bool) { clients.fetch_sub(1); });
}

void ApiServer::Impl::Static(const httplib::Request& req, httplib::Response& res) {
  std::string path = req.path == "/" ? "/index.html" : req.path;
#ifdef CHAMBER_HAVE_WEB_ASSETS
  const web::Asset* a = web::FindAsset(path);
  if (!a) a = web::FindAsset("/index.html");  // the dashboard routes its own paths
  if (a) {
    if (a->gzip) res.set_header("Content-Encoding", "gzip");
    res.set_header("Cache-Control", path == "/index.html" ? "no-cache" : "max-age=3600");
    res.set_content(std::string(a->body), std::string(a->content_type).c_str());
    return;
  }
#endif
  (void)path;
  res.set_content(kNoDashboard, "text/html; charset=utf-8");
}

ApiServer::ApiServer(Daemon& daemon, std::shared_ptr<Authenticator> auth, ServerOptions options)
    : impl_(std::make_unique<Impl>(daemon, std::move(auth), std::move(options), event_clients_)) {}

ApiServer::~ApiServer() { Stop(); }

int ApiServer::certificate_reloads() const {
  return impl_->certificate ? impl_->certificate->reloads() : 0;
}

Status ApiServer::Start() {
  Impl& i = *impl_;
  if (!i.options.anonymous && !i.auth)
    return Status::InvalidArgument("the API needs a token file or TokenReview, or --no-auth");
  if (i.options.anonymous && !IsLoopback(i.options.host))
    spdlog::warn("serving {} without authentication: anyone who can reach it may use the API",
                 i.options.host);
  if (i.options.tls_cert_file.empty() != i.options.tls_key_file.empty())
    return Status::InvalidArgument("TLS needs both --tls-cert-file and --tls-key-file");
  if (!i.options.tls_cert_file.empty()) {
    CHAMBER_ASSIGN_OR_RETURN(
        i.certificate, tls::ServingCertificate::Load({"--tls-cert-file", i.options.tls_cert_file},
                                                     {"--tls-key-file", i.options.tls_key_file}));
    tls::ServingCertificate* certificate = i.certificate.get();
    auto ssl = std::make_unique<httplib::SSLServer>([certificate](SSL_CTX& ctx) {
      certificate->Install(ctx);
      return true;
    });
    if (!ssl->is_valid())
      return Status::InvalidArgument("--tls-cert-file " + i.options.tls_cert_file +
                                     ", --tls-key-file " + i.options.tls_key_file +
                                     ": OpenSSL cannot serve with them");
    i.server = std::move(ssl);
  } else {
    i.server = std::make_unique<httplib::Server>();
  }
  const size_t threads = i.options.max_event_clients + 16;
  i.server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  i.server->set_keep_alive_timeout(std::max<time_t>(1, i.options.idle_timeout.count()));
  i.server->set_read_timeout(i.options.read_timeout);
  i.server->set_write_timeout(i.options.write_timeout);
  i.server->set_payload_max_length(i.options.max_body_bytes);
  i.server->set_pre_routing_handler(
      [&i](const httplib::Request& req, httplib::Response& res) { return i.PreRouting(req, res); });
  i.server->set_error_handler(httplib::Server::HandlerWithResponse(
      [&i](const httplib::Request& req, httplib::Response& res) { return i.Error(req, res); }));
  i.Routes();
  if (i.options.port == 0) {
    port_ = i.server->bind_to_any_port(i.options.host);
    if (port_ < 0) return Status::Unavailable("cannot listen on " + i.options.host);
  } else {
    if (!i.server->bind_to_port(i.options.host, i.options.port))
      return Status::Unavailable("cannot listen on " + i.options.host + ":" +
                                 std::to_string(i.options.port) + " (is the port in use?)");
    port_ = i.options.port;
  }
  i.thread = std::thread([&i] {
    i.server->listen_after_bind();
    i.listen_returned = true;
  });
  // Until the thread listens, stop() would be lost and Stop would wait forever.
  while (!i.server->is_running() && !i.listen_returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

std::vector<std::string> ApiServer::routes() const { return impl_->routes; }

void ApiServer::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->stopping = true;
  impl_->daemon.Shutdown();
  impl_->server->stop();
  impl_->thread.join();
}

}  // namespace chamber::daemon
