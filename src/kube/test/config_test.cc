#include "kube/config.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

namespace chamber::kube {
namespace {

constexpr char kCa[] = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
constexpr char kCert[] = "-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n";
constexpr char kKey[] = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kube_config_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Kubeconfig(const std::string& extra_user = "token: abc") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
         "clusters:\n"
         "- name: c1\n"
         "  cluster:\n"
         "    server: https://10.0.0.1:6443/\n"
         "    certificate-authority-data: " +
         Base64Encode(kCa) +
         "\n"
         "contexts:\n"
         "- name: dev\n"
         "  context: {cluster: c1, user: u1, namespace: team-a}\n"
         "users:\n"
         "- name: u1\n"
         "  user:\n"
         "    " +
         extra_user + "\n";
}

TEST(Base64Test, RoundTripsAndRejectsGarbage) {
  for (const std::string s : {"", "a", "ab", "abc", "abcd", "hello world\n"})
    EXPECT_EQ(*Base64Decode(Base64Encode(s)), s);
  EXPECT_EQ(Base64Encode("abc"), "YWJj");
  EXPECT_EQ(*Base64Decode("YW\nJj"), "abc");
  Result<std::string> bad = Base64Decode("YW*j");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("offset 2"), std::string::npos);
}

TEST(KubeconfigTest, ParsesClusterUserAndContext) {
  Result<RestConfig> c = ParseKubeconfig(Kubeconfig(), "kc.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->token, "abc");
  EXPECT_EQ(c->namespace_name, "team-a");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_NE(c->source.find("context dev"), std::string::npos);
}

TEST(KubeconfigTest, ReadsCertificateFilesRelativeToTheKubeconfig) {
  TempDir dir;
  dir.Write("client.crt", kCert);
  dir.Write("client.key", kKey);
  dir.Write("ca.crt", kCa);
  const std::string text =
      "current-context: x\n"
      "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority: ca.crt}}]\n"
      "users: [{name: u, user: {client-certificate: client.crt, client-key: " +
      dir.path() +
      "/client.key}}]\n"
      "contexts: [{name: x, context: {cluster: c, user: u}}]\n";
  const std::string path = dir.Write("config", text);
  Result<RestConfig> c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->client_cert_pem, kCert);
  EXPECT_EQ(c->client_key_pem, kKey);
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->namespace_name, "default");
}

TEST(KubeconfigTest, ClientCertificateDataAndInsecureFlag) {
  const std::string text =
      "current-context: x\n"
      "clusters: [{name: c, cluster: {server: 'https://h:1', insecure-skip-tls-verify: true}}]\n"
      "users: [{name: u, user: {client-certificate-data: " +
      Base64Encode(kCert) + ", client-key-data: " + Base64Encode(kKey) +
      "}}]\n"
      "contexts: [{name: x, context: {cluster: c, user: u}}]\n";
  Result<RestConfig> c = ParseKubeconfig(text, "kc");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->client_cert_pem, kCert);
  EXPECT_EQ(c->client_key_pem, kKey);
  EXPECT_TRUE(c->insecure_skip_tls_verify);
}

TEST(KubeconfigTest, MergesSeveralFilesFirstDefinitionWins) {
  TempDir dir;
  const std::string a = dir.Write("a",
                                  "current-context: one\n"
                                  "clusters: [{name: c, cluster: {server: 'https://first:1'}}]\n"
                                  "contexts: [{name: one, context: {cluster: c, user: u}}]\n");
  const std::string b = dir.Write("b",
                                  "current-context: two\n"
                                  "clusters: [{name: c, cluster: {server: 'https://second:1'}},"
                                  " {name: d, cluster: {server: 'https://d:1'}}]\n"
                                  "users: [{name: u, user: {token: from-b}}]\n"
                                  "contexts: [{name: two, context: {cluster: d, user: u}},"
                                  " {name: one, context: {cluster: d}}]\n");
  Result<RestConfig> c = LoadKubeconfig(a + ":" + dir.path() + "/missing:" + b);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://first:1");  // context "one" and cluster "c" from file a
  EXPECT_EQ(c->token, "from-b");            // user only in file b
  Result<RestConfig> two = LoadKubeconfig(a + ":" + b, "two");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->server, "https://d:1");
}

TEST(KubeconfigTest, ErrorsNameTheFileLineAndField) {
  Result<RestConfig> c = ParseKubeconfig(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster: {server: 'ftp://h'}\n"
      "contexts: [{name: x, context: {cluster: c}}]\n",
      "kc.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("kc.yaml:4:"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("clusters[0].cluster.server"), std::string::npos);

  Result<RestConfig> missing_ctx = ParseKubeconfig(Kubeconfig(), "kc.yaml", ".", "nope");
  ASSERT_FALSE(missing_ctx.ok());
  EXPECT_NE(missing_ctx.status().message().find("context \"nope\" is not defined"),
            std::string::npos);

  Result<RestConfig> bad_data =
      ParseKubeconfig(Kubeconfig("client-certificate-data: '!!notbase64'"), "kc.yaml");
  ASSERT_FALSE(bad_data.ok());
  EXPECT_NE(bad_data.status().message().find("users[0].user.client-certificate-data"),
            std::string::npos)
      << bad_data.status().message();

  Result<RestConfig> not_pem =
      ParseKubeconfig(Kubeconfig("client-certificate-data: " + Base64Encode("x")), "kc.yaml");
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("users[0].user.client-certificate-data: not PEM"),
            std::string::npos)
      << not_pem.status().message();

  Result<RestConfig> lone_cert =
      ParseKubeconfig(Kubeconfig("client-certificate-data: " + Base64Encode(kCert)), "kc.yaml");
  ASSERT_FALSE(lone_cert.ok());
  EXPECT_NE(lone_cert.status().message().find("must be given together"), std::string::npos);

  Result<RestConfig> syntax = ParseKubeconfig("clusters: [\n", "kc.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().message().rfind("kc.yaml:", 0), 0u) << syntax.status().message();

  Result<RestConfig> token_file = ParseKubeconfig(Kubeconfig("tokenFile: /nonexistent/t"), "kc");
  ASSERT_FALSE(token_file.ok());
  EXPECT_NE(token_file.status().message().find("users[0].user.tokenFile"), std::string::npos);

  Result<RestConfig> none = LoadKubeconfig("/nonexistent/a:/nonexistent/b");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("/nonexistent/a, /nonexistent/b"), std::string::npos);
}

TEST(InClusterTest, ReadsServiceAccountFiles) {
  TempDir dir;
  InClusterPaths p;
  p.token_file = dir.Write("token", "tok-1\n");
  p.ca_file = dir.Write("ca.crt", kCa);
  p.namespace_file = dir.Write("namespace", "chamber-system\n");
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  Result<RestConfig> c = InClusterConfig(p);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, p.token_file);
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->namespace_name, "chamber-system");

  unsetenv("KUBERNETES_SERVICE_HOST");
  Result<RestConfig> outside = InClusterConfig(p);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  unsetenv("KUBERNETES_SERVICE_PORT");
}

TEST(TokenSourceTest, RereadsTheFileAfterTheRefreshPeriodOrInvalidate) {
  TempDir dir;
  const std::string path = dir.Write("token", "one\n");
  TokenSource ts("", path, std::chrono::milliseconds(200));
  EXPECT_EQ(*ts.Token(), "one");
  dir.Write("token", "two");
  EXPECT_EQ(*ts.Token(), "one");  // cached within the refresh period
  EXPECT_TRUE(ts.Invalidate());
  EXPECT_EQ(*ts.Token(), "two");
  dir.Write("token", "three");
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(*ts.Token(), "three");
  std::filesystem::remove(path);
  ts.Invalidate();
  EXPECT_EQ(*ts.Token(), "three");  // a missing file keeps the last good token

  TokenSource fixed("static", "");
  EXPECT_EQ(*fixed.Token(), "static");
  EXPECT_FALSE(fixed.Invalidate());
}

}  // namespace
}  // namespace chamber::kube
