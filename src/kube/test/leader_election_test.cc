#include "kube/leader_election.h"

#include <gtest/gtest.h>

#include "kube/test/fake_apiserver.h"

namespace chamber::kube {
namespace {

using testing::FakeApiServer;
using namespace std::chrono_literals;

const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

LeaderElectionConfig Config(const std::string& id) {
  LeaderElectionConfig c;
  c.lease_name = "chamber";
  c.identity = id;
  c.lease_duration = 3000ms;
  c.renew_deadline = 2000ms;
  c.retry_period = 200ms;
  return c;
}

template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return f();
}

TEST(LeaderElectionTest, ValidatesTimings) {
  LeaderElectionConfig c = Config("a");
  c.renew_deadline = 3s;
  EXPECT_FALSE(LeaderElector::Create(nullptr, c).ok());
  c = Config("a");
  c.retry_period = 1800ms;
  EXPECT_FALSE(LeaderElector::Create(nullptr, c).ok());
  c = Config("");
  EXPECT_FALSE(LeaderElector::Create(nullptr, c).ok());
}

TEST(LeaderElectionTest, ReleaseHandsOverAtOnce) {
  FakeApiServer s;
  auto client = Client::Create(s.Config()).value();
  std::atomic<bool> a_leading{false}, b_leading{false};
  std::vector<std::string> b_saw;
  std::mutex mu;
  LeaderElectionConfig ca = Config("a");
  ca.on_started_leading = [&](CancellationToken t) {
    a_leading = true;
    t.WaitFor(1h);
  };
  ca.on_stopped_leading = [&] { a_leading = false; };
  LeaderElectionConfig cb = Config("b");
  cb.on_started_leading = [&](CancellationToken t) {
    b_leading = true;
    t.WaitFor(1h);
  };
  cb.on_new_leader = [&](const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    b_saw.push_back(id);
  };
  auto a = LeaderElector::Create(client.get(), ca).value();
  auto b = LeaderElector::Create(client.get(), cb).value();
  CancellationToken stop_a, stop_b;
  std::thread ta([&] { a->Run(stop_a); });
  ASSERT_TRUE(Eventually([&] { return a_leading.load(); }, 3s));
  EXPECT_TRUE(a->IsLeader());
  EXPECT_EQ(a->term(), "a/0");
  std::thread tb([&] { b->Run(stop_b); });
  std::this_thread::sleep_for(2500ms);  // a keeps renewing: b must not take over
  EXPECT_FALSE(b_leading.load());
  EXPECT_EQ(b->leader(), "a");
  EXPECT_EQ(s.Object(kLeases, "chamber")["spec"]["holderIdentity"], "a");

  const auto released = std::chrono::steady_clock::now();
  stop_a.Cancel();  // graceful shutdown: releases the lease
  ta.join();
  EXPECT_FALSE(a_leading.load());
  EXPECT_FALSE(a->IsLeader());
  ASSERT_TRUE(Eventually([&] { return b_leading.load(); }, 3s));
  // b takes over on its next retry, well before a lease duration (3 s) has passed.
  EXPECT_LT(std::chrono::steady_clock::now() - released, 1500ms);
  const Json lease = s.Object(kLeases, "chamber");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);  // created by "a" at 0; "b" took over
  EXPECT_EQ(b->term(), "b/1");
  EXPECT_EQ(a->term(), "");  // not leading any more
  stop_b.Cancel();
  tb.join();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(b_saw.size(), 2u);
  EXPECT_EQ(b_saw.front(), "a");
  EXPECT_EQ(b_saw.back(), "b");
}

TEST(LeaderElectionTest, CrashedLeaderIsReplacedAfterTheLeaseDuration) {
  FakeApiServer s;
  auto client = Client::Create(s.Config()).value();
  // A leader that renewed once and then died: its record never changes again.
  s.Upsert(kLeases, {{"apiVersion", "coordination.k8s.io/v1"},
                     {"kind", "Lease"},
                     {"metadata", {{"name", "chamber"}, {"namespace", "default"}}},
                     {"spec",
                      {{"holderIdentity", "dead"},
                       {"leaseDurationSeconds", 1},
                       {"renewTime", "2099-01-01T00:00:00.000000Z"},  // remote clock ignored
                       {"leaseTransitions", 4}}}});
  std::atomic<bool> leading{false};
  LeaderElectionConfig cb = Config("b");
  cb.on_started_leading = [&](CancellationToken t) {
    leading = true;
    t.WaitFor(1h);
  };
  auto b = LeaderElector::Create(client.get(), cb).value();
  CancellationToken stop;
  const auto start = std::chrono::steady_clock::now();
  std::thread tb([&] { b->Run(stop); });
  ASSERT_TRUE(Eventually([&] { return leading.load(); }, 5s));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 900ms);   // waited for the record to stay unchanged a lease duration (1 s)
  EXPECT_LT(took, 2800ms);  // and not the configured 3 s
  EXPECT_EQ(s.Object(kLeases, "chamber")["spec"]["leaseTransitions"], 5);
  stop.Cancel();
  tb.join();
}

TEST(LeaderElectionTest, LosingTheLeaseCancelsTheLeadershipToken) {
  FakeApiServer s;
  auto client = Client::Create(s.Config()).value();
  std::atomic<bool> stopped{false};
  CancellationToken seen;
  std::atomic<bool> have_token{false};
  LeaderElectionConfig ca = Config("a");
  ca.on_started_leading = [&](CancellationToken t) {
    seen = t;
    have_token = true;
    t.WaitFor(1h);
  };
  ca.on_stopped_leading = [&] { stopped = true; };
  auto a = LeaderElector::Create(client.get(), ca).value();
  CancellationToken stop;
  std::thread ta([&] { a->Run(stop); });
  ASSERT_TRUE(Eventually([&] { return have_token.load(); }, 3s));
  EXPECT_FALSE(seen.cancelled());
  // Every renewal now fails: within the renew deadline the token reports cancelled.
  s.set_intercept([](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "PUT") return false;
    res.status = 409;
    res.set_content(R"({"kind":"Status","reason":"Conflict","code":409})", "application/json");
    return true;
  });
  const auto cut = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return seen.cancelled(); }, 3s));
  EXPECT_LT(std::chrono::steady_clock::now() - cut, 2600ms);  // renew deadline 2 s
  ta.join();                                                  // Run returns once leadership is lost
  EXPECT_TRUE(stopped.load());
  EXPECT_FALSE(a->IsLeader());
}

// The term a leader stamps on its writes is the Lease as it acquired it: a renewal that finds a
// successor's record (taken over while this leader was stopped, say) must not hand it the
// successor's term, which the API server's fence would accept.
TEST(LeaderElectionTest, ALeaderKeepsItsOwnTermWhenItSeesASuccessorsLease) {
  FakeApiServer s;
  auto client = Client::Create(s.Config()).value();
  std::atomic<bool> have_token{false};
  CancellationToken seen;
  LeaderElectionConfig ca = Config("a");
  ca.on_started_leading = [&](CancellationToken t) {
    seen = t;
    have_token = true;
    t.WaitFor(1h);
  };
  auto a = LeaderElector::Create(client.get(), ca).value();
  CancellationToken stop;
  std::thread ta([&] { a->Run(stop); });
  ASSERT_TRUE(Eventually([&] { return have_token.load(); }, 3s));
  EXPECT_EQ(a->term(), "a/0");
  // A successor takes the Lease behind a's back; a's renewals now read b's record.
  Json lease = s.Object(kLeases, "chamber");
  lease["spec"]["holderIdentity"] = "b";
  lease["spec"]["leaseTransitions"] = 1;
  s.Upsert(kLeases, lease);
  ASSERT_TRUE(Eventually([&] { return a->leader() == "b"; }, 3s));
  // Until its token is cancelled a still takes itself for the leader, with its own term only.
  if (!seen.cancelled()) {
    EXPECT_EQ(a->term(), "a/0");
  }
  ASSERT_TRUE(Eventually([&] { return seen.cancelled(); }, 4s));
  EXPECT_EQ(a->term(), "");
  stop.Cancel();
  ta.join();
}

TEST(CancellationTokenTest, APassedDeadlineIsFinal) {
  const auto now = std::chrono::steady_clock::now();
  CancellationToken t;
  t.set_deadline(now + 1h);
  EXPECT_FALSE(t.cancelled());
  t.set_deadline(now + 20ms);  // moved earlier
  EXPECT_FALSE(t.WaitFor(1ms));
  EXPECT_TRUE(t.WaitFor(1h));  // returns at the deadline
  t.set_deadline(now + 1h);    // too late: it stays cancelled
  EXPECT_TRUE(t.cancelled());
  EXPECT_TRUE(t.WaitFor(10ms));
}

// The renewals fail until the leadership token's deadline has passed (its worker has stopped),
// then succeed again: the candidate must not lead on with no worker, holding the Lease while
// nothing schedules; Run returns as for a lost Lease, and a standby can take over.
TEST(LeaderElectionTest, ARenewalAfterTheDeadlineDoesNotReviveALeaderThatStopped) {
  FakeApiServer s;
  auto client = Client::Create(s.Config()).value();
  CancellationToken seen;
  std::atomic<bool> have_token{false}, worker_done{false}, stopped{false}, run_done{false};
  LeaderElectionConfig ca = Config("a");
  ca.on_started_leading = [&](CancellationToken t) {
    seen = t;
    have_token = true;
    t.WaitFor(1h);
    worker_done = true;
  };
  ca.on_stopped_leading = [&] { stopped = true; };
  auto a = LeaderElector::Create(client.get(), ca).value();
  CancellationToken stop;
  std::thread ta([&] {
    a->Run(stop);
    run_done = true;
  });
  ASSERT_TRUE(Eventually([&] { return have_token.load(); }, 3s));
  std::atomic<bool> failing{true};
  s.set_intercept([&failing](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "PUT" || !failing) return false;
    res.status = 409;
    res.set_content(R"({"kind":"Status","reason":"Conflict","code":409})", "application/json");
    return true;
  });
  ASSERT_TRUE(Eventually([&] { return worker_done.load(); }, 3s));
  failing = false;  // the API server answers again before the elector's round would have ended
  const bool returned = Eventually([&] { return run_done.load(); }, 3s);
  EXPECT_TRUE(returned) << "the elector kept renewing the Lease after its worker stopped";
  EXPECT_FALSE(a->IsLeader());
  EXPECT_TRUE(seen.cancelled());
  stop.Cancel();
  ta.join();
  EXPECT_TRUE(stopped.load());
}

// activity() is what chamberd's /healthz reads: each attempt, leading or not, moves it.
TEST(LeaderElectionTest, ActivityAdvancesEveryRetryPeriod) {
  FakeApiServer s;
  auto client = Client::Create(s.Config()).value();
  LeaderElectionConfig ca = Config("a");
  ca.on_started_leading = [](CancellationToken t) { t.WaitFor(1h); };
  auto a = LeaderElector::Create(client.get(), ca).value();
  EXPECT_EQ(a->activity().started, std::chrono::steady_clock::time_point());
  EXPECT_EQ(a->activity().finished, std::chrono::steady_clock::time_point());
  CancellationToken stop;
  const auto begin = std::chrono::steady_clock::now();
  std::thread ta([&] { a->Run(stop); });
  ASSERT_TRUE(Eventually([&] { return a->IsLeader(); }, 3s));
  const LeaderElector::Activity first = a->activity();
  EXPECT_GE(first.started, begin);
  EXPECT_GE(first.finished, first.started);
  // The leader renews every retry period (200 ms): a later attempt is seen within a few.
  ASSERT_TRUE(Eventually([&] { return a->activity().started > first.started; }, 1s));
  EXPECT_GE(a->activity().started - first.started, 150ms);
  stop.Cancel();
  ta.join();
}

}  // namespace
}  // namespace chamber::kube
