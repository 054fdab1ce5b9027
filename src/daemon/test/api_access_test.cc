// Who may call what, and what the API does with clients that send too much, too often or too
// slowly, on the real server over loopback: the authorization matrix (every route the server
// registers against every kind of credential), the body limit, the per-client rate limit and the
// read timeout.
#include <httplib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>

#include "daemon/http_server.h"
#include "daemon/test/demo_daemon.h"
#include "health/health_service.h"

namespace chamber::daemon {
namespace {

using nlohmann::json;

constexpr const char* kRead = "read-token-0123456789";
constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kAgent = "agent-token-0123456789";
constexpr const char* kReplica = "replica-token-0123456789";
// Known to TokenReview only: chamber-agent's service account, bound to a pod on another node.
constexpr const char* kBoundAgent = "bound-agent-token-0123456789";
constexpr const char* kAgentUser = "system:serviceaccount:chamber:chamber-agent";

// A demo cluster's daemon (one cycle run), a health controller, and the server over them with
// the tokens above.
struct Served {
  explicit Served(ServerOptions so = {}) {
    daemon = test_support::OneCycleDemoDaemon();
    health = test_support::BareHealthService();
    auto chain = std::make_shared<ChainAuthenticator>();
    chain->Add(std::move(TokenFileAuthenticator::Parse(
                             std::string(kRead) + " read viewer\n" + kAdmin + " admin operator\n" +
                                 kAgent + " agent node-agent\n" + kReplica + " replica standby\n",
                             "tokens"))
                   .value());
    TokenReviewAuthenticator::Options ro;
    ro.agent_users = {kAgentUser};
    chain->Add(std::make_unique<TokenReviewAuthenticator>(
        [](std::string_view token) -> Result<ReviewedUser> {
          ReviewedUser u;
          if (token != kBoundAgent) return u;  // not authenticated
          u.authenticated = true;
          u.username = kAgentUser;
          u.node = "gpu-elsewhere";
          return u;
        },
        ro));
    so.port = 0;
    so.health = health;
    server = std::make_unique<ApiServer>(*daemon, chain, so);
    EXPECT_TRUE(server->Start().ok());
  }
  ~Served() { server.reset(); }

  httplib::Client Client(const char* token) const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(10);
    if (token) c.set_bearer_token_auth(token);
    return c;
  }

  std::unique_ptr<Daemon> daemon;
  std::shared_ptr<health::HealthService> health;
  std::unique_ptr<ApiServer> server;
};

std::string Report(const std::string& node) {
  return json{{"kind", "chamber.io/agent-report/v1"},
              {"node", node},
              {"time", 100.0},
              {"inventory", {{"gpus", json::array()}}},
              {"samples", json::array()},
              {"incidents", json::array()}}
      .dump();
}

// Every route the server registers, as registered ("METHOD pattern"), with a path that reaches
// it and what each credential gets:
//   none, unknown token, read, admin, agent, agent bound to another node, replica
// U: 401 (unauthenticated), F: 403 (forbidden), A: allowed (the handler answered: 2xx, or 400 or
// 404 for what it did not find, never 401, 403 or 429).
struct Cell {
  const char* name;
  const char* token;
};
const Cell kCredentials[] = {{"none", nullptr},    {"unknown", "unknown-token-0123456789"},
                             {"read", kRead},      {"admin", kAdmin},
                             {"agent", kAgent},    {"agent-bound-elsewhere", kBoundAgent},
                             {"replica", kReplica}};

struct Route {
  std::string registered;  // "METHOD pattern", as ApiServer::routes() lists it
  std::string path;        // a path it answers
  std::string expect;      // one letter per credential, in kCredentials' order
};

const std::vector<Route>& Matrix() {
  static const std::vector<Route> routes = {
      {"GET /healthz", "/healthz", "AAAAAAA"},
      {"GET /metrics", "/metrics", "UUAAFFF"},
      {"GET /api/v1/fleet", "/api/v1/fleet", "UUAAFFF"},
      {"GET /api/v1/nodes", "/api/v1/nodes", "UUAAFFF"},
      {"GET /api/v1/gpus", "/api/v1/gpus", "UUAAFFF"},
      {"GET /api/v1/queues", "/api/v1/queues", "UUAAFFF"},
      {"GET /api/v1/health", "/api/v1/health", "UUAAFFF"},
      {"POST /api/v1/agent/reports", "/api/v1/agent/reports", "UUFAAFF"},
      {"POST /api/v1/health/nodes/([^/]+)/clear", "/api/v1/health/nodes/h100-1/clear", "UUFAFFF"},
      {"GET /api/v1/cost", "/api/v1/cost", "UUAAFFF"},
      {"GET /api/v1/workloads", "/api/v1/workloads", "UUAAFFF"},
      {"GET /api/v1/workloads/([^/]+)(?:/([^/]+))?", "/api/v1/workloads/ml/none", "UUAAFFF"},
      {"POST /api/v1/nodes/([^/]+)/cordon", "/api/v1/nodes/h100-1/cordon", "UUFAFFF"},
      {"POST /api/v1/nodes/([^/]+)/uncordon", "/api/v1/nodes/h100-1/uncordon", "UUFAFFF"},
      {"GET /api/v1/history", "/api/v1/history", "UUAAFFF"},
      {"GET /api/v1/history/replication", "/api/v1/history/replication", "UUAAFFA"},
      {"GET /api/v1/events", "/api/v1/events", "UUAAFFF"},
      {"GET /api/.*", "/api/v1/nonexistent", "UUAAFFF"},
      {"GET /.*", "/", "AAAAAAA"},
  };
  return routes;
}

// The status of one request; an event stream is cut after its headers.
int StatusOf(const Served& s, const Route& route, const char* token) {
  httplib::Client c = s.Client(token);
  const std::string method = route.registered.substr(0, route.registered.find(' '));
  if (method == "POST") {
    // The report names h100-1: the token bound to another node may not speak for it.
    auto r = c.Post(route.path, Report("h100-1"), "application/json");
    return r ? r->status : -1;
  }
  int status = -1;
  c.Get(
      route.path,
      [&](const httplib::Response& res) {
        status = res.status;
        return route.path != "/api/v1/events";
      },
      [](const char*, size_t) { return true; });
  return status;
}

TEST(AuthorizationMatrixTest, EveryRouteAgainstEveryCredential) {
  Served s;
  // The table names every route the server registers, and no other.
  std::vector<std::string> registered = s.server->routes();
  std::vector<std::string> listed;
  for (const Route& r : Matrix()) listed.push_back(r.registered);
  std::sort(registered.begin(), registered.end());
  std::sort(listed.begin(), listed.end());
  ASSERT_EQ(listed, registered) << "a route without a row here (or a row without a route)";
  ASSERT_EQ(registered.size(), 19u);

  int cells = 0;
  for (const Route& route : Matrix()) {
    ASSERT_EQ(route.expect.size(), std::size(kCredentials)) << route.registered;
    for (size_t c = 0; c < std::size(kCredentials); ++c) {
      const int status = StatusOf(s, route, kCredentials[c].token);
      const std::string where =
          route.registered + " as " + kCredentials[c].name + ": " + std::to_string(status);
      switch (route.expect[c]) {
        case 'U':
          EXPECT_EQ(status, 401) << where;
          break;
        case 'F':
          EXPECT_EQ(status, 403) << where;
          break;
        default:
          EXPECT_TRUE(status >= 200 && status < 500 && status != 401 && status != 403 &&
                      status != 429)
              << where;
      }
      ++cells;
    }
  }
  EXPECT_EQ(cells, 19 * 7);
  // The report was well formed: an agent's was taken (202), not merely let through to a 400.
  auto r = s.Client(kAgent).Post("/api/v1/agent/reports", Report("h100-1"), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202) << r->body;
}

// What the server refuses before a handler runs is still the API's JSON error.
void ExpectJsonError(const httplib::Result& r, int status, const std::string& says) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  ASSERT_TRUE(json::accept(r->body)) << r->body;
  const json body = json::parse(r->body);
  ASSERT_TRUE(body.contains("error")) << r->body;
  EXPECT_NE(body["error"].get<std::string>().find(says), std::string::npos) << r->body;
}

// A connected socket to the server, with a receive timeout.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void Send(int fd, const std::string& data) {
  ASSERT_EQ(send(fd, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
}

// Everything until the server closes the connection (or 10 s pass).
std::string ReadToClose(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// One response: its head, and its body by Content-Length.
std::string ReadResponse(int fd) {
  std::string out;
  char buf[4096];
  size_t want = std::string::npos;
  while (out.size() < want) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    const size_t head = out.find("\r\n\r\n");
    std::smatch length;
    if (head != std::string::npos &&
        std::regex_search(out.cbegin(), out.cbegin() + static_cast<std::ptrdiff_t>(head), length,
                          std::regex("Content-Length: (\\d+)")))
      want = head + 4 + std::stoul(length[1]);
  }
  return out;
}

TEST(ApiLimitsTest, BodiesOverTheLimitAreRefusedWith413) {
  ServerOptions so;
  so.max_body_bytes = 4096;
  Served s(so);
  const std::string big = Report("h100-1").insert(1, std::string(5000, ' '));
  ExpectJsonError(s.Client(kAgent).Post("/api/v1/agent/reports", big, "application/json"), 413,
                  "limit of 4096 bytes");
  // Under the limit the same report is taken.
  auto ok = s.Client(kAgent).Post("/api/v1/agent/reports", Report("h100-1"), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 202) << ok->body;
  // On any path, before authentication: a body is refused before it is read.
  ExpectJsonError(s.Client(nullptr).Post("/api/v1/nodes/h100-1/cordon", big, "text/plain"), 413,
                  "4096 bytes");
  // A body without a length (chunked) is refused unread, and the connection closed.
  const int fd = Connect(s.server->port());
  Send(fd,
       "POST /api/v1/agent/reports HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
       "5\r\nhello\r\n0\r\n\r\n");
  const std::string answer = ReadResponse(fd);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 411", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Content-Length (at most 4096 bytes"), std::string::npos) << answer;
  // Methods no route takes are JSON 404s too.
  ExpectJsonError(s.Client(kRead).Post("/api/v1/fleet", "", "text/plain"), 404,
                  "no such path: POST /api/v1/fleet");

  const std::string metrics = s.Client(kRead).Get("/metrics")->body;
  EXPECT_NE(metrics.find("chamber_api_refused_requests_total{reason=\"body_too_large\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("chamber_api_refused_requests_total{reason=\"length_required\"} 1"),
            std::string::npos);
}

TEST(ApiLimitsTest, ClientsOverTheirRateGet429WithRetryAfter) {
  ServerOptions so;
  so.rate_limit.rate = 0.1;  // one request per 10 s: no refill while the test runs
  so.rate_limit.burst = 5;
  Served s(so);
  for (int i = 0; i < 5; ++i) {
    auto r = s.Client(kRead).Get("/api/v1/fleet");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << i;
  }
  auto refused = s.Client(kRead).Get("/api/v1/fleet");
  ExpectJsonError(refused, 429, "too many requests from \"viewer\"");
  const int retry_after = std::stoi(refused->get_header_value("Retry-After"));
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 10);
  // Every route with a token counts against its principal, whatever it is.
  ExpectJsonError(s.Client(kRead).Post("/api/v1/nodes/h100-1/cordon", "", "text/plain"), 429,
                  "retry after");
  // Other principals have buckets of their own.
  EXPECT_EQ(s.Client(kAdmin).Get("/api/v1/fleet")->status, 200);
  // Agents sharing one identity are told apart by node (or address): a bound agent's bucket is
  // its own, not the token-file agent's.
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(s.Client(kAgent)
                  .Post("/api/v1/agent/reports", Report("h100-1"), "application/json")
                  ->status,
              202);
  EXPECT_EQ(
      s.Client(kAgent).Post("/api/v1/agent/reports", Report("h100-1"), "application/json")->status,
      429);
  EXPECT_EQ(s.Client(kBoundAgent)
                .Post("/api/v1/agent/reports", Report("gpu-elsewhere"), "application/json")
                ->status,
            202);
  // Callers without a token are limited by address: 401 until their bucket is empty, then 429.
  std::vector<int> anonymous;
  for (int i = 0; i < 7; ++i) anonymous.push_back(s.Client(nullptr).Get("/api/v1/fleet")->status);
  EXPECT_EQ(anonymous, (std::vector<int>{401, 401, 401, 401, 401, 429, 429}));
  // Replicas (chamberd's standbys catching up on the history) are not limited.
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(s.Client(kReplica).Get("/api/v1/history/replication")->status, 404) << i;
  // /healthz and the dashboard's files are never limited.
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(s.Client(nullptr).Get("/healthz")->status, 200) << i;
    ASSERT_EQ(s.Client(nullptr).Get("/")->status, 200) << i;
  }
  const std::string metrics = s.Client(kAdmin).Get("/metrics")->body;
  EXPECT_NE(metrics.find("chamber_api_refused_requests_total{reason=\"rate_limited\"} 5"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("chamber_api_refused_requests_total{reason=\"unauthenticated\"} 5"),
            std::string::npos);
}

TEST(ApiLimitsTest, ASlowClientIsDroppedAfterTheReadTimeoutWhileOthersAreServed) {
  ServerOptions so;
  so.read_timeout = std::chrono::milliseconds(1000);
  so.idle_timeout = std::chrono::seconds(1);
  Served s(so);
  // Slowloris: a few connections that send half a request each and then nothing.
  std::vector<int> slow;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {
    slow.push_back(Connect(s.server->port()));
    Send(slow.back(), "GET /api/v1/fleet HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ");
  }
  // Meanwhile everyone else is served at once.
  for (int i = 0; i < 10; ++i) {
    const auto t = std::chrono::steady_clock::now();
    auto r = s.Client(kRead).Get("/api/v1/fleet");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t, std::chrono::milliseconds(500));
  }
  // Each slow connection is answered (400: the request never arrived whole) after the read
  // timeout, and closed after the idle timeout that follows every answer.
  char first = 0;
  ASSERT_EQ(recv(slow[0], &first, 1, MSG_PEEK), 1);
  const auto answered = std::chrono::steady_clock::now() - start;
  EXPECT_GE(answered, std::chrono::milliseconds(900));
  EXPECT_LT(answered, std::chrono::milliseconds(2500));
  for (int fd : slow) {
    const std::string answer = ReadToClose(fd);
    close(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
    EXPECT_NE(answer.find(R"({"error":"malformed or incomplete request"})"), std::string::npos)
        << answer;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(6000));
}

}  // namespace
}  // namespace chamber::daemon
