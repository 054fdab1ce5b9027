// The client against a real kube-apiserver and etcd (the ctest fixture "controlplane" starts
// them and sets CHAMBER_TEST_KUBECONFIG to an admin kubeconfig).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "common/file.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "kube/leader_election.h"

namespace chamber::kube {
namespace {

using namespace std::chrono_literals;

template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

// The etcd client URL of the test control plane: CHAMBER_ETCD_URL in its env file when the
// fixture writes one, else read from the etcd process's command line (pid in `pids`).
std::string EtcdUrl() {
  const char* dir = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR");
  if (dir == nullptr) return "";
  Result<std::string> env = ReadFile(std::string(dir) + "/env");
  if (env.ok()) {
    const size_t at = env->find("CHAMBER_ETCD_URL=");
    if (at != std::string::npos) {
      const size_t start = at + std::string("CHAMBER_ETCD_URL=").size();
      return env->substr(start, env->find('\n', start) - start);
    }
  }
  Result<std::string> pids = ReadFile(std::string(dir) + "/pids");
  if (!pids.ok()) return "";
  std::istringstream in(*pids);
  std::string name, pid, bin;
  while (in >> name >> pid) {
    std::getline(in, bin);
    if (name != "etcd") continue;
    Result<std::string> cmdline = ReadFile("/proc/" + pid + "/cmdline");
    if (!cmdline.ok()) return "";
    std::vector<std::string> args;
    std::string arg;
    for (char ch : *cmdline) {
      if (ch == '\0') {
        args.push_back(std::move(arg));
        arg.clear();
      } else {
        arg += ch;
      }
    }
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--listen-client-urls") return args[i + 1].substr(0, args[i + 1].find(','));
  }
  return "";
}

// Compacts etcd's history up to its current revision (through etcd's JSON gateway), so that
// watches from older resourceVersions fail with 410 where the apiserver reads etcd directly.
Status CompactEtcd() {
  const std::string url = EtcdUrl();
  if (url.empty()) return Status::NotFound("etcd URL of the test control plane not found");
  RestConfig cfg;
  cfg.server = url;
  cfg.source = "etcd";
  cfg.qps = 0;
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, Transport::Create(cfg));
  HttpRequest range;
  range.method = "POST";
  range.path = "/v3/kv/range";
  range.body = R"({"key":"AA=="})";
  CHAMBER_ASSIGN_OR_RETURN(HttpResponse r, t->Do(range));
  CHAMBER_ASSIGN_OR_RETURN(Json j, ParseJson(r.body, "etcd range"));
  HttpRequest compact;
  compact.method = "POST";
  compact.path = "/v3/kv/compaction";
  compact.body = Json{{"revision", j["header"]["revision"]}, {"physical", true}}.dump();
  CHAMBER_ASSIGN_OR_RETURN(HttpResponse c, t->Do(compact));
  if (c.code != 200)
    return Status::Unavailable("etcd compaction: HTTP " + std::to_string(c.code) + " " + c.body);
  return Status::Ok();
}

class KubeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* kc = std::getenv("CHAMBER_TEST_KUBECONFIG");
    if (kc == nullptr || *kc == '\0') GTEST_SKIP() << "CHAMBER_TEST_KUBECONFIG is not set";
    Result<RestConfig> cfg = LoadKubeconfig(kc);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    config_ = *cfg;
    config_.qps = 0;  // tests create thousands of objects
    Result<std::unique_ptr<Client>> c = Client::Create(config_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
    std::random_device rd;
    ns_ = "kube-it-" + std::to_string(rd() % 1'000'000);
    Result<Json> created = client_->Create(
        resources::kNamespaces, "",
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  void TearDown() override {
    if (client_) (void)client_->Delete(resources::kNamespaces, "", ns_);
  }

  Json ConfigMap(const std::string& name, const std::string& value = "v") const {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"data", {{"k", value}}}};
  }

  Json EventJson(const std::string& name, const std::string& message = "m") const {
    return {{"apiVersion", "v1"},
            {"kind", "Event"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"involvedObject", {{"kind", "ConfigMap"}, {"name", "x"}, {"namespace", ns_}}},
            {"reason", "Test"},
            {"message", message},
            {"type", "Normal"}};
  }

  RestConfig config_;
  std::unique_ptr<Client> client_;
  std::string ns_;
};

TEST_F(KubeIntegrationTest, Crud) {
  Result<Json> c = client_->Create(resources::kConfigMaps, ns_, ConfigMap("a"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(
      IsAlreadyExists(client_->Create(resources::kConfigMaps, ns_, ConfigMap("a")).status()));
  Result<Json> got = client_->Get(resources::kConfigMaps, ns_, "a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["data"]["k"], "v");
  Json upd = *got;
  upd["data"]["k"] = "w";
  Result<Json> updated = client_->Update(resources::kConfigMaps, ns_, upd);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_TRUE(IsConflict(client_->Update(resources::kConfigMaps, ns_, upd).status()));  // stale
  Result<Json> merged =
      client_->MergePatch(resources::kConfigMaps, ns_, "a", {{"data", {{"m", "1"}}}});
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ((*merged)["data"]["k"], "w");
  EXPECT_EQ((*merged)["data"]["m"], "1");
  // JSON patch whose test precondition holds, then one whose test fails.
  const std::string uid = (*merged)["metadata"]["uid"];
  Result<Json> patched =
      client_->JsonPatch(resources::kConfigMaps, ns_, "a",
                         Json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", uid}},
                                      {{"op", "replace"}, {"path", "/data/k"}, {"value", "x"}}}));
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["data"]["k"], "x");
  Result<Json> failed =
      client_->JsonPatch(resources::kConfigMaps, ns_, "a",
                         Json::array({{{"op", "test"}, {"path", "/data/k"}, {"value", "not-x"}},
                                      {{"op", "replace"}, {"path", "/data/k"}, {"value", "y"}}}));
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(IsInvalid(failed.status())) << failed.status().ToString();
  // Delete with a wrong UID precondition fails, with the right one succeeds.
  DeleteOptions wrong;
  wrong.uid = "00000000-0000-0000-0000-000000000000";
  EXPECT_TRUE(IsConflict(client_->Delete(resources::kConfigMaps, ns_, "a", wrong)));
  DeleteOptions right;
  right.uid = uid;
  right.grace_period_seconds = 0;
  EXPECT_TRUE(client_->Delete(resources::kConfigMaps, ns_, "a", right).ok());
  EXPECT_TRUE(IsNotFound(client_->Get(resources::kConfigMaps, ns_, "a").status()));
  // An Event about a ConfigMap.
  Result<Json> cm = client_->Create(resources::kConfigMaps, ns_, ConfigMap("ev"));
  ASSERT_TRUE(cm.ok());
  Result<Json> ev = client_->CreateEvent({*cm, "Tested", "integration test", "Normal"});
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  EXPECT_EQ((*ev)["involvedObject"]["uid"], (*cm)["metadata"]["uid"]);
}

TEST_F(KubeIntegrationTest, ListPaginatesOver5000Objects) {
  constexpr int kCount = 5000;
  constexpr int kThreads = 8;
  std::atomic<int> next{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i; (i = next++) < kCount;)
        if (!client_->Create(resources::kConfigMaps, ns_, ConfigMap("cm-" + std::to_string(i)))
                 .ok())
          ++errors;
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors.load(), 0);
  ListOptions lo;
  lo.limit = 500;
  Result<ObjectList> list = client_->List(resources::kConfigMaps, ns_, lo);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::set<std::string> names;
  for (const Json& j : list->items)
    if (j["metadata"]["name"].get<std::string>().rfind("cm-", 0) == 0)
      names.insert(j["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(list->restarts, 0);
  EXPECT_FALSE(list->resource_version.empty());
}

TEST_F(KubeIntegrationTest, WatchStreamsEventsAndBookmarksAndTooOldVersionIsGone) {
  Result<ObjectList> list = client_->List(resources::kConfigMaps, ns_);
  ASSERT_TRUE(list.ok());
  std::thread writer([&] {
    std::this_thread::sleep_for(300ms);
    (void)client_->Create(resources::kConfigMaps, ns_, ConfigMap("w1"));
    (void)client_->MergePatch(resources::kConfigMaps, ns_, "w1", {{"data", {{"k", "2"}}}});
    (void)client_->Delete(resources::kConfigMaps, ns_, "w1");
  });
  std::vector<std::string> seen;
  int bookmarks = 0;
  WatchOptions wo;
  wo.resource_version = list->resource_version;
  wo.timeout_seconds = 5;  // the apiserver sends a bookmark shortly before the timeout
  // Only this test's object: kube-controller-manager adds kube-root-ca.crt to new namespaces
  // at a moment of its own.
  wo.field_selector = "metadata.name=w1";
  Result<std::string> rv = client_->Watch(resources::kConfigMaps, ns_, wo, [&](WatchEvent&& e) {
    if (e.type == WatchEventType::kBookmark) {
      ++bookmarks;
      return;
    }
    seen.push_back(std::string(WatchEventTypeName(e.type)) + " " +
                   e.object["metadata"]["name"].get<std::string>());
  });
  writer.join();
  ASSERT_TRUE(rv.ok()) << rv.status().ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED w1", "MODIFIED w1", "DELETED w1"}));
  EXPECT_GE(bookmarks, 1);
  EXPECT_GT(std::stoll(*rv), std::stoll(list->resource_version));

  // Events are not in the apiserver's watch cache, so a watch on them reads etcd: after a
  // compaction an old version is gone.
  ASSERT_TRUE(client_->Create(resources::kEvents, ns_, EventJson("e0")).ok());
  Status compacted = CompactEtcd();
  ASSERT_TRUE(compacted.ok()) << compacted.ToString();
  WatchOptions old;
  old.resource_version = "1";
  old.timeout_seconds = 5;
  Result<std::string> gone = client_->Watch(resources::kEvents, ns_, old, [](WatchEvent&&) {});
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(IsGone(gone.status())) << gone.status().ToString();
}

TEST_F(KubeIntegrationTest, InformerRelistsAfterGoneWithoutLostOrDuplicatedEvents) {
  // Events: the apiserver serves their watches from etcd (no watch cache), so compacting etcd
  // makes an old resourceVersion really expire.
  auto name = [](const char* p, int i) { return std::string(p) + std::to_string(i); };
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(client_->Create(resources::kEvents, ns_, EventJson(name("o-", i))).ok());
  std::mutex mu;
  std::map<std::string, int> adds, deletes;
  Informer<Event>::Handlers h;
  h.on_add = [&](const Event& o) {
    std::lock_guard<std::mutex> lock(mu);
    ++adds[o.metadata.name];
  };
  h.on_delete = [&](const Event& o) {
    std::lock_guard<std::mutex> lock(mu);
    ++deletes[o.metadata.name];
  };
  InformerOptions io;
  io.type = resources::kEvents;
  io.namespace_name = ns_;
  io.page_size = 20;
  Informer<Event> inf(client_.get(), io, h);
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  const std::string synced_at = inf.last_resource_version();
  for (int i = 0; i < 10; ++i) (void)client_->Delete(resources::kEvents, ns_, name("o-", i));
  for (int i = 20; i < 25; ++i)
    (void)client_->MergePatch(resources::kEvents, ns_, name("o-", i), {{"message", "changed"}});
  Status compacted = CompactEtcd();
  ASSERT_TRUE(compacted.ok()) << compacted.ToString();
  // Resume from the version of the first list, now compacted away: 410, then a fresh list.
  inf.RestartWatchFrom(synced_at);
  for (int i = 10; i < 20; ++i) (void)client_->Delete(resources::kEvents, ns_, name("o-", i));
  for (int i = 0; i < 10; ++i)
    (void)client_->Create(resources::kEvents, ns_, EventJson(name("n-", i)));
  ASSERT_TRUE(Eventually([&] { return inf.stats().gone >= 1 && inf.stats().lists >= 2; }, 10s))
      << "gone " << inf.stats().gone << " lists " << inf.stats().lists;
  Result<ObjectList> truth = client_->List(resources::kEvents, ns_);
  ASSERT_TRUE(truth.ok());
  std::set<std::string> want;
  for (const Json& j : truth->items)
    want.insert(ns_ + "/" + j["metadata"]["name"].get<std::string>());
  EXPECT_EQ(want.size(), 40u);
  ASSERT_TRUE(Eventually(
      [&] {
        const auto keys = inf.Keys();
        return std::set<std::string>(keys.begin(), keys.end()) == want;
      },
      10s));
  EXPECT_EQ(inf.Get(ns_ + "/o-20")->message, "changed");
  inf.Stop();
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(adds[name("o-", i)], 1) << i;
    EXPECT_EQ(deletes[name("o-", i)], 1) << i;
  }
  for (int i = 20; i < 50; ++i) {
    EXPECT_EQ(adds[name("o-", i)], 1) << i;
    EXPECT_EQ(deletes[name("o-", i)], 0) << i;
  }
  for (int i = 0; i < 10; ++i) EXPECT_EQ(adds[name("n-", i)], 1) << i;
}

TEST_F(KubeIntegrationTest, UpdateWithRetryUnderContention) {
  ASSERT_TRUE(client_->Create(resources::kConfigMaps, ns_, ConfigMap("counter", "0")).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        Result<Json> r = client_->UpdateWithRetry(
            resources::kConfigMaps, ns_, "counter",
            [](Json& obj) {
              obj["data"]["k"] = std::to_string(std::stoi(obj["data"]["k"].get<std::string>()) + 1);
              return Status::Ok();
            },
            50);
        if (!r.ok()) ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ((*client_->Get(resources::kConfigMaps, ns_, "counter"))["data"]["k"], "40");
}

TEST_F(KubeIntegrationTest, BindingEvictionAndStatus) {
  const std::string node = ns_ + "-node";
  ASSERT_TRUE(client_
                  ->Create(resources::kNodes, "",
                           {{"apiVersion", "v1"},
                            {"kind", "Node"},
                            {"metadata", {{"name", node}}},
                            {"status", {{"capacity", {{"nvidia.com/gpu", "8"}, {"cpu", "64"}}}}}})
                  .ok());
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", ns_}, {"labels", {{"app", "x"}}}}},
              {"spec",
               {{"schedulerName", "chamber"},
                {"containers", Json::array({{{"name", "c"},
                                             {"image", "busybox"},
                                             {"resources",
                                              {{"requests", {{"nvidia.com/gpu", "1"}}},
                                               {"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}};
  Result<Json> created = client_->Create(resources::kPods, ns_, pod);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string uid = (*created)["metadata"]["uid"];
  Status wrong = client_->Bind(ns_, "p", "00000000-0000-0000-0000-000000000000", node);
  EXPECT_FALSE(wrong.ok());
  Status bound = client_->Bind(ns_, "p", uid, node);
  ASSERT_TRUE(bound.ok()) << bound.ToString();
  Result<Json> got = client_->Get(resources::kPods, ns_, "p");
  ASSERT_TRUE(got.ok());
  Result<Pod> typed = Pod::FromJson(*got);
  ASSERT_TRUE(typed.ok());
  EXPECT_EQ(typed->node_name, node);
  EXPECT_EQ(typed->Requests().Get("nvidia.com/gpu"), 1);
  EXPECT_TRUE(IsConflict(client_->Bind(ns_, "p", uid, node)));  // already bound

  // Mark it running and ready through the status subresource, so the budget counts it.
  Json status = *got;
  status["status"]["phase"] = "Running";
  status["status"]["conditions"] = Json::array({{{"type", "Ready"}, {"status", "True"}}});
  Result<Json> st = client_->UpdateStatus(resources::kPods, ns_, status);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)["status"]["phase"], "Running");

  ASSERT_TRUE(
      client_
          ->Create(
              resources::kPodDisruptionBudgets, ns_,
              {{"apiVersion", "policy/v1"},
               {"kind", "PodDisruptionBudget"},
               {"metadata", {{"name", "pdb"}, {"namespace", ns_}}},
               {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "x"}}}}}}}})
          .ok());
  Status evicted = client_->Evict(ns_, "p");
  ASSERT_FALSE(evicted.ok());
  EXPECT_TRUE(IsEvictionBlocked(evicted)) << evicted.ToString();
  EXPECT_TRUE(client_->Get(resources::kPods, ns_, "p").ok());  // still there
  (void)client_->Delete(resources::kNodes, "", node);
}

TEST_F(KubeIntegrationTest, ServerSideApplyConflictBetweenManagers) {
  Result<Json> a = client_->Apply(resources::kConfigMaps, ns_, "ssa", {{"data", {{"k", "a"}}}},
                                  {"manager-a", false});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Result<Json> b = client_->Apply(resources::kConfigMaps, ns_, "ssa", {{"data", {{"k", "b"}}}},
                                  {"manager-b", false});
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(IsConflict(b.status())) << b.status().ToString();
  EXPECT_NE(b.status().message().find("manager-a"), std::string::npos);
  Result<Json> forced = client_->Apply(resources::kConfigMaps, ns_, "ssa", {{"data", {{"k", "b"}}}},
                                       {"manager-b", true});
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ((*forced)["data"]["k"], "b");
}

TEST_F(KubeIntegrationTest, LeaderElectionHandsOver) {
  auto make = [&](const std::string& id, std::atomic<bool>* leading, bool release) {
    LeaderElectionConfig c;
    c.lease_namespace = ns_;
    c.lease_name = "chamber";
    c.identity = id;
    c.lease_duration = 3s;
    c.renew_deadline = 2s;
    c.retry_period = 500ms;
    c.release_on_cancel = release;
    c.on_started_leading = [leading](CancellationToken t) {
      *leading = true;
      t.WaitFor(1h);
      *leading = false;
    };
    return LeaderElector::Create(client_.get(), c).value();
  };
  std::atomic<bool> a_leads{false}, b_leads{false}, c_leads{false};
  auto a = make("a", &a_leads, /*release=*/false);
  auto b = make("b", &b_leads, /*release=*/true);
  CancellationToken stop_a, stop_b, stop_c;
  std::thread ta([&] { a->Run(stop_a); });
  ASSERT_TRUE(Eventually([&] { return a_leads.load(); }, 5s));
  std::thread tb([&] { b->Run(stop_b); });
  std::this_thread::sleep_for(4s);
  EXPECT_FALSE(b_leads.load());
  // The leader dies without releasing: b takes over once the lease has not changed for its
  // duration (plus at most a retry period).
  const auto died = std::chrono::steady_clock::now();
  stop_a.Cancel();
  ta.join();
  ASSERT_TRUE(Eventually([&] { return b_leads.load(); }, 8s));
  const auto handover = std::chrono::steady_clock::now() - died;
  EXPECT_LT(handover, 3s + 1500ms);
  Result<Json> lease = client_->Get(resources::kLeases, ns_, "chamber");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
  // b shuts down and releases: c takes over within a retry period.
  auto c = make("c", &c_leads, true);
  std::thread tc([&] { c->Run(stop_c); });
  std::this_thread::sleep_for(1s);
  EXPECT_FALSE(c_leads.load());
  const auto released = std::chrono::steady_clock::now();
  stop_b.Cancel();
  tb.join();
  ASSERT_TRUE(Eventually([&] { return c_leads.load(); }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - released, 1500ms);
  stop_c.Cancel();
  tc.join();
  lease = client_->Get(resources::kLeases, ns_, "chamber");
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE((*lease)["spec"].contains("holderIdentity"));  // c released on shutdown
}

TEST_F(KubeIntegrationTest, RotatedTokenFileKeepsTheClientWorking) {
  ASSERT_TRUE(client_
                  ->Create(resources::kServiceAccounts, ns_,
                           {{"apiVersion", "v1"},
                            {"kind", "ServiceAccount"},
                            {"metadata", {{"name", "reader"}, {"namespace", ns_}}}})
                  .ok());
  // Read-only access to ConfigMaps (the built-in "view" role is aggregated by the
  // controller-manager, which this test does not rely on).
  const ResourceType cluster_roles{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole",
                                   false};
  ASSERT_TRUE(
      client_
          ->Create(cluster_roles, "",
                   {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRole"},
                    {"metadata", {{"name", ns_ + "-reader"}}},
                    {"rules", Json::array({{{"apiGroups", Json::array({""})},
                                            {"resources", Json::array({"configmaps"})},
                                            {"verbs", Json::array({"get", "list", "watch"})}}})}})
          .ok());
  ASSERT_TRUE(client_
                  ->Create(resources::kClusterRoleBindings, "",
                           {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                            {"kind", "ClusterRoleBinding"},
                            {"metadata", {{"name", ns_ + "-reader"}}},
                            {"roleRef",
                             {{"apiGroup", "rbac.authorization.k8s.io"},
                              {"kind", "ClusterRole"},
                              {"name", ns_ + "-reader"}}},
                            {"subjects", Json::array({{{"kind", "ServiceAccount"},
                                                       {"name", "reader"},
                                                       {"namespace", ns_}}})}})
                  .ok());
  ASSERT_TRUE(client_->Create(resources::kConfigMaps, ns_, ConfigMap("visible")).ok());
  // Tokens bound to Secrets: deleting the Secret revokes its token.
  auto secret = [&](const std::string& name) {
    Result<Json> s = client_->Create({"", "v1", "secrets", "Secret", true}, ns_,
                                     {{"apiVersion", "v1"},
                                      {"kind", "Secret"},
                                      {"metadata", {{"name", name}, {"namespace", ns_}}}});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return Json{
        {"kind", "Secret"}, {"apiVersion", "v1"}, {"name", name}, {"uid", (*s)["metadata"]["uid"]}};
  };
  Result<std::string> t1 = client_->CreateToken(ns_, "reader", 600, secret("s1"));
  ASSERT_TRUE(t1.ok()) << t1.status().ToString();
  char tmpl[] = "/tmp/kube_it_token_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string token_file = tmpl;
  std::ofstream(token_file) << *t1;

  RestConfig sa = config_;
  sa.client_cert_pem.clear();
  sa.client_key_pem.clear();
  sa.token.clear();
  sa.token_file = token_file;
  auto reader = Client::Create(sa).value();
  Result<Json> got = Status::Internal("not tried");
  // The RBAC authorizer sees the new binding through its informers: allow it a moment.
  ASSERT_TRUE(Eventually(
      [&] {
        got = reader->Get(resources::kConfigMaps, ns_, "visible");
        return got.ok();
      },
      10s))
      << got.status().ToString();
  EXPECT_TRUE(IsForbidden(reader->Delete(resources::kConfigMaps, ns_, "visible")));  // view only

  // Rotate: a new token in the file, the old one revoked.
  Result<std::string> t2 = client_->CreateToken(ns_, "reader", 600, secret("s2"));
  ASSERT_TRUE(t2.ok());
  std::ofstream(token_file) << *t2;
  ASSERT_TRUE(client_->Delete({"", "v1", "secrets", "Secret", true}, ns_, "s1").ok());
  ASSERT_TRUE(Eventually(
      [&] {
        RestConfig old = sa;
        old.token_file.clear();
        old.token = *t1;
        auto probe = Client::Create(old).value();
        return IsUnauthorized(probe->Get(resources::kConfigMaps, ns_, "visible").status());
      },
      30s));  // the apiserver caches successful token reviews for 10 s
  got = reader->Get(resources::kConfigMaps, ns_, "visible");
  EXPECT_TRUE(got.ok()) << got.status().ToString();

  // An invalid token: a clear Unauthorized error.
  RestConfig bogus = sa;
  bogus.token_file.clear();
  bogus.token = "not-a-token";
  Result<Json> denied = Client::Create(bogus).value()->Get(resources::kConfigMaps, ns_, "visible");
  EXPECT_TRUE(IsUnauthorized(denied.status())) << denied.status().ToString();
  (void)client_->Delete(resources::kClusterRoleBindings, "", ns_ + "-reader");
  (void)client_->Delete(cluster_roles, "", ns_ + "-reader");
  std::filesystem::remove(token_file);
}

TEST_F(KubeIntegrationTest, BadCertificateAndUnreachableServerAreClearErrors) {
  TransportOptions once;
  once.backoff.max_retries = 0;
  RestConfig wrong_ca = config_;
  wrong_ca.ca_pem = config_.client_cert_pem;  // a real certificate, but not the server's CA
  Result<Json> untrusted =
      Client::Create(wrong_ca, once).value()->Get(resources::kNamespaces, "", ns_);
  ASSERT_FALSE(untrusted.ok());
  EXPECT_EQ(untrusted.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(untrusted.status().message().find("TLS"), std::string::npos)
      << untrusted.status().message();

  RestConfig garbage_ca = config_;
  garbage_ca.ca_pem = "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n";
  Result<Json> garbage =
      Client::Create(garbage_ca, once).value()->Get(resources::kNamespaces, "", ns_);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("TLS"), std::string::npos)
      << garbage.status().message();

  RestConfig no_cert = config_;
  no_cert.client_cert_pem.clear();
  no_cert.client_key_pem.clear();
  Result<Json> anonymous =
      Client::Create(no_cert, once).value()->Get(resources::kNamespaces, "", ns_);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_TRUE(IsForbidden(anonymous.status()) || IsUnauthorized(anonymous.status()))
      << anonymous.status().ToString();

  RestConfig closed = config_;
  closed.server = "https://127.0.0.1:1";
  Result<Json> unreachable =
      Client::Create(closed, once).value()->Get(resources::kNamespaces, "", ns_);
  ASSERT_FALSE(unreachable.ok());
  EXPECT_NE(unreachable.status().message().find("server unreachable"), std::string::npos)
      << unreachable.status().message();
}

// tls-server-name: the certificate is checked against that name while the connection goes to
// the server URL's address (here 127.0.0.1, whose certificate also names
// kubernetes.default.svc, as a cluster's apiserver certificate does).
TEST_F(KubeIntegrationTest, TlsServerNameIsTheNameTheCertificateIsCheckedAgainst) {
  if (config_.server.rfind("https://", 0) != 0) GTEST_SKIP() << "not a TLS server";
  TransportOptions once;
  once.backoff.max_retries = 0;
  RestConfig named = config_;
  named.tls_server_name = "kubernetes.default.svc";
  std::unique_ptr<Client> client = Client::Create(named, once).value();
  Result<Json> ns = client->Get(resources::kNamespaces, "", ns_);
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ(ns->at("metadata").at("name"), ns_);
  // Keep-alive still works through the redirected connection.
  ASSERT_TRUE(client->Get(resources::kNamespaces, "", ns_).ok());
  EXPECT_EQ(client->transport().connections_opened(), 1);

  RestConfig wrong = config_;
  wrong.tls_server_name = "not-the-apiserver.example.com";
  Result<Json> refused = Client::Create(wrong, once).value()->Get(resources::kNamespaces, "", ns_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("not-the-apiserver.example.com"), std::string::npos)
      << refused.status().message();

  RestConfig bad = config_;
  bad.tls_server_name = "host:1";
  Result<std::unique_ptr<Client>> rejected = Client::Create(bad, once);
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("tls-server-name"), std::string::npos);
}

}  // namespace
}  // namespace chamber::kube
