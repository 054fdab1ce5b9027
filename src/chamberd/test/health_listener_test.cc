#include "chamberd/health_listener.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Reply {
  int status = -1;
  std::string body;
};

Reply Get(int port, const std::string& path) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get(path);
  if (!res) return {};
  return {res->status, res->body};
}

TEST(HealthListenerTest, AnswersEachCheckWithItsStatusAndReason) {
  std::atomic<bool> stuck{false}, ready{false};
  HealthChecks checks;
  checks.live = [&]() -> std::string { return stuck ? "leader election stuck: x" : ""; };
  checks.ready = [&]() -> std::string {
    return ready ? "" : "starting: waiting for the informers to sync";
  };
  HealthListener listener(checks);
  ASSERT_TRUE(listener.Start("127.0.0.1", 0).ok());
  ASSERT_GT(listener.port(), 0);

  Reply r = Get(listener.port(), "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  r = Get(listener.port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "starting: waiting for the informers to sync\n");

  ready = true;
  stuck = true;
  r = Get(listener.port(), "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  r = Get(listener.port(), "/healthz");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "leader election stuck: x\n");
  EXPECT_EQ(Get(listener.port(), "/metrics").status, 404);

  listener.Stop();
  listener.Stop();  // idempotent
  EXPECT_EQ(Get(listener.port(), "/healthz").status, -1);
}

TEST(HealthListenerTest, APassingReadinessNamesTheRole) {
  std::atomic<bool> ready{true};
  HealthChecks checks;
  checks.ready = [&]() -> std::string { return ready ? "" : "starting: no Lease attempt yet"; };
  checks.role = [] { return std::string("standby: leader is replica-a"); };
  HealthListener listener(checks);
  ASSERT_TRUE(listener.Start("127.0.0.1", 0).ok());
  Reply r = Get(listener.port(), "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok: standby: leader is replica-a\n");
  ready = false;  // a failing check says why, not the role
  r = Get(listener.port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "starting: no Lease attempt yet\n");
}

TEST(HealthListenerTest, ServesTheReplicasOwnMetricsWhenGiven) {
  std::atomic<int> calls{0};
  HealthChecks checks;
  checks.metrics = [&] {
    return "# TYPE chamber_replica_leader gauge\nchamber_replica_leader " +
           std::to_string(calls++) + "\n";
  };
  HealthListener listener(checks);
  ASSERT_TRUE(listener.Start("127.0.0.1", 0).ok());
  httplib::Client http("127.0.0.1", listener.port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "# TYPE chamber_replica_leader gauge\nchamber_replica_leader 0\n");
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(Get(listener.port(), "/metrics").body,
            "# TYPE chamber_replica_leader gauge\nchamber_replica_leader 1\n");  // read anew
}

TEST(HealthListenerTest, APortInUseIsAnErrorNamingTheFlag) {
  // A socket without SO_REUSEPORT holds the port (httplib sets that option on its own).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  HealthListener listener(HealthChecks{});
  Status s = listener.Start("127.0.0.1", port);
  close(fd);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "--health-listen: cannot listen on 127.0.0.1:" + std::to_string(port) +
                             " (is the port in use?)");
}

TEST(ElectionLivenessTest, IdleLoopIsStuckAfterTheIdleLimit) {
  const Clock::time_point t0 = Clock::now();
  kube::LeaderElector::Activity none;  // no attempt yet: counted from `since`
  EXPECT_EQ(ElectionLiveness(none, t0, t0 + 9s, 10s, 130s), "");
  EXPECT_EQ(ElectionLiveness(none, t0, t0 + 11s, 10s, 130s),
            "leader election stuck: no Lease attempt for 11 s");

  kube::LeaderElector::Activity done{t0 + 20s, t0 + 21s};
  EXPECT_EQ(ElectionLiveness(done, t0, t0 + 30s, 10s, 130s), "");
  EXPECT_EQ(ElectionLiveness(done, t0, t0 + 31s + 500ms, 10s, 130s),
            "leader election stuck: no Lease attempt for 10 s");
}

TEST(ElectionLivenessTest, RunningAttemptIsStuckAfterTheAttemptLimit) {
  const Clock::time_point t0 = Clock::now();
  kube::LeaderElector::Activity running{t0 + 20s, t0 + 5s};
  // Longer than the idle limit is fine while a request may still answer.
  EXPECT_EQ(ElectionLiveness(running, t0, t0 + 60s, 10s, 130s), "");
  EXPECT_EQ(ElectionLiveness(running, t0, t0 + 151s, 10s, 130s),
            "leader election stuck: a Lease attempt has run for 131 s");
}

}  // namespace
}  // namespace chamber::chamberd
