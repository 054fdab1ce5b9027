// The webhook over HTTPS with the test PKI, as the API server calls it.
#include "admission/webhook_server.h"

#include <httplib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/testing/test_pki.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace chamber::admission {
namespace {

class OneNamespace : public ObjectSource {
 public:
  Result<kube::ObjectMeta> Owner(const std::string& ns, const kube::OwnerReference& r) override {
    return kube::ApiErrorStatus("GET " + ns + "/" + r.name, 503, "");
  }
  Result<kube::ObjectMeta> Namespace(const std::string& name) override {
    kube::ObjectMeta m;
    m.name = name;
    if (name == "ml") m.labels["chamber.io/queue"] = "default-q";
    return m;
  }
};

std::string Review(const std::string& ns, Json pod) {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "u-" + ns},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"namespace", ns},
                {"operation", "CREATE"},
                {"object", std::move(pod)}}}}
      .dump();
}

Json APod(Json owners = nullptr) {
  Json p = {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", Json::array()}}}};
  if (!owners.is_null()) p["metadata"]["ownerReferences"] = std::move(owners);
  return p;
}

class WebhookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok());
    WebhookOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.cert_file = pki_("server.crt");
    o.key_file = pki_("server.key");
    server_ = std::make_unique<WebhookServer>(o, &source_);
    ASSERT_TRUE(server_->Start().ok());
  }

  httplib::Result Post(const std::string& path, const std::string& body) {
    httplib::SSLClient c("127.0.0.1", server_->port());
    c.set_ca_cert_path(pki_("ca.crt").c_str());
    c.enable_server_certificate_verification(true);
    return c.Post(path, body, "application/json");
  }

  testing::TestPki pki_;
  OneNamespace source_;
  std::unique_ptr<WebhookServer> server_;
};

TEST_F(WebhookServerTest, PatchesAPodOfANamespaceWithADefaultQueue) {
  auto res = Post("/mutate/pods", Review("ml", APod()));
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200) << res->body;
  const Json out = Json::parse(res->body);
  EXPECT_EQ(out["response"]["uid"], "u-ml");
  EXPECT_EQ(out["response"]["allowed"], true);
  const Json patch =
      Json::parse(kube::Base64Decode(out["response"]["patch"].get<std::string>()).value());
  EXPECT_EQ(patch[0]["path"], "/spec/schedulerName");
  EXPECT_EQ(patch[0]["value"], "chamber");
  EXPECT_EQ(server_->mutated(), 1u);
}

TEST_F(WebhookServerTest, LeavesAPlainNamespacesPodAlone) {
  auto res = Post("/mutate/pods", Review("plain", APod()));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const Json out = Json::parse(res->body);
  EXPECT_EQ(out["response"]["allowed"], true);
  EXPECT_FALSE(out["response"].contains("patch"));
  EXPECT_EQ(server_->mutated(), 0u);
}

TEST_F(WebhookServerTest, RefusesWhenAnOwnerCannotBeRead) {
  auto res = Post("/mutate/pods", Review("plain", APod(Json::array({{{"apiVersion", "batch/v1"},
                                                                     {"kind", "Job"},
                                                                     {"name", "train"},
                                                                     {"uid", "1"},
                                                                     {"controller", true}}}))));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const Json out = Json::parse(res->body);
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 500);
  EXPECT_NE(out["response"]["status"]["message"].get<std::string>().find(
                "reading Job plain/train, owner of Pod plain/p"),
            std::string::npos);
  EXPECT_EQ(server_->refused(), 1u);
}

TEST_F(WebhookServerTest, AMalformedPodIsRefusedWith400NamingTheField) {
  Json pod = APod();
  pod["spec"]["schedulerName"] = 7;
  auto res = Post("/mutate/pods", Review("ml", pod));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const Json out = Json::parse(res->body);
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 400);
  EXPECT_NE(out["response"]["status"]["message"].get<std::string>().find("spec.schedulerName"),
            std::string::npos);
}

TEST_F(WebhookServerTest, ABadBodyGets400NamingTheField) {
  auto res =
      Post("/mutate/pods", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("field request: missing"), std::string::npos) << res->body;
  auto unknown = Post("/mutate/nodes", Review("ml", APod()));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

// Every answer is counted once, by its path and result, with the time it took: what each
// replica shows on its health port's /metrics.
TEST_F(WebhookServerTest, MetricsCountEachAnswerByPathAndResult) {
  ASSERT_TRUE(Post("/mutate/pods", Review("ml", APod())));     // mutated
  ASSERT_TRUE(Post("/mutate/pods", Review("plain", APod())));  // unchanged
  ASSERT_TRUE(Post("/mutate/pods",
                   Review("plain", APod(Json::array({{{"apiVersion", "batch/v1"},
                                                      {"kind", "Job"},
                                                      {"name", "train"},
                                                      {"uid", "1"},
                                                      {"controller", true}}})))));  // refused
  ASSERT_TRUE(Post("/mutate/pods", "{}"));                                          // bad_request
  EXPECT_EQ(server_->Handle("/mutate/workloads", "[]").first, 400);
  EXPECT_EQ(server_->Handle("/mutate/nodes", "{}").first, 404);
  EXPECT_EQ(server_->mutated(), 1u);
  EXPECT_EQ(server_->refused(), 1u);

  prometheus::TextWriter w;
  server_->WriteMetrics(w);
  const std::string text = w.Take();
  for (const char* line : {
           "chamber_webhook_requests_total{path=\"/mutate/pods\",result=\"mutated\"} 1\n",
           "chamber_webhook_requests_total{path=\"/mutate/pods\",result=\"unchanged\"} 1\n",
           "chamber_webhook_requests_total{path=\"/mutate/pods\",result=\"refused\"} 1\n",
           "chamber_webhook_requests_total{path=\"/mutate/pods\",result=\"bad_request\"} 1\n",
           "chamber_webhook_requests_total{path=\"/mutate/pods\",result=\"not_found\"} 0\n",
           "chamber_webhook_requests_total{path=\"/mutate/workloads\",result=\"bad_request\"} 1\n",
           "chamber_webhook_requests_total{path=\"/mutate/workloads\",result=\"mutated\"} 0\n",
           "chamber_webhook_requests_total{path=\"other\",result=\"not_found\"} 1\n",
           "chamber_webhook_certificate_reloads_total 0\n",
           "# TYPE chamber_webhook_request_seconds_total counter\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  const std::string seconds = "chamber_webhook_request_seconds_total{path=\"/mutate/pods\"} ";
  const size_t at = text.find(seconds);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(at + seconds.size())), 0.0) << text;
}

// The files replaced as a Secret volume's are on renewal: the next handshake serves the new
// certificate; a pair that does not match leaves the last good one in service.
TEST(WebhookServerCertificate, FollowsTheFilesAsTheyAreReplaced) {
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok());
  const std::filesystem::path dir = pki("live");
  std::filesystem::create_directories(dir);
  auto put = [&](const std::string& cert, const std::string& key) {
    // Written aside, then renamed over the served files.
    std::filesystem::copy_file(pki(cert), dir / "new.crt",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(pki(key), dir / "new.key",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(dir / "new.crt", dir / "tls.crt");
    std::filesystem::rename(dir / "new.key", dir / "tls.key");
  };
  put("server.crt", "server.key");
  OneNamespace source;
  WebhookOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.cert_file = (dir / "tls.crt").string();
  o.key_file = (dir / "tls.key").string();
  WebhookServer server(o, &source);
  ASSERT_TRUE(server.Start().ok());
  // Verified against the CA and the host name 127.0.0.1: only "server" names it.
  auto verified = [&] {
    httplib::SSLClient c("127.0.0.1", server.port());
    c.set_ca_cert_path(pki("ca.crt").c_str());
    c.enable_server_certificate_verification(true);
    return static_cast<bool>(c.Post("/mutate/pods", Review("ml", APod()), "application/json"));
  };
  EXPECT_TRUE(verified());
  put("elsewhere.crt", "elsewhere.key");  // same CA, another host name
  EXPECT_FALSE(verified()) << "the replaced certificate was not served";
  EXPECT_EQ(server.certificate_reloads(), 1);
  put("server.crt", "elsewhere.key");  // a key of another certificate: refused, kept
  EXPECT_FALSE(verified());
  EXPECT_EQ(server.certificate_reloads(), 1);
  put("server.crt", "server.key");
  EXPECT_TRUE(verified());
  EXPECT_EQ(server.certificate_reloads(), 2);
}

// Counts the reads that reach it; "gone" does not exist, "flaky" fails.
class Counting : public ObjectSource {
 public:
  Result<kube::ObjectMeta> Owner(const std::string& ns, const kube::OwnerReference& r) override {
    ++reads;
    if (r.name == "gone") return kube::ApiErrorStatus("GET " + r.name, 404, "");
    if (r.name == "flaky") return kube::ApiErrorStatus("GET " + r.name, 503, "");
    kube::ObjectMeta m;
    m.name = r.name;
    m.namespace_name = ns;
    m.uid = r.uid;
    return m;
  }
  Result<kube::ObjectMeta> Namespace(const std::string& name) override {
    ++reads;
    kube::ObjectMeta m;
    m.name = name;
    return m;
  }
  int reads = 0;
};

TEST(CachingObjectSource, KeepsAnswersForTheirTimeAndErrorsNot) {
  Counting inner;
  auto now = std::chrono::steady_clock::time_point{};
  CachingObjectSource cache(&inner, std::chrono::seconds(5), 3, [&] { return now; });
  const kube::OwnerReference job{"batch/v1", "Job", "train", "uid-1", true};
  EXPECT_TRUE(cache.Owner("ml", job).ok());
  EXPECT_TRUE(cache.Owner("ml", job).ok());
  EXPECT_TRUE(cache.Namespace("ml").ok());
  EXPECT_TRUE(cache.Namespace("ml").ok());
  EXPECT_EQ(inner.reads, 2);
  now += std::chrono::seconds(4);
  EXPECT_TRUE(cache.Owner("ml", job).ok());
  EXPECT_EQ(inner.reads, 2) << "within its time";
  now += std::chrono::seconds(2);
  EXPECT_TRUE(cache.Owner("ml", job).ok());
  EXPECT_TRUE(cache.Namespace("ml").ok());
  EXPECT_EQ(inner.reads, 4) << "past its time";
  // The same name with another UID (deleted and created again) is another object.
  EXPECT_EQ(cache.Owner("ml", {"batch/v1", "Job", "train", "uid-2", true})->uid, "uid-2");
  EXPECT_EQ(inner.reads, 5);
  // NotFound is an answer; a failure is not.
  const kube::OwnerReference gone{"batch/v1", "Job", "gone", "u", true};
  const kube::OwnerReference flaky{"batch/v1", "Job", "flaky", "u", true};
  EXPECT_TRUE(kube::IsNotFound(cache.Owner("ml", gone).status()));
  EXPECT_TRUE(kube::IsNotFound(cache.Owner("ml", gone).status()));
  EXPECT_FALSE(cache.Owner("ml", flaky).ok());
  EXPECT_FALSE(cache.Owner("ml", flaky).ok());
  EXPECT_EQ(inner.reads, 5 + 1 + 2);
  // Full at 3 entries when "gone" came: it started afresh, so "train" is read again.
  EXPECT_TRUE(cache.Owner("ml", job).ok());
  EXPECT_EQ(inner.reads, 9);
}

TEST(WebhookServerStart, NamesTheFlagOfAMissingCertificate) {
  OneNamespace source;
  WebhookOptions o;
  o.port = 0;
  o.cert_file = "/nonexistent/tls.crt";
  o.key_file = "/nonexistent/tls.key";
  WebhookServer server(o, &source);
  Status s = server.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--webhook-tls-cert-file /nonexistent/tls.crt"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace chamber::admission
