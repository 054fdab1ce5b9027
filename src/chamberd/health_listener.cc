#include "chamberd/health_listener.h"

#include <httplib.h>

#include <algorithm>
#include <thread>

#include "common/prometheus_text.h"

namespace chamber::chamberd {
namespace {

void Answer(httplib::Response& res, const std::string& problem, int failure_status,
            const std::string& role = "") {
  res.status = problem.empty() ? 200 : failure_status;
  const std::string ok = role.empty() ? "ok" : "ok: " + role;
  res.set_content((problem.empty() ? ok : problem) + "\n", "text/plain");
}

std::string Seconds(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

struct HealthListener::Impl {
  explicit Impl(HealthChecks c) : checks(std::move(c)) {}
  HealthChecks checks;
  httplib::Server server;
  std::thread thread;
};

HealthListener::HealthListener(HealthChecks checks)
    : impl_(std::make_unique<Impl>(std::move(checks))) {}

HealthListener::~HealthListener() { Stop(); }

Status HealthListener::Start(const std::string& host, int port) {
  Impl& i = *impl_;
  // Probes are small and few: a handful of threads, short time-outs.
  i.server.new_task_queue = [] { return new httplib::ThreadPool(4); };
  i.server.set_keep_alive_timeout(2);
  i.server.set_read_timeout(5);
  i.server.set_write_timeout(5);
  i.server.Get("/healthz", [&i](const httplib::Request&, httplib::Response& res) {
    Answer(res, i.checks.live ? i.checks.live() : "", 500);
  });
  i.server.Get("/readyz", [&i](const httplib::Request&, httplib::Response& res) {
    const std::string problem = i.checks.ready ? i.checks.ready() : "";
    Answer(res, problem, 503, problem.empty() && i.checks.role ? i.checks.role() : "");
  });
  if (i.checks.metrics)
    i.server.Get("/metrics", [&i](const httplib::Request&, httplib::Response& res) {
      res.set_content(i.checks.metrics(), std::string(prometheus::kContentType));
    });
  if (port == 0) {
    port_ = i.server.bind_to_any_port(host);
    if (port_ < 0) return Status::Unavailable("--health-listen: cannot listen on " + host);
  } else {
    if (!i.server.bind_to_port(host, port))
      return Status::Unavailable("--health-listen: cannot listen on " + host + ":" +
                                 std::to_string(port) + " (is the port in use?)");
    port_ = port;
  }
  i.thread = std::thread([&i] { i.server.listen_after_bind(); });
  return Status::Ok();
}

void HealthListener::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

std::string ElectionLiveness(const kube::LeaderElector::Activity& activity,
                             std::chrono::steady_clock::time_point since,
                             std::chrono::steady_clock::time_point now,
                             std::chrono::milliseconds idle_limit,
                             std::chrono::milliseconds attempt_limit) {
  if (activity.started > activity.finished) {  // an attempt is running
    if (now - activity.started > attempt_limit)
      return "leader election stuck: a Lease attempt has run for " +
             Seconds(now - activity.started);
    return "";
  }
  const auto last = std::max(activity.finished, since);
  if (now - last > idle_limit)
    return "leader election stuck: no Lease attempt for " + Seconds(now - last);
  return "";
}

}  // namespace chamber::chamberd
