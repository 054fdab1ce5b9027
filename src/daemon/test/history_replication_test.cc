// A standby's copy of the leader's history (history_replication.h), with the leader's store
// answering through the replication stream's JSON in place of HTTP (daemon_api_test runs the
// same over a real server).
#include "daemon/history_replication.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include <gtest/gtest.h>

namespace chamber::daemon {
namespace {

namespace fs = std::filesystem;
using fleet::HistoryResolution;
using fleet::HistoryRow;
using fleet::HistoryStore;

std::map<std::string, std::string> Query(const std::string& target) {
  std::map<std::string, std::string> out;
  const size_t q = target.find('?');
  std::string rest = q == std::string::npos ? "" : target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string kv = rest.substr(0, amp);
    const size_t eq = kv.find('=');
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
    rest = amp == std::string::npos ? "" : rest.substr(amp + 1);
  }
  return out;
}

// Retention's clock: the tests' rows are from the first hours of 1970.
int64_t TestNow() { return 3700; }

class HistoryFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chamber-follower-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    leader_ = Open("leader.db");
    standby_ = Open("standby.db");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<HistoryStore> Open(const std::string& name, fleet::HistoryOptions o = {}) {
    auto s = HistoryStore::Open((dir_ / name).string(), o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // The leader's side of GET /api/v1/history/replication.
  HistoryFollower::Fetch LeaderFetch(HistoryStore* leader) {
    return [this, leader](const std::string& target) -> Result<std::string> {
      targets_.push_back(target);
      if (fail_at_ > 0 && static_cast<int>(targets_.size()) == fail_at_)
        return Status::Unavailable("connection refused");
      auto q = Query(target);
      const HistoryResolution r =
          q["resolution"] == "coarse" ? HistoryResolution::kCoarse : HistoryResolution::kFine;
      CHAMBER_ASSIGN_OR_RETURN(fleet::HistoryBatch b,
                               leader->Export(r, std::stoll(q["since"]), std::stoul(q["limit"])));
      return HistoryBatchJson(b).dump();
    };
  }

  static std::vector<HistoryRow> Rows(HistoryStore& s, HistoryResolution r) {
    return s.Export(r, 0, 1000000).value().rows;
  }

  // Three series over ten minutes of hour 0, hour 0 rolled up, and two minutes of hour 1.
  void FillLeader() {
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(leader_
                      ->Write(i * 60, {{"gpus_used", "cluster", i * 1.5},
                                       {"gpus_used", "pool:a", 1.0 / (i + 3)},
                                       {"cycle_ms", "cluster", 2.0 + i}})
                      .ok());
    ASSERT_TRUE(leader_->Write(3600, {{"gpus_used", "cluster", 4}}).ok());
    ASSERT_TRUE(leader_->Maintain(3600).ok());
    ASSERT_TRUE(leader_->Write(3660, {{"gpus_used", "cluster", 5}}).ok());
  }

  fs::path dir_;
  std::unique_ptr<HistoryStore> leader_, standby_;
  std::vector<std::string> targets_;
  int fail_at_ = 0;  // the request (1-based) that fails; 0: none
};

TEST_F(HistoryFollowerTest, CopiesEveryPageAndARepeatedRoundAddsNothing) {
  FillLeader();
  HistoryFollower f(standby_.get(), LeaderFetch(leader_.get()),
                    {.page_rows = 4, .now_unix = TestNow});
  ASSERT_TRUE(f.SyncOnce().ok());
  EXPECT_EQ(Rows(*standby_, HistoryResolution::kFine), Rows(*leader_, HistoryResolution::kFine));
  EXPECT_EQ(Rows(*standby_, HistoryResolution::kCoarse),
            Rows(*leader_, HistoryResolution::kCoarse));
  ASSERT_EQ(*leader_->CountFine(), 32);
  EXPECT_EQ(f.rows_copied(), 32 + 3);
  EXPECT_EQ(f.rounds(), 1);
  // 32 fine rows a page of about 4 at a time (whole minutes: 3 rows each), then the coarse ones.
  EXPECT_EQ(targets_.front(), "/api/v1/history/replication?resolution=fine&since=0&limit=4");
  EXPECT_GE(targets_.size(), 11u);
  // The roll-up mark came along: the standby, leading, would not roll hour 0 up again.
  EXPECT_EQ(standby_->Export(HistoryResolution::kCoarse, 0, 10)->rolled_up_until, 3600);

  // Again, with nothing new: only the newest buckets are asked for, and nothing is added.
  targets_.clear();
  ASSERT_TRUE(f.SyncOnce().ok());
  EXPECT_EQ(targets_, (std::vector<std::string>{
                          "/api/v1/history/replication?resolution=fine&since=3660&limit=4",
                          "/api/v1/history/replication?resolution=coarse&since=0&limit=4"}));
  EXPECT_EQ(*standby_->CountFine(), 32);
  EXPECT_EQ(*standby_->CountCoarse(), 3);

  // The leader fills its newest minute further: the standby's copy becomes the leader's.
  ASSERT_TRUE(leader_->Write(3670, {{"gpus_used", "cluster", 7}}).ok());
  ASSERT_TRUE(f.SyncOnce().ok());
  EXPECT_EQ(standby_->Read("gpus_used", "cluster", 3660, 3660)->points,
            (std::vector<fleet::HistoryPoint>{{3660, 6}}));
  EXPECT_EQ(Rows(*standby_, HistoryResolution::kFine), Rows(*leader_, HistoryResolution::kFine));
}

TEST_F(HistoryFollowerTest, AFailedPageKeepsWhatWasCopiedAndTheNextRoundGoesOn) {
  FillLeader();
  fail_at_ = 3;
  HistoryFollower f(standby_.get(), LeaderFetch(leader_.get()),
                    {.page_rows = 4, .now_unix = TestNow});
  Status st = f.SyncOnce();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "connection refused");
  EXPECT_EQ(f.rounds(), 0);
  const int64_t copied = *standby_->CountFine();
  EXPECT_EQ(copied, 6);
  // The next round asks from the newest minute copied, and ends with the leader's rows, once.
  const int64_t newest = standby_->Newest()->fine;
  EXPECT_EQ(newest, 60);  // two pages of one minute each came before the failure
  fail_at_ = 0;
  targets_.clear();
  ASSERT_TRUE(f.SyncOnce().ok());
  EXPECT_EQ(targets_.front(), "/api/v1/history/replication?resolution=fine&since=60&limit=4");
  EXPECT_EQ(Rows(*standby_, HistoryResolution::kFine), Rows(*leader_, HistoryResolution::kFine));
  EXPECT_EQ(*standby_->CountFine(), 32);
}

TEST_F(HistoryFollowerTest, RefusesALeaderWithOtherStepsOrAnAnswerItCannotRead) {
  fleet::HistoryOptions seconds;
  seconds.fine_step_seconds = 1;
  auto fast = Open("fast.db", seconds);
  ASSERT_TRUE(fast->Write(5, {{"m", "cluster", 1}}).ok());
  HistoryFollower f(standby_.get(), LeaderFetch(fast.get()), {.now_unix = TestNow});
  Status st = f.SyncOnce();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the rows come in steps of 1 s and 3600 s, this history keeps 60 s"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(*standby_->CountFine(), 0);

  HistoryFollower html(
      standby_.get(),
      [](const std::string&) -> Result<std::string> { return std::string("<html>"); }, {});
  st = html.SyncOnce();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the answer is not JSON"), std::string::npos) << st.message();

  nlohmann::json bad = HistoryBatchJson(leader_->Export(HistoryResolution::kFine, 0, 10).value());
  bad["rows"] =
      nlohmann::json::array({{"m", "cluster", 60, 1.0, 1}, {"m", "cluster", 120, 1.0, 0}});
  Result<fleet::HistoryBatch> parsed = ParseHistoryBatch(bad);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "history batch: rows[1][4]: expected an integer of at least 1");
  bad["version"] = 2;
  EXPECT_EQ(ParseHistoryBatch(bad).status().message(),
            "history batch: version: 2 is not supported (this build reads 1)");
  bad["format"] = "something-else";
  EXPECT_EQ(ParseHistoryBatch(bad).status().message(),
            "history batch: format: expected \"chamber-fleet-history\"");
}

// Each wrong value is named by its field, or by its row and column.
TEST(ParseHistoryBatchTest, ErrorsNameTheFieldOrTheRowsElement) {
  fleet::HistoryBatch batch;
  batch.fine_step = 60;
  batch.coarse_step = 3600;
  batch.rows = {{"m", "cluster", 60, 1.5, 2}};
  const nlohmann::json good = HistoryBatchJson(batch);
  Result<fleet::HistoryBatch> parsed = ParseHistoryBatch(good);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->rows, batch.rows);

  const auto message = [&](const std::function<void(nlohmann::json&)>& spoil) {
    nlohmann::json j = good;
    spoil(j);
    return ParseHistoryBatch(j).status().message();
  };
  EXPECT_EQ(message([](nlohmann::json& j) { j = nlohmann::json::array(); }),
            "history batch: expected an object");
  EXPECT_EQ(message([](nlohmann::json& j) { j["format"] = 1; }),
            "history batch: format: expected a string");
  EXPECT_EQ(message([](nlohmann::json& j) { j.erase("next"); }), "history batch: next: missing");
  EXPECT_EQ(message([](nlohmann::json& j) { j["fine_step"] = 60.5; }),
            "history batch: fine_step: expected an integer");
  EXPECT_EQ(message([](nlohmann::json& j) { j["more"] = "no"; }),
            "history batch: more: expected true or false");
  EXPECT_EQ(message([](nlohmann::json& j) { j["rows"] = nlohmann::json::object(); }),
            "history batch: rows: expected a list");
  EXPECT_EQ(message([](nlohmann::json& j) {
              j["rows"][0] = {"m", "cluster"};
            }),
            "history batch: rows[0]: expected [metric, scope, time, sum, count]");
  EXPECT_EQ(message([](nlohmann::json& j) { j["rows"][0][1] = 7; }),
            "history batch: rows[0][1]: expected a string");
  EXPECT_EQ(message([](nlohmann::json& j) { j["rows"][0][2] = "60"; }),
            "history batch: rows[0][2]: expected an integer");
  EXPECT_EQ(message([](nlohmann::json& j) { j["rows"][0][2] = UINT64_MAX; }),
            "history batch: rows[0][2]: out of range");
  EXPECT_EQ(message([](nlohmann::json& j) { j["rows"][0][3] = nullptr; }),
            "history batch: rows[0][3]: expected a number");
  EXPECT_EQ(message([](nlohmann::json& j) { j["rows"][0][4] = 1.5; }),
            "history batch: rows[0][4]: expected an integer");
}

// The copy keeps the leader's retention by its own clock: two days on, only the last minute's
// fine row is left, and the rolled-up hours.
TEST_F(HistoryFollowerTest, TheCopyExpiresAsTheLeadersHistoryDoes) {
  FillLeader();
  HistoryFollower f(standby_.get(), LeaderFetch(leader_.get()),
                    {.now_unix = [] { return int64_t{2 * 24 * 3600 + 3700}; }});
  ASSERT_TRUE(f.SyncOnce().ok());
  EXPECT_EQ(f.rows_copied(), 32 + 3);
  EXPECT_EQ(*standby_->CountFine(), 1);
  EXPECT_EQ(*standby_->CountCoarse(), 3);
}

// Once Stop returns, nothing more is written to the store, even by a round in flight.
TEST_F(HistoryFollowerTest, StopEndsTheCopying) {
  FillLeader();
  std::atomic<bool> release{false};
  HistoryFollower::Fetch fetch = LeaderFetch(leader_.get());
  int calls = 0;
  HistoryFollower f(standby_.get(),
                    [&](const std::string& target) -> Result<std::string> {
                      // The first round runs; the second's first request waits until after Stop.
                      if (++calls == 3)
                        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                      return fetch(target);
                    },
                    {.period = std::chrono::milliseconds(10), .now_unix = TestNow});
  f.Start();
  for (int i = 0; i < 2000 && f.rounds() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(f.rounds(), 1);
  ASSERT_TRUE(leader_->Write(3670, {{"gpus_used", "cluster", 7}}).ok());
  const auto before = Rows(*standby_, HistoryResolution::kFine);
  f.Stop();
  release = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(Rows(*standby_, HistoryResolution::kFine), before);
  EXPECT_NE(Rows(*leader_, HistoryResolution::kFine), before) << "the leader had more to copy";
  EXPECT_EQ(f.rounds(), 1);
}

}  // namespace
}  // namespace chamber::daemon
