// The client against an in-process HTTP server that scripts the API server's failure modes.
#include "kube/client.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "kube/errors.h"
#include "kube/test/fake_apiserver.h"

namespace chamber::kube {
namespace {

using testing::FakeApiServer;

TransportOptions FastRetries() {
  TransportOptions o;
  o.backoff.initial = std::chrono::milliseconds(5);
  o.backoff.max = std::chrono::milliseconds(2000);
  o.backoff.max_retries = 4;
  o.seed = 1;
  return o;
}

std::unique_ptr<Client> MakeClient(const FakeApiServer& s, TransportOptions o = FastRetries()) {
  Result<std::unique_ptr<Client>> c = Client::Create(s.Config(), o);
  EXPECT_TRUE(c.ok());
  return std::move(*c);
}

Json ConfigMap(const std::string& name, const std::string& value = "v") {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"data", {{"k", value}}}};
}

const std::string kCms = "/api/v1/namespaces/default/configmaps";

TEST(ClientTest, CrudAndKeepAlive) {
  FakeApiServer s;
  auto c = MakeClient(s);
  Result<Json> created = c->Create(resources::kConfigMaps, "default", ConfigMap("a"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_FALSE((*created)["metadata"]["resourceVersion"].get<std::string>().empty());
  Result<Json> again = c->Create(resources::kConfigMaps, "default", ConfigMap("a"));
  EXPECT_TRUE(IsAlreadyExists(again.status()));
  for (int i = 0; i < 10; ++i) {
    Result<Json> got = c->Get(resources::kConfigMaps, "default", "a");
    ASSERT_TRUE(got.ok());
    EXPECT_EQ((*got)["data"]["k"], "v");
  }
  EXPECT_EQ(c->transport().connections_opened(), 1);  // one connection, kept alive
  Result<Json> missing = c->Get(resources::kConfigMaps, "default", "nope");
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("GET " + kCms + "/nope: HTTP 404 NotFound"),
            std::string::npos)
      << missing.status().message();
  Result<Json> patched =
      c->MergePatch(resources::kConfigMaps, "default", "a", {{"data", {{"k", "w"}}}});
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ((*patched)["data"]["k"], "w");
  EXPECT_TRUE(c->Delete(resources::kConfigMaps, "default", "a").ok());
  EXPECT_TRUE(IsNotFound(c->Delete(resources::kConfigMaps, "default", "a")));
}

TEST(ClientTest, RetriesTooManyRequestsHonouringRetryAfter) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  std::atomic<int> calls{0};
  s.set_intercept([&](const httplib::Request&, httplib::Response& res) {
    if (++calls > 1) return false;
    res.status = 429;
    res.set_header("Retry-After", "1");
    res.set_content(R"({"kind":"Status","reason":"TooManyRequests","code":429})",
                    "application/json");
    return true;
  });
  auto c = MakeClient(s);
  const auto start = std::chrono::steady_clock::now();
  Result<Json> got = c->Get(resources::kConfigMaps, "default", "a");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_GE(took, std::chrono::milliseconds(990));  // waited Retry-After, not the 5 ms backoff
}

TEST(ClientTest, RetriesServerErrorsOnlyWhenIdempotent) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  std::atomic<int> failures{0};
  s.set_intercept([&](const httplib::Request&, httplib::Response& res) {
    if (failures <= 0) return false;
    --failures;
    res.status = 500;
    res.set_content(R"({"kind":"Status","reason":"InternalError","message":"etcd hiccup"})",
                    "application/json");
    return true;
  });
  auto c = MakeClient(s);
  failures = 2;
  Result<Json> got = c->Get(resources::kConfigMaps, "default", "a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(failures.load(), 0);

  failures = 1;  // a create is not repeated on 500: it may have happened
  Result<Json> created = c->Create(resources::kConfigMaps, "default", ConfigMap("b"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(HttpCode(created.status()), 500);
  EXPECT_NE(created.status().message().find("etcd hiccup"), std::string::npos);

  failures = 100;  // retries run out
  Result<Json> exhausted = c->Get(resources::kConfigMaps, "default", "a");
  ASSERT_FALSE(exhausted.ok());
  EXPECT_EQ(exhausted.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failures.load(), 100 - 5);  // the first try and four retries
}

TEST(ClientTest, TruncatedJsonIsAClearError) {
  FakeApiServer s;
  s.set_intercept([](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"kind":"ConfigMap","metadata":{"name":"a")", "application/json");
    return true;
  });
  auto c = MakeClient(s);
  Result<Json> got = c->Get(resources::kConfigMaps, "default", "a");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("malformed JSON from the server"), std::string::npos);
  EXPECT_NE(got.status().message().find(kCms + "/a"), std::string::npos);
  Result<ObjectList> list = c->List(resources::kConfigMaps, "default");
  EXPECT_FALSE(list.ok());
}

TEST(ClientTest, UnreachableServerNamesTheServer) {
  RestConfig cfg;
  cfg.server = "http://127.0.0.1:1";
  cfg.source = "test config";
  TransportOptions o = FastRetries();
  o.backoff.max_retries = 1;
  auto c = Client::Create(cfg, o);
  ASSERT_TRUE(c.ok());
  Result<Json> got = (*c)->Get(resources::kPods, "default", "x");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("server unreachable"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("127.0.0.1:1"), std::string::npos);
  EXPECT_NE(got.status().message().find("test config"), std::string::npos);
}

TEST(ClientTest, ReReadsARotatedTokenFileAfter401) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  char tmpl[] = "/tmp/kube_token_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string token_file = tmpl;
  std::ofstream(token_file) << "old-token\n";
  std::atomic<bool> rotated{false};
  s.set_intercept([&](const httplib::Request& req, httplib::Response& res) {
    const std::string want = rotated ? "Bearer new-token" : "Bearer old-token";
    if (req.get_header_value("Authorization") == want) return false;
    res.status = 401;
    res.set_content(R"({"kind":"Status","reason":"Unauthorized","message":"token expired"})",
                    "application/json");
    return true;
  });
  RestConfig cfg = s.Config();
  cfg.token_file = token_file;
  auto c = Client::Create(cfg, FastRetries());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Get(resources::kConfigMaps, "default", "a").ok());
  // The server stops accepting the old token; the file has not rotated yet.
  rotated = true;
  Result<Json> expired = (*c)->Get(resources::kConfigMaps, "default", "a");
  ASSERT_FALSE(expired.ok());
  EXPECT_TRUE(IsUnauthorized(expired.status()));
  EXPECT_NE(expired.status().message().find("token expired"), std::string::npos);
  // Now the file rotates: the next 401 re-reads it and the request succeeds.
  std::ofstream(token_file) << "new-token\n";
  Result<Json> after = (*c)->Get(resources::kConfigMaps, "default", "a");
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(s.last_authorization(), "Bearer new-token");
  std::filesystem::remove(token_file);
}

TEST(ClientTest, QpsLimitPacesRequests) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  RestConfig cfg = s.Config();
  cfg.qps = 20;
  cfg.burst = 2;
  auto c = Client::Create(cfg, FastRetries());
  ASSERT_TRUE(c.ok());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*c)->Get(resources::kConfigMaps, "default", "a").ok());
  // Two from the burst, then four at 20 per second: at least 200 ms.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
}

TEST(ClientTest, ListPaginatesAndStartsOverWhenTheContinueTokenExpires) {
  FakeApiServer s;
  for (int i = 0; i < 25; ++i) s.Upsert(kCms, ConfigMap("cm-" + std::to_string(100 + i)));
  auto c = MakeClient(s);
  ListOptions lo;
  lo.limit = 10;
  Result<ObjectList> all = c->List(resources::kConfigMaps, "default", lo);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->items.size(), 25u);
  EXPECT_EQ(all->restarts, 0);
  EXPECT_EQ(s.lists.load(), 3);
  EXPECT_EQ(all->resource_version, std::to_string(s.resource_version()));

  s.expire_continue_once = 1;
  Result<ObjectList> again = c->List(resources::kConfigMaps, "default", lo);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->items.size(), 25u);  // no page twice, none lost
  EXPECT_EQ(again->restarts, 1);
  std::set<std::string> names;
  for (const Json& j : again->items) names.insert(j["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), 25u);
}

TEST(ClientTest, WatchStreamsEventsAndReturnsTheLastVersion) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  auto c = MakeClient(s);
  const std::string start = std::to_string(s.resource_version());
  std::vector<std::string> seen;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.Upsert(kCms, ConfigMap("b"));
    s.Upsert(kCms, ConfigMap("a", "changed"));
    s.Remove(kCms, "b");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s.CloseWatches();
  });
  WatchOptions wo;
  wo.resource_version = start;
  wo.allow_bookmarks = false;
  Result<std::string> rv = c->Watch(resources::kConfigMaps, "default", wo, [&](WatchEvent&& e) {
    seen.push_back(std::string(WatchEventTypeName(e.type)) + " " +
                   e.object["metadata"]["name"].get<std::string>());
  });
  writer.join();
  ASSERT_TRUE(rv.ok()) << rv.status().ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED b", "MODIFIED a", "DELETED b"}));
  EXPECT_EQ(*rv, std::to_string(s.resource_version()));
}

// A watch whose stream goes quiet (a connection that died without a word) is given up after
// the idle time-out rather than held until the server's own time-out.
TEST(ClientTest, ASilentWatchStreamIsGivenUp) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  TransportOptions o = FastRetries();
  o.stream_idle_timeout = std::chrono::seconds(2);
  auto c = MakeClient(s, o);
  WatchOptions wo;
  wo.resource_version = std::to_string(s.resource_version());
  wo.allow_bookmarks = false;
  wo.timeout_seconds = 60;  // the server would hold it a minute
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> rv = c->Watch(resources::kConfigMaps, "default", wo, [](WatchEvent&&) {});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(rv.ok());
  EXPECT_EQ(rv.status().code(), StatusCode::kUnavailable) << rv.status().ToString();
  EXPECT_NE(rv.status().message().find("the stream sent nothing for 2 s"), std::string::npos)
      << rv.status().message();
  EXPECT_GE(took, std::chrono::seconds(2));
  EXPECT_LT(took, std::chrono::seconds(20));
}

TEST(ClientTest, WatchReportsGoneAsHttpStatusAndAsErrorEvent) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a"));
  const std::string old = std::to_string(s.resource_version() - 1);
  s.Compact();
  auto c = MakeClient(s);
  WatchOptions wo;
  wo.resource_version = old;
  Result<std::string> http = c->Watch(resources::kConfigMaps, "default", wo, [](WatchEvent&&) {});
  ASSERT_FALSE(http.ok());
  EXPECT_TRUE(IsGone(http.status())) << http.status().ToString();
  s.gone_as_error_event = true;
  Result<std::string> event = c->Watch(resources::kConfigMaps, "default", wo, [](WatchEvent&&) {});
  ASSERT_FALSE(event.ok());
  EXPECT_TRUE(IsGone(event.status())) << event.status().ToString();
  EXPECT_NE(event.status().message().find("ERROR event"), std::string::npos);
}

TEST(ClientTest, WatchWithTruncatedOrMalformedStreamFailsClearly) {
  FakeApiServer s;
  std::string body;
  s.set_intercept([&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/json");
    return true;
  });
  auto c = MakeClient(s);
  body = R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})"
         "\n"
         R"({"type":"MODIFIED","object":{"metadata":{"name":"a","reso)";
  int events = 0;
  Result<std::string> truncated =
      c->Watch(resources::kConfigMaps, "default", {}, [&](WatchEvent&&) { ++events; });
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(events, 1);
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status().message();
  body = "{not json}\n";
  Result<std::string> malformed =
      c->Watch(resources::kConfigMaps, "default", {}, [&](WatchEvent&&) { ++events; });
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("malformed JSON"), std::string::npos);
  body = R"({"type":"EXPLODED","object":{}})"
         "\n";
  Result<std::string> unknown =
      c->Watch(resources::kConfigMaps, "default", {}, [&](WatchEvent&&) { ++events; });
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("EXPLODED"), std::string::npos);
}

TEST(ClientTest, WatchDecoderHandlesLinesSplitAnywhere) {
  const std::string stream =
      R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})"
      "\n";
  for (size_t split = 0; split <= stream.size(); ++split) {
    WatchStreamDecoder d("t");
    std::vector<WatchEventType> types;
    auto cb = [&](WatchEvent&& e) { types.push_back(e.type); };
    ASSERT_TRUE(d.Feed(std::string_view(stream).substr(0, split), cb).ok());
    ASSERT_TRUE(d.Feed(std::string_view(stream).substr(split), cb).ok());
    ASSERT_TRUE(d.Finish().ok());
    EXPECT_EQ(types,
              (std::vector<WatchEventType>{WatchEventType::kAdded, WatchEventType::kBookmark}));
    EXPECT_EQ(d.resource_version(), "9");
  }
}

TEST(ClientTest, UpdateWithRetryReappliesTheMutationOnConflict) {
  FakeApiServer s;
  s.Upsert(kCms, ConfigMap("a", "0"));
  auto c = MakeClient(s);
  int attempts = 0;
  Result<Json> r = c->UpdateWithRetry(resources::kConfigMaps, "default", "a", [&](Json& obj) {
    if (++attempts == 1) {  // someone else writes between our get and our update
      Json other = s.Object(kCms, "a");
      other["data"]["other"] = "x";
      s.Upsert(kCms, other);
    }
    obj["data"]["k"] = std::to_string(std::stoi(obj["data"]["k"].get<std::string>()) + 1);
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ((*r)["data"]["k"], "1");
  EXPECT_EQ((*r)["data"]["other"], "x");  // the other writer's change survived

  Json stale = s.Object(kCms, "a");
  stale["metadata"]["resourceVersion"] = "1";
  Result<Json> conflict = c->Update(resources::kConfigMaps, "default", stale);
  EXPECT_TRUE(IsConflict(conflict.status())) << conflict.status().ToString();
}

TEST(ClientTest, EvictionBlockedByADisruptionBudgetIsDistinct) {
  FakeApiServer s;
  std::atomic<int> evictions{0};
  s.set_intercept([&](const httplib::Request& req, httplib::Response& res) {
    if (req.path.find("/eviction") == std::string::npos) return false;
    ++evictions;
    const Json body = Json::parse(req.body);
    EXPECT_EQ(body["kind"], "Eviction");
    EXPECT_EQ(body["apiVersion"], "policy/v1");
    EXPECT_EQ(body["deleteOptions"]["preconditions"]["uid"], "u-1");
    res.status = 429;
    res.set_content(
        R"({"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod as it would violate the pod's disruption budget."})",
        "application/json");
    return true;
  });
  auto c = MakeClient(s);
  DeleteOptions opts;
  opts.uid = "u-1";
  Status st = c->Evict("default", "p", opts);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(IsEvictionBlocked(st));
  EXPECT_TRUE(IsTooManyRequests(st));
  EXPECT_NE(st.message().find("disruption budget"), std::string::npos);
  EXPECT_EQ(evictions.load(), 1);  // not retried
}

TEST(ClientTest, BindingApplyJsonPatchAndEventRequestsAreWellFormed) {
  FakeApiServer s;
  std::vector<std::pair<std::string, Json>> seen;
  std::mutex mu;
  s.set_intercept([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    Json body = Json::parse(req.body, nullptr, false);
    seen.emplace_back(
        req.method + " " + req.path + " " + req.get_header_value("Content-Type") +
            (req.has_param("fieldManager") ? " fm=" + req.get_param_value("fieldManager") +
                                                 " force=" + req.get_param_value("force")
                                           : ""),
        body);
    res.status = 201;
    res.set_content(R"({"kind":"X","metadata":{"name":"x"}})", "application/json");
    return true;
  });
  auto c = MakeClient(s);
  ASSERT_TRUE(c->Bind("ml", "p", "uid-7", "gpu-1").ok());
  ASSERT_TRUE(
      c->Apply(resources::kConfigMaps, "default", "a", {{"data", {{"k", "v"}}}}, {"chamber", true})
          .ok());
  ASSERT_TRUE(
      c->JsonPatch(resources::kPods, "ml", "p",
                   Json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", "uid-7"}},
                                {{"op", "replace"}, {"path", "/spec/x"}, {"value", 1}}}),
                   "status")
          .ok());
  Json pod = {{"kind", "Pod"},
              {"apiVersion", "v1"},
              {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "uid-7"}}}};
  ASSERT_TRUE(c->CreateEvent({pod, "Preempted", "made room", "Warning"}).ok());
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].first, "POST /api/v1/namespaces/ml/pods/p/binding application/json");
  EXPECT_EQ(seen[0].second["target"]["name"], "gpu-1");
  EXPECT_EQ(seen[0].second["metadata"]["uid"], "uid-7");
  EXPECT_EQ(seen[1].first,
            "PATCH /api/v1/namespaces/default/configmaps/a application/apply-patch+yaml "
            "fm=chamber force=true");
  EXPECT_EQ(seen[1].second["kind"], "ConfigMap");
  EXPECT_EQ(seen[1].second["metadata"]["name"], "a");
  EXPECT_EQ(seen[2].first, "PATCH /api/v1/namespaces/ml/pods/p/status application/json-patch+json");
  EXPECT_EQ(seen[2].second[0]["op"], "test");
  EXPECT_EQ(seen[3].first, "POST /api/v1/namespaces/ml/events application/json");
  EXPECT_EQ(seen[3].second["involvedObject"]["uid"], "uid-7");
  EXPECT_EQ(seen[3].second["reason"], "Preempted");
  EXPECT_EQ(seen[3].second["type"], "Warning");
  EXPECT_EQ(seen[3].second["count"], 1);
}

TEST(ClientTest, Paths) {
  EXPECT_EQ(ResourcePath(resources::kPods, "ml", "p", "binding"),
            "/api/v1/namespaces/ml/pods/p/binding");
  EXPECT_EQ(ResourcePath(resources::kNodes, "ml", "n"), "/api/v1/nodes/n");
  EXPECT_EQ(ResourcePath(resources::kLeases, "kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
  EXPECT_EQ(ResourcePath(resources::kPods, ""), "/api/v1/pods");
  EXPECT_EQ(UrlEncode("app=x,tier!=y"), "app%3Dx%2Ctier%21%3Dy");
}

TEST(ClientTest, ParsesServerUrls) {
  ServerUrl u = ParseServerUrl("https://[::1]:6443/k8s/clusters/c-1/").value();
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.host, "[::1]");
  EXPECT_EQ(u.port, "6443");
  EXPECT_EQ(u.path, "/k8s/clusters/c-1");
  EXPECT_EQ(u.authority, "[::1]:6443");
  u = ParseServerUrl("https://api.example.com").value();
  EXPECT_EQ(u.host, "api.example.com");
  EXPECT_EQ(u.port, "");
  EXPECT_EQ(u.path, "");
  for (const char* bad : {"api.example.com", "https://", "https://[::1",
                          "https://h:", "https://h:x1", "https://:443"}) {
    Result<ServerUrl> r = ParseServerUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

TEST(ClientTest, TlsServerNameIsIgnoredForPlainHttp) {
  FakeApiServer s;
  s.Upsert("/api/v1/namespaces", Json{{"metadata", {{"name", "ml"}}}});
  RestConfig cfg = s.Config();
  cfg.tls_server_name = "kubernetes.default.svc";
  std::unique_ptr<Client> c = Client::Create(cfg, FastRetries()).value();
  Result<Json> ns = c->Get(resources::kNamespaces, "", "ml");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
}

}  // namespace
}  // namespace chamber::kube
