#include "fleet/history_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace chamber::fleet {
namespace {

namespace fs = std::filesystem;

class HistoryStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chamber-history-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name = "history.db") const { return (dir_ / name).string(); }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
};

std::unique_ptr<HistoryStore> MustOpen(const std::string& path, const HistoryOptions& o = {}) {
  auto r = HistoryStore::Open(path, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST_F(HistoryStoreTest, SurvivesCloseAndReopen) {
  {
    auto s = MustOpen(Path());
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Write(120, {{"utilization", "cluster", 0.5}, {"cost", "pool:h100", 10}}).ok());
    ASSERT_TRUE(s->Write(150, {{"utilization", "cluster", 0.7}}).ok());
    ASSERT_TRUE(s->Write(180, {{"utilization", "cluster", 0.2}}).ok());
  }
  auto s = MustOpen(Path());
  ASSERT_TRUE(s);
  auto r = s->Read("utilization", "cluster", 0, 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->step, 60);
  ASSERT_EQ(r->points.size(), 2u);
  EXPECT_EQ(r->points[0].time, 120);
  EXPECT_DOUBLE_EQ(r->points[0].value, 0.6);  // the mean of two samples in one minute
  EXPECT_EQ(r->points[1], (HistoryPoint{180, 0.2}));
  auto c = s->Catalogue();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->metrics, (std::vector<std::string>{"cost", "utilization"}));
  EXPECT_EQ(c->scopes, (std::vector<std::string>{"cluster", "pool:h100"}));
  // Range bounds are inclusive; an empty range has no points.
  EXPECT_EQ(s->Read("utilization", "cluster", 180, 180)->points.size(), 1u);
  EXPECT_TRUE(s->Read("utilization", "cluster", 181, 239)->points.empty());
  EXPECT_FALSE(s->Read("utilization", "cluster", 10, 5).ok());
}

TEST_F(HistoryStoreTest, RollsUpHoursAndAppliesRetention) {
  HistoryOptions o;
  o.fine_retention_seconds = 3600;
  o.coarse_retention_seconds = 7200;
  auto s = MustOpen(Path(), o);
  ASSERT_TRUE(s);
  // Hour 0: minute i holds i, except minute 0, which holds the mean of 0 and 10.
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(s->Write(i * 60, {{"m", "cluster", double(i)}}).ok());
  ASSERT_TRUE(s->Write(30, {{"m", "cluster", 10}}).ok());
  const double hour0 = (5.0 + 59.0 * 60.0 / 2.0) / 60.0;  // (5 + 1 + ... + 59) / 60

  // Averaged into hours from the fine points before any roll-up.
  auto r = s->Read("m", "cluster", 0, 3599, 3600);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->points.size(), 1u);
  EXPECT_DOUBLE_EQ(r->points[0].value, hour0);

  ASSERT_TRUE(s->Maintain(3599).ok());  // hour 0 is not complete yet
  EXPECT_EQ(*s->CountCoarse(), 0);
  ASSERT_TRUE(s->Maintain(7260).ok());  // hour 0 rolls up; its minutes expire
  EXPECT_EQ(*s->CountCoarse(), 1);
  EXPECT_EQ(*s->CountFine(), 0);
  ASSERT_TRUE(s->Maintain(7260).ok());  // idempotent
  EXPECT_EQ(*s->CountCoarse(), 1);

  ASSERT_TRUE(s->Write(7200, {{"m", "cluster", 3}}).ok());
  r = s->Read("m", "cluster", 0, 10000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step, 3600);
  ASSERT_EQ(r->points.size(), 2u);
  EXPECT_EQ(r->points[0].time, 0);
  EXPECT_DOUBLE_EQ(r->points[0].value, hour0);
  EXPECT_EQ(r->points[1], (HistoryPoint{7200, 3}));

  // Hour 0 stays until its whole hour is older than the coarse retention (two hours).
  ASSERT_TRUE(s->Maintain(3 * 3600 - 1).ok());
  EXPECT_EQ(*s->CountCoarse(), 1);
  EXPECT_EQ(*s->CountFine(), 1);
  ASSERT_TRUE(s->Maintain(3 * 3600).ok());  // hour 0 expires, hour 2 rolls up
  EXPECT_EQ(*s->CountCoarse(), 1);
  // A fine point expires once its whole minute is older than the fine retention.
  EXPECT_EQ(*s->CountFine(), 1);
  ASSERT_TRUE(s->Maintain(7200 + 3600 + 59).ok());
  EXPECT_EQ(*s->CountFine(), 1);
  ASSERT_TRUE(s->Maintain(7200 + 3600 + 60).ok());
  EXPECT_EQ(*s->CountFine(), 0);
  r = s->Read("m", "cluster", 0, 100000);
  ASSERT_EQ(r->points.size(), 1u);
  EXPECT_EQ(r->points[0], (HistoryPoint{7200, 3}));
}

TEST_F(HistoryStoreTest, RefusesAFileThatIsNotSqlite) {
  const std::string path = Path("notes.txt");
  { std::ofstream(path) << "these are someone's notes, not a database\n"; }
  const std::string before = Slurp(path);
  auto r = HistoryStore::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("not an SQLite database"), std::string::npos);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_EQ(Slurp(path), before);
}

TEST_F(HistoryStoreTest, RefusesAnotherApplicationsDatabase) {
  const std::string path = Path("app.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ann')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const std::string before = Slurp(path);
  auto r = HistoryStore::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("another application (tables: users)"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(Slurp(path), before);
}

TEST_F(HistoryStoreTest, RefusesACorruptDatabase) {
  const std::string path = Path();
  {
    auto s = MustOpen(path);
    ASSERT_TRUE(s);
    std::vector<HistorySample> many;
    for (int i = 0; i < 2000; ++i) many.push_back({"m" + std::to_string(i), "cluster", 1});
    ASSERT_TRUE(s->Write(60, many).ok());
    ASSERT_TRUE(s->Maintain(60).ok());
  }
  fs::remove(path + "-wal");
  fs::remove(path + "-shm");
  std::string bytes = Slurp(path);
  ASSERT_GT(bytes.size(), 8192u);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  { std::ofstream(path, std::ios::binary) << bytes; }
  auto r = HistoryStore::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("corrupt"), std::string::npos) << r.status().message();
  EXPECT_EQ(Slurp(path), bytes);
}

TEST_F(HistoryStoreTest, RejectsInconsistentOptions) {
  HistoryOptions o;
  o.coarse_step_seconds = 90;
  auto r = HistoryStore::Open(Path(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multiple of the fine step"), std::string::npos);
  EXPECT_FALSE(fs::exists(Path()));
}

}  // namespace
}  // namespace chamber::fleet
