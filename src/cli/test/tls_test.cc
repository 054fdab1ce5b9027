// `chamber status --server https://...` against a real in-process server over TLS, with the
// certificates of a throwaway PKI (common/testing/test_pki.h): --ca-file trusts the server's CA
// and is served; another CA, or none (the system's trust store), fails with the reason.
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/sim/demo_cluster.h"
#include "cli/command.h"
#include "cli/test/run_cli.h"
#include "common/testing/test_pki.h"
#include "daemon/http_server.h"

namespace chamber::cli {
namespace {

constexpr const char* kToken = "cli-tls-token-0123456789";

class CliTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok()) << "openssl could not make the test's PKI";
    backend::DemoClusterOptions o;
    o.seed = 11;
    o.gpu_mtbf_hours = 0;
    auto b = std::move(backend::SimulatedBackend::Create(backend::DemoCluster(o))).value();
    daemon_ = std::make_unique<daemon::Daemon>(std::move(b), daemon::DaemonOptions{}, nullptr);
    ASSERT_TRUE(daemon_->Tick().ok());
    daemon::ServerOptions so;
    so.port = 0;
    so.tls_cert_file = pki_("server.crt");
    so.tls_key_file = pki_("server.key");
    auto tokens = daemon::TokenFileAuthenticator::Parse(std::string(kToken) + " read\n", "t");
    server_ = std::make_unique<daemon::ApiServer>(
        *daemon_, std::shared_ptr<daemon::Authenticator>(std::move(tokens).value()), so);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    server_.reset();
    daemon_.reset();
  }
  std::string Server() const { return "https://127.0.0.1:" + std::to_string(server_->port()); }
  testing::Output Status(std::vector<std::string> more) const {
    std::vector<std::string> args = {"status", "-o",      "json", "--server",
                                     Server(), "--token", kToken};
    args.insert(args.end(), more.begin(), more.end());
    return testing::RunCli(std::move(args), [](CommandRegistry& r) { RegisterStatusCommand(r); });
  }

  // Made on first use, not when the binary only lists its tests.
  static const chamber::testing::TestPki& Pki() {
    static const chamber::testing::TestPki pki;
    return pki;
  }
  const chamber::testing::TestPki& pki_ = Pki();
  std::unique_ptr<daemon::Daemon> daemon_;
  std::unique_ptr<daemon::ApiServer> server_;
};

TEST_F(CliTlsTest, TheServersCaIsTrustedWithCaFile) {
  const testing::Output o = Status({"--ca-file", pki_("ca.crt")});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(nlohmann::json::parse(o.out).contains("summary")) << o.out;
}

TEST_F(CliTlsTest, AnotherCaOrTheSystemStoreIsRefused) {
  testing::Output o = Status({"--ca-file", pki_("other-ca.crt")});
  EXPECT_NE(o.code, 0) << o.out;
  EXPECT_NE(o.err.find("SSLServerVerification"), std::string::npos) << o.err;
  o = Status({});
  EXPECT_NE(o.code, 0) << o.out;
  EXPECT_NE(o.err.find("SSLServerVerification"), std::string::npos) << o.err;
}

TEST_F(CliTlsTest, ACaFileWithoutACertificateIsNamed) {
  const testing::Output o = Status({"--ca-file", pki_("ca.key")});
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("--ca-file " + pki_("ca.key") + ": holds no PEM certificate"),
            std::string::npos)
      << o.err;
}

}  // namespace
}  // namespace chamber::cli
