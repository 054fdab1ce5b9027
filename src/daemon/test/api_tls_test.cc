// The API over TLS, on the real server over loopback with certificates made for the test by the
// `openssl` command line: a client that trusts the server's CA is served; one that trusts another
// CA, one that speaks plain HTTP, and one that reaches a server whose certificate names another
// host all fail; the agent's push and the history replication client deliver over HTTPS; and
// Start refuses bad files naming the flag and the file.
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "common/testing/test_pki.h"
#include "common/tls.h"
#include "daemon/history_replication.h"
#include "daemon/http_server.h"
#include "daemon/test/demo_daemon.h"
#include "health/health_service.h"

namespace chamber::daemon {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRead = "read-token-0123456789";
constexpr const char* kAgent = "agent-token-0123456789";
constexpr const char* kReplica = "replica-token-0123456789";

void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

const chamber::testing::TestPki& Certs() {
  static const chamber::testing::TestPki pki;
  return pki;
}

// A demo cluster's daemon, a health controller, and the server over TLS with `cert`'s
// certificate and key ("server": 127.0.0.1).
struct Served {
  // `cert` names the test PKI's pair, or with `as_path` the path of `<cert>.crt` and `.key`.
  explicit Served(const std::string& cert = "server", bool as_path = false) {
    daemon = test_support::OneCycleDemoDaemon();
    health = test_support::BareHealthService();
    auth = std::move(TokenFileAuthenticator::Parse(std::string(kRead) + " read viewer\n" + kAgent +
                                                       " agent node-agent\n" + kReplica +
                                                       " replica standby\n",
                                                   "tokens"))
               .value();
    ServerOptions so;
    so.port = 0;
    so.health = health;
    so.tls_cert_file = as_path ? cert + ".crt" : Certs()(cert + ".crt");
    so.tls_key_file = as_path ? cert + ".key" : Certs()(cert + ".key");
    server = std::make_unique<ApiServer>(*daemon, auth, so);
    const Status s = server->Start();
    EXPECT_TRUE(s.ok()) << s.message();
  }
  ~Served() { server.reset(); }

  std::string Url() const { return "https://127.0.0.1:" + std::to_string(server->port()); }
  // An HTTPS client of this server that trusts `ca` ("ca": the server's).
  httplib::Client Client(const std::string& ca) const {
    httplib::Client c(Url());
    c.set_connection_timeout(5);
    c.set_read_timeout(10);
    c.enable_server_certificate_verification(true);
    c.set_ca_cert_path(Certs()(ca + ".crt"));
    c.set_bearer_token_auth(kRead);
    return c;
  }

  std::unique_ptr<Daemon> daemon;
  std::shared_ptr<health::HealthService> health;
  std::shared_ptr<Authenticator> auth;
  std::unique_ptr<ApiServer> server;
};

class ApiTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Certs().ok()) << "openssl could not make the test's PKI"; }
};

TEST_F(ApiTlsTest, AClientThatTrustsTheCaIsServed) {
  Served s;
  auto c = s.Client("ca");
  httplib::Result r = c.Get("/api/v1/fleet");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  // Authentication still applies over TLS.
  c.set_bearer_token_auth("not-a-token");
  r = c.Get("/api/v1/fleet");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401);
}

TEST_F(ApiTlsTest, AClientThatTrustsAnotherCaFailsTheHandshake) {
  Served s;
  httplib::Result r = s.Client("other-ca").Get("/api/v1/fleet");
  ASSERT_FALSE(r) << "served " << r->status << " to a client that does not trust the server's CA";
  EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification) << httplib::to_string(r.error());
}

TEST_F(ApiTlsTest, PlainHttpToTheTlsPortGetsNoAnswer) {
  Served s;
  httplib::Client c("http://127.0.0.1:" + std::to_string(s.server->port()));
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  c.set_bearer_token_auth(kRead);
  httplib::Result r = c.Get("/api/v1/fleet");
  EXPECT_FALSE(r) << "plain HTTP was answered " << r->status;
}

TEST_F(ApiTlsTest, ACertificateForAnotherHostFailsHostVerification) {
  Served s("elsewhere");  // signed by the trusted CA, for elsewhere.example only
  httplib::Result r = s.Client("ca").Get("/api/v1/fleet");
  ASSERT_FALSE(r) << "served " << r->status << " under a certificate for another host";
  EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification) << httplib::to_string(r.error());
}

// A certificate renewed in place (a Secret volume's files replaced) is served from the next
// handshake on, without a restart; a replaced pair that does not hold keeps the last good one.
TEST_F(ApiTlsTest, ARenewedCertificateIsServedWithoutARestart) {
  const fs::path dir = Certs()("renewed");
  fs::create_directories(dir);
  auto put = [&](const std::string& cert, const std::string& key) {
    fs::copy_file(Certs()(cert), dir / "new.crt", fs::copy_options::overwrite_existing);
    fs::copy_file(Certs()(key), dir / "new.key", fs::copy_options::overwrite_existing);
    fs::rename(dir / "new.crt", dir / "tls.crt");
    fs::rename(dir / "new.key", dir / "tls.key");
  };
  put("server.crt", "server.key");
  Served s((dir / "tls").string(), /*as_path=*/true);
  auto fleet = [&] { return static_cast<bool>(s.Client("ca").Get("/api/v1/fleet")); };
  EXPECT_TRUE(fleet());
  put("elsewhere.crt", "elsewhere.key");  // the same CA, another host name
  EXPECT_FALSE(fleet()) << "the renewed certificate was not served";
  EXPECT_EQ(s.server->certificate_reloads(), 1);
  put("server.crt", "elsewhere.key");  // a key of another certificate: refused, the last kept
  EXPECT_FALSE(fleet());
  EXPECT_EQ(s.server->certificate_reloads(), 1);
  put("server.crt", "server.key");
  EXPECT_TRUE(fleet());
  EXPECT_EQ(s.server->certificate_reloads(), 2);
}

TEST_F(ApiTlsTest, HistoryReplicationFetchesOverHttps) {
  Served s;
  auto token = []() -> Result<std::string> { return std::string(kReplica); };
  // This server keeps no history: its 404 proves the handshake and the token went through.
  Result<std::string> got =
      HttpHistoryFetch(s.Url(), token, Certs()("ca.crt"))("/api/v1/history/replication");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("HTTP 404"), std::string::npos) << got.status().message();
  got = HttpHistoryFetch(s.Url(), token, Certs()("other-ca.crt"))("/api/v1/history/replication");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("SSLServerVerification"), std::string::npos)
      << got.status().message();
}

// The chamber-agent runtime (no NVML: an empty inventory) pushing to the server over HTTPS.
struct PushingAgent {
  PushingAgent(const std::string& url, const std::string& ca, const std::string& dir) {
    const std::string token_file = dir + "/agent-token";
    Write(token_file, std::string(kAgent) + "\n");
    agent::AgentOptions o;
    o.node_name = "tls-node";
    o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    o.kernel_log = "";
    o.pod_resources_socket = "";
    o.listen_host = "127.0.0.1";
    o.listen_port = 0;
    o.interval_s = 0.05;
    o.chamberd_url = url + "/api/v1/agent/reports";
    o.chamberd_ca_file = ca;
    o.token_file = token_file;
    o.push_interval_s = 0.1;
    a = std::make_unique<agent::Agent>(o);
    a->Start();
    serving = std::thread([this] { EXPECT_TRUE(a->Serve().ok()); });
  }
  ~PushingAgent() {
    a->Stop();
    serving.join();
  }
  std::unique_ptr<agent::Agent> a;
  std::thread serving;
};

bool Reported(health::HealthService& h, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  do {
    if (h.View().dump().find("tls-node") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

TEST_F(ApiTlsTest, TheAgentPushesItsReportOverHttps) {
  Served s;
  const std::string dir = fs::path(Certs()("ca.crt")).parent_path().string();
  {
    PushingAgent untrusting(s.Url(), Certs()("other-ca.crt"), dir);
    EXPECT_FALSE(Reported(*s.health, std::chrono::milliseconds(1000)))
        << "an agent that does not trust the server's CA delivered its report";
  }
  PushingAgent agent(s.Url(), Certs()("ca.crt"), dir);
  EXPECT_TRUE(Reported(*s.health, std::chrono::seconds(10))) << s.health->View().dump();
}

TEST_F(ApiTlsTest, StartRefusesBadFilesNamingTheFlagAndFile) {
  backend::DemoClusterOptions o;
  o.seed = 3;
  auto b = std::move(backend::SimulatedBackend::Create(backend::DemoCluster(o))).value();
  Daemon d(std::move(b), DaemonOptions{}, nullptr);
  auto start = [&](const std::string& cert, const std::string& key) {
    ServerOptions so;
    so.port = 0;
    so.anonymous = true;
    so.tls_cert_file = cert;
    so.tls_key_file = key;
    ApiServer server(d, nullptr, so);
    return server.Start();
  };
  const std::string missing = Certs()("missing.crt");
  Status st = start(missing, Certs()("server.key"));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--tls-cert-file " + missing + ": no such file"), std::string::npos)
      << st.message();
  // A key where the certificate should be, and a certificate where the key should be.
  st = start(Certs()("server.key"), Certs()("server.key"));
  EXPECT_NE(
      st.message().find("--tls-cert-file " + Certs()("server.key") + ": not a PEM certificate"),
      std::string::npos)
      << st.message();
  st = start(Certs()("server.crt"), Certs()("server.crt"));
  EXPECT_NE(st.message().find("--tls-key-file " + Certs()("server.crt") + ": not an unencrypted"),
            std::string::npos)
      << st.message();
  // Another certificate's key.
  st = start(Certs()("server.crt"), Certs()("elsewhere.key"));
  EXPECT_NE(st.message().find("--tls-key-file " + Certs()("elsewhere.key") +
                              ": is not the key of the certificate in --tls-cert-file " +
                              Certs()("server.crt")),
            std::string::npos)
      << st.message();
  st = start(Certs()("server.crt"), "");
  EXPECT_NE(st.message().find("both --tls-cert-file and --tls-key-file"), std::string::npos)
      << st.message();
  EXPECT_TRUE(start(Certs()("server.crt"), Certs()("server.key")).ok());
}

TEST_F(ApiTlsTest, CaFileCheck) {
  EXPECT_TRUE(tls::CheckCaFile({"--ca-file", Certs()("ca.crt")}).ok());
  const Status st = tls::CheckCaFile({"--ca-file", Certs()("ca.key")});
  EXPECT_NE(st.message().find("--ca-file " + Certs()("ca.key") + ": holds no PEM certificate"),
            std::string::npos)
      << st.message();
  EXPECT_NE(tls::CheckCaFile({"--ca-file", Certs()("nope.crt")}).message().find("no such file"),
            std::string::npos);
}

}  // namespace
}  // namespace chamber::daemon
