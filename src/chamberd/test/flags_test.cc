// chamberd's flag checks that CLI11 cannot make (CheckFlags): pairs, files, addresses, each
// error naming the flag.
#include "chamberd/flags.h"

#include <gtest/gtest.h>

#include "common/testing/test_pki.h"

namespace chamber::chamberd {
namespace {

std::string Error(Flags f) {
  Status s = CheckFlags(&f);
  return s.ok() ? "ok" : std::string(s.message());
}

TEST(CheckFlags, TheWebhooksCertificateAndKeyComeTogetherAndHold) {
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok());
  Flags f;
  EXPECT_EQ(Error(f), "ok") << "no webhook by default";
  f.webhook_tls_cert_file = pki("server.crt");
  EXPECT_EQ(Error(f), "--webhook-tls-cert-file needs --webhook-tls-key-file");
  f.webhook_tls_key_file = pki("server.key");
  EXPECT_EQ(Error(f), "ok");
  f.webhook_tls_key_file = pki("elsewhere.key");
  EXPECT_NE(Error(f).find("--webhook-tls-key-file " + pki("elsewhere.key") +
                          ": is not the key of the certificate in --webhook-tls-cert-file"),
            std::string::npos)
      << Error(f);
  f.webhook_tls_key_file = pki("server.key");
  f.webhook_listen = "9443";
  EXPECT_NE(Error(f).find("--webhook-listen 9443: expected HOST:PORT"), std::string::npos)
      << Error(f);
  Flags key_only;
  key_only.webhook_tls_key_file = pki("server.key");
  EXPECT_EQ(Error(key_only), "--webhook-tls-key-file needs --webhook-tls-cert-file");
}

}  // namespace
}  // namespace chamber::chamberd
