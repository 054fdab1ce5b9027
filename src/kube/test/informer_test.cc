#include "kube/informer.h"

#include <atomic>
#include <future>
#include <memory>

#include <gtest/gtest.h>

#include "kube/test/fake_apiserver.h"

namespace chamber::kube {
namespace {

using testing::FakeApiServer;
using namespace std::chrono_literals;

const std::string kPods = "/api/v1/namespaces/ml/pods";

Json PodJson(const std::string& name, const std::string& node, const std::string& team = "a") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"team", team}}}}},
          {"spec", {{"nodeName", node}}}};
}

// Records handler calls as "add x", "update x", "delete x".
struct Recorder {
  std::mutex mu;
  std::vector<std::string> calls;
  Informer<Pod>::Handlers Handlers() {
    return {
        [this](const Pod& p) { Add("add " + p.metadata.name); },
        [this](const Pod& a, const Pod& b) {
          Add((a.metadata.resource_version == b.metadata.resource_version ? "resync " : "update ") +
              b.metadata.name);
        },
        [this](const Pod& p) { Add("delete " + p.metadata.name); }};
  }
  void Add(std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(std::move(s));
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(calls, {});
  }
  int Count(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(std::count(calls.begin(), calls.end(), s));
  }
};

template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout = 5s) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return f();
}

InformerOptions PodOptions() {
  InformerOptions o;
  o.type = resources::kPods;
  o.namespace_name = "ml";
  o.page_size = 2;
  o.backoff.initial = 10ms;
  o.backoff.max = 100ms;
  return o;
}

std::unique_ptr<Client> MakeClient(const FakeApiServer& s) {
  TransportOptions t;
  t.backoff.initial = 5ms;
  return Client::Create(s.Config(), t).value();
}

TEST(InformerTest, SyncsWatchesAndIndexes) {
  FakeApiServer s;
  s.Upsert(kPods, PodJson("p1", "n1"));
  s.Upsert(kPods, PodJson("p2", "n1", "b"));
  s.Upsert(kPods, PodJson("p3", "n2"));
  auto client = MakeClient(s);
  Recorder rec;
  Informer<Pod> inf(client.get(), PodOptions(), rec.Handlers());
  inf.AddIndex(index::kNodeName, index::PodsByNode);
  inf.AddIndex(index::kLabel, index::ByLabel<Pod>);
  inf.AddIndex(index::kNamespace, index::ByNamespace<Pod>);
  EXPECT_FALSE(inf.HasSynced());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add p1", "add p2", "add p3"}));
  EXPECT_EQ(inf.ByIndex(index::kNodeName, "n1").size(), 2u);
  EXPECT_EQ(inf.ByIndex(index::kLabel, "team=b").size(), 1u);
  EXPECT_EQ(inf.ByIndex(index::kNamespace, "ml").size(), 3u);

  s.Upsert(kPods, PodJson("p4", "n2"));
  s.Upsert(kPods, PodJson("p1", "n2"));  // moves to n2
  s.Remove(kPods, "p2");
  ASSERT_TRUE(Eventually([&] { return inf.List().size() == 3 && inf.Get("ml/p2") == nullptr; }));
  ASSERT_TRUE(Eventually([&] { return inf.ByIndex(index::kNodeName, "n2").size() == 3; }));
  EXPECT_TRUE(inf.ByIndex(index::kNodeName, "n1").empty());
  EXPECT_TRUE(inf.ByIndex(index::kLabel, "team=b").empty());
  EXPECT_EQ(inf.Get("ml/p1")->node_name, "n2");
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add p4", "update p1", "delete p2"}));
  inf.Stop();
}

TEST(InformerTest, ReconnectsAfterTheServerEndsTheWatch) {
  FakeApiServer s;
  s.Upsert(kPods, PodJson("p1", "n1"));
  auto client = MakeClient(s);
  Recorder rec;
  Informer<Pod> inf(client.get(), PodOptions(), rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return s.watches.load() == 1; }));
  s.CloseWatches();
  ASSERT_TRUE(Eventually([&] { return s.watches.load() == 2; }));
  s.Upsert(kPods, PodJson("p2", "n1"));
  ASSERT_TRUE(Eventually([&] { return inf.Get("ml/p2") != nullptr; }));
  EXPECT_EQ(s.lists.load(), 1);  // resumed from the last version, no re-list
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add p1", "add p2"}));
  inf.Stop();
}

// After 410 the informer lists again; objects deleted while it was not watching get a delete,
// new ones an add, and unchanged ones nothing.
void CheckRelistAfterGone(bool as_error_event) {
  FakeApiServer s;
  s.gone_as_error_event = as_error_event;
  s.send_bookmarks = false;
  s.Upsert(kPods, PodJson("keep", "n1"));
  s.Upsert(kPods, PodJson("vanish", "n1"));
  s.Upsert(kPods, PodJson("change", "n1"));
  auto client = MakeClient(s);
  Recorder rec;
  Informer<Pod> inf(client.get(), PodOptions(), rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return s.watches.load() == 1; }));
  EXPECT_EQ(rec.Take().size(), 3u);
  // While the informer is disconnected, history moves on and is compacted away: its watch
  // request is held until then, and resumes from a version no longer kept. (Refusing it instead
  // would make the informer list again after a few refusals, if the history took a while to
  // move on, and then it would never see the 410.)
  std::promise<void> moved_on;
  std::shared_future<void> held = moved_on.get_future().share();
  auto arrived = std::make_shared<std::atomic<int>>(0);
  s.set_intercept([held, arrived](const httplib::Request& req, httplib::Response&) {
    if (req.get_param_value("watch") == "true") {
      ++*arrived;
      held.wait();
    }
    return false;
  });
  s.CloseWatches();
  // History moves on only once the informer's next watch is held: the closed stream has ended
  // by then. Moving on earlier, on a loaded machine, let the old stream deliver the changes
  // before it noticed the close, and the next watch resumed from a version still kept.
  if (!Eventually([&] { return arrived->load() >= 1; })) {
    moved_on.set_value();  // release the server's handler before failing
    FAIL() << "the informer did not watch again after its stream was closed";
  }
  s.Remove(kPods, "vanish");
  s.Upsert(kPods, PodJson("change", "n2"));
  s.Upsert(kPods, PodJson("new", "n1"));
  s.Compact();
  moved_on.set_value();
  s.set_intercept(nullptr);
  ASSERT_TRUE(Eventually([&] { return inf.stats().gone >= 1 && inf.stats().lists >= 2; }, 20s));
  ASSERT_TRUE(Eventually([&] { return inf.Get("ml/new") != nullptr; }));
  std::vector<std::string> calls = rec.Take();
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<std::string>{"add new", "delete vanish", "update change"}));
  std::vector<std::string> keys = inf.Keys();
  EXPECT_EQ(keys, (std::vector<std::string>{"ml/change", "ml/keep", "ml/new"}));
  // And it keeps watching from the new list.
  s.Upsert(kPods, PodJson("later", "n1"));
  ASSERT_TRUE(Eventually([&] { return inf.Get("ml/later") != nullptr; }));
  // The cache holds it before the handler has run: wait for the handler too.
  ASSERT_TRUE(Eventually([&] { return rec.Count("add later") == 1; }));
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add later"}));
  inf.Stop();
}

TEST(InformerTest, RelistsCorrectlyAfterHttpGone) { CheckRelistAfterGone(false); }
TEST(InformerTest, RelistsCorrectlyAfterGoneErrorEvent) { CheckRelistAfterGone(true); }

TEST(InformerTest, SkipsUndecodableObjectsAndRecoversFromBrokenStreams) {
  FakeApiServer s;
  s.Upsert(kPods, PodJson("good", "n1"));
  Json bad = PodJson("bad", "n1");
  bad["spec"]["containers"] =
      Json::array({{{"name", "c"}, {"resources", {{"requests", {{"cpu", "lots"}}}}}}});
  s.Upsert(kPods, bad);
  auto client = MakeClient(s);
  Recorder rec;
  Informer<Pod> inf(client.get(), PodOptions(), rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  EXPECT_EQ(inf.Keys(), (std::vector<std::string>{"ml/good"}));
  EXPECT_EQ(inf.stats().decode_errors, 1);
  // A stream cut in the middle of an event: the informer retries and catches up.
  std::atomic<int> broken{2};
  s.set_intercept([&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("watch") != "true" || broken <= 0) return false;
    --broken;
    res.set_content(R"({"type":"ADDED","object":{"metadata":{"na)", "application/json");
    return true;
  });
  s.CloseWatches();
  ASSERT_TRUE(Eventually([&] { return broken.load() == 0; }));  // both broken streams served
  s.Upsert(kPods, PodJson("after", "n1"));
  ASSERT_TRUE(Eventually([&] { return inf.Get("ml/after") != nullptr; }));
  EXPECT_GE(inf.stats().watches, 3);  // two broken streams, then one that works
  EXPECT_EQ(rec.Count("add after"), 1);
  EXPECT_EQ(rec.Count("add good"), 1);
  inf.Stop();
}

TEST(InformerTest, ResyncReplaysCachedObjects) {
  FakeApiServer s;
  s.Upsert(kPods, PodJson("p1", "n1"));
  s.Upsert(kPods, PodJson("p2", "n1"));
  auto client = MakeClient(s);
  Recorder rec;
  InformerOptions o = PodOptions();
  o.resync_period = 100ms;
  Informer<Pod> inf(client.get(), o, rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(
      Eventually([&] { return rec.Count("resync p1") >= 2 && rec.Count("resync p2") >= 2; }));
  inf.Stop();
  EXPECT_EQ(rec.Count("add p1"), 1);
}

TEST(InformerTest, StopsPromptlyWhileWatching) {
  FakeApiServer s;
  auto client = MakeClient(s);
  Informer<Pod> inf(client.get(), PodOptions());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return s.watches.load() == 1; }));
  const auto start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

}  // namespace
}  // namespace chamber::kube
