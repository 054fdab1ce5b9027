#include "fleet/history_store.h"

#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace chamber::fleet {

// For gtest's messages (found by argument-dependent lookup, so outside the unnamed namespace).
void PrintTo(const HistoryRow& r, std::ostream* os) {
  *os << r.metric << "/" << r.scope << " at " << r.time << ": sum " << std::fixed << r.sum
      << ", count " << r.count;
}

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

// Every row of one resolution, read through Export page by page.
std::vector<HistoryRow> AllRows(HistoryStore& s, HistoryResolution r, size_t limit = 100000) {
  std::vector<HistoryRow> out;
  int64_t since = 0;
  for (int page = 0; page < 1000; ++page) {
    Result<HistoryBatch> b = s.Export(r, since, limit);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) break;
    out.insert(out.end(), b->rows.begin(), b->rows.end());
    if (!b->more) break;
    EXPECT_GT(b->next, since) << "a page must move on";
    since = b->next;
  }
  return out;
}

// What a standby does each round: copy from its newest buckets on, fine rows then coarse.
void CopyFrom(HistoryStore& leader, HistoryStore& standby, size_t limit = 100000) {
  for (HistoryResolution r : {HistoryResolution::kFine, HistoryResolution::kCoarse}) {
    Result<HistoryPosition> at = standby.Newest();
    ASSERT_TRUE(at.ok());
    int64_t since = r == HistoryResolution::kFine ? at->fine : at->coarse;
    for (int page = 0; page < 1000; ++page) {
      Result<HistoryBatch> b = leader.Export(r, since, limit);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      ASSERT_TRUE(standby.Import(*b).ok());
      if (!b->more) break;
      since = b->next;
    }
  }
}

TEST_F(HistoryStoreTest, ACopyHoldsTheLeadersBucketsAndCopyingAgainAddsNothing) {
  auto leader = MustOpen(Path("leader.db"));
  auto standby = MustOpen(Path("standby.db"));
  ASSERT_TRUE(leader && standby);
  for (int64_t t : {0, 20, 60, 70, 110, 120})
    ASSERT_TRUE(
        leader->Write(t, {{"gpus_used", "cluster", double(t) / 10}, {"gpus_used", "pool:h100", 1}})
            .ok());
  CopyFrom(*leader, *standby);
  const std::vector<HistoryRow> rows = AllRows(*leader, HistoryResolution::kFine);
  ASSERT_EQ(rows.size(), 6u);  // 3 minutes x 2 series
  EXPECT_EQ(rows[0], (HistoryRow{"gpus_used", "cluster", 0, 2.0, 2}));
  EXPECT_EQ(AllRows(*standby, HistoryResolution::kFine), rows);
  EXPECT_EQ(standby->Read("gpus_used", "cluster", 0, 1000)->points,
            leader->Read("gpus_used", "cluster", 0, 1000)->points);

  // Copying the same rows again, from the start or from the newest bucket, changes nothing.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(standby->Import(*leader->Export(HistoryResolution::kFine, 0, 1000)).ok());
    CopyFrom(*leader, *standby);
  }
  EXPECT_EQ(AllRows(*standby, HistoryResolution::kFine), rows);
  EXPECT_EQ(*standby->CountFine(), 6);

  // The leader goes on filling its newest bucket and starts another: the standby's copy of the
  // newest bucket is replaced by the leader's, not added to.
  ASSERT_TRUE(leader->Write(130, {{"gpus_used", "cluster", 5}}).ok());
  ASSERT_TRUE(leader->Write(180, {{"gpus_used", "cluster", 7}}).ok());
  EXPECT_EQ(standby->Newest()->fine, 120);
  CopyFrom(*leader, *standby);
  EXPECT_EQ(AllRows(*standby, HistoryResolution::kFine),
            AllRows(*leader, HistoryResolution::kFine));
  auto series = standby->Read("gpus_used", "cluster", 0, 1000);
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(series->points, (std::vector<HistoryPoint>{{0, 1}, {60, 8}, {120, 8.5}, {180, 7}}));
  EXPECT_EQ(*standby->CountFine(), 7);
}

TEST_F(HistoryStoreTest, ExportPagesByWholeTimes) {
  auto s = MustOpen(Path());
  ASSERT_TRUE(s);
  for (int64_t t = 0; t < 5 * 60; t += 60)
    ASSERT_TRUE(s->Write(t, {{"a", "cluster", 1}, {"b", "cluster", 2}, {"c", "cluster", 3}}).ok());
  // Four rows: the fifth row is the second time's, so the page ends before that time.
  auto b = s->Export(HistoryResolution::kFine, 0, 4);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rows.size(), 3u);
  EXPECT_TRUE(b->more);
  EXPECT_EQ(b->next, 60);
  // A time with more rows than the limit comes whole, alone.
  b = s->Export(HistoryResolution::kFine, 60, 2);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->rows.size(), 3u);
  EXPECT_EQ(b->rows.front().time, 60);
  EXPECT_EQ(b->rows.back().time, 60);
  EXPECT_EQ(b->next, 61);
  // Every page size reads every row once, in order.
  const std::vector<HistoryRow> all = AllRows(*s, HistoryResolution::kFine);
  ASSERT_EQ(all.size(), 15u);
  for (size_t limit : {1, 2, 3, 4, 7, 14, 15, 16})
    EXPECT_EQ(AllRows(*s, HistoryResolution::kFine, limit), all) << "limit " << limit;
  // Nothing at or after `since`: no rows, nothing more.
  b = s->Export(HistoryResolution::kFine, 1000, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->rows.empty());
  EXPECT_FALSE(b->more);
  EXPECT_FALSE(s->Export(HistoryResolution::kFine, 0, 0).ok());
}

// The old leader rolled hour 0 up while all its minutes were kept; by the time the standby
// copies, the oldest minutes have expired. The standby, now the leader, keeps the old leader's
// hour rather than rolling it up again from the minutes left, rolls up the next hour itself and
// goes on filling the bucket the old leader was filling.
TEST_F(HistoryStoreTest, ANewLeaderContinuesTheOldLeadersBucketsAndRollUps) {
  auto leader = MustOpen(Path("leader.db"));
  auto standby = MustOpen(Path("standby.db"));
  ASSERT_TRUE(leader && standby);
  for (int i = 0; i < 60; ++i)
    ASSERT_TRUE(leader->Write(i * 60, {{"m", "cluster", double(i)}}).ok());
  ASSERT_TRUE(leader->Write(3600, {{"m", "cluster", 100}}).ok());
  ASSERT_TRUE(leader->Maintain(3600).ok());
  ASSERT_EQ(*leader->CountCoarse(), 1);
  // The minutes of hour 0 the leader has no more (as if expired): the first half.
  HistoryBatch fine = *leader->Export(HistoryResolution::kFine, 30 * 60, 100000);
  ASSERT_TRUE(standby->Import(fine).ok());
  ASSERT_TRUE(standby->Import(*leader->Export(HistoryResolution::kCoarse, 0, 100000)).ok());

  // The standby leads: hour 1 continues in the same bucket, then hour 1 completes.
  ASSERT_TRUE(standby->Write(3610, {{"m", "cluster", 200}}).ok());
  for (int i = 1; i < 60; ++i)
    ASSERT_TRUE(standby->Write(3600 + i * 60, {{"m", "cluster", 1}}).ok());
  EXPECT_EQ(standby->Read("m", "cluster", 3600, 3600)->points,
            (std::vector<HistoryPoint>{{3600, 150}}));
  ASSERT_TRUE(standby->Maintain(7200).ok());
  const std::vector<HistoryRow> coarse = AllRows(*standby, HistoryResolution::kCoarse);
  ASSERT_EQ(coarse.size(), 2u);
  // Hour 0 as the old leader rolled it (the mean of 0..59), not from the minutes 30..59 left.
  EXPECT_EQ(coarse[0], AllRows(*leader, HistoryResolution::kCoarse).at(0));
  EXPECT_EQ(coarse[0], (HistoryRow{"m", "cluster", 0, 1770, 60}));
  EXPECT_EQ(coarse[1], (HistoryRow{"m", "cluster", 3600, 150 + 59, 60}));
  EXPECT_EQ(*standby->CountCoarse(), 2);
}

TEST_F(HistoryStoreTest, ImportRefusesOtherStepsAndEmptyBuckets) {
  auto s = MustOpen(Path());
  ASSERT_TRUE(s);
  HistoryBatch b;
  b.fine_step = 1;
  b.coarse_step = 3600;
  b.rows = {{"m", "cluster", 5, 1, 1}};
  Status st = s->Import(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("steps of 1 s and 3600 s, this history keeps 60 s and 3600 s"),
            std::string::npos)
      << st.message();
  b.fine_step = 60;
  b.rows = {{"m", "cluster", 60, 1, 1}, {"m", "cluster", 120, 1, 0}};
  st = s->Import(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("m/cluster at 120: count must be at least 1"), std::string::npos)
      << st.message();
  EXPECT_EQ(*s->CountFine(), 0) << "a refused batch stores nothing";
}

// A restarted replica opens its file again and goes on from where it stopped: the hours it
// rolled up are not rolled up again, new points follow the old ones.
TEST_F(HistoryStoreTest, ARestartedReplicaContinuesFromItsFile) {
  {
    auto s = MustOpen(Path());
    ASSERT_TRUE(s);
    for (int i = 0; i < 61; ++i) ASSERT_TRUE(s->Write(i * 60, {{"m", "cluster", 2}}).ok());
    ASSERT_TRUE(s->Maintain(3600).ok());
  }
  auto s = MustOpen(Path());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->Newest()->fine, 3600);
  EXPECT_EQ(s->Newest()->coarse, 0);
  ASSERT_TRUE(s->Write(3630, {{"m", "cluster", 4}}).ok());
  ASSERT_TRUE(s->Write(3660, {{"m", "cluster", 4}}).ok());
  ASSERT_TRUE(s->Maintain(3660).ok());
  EXPECT_EQ(*s->CountCoarse(), 1);
  auto r = s->Read("m", "cluster", 3540, 3660);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->points, (std::vector<HistoryPoint>{{3540, 2}, {3600, 3}, {3660, 4}}));
  EXPECT_EQ(s->Read("m", "cluster", 0, 3599, 3600)->points, (std::vector<HistoryPoint>{{0, 2}}));
}

// ---- Crash safety: writers killed with SIGKILL in the middle of their work. ----

// The writer's shape: every Write at time t stores kCrashSeries samples whose values encode t and
// the series, each in a fine bucket of its own, so every stored row says which Write made it.
constexpr int kCrashSeries = 40;
constexpr int64_t kCrashStart = 3600;   // the first Write; hours from here on are whole
constexpr int kCrashMaintainEvery = 7;  // Writes between two Maintain calls

HistoryOptions CrashOptions() {
  HistoryOptions o;  // 1-minute and 1-hour steps; minutes kept 2 hours, so deletes happen
  o.fine_retention_seconds = 2 * 3600;
  return o;
}

std::string CrashMetric(int i) { return "m" + std::to_string(i); }
double CrashValue(int64_t t, int i) { return static_cast<double>(t * 1000 + i); }

std::vector<HistorySample> CrashSamples(int64_t t) {
  std::vector<HistorySample> out;
  for (int i = 0; i < kCrashSeries; ++i)
    out.push_back({CrashMetric(i), "cluster", CrashValue(t, i)});
  return out;
}

// What the writer tells the parent through the pipe, one int64 each: (t << 2) | step.
enum CrashStep : int64_t { kWriting = 0, kWritten = 1, kMaintaining = 2, kMaintained = 3 };

// The child: opens the file, continues after the newest bucket it holds, and says when it starts
// and ends each Write and Maintain; kWritten is the acknowledgement, sent after Write returned
// OK. Never returns; ends with _exit (or SIGKILL).
[[noreturn]] void RunCrashWriter(const std::string& path, int fd) {
  auto fail = [](const char* what, const Status& st) {
    std::string m = std::string("crash writer: ") + what + ": " + st.ToString() + "\n";
    (void)!write(STDERR_FILENO, m.data(), m.size());
    _exit(3);
  };
  auto opened = HistoryStore::Open(path, CrashOptions());
  if (!opened.ok()) fail("Open", opened.status());
  HistoryStore& store = **opened;
  Result<HistoryPosition> at = store.Newest();
  if (!at.ok()) fail("Newest", at.status());
  auto say = [fd](int64_t t, CrashStep step) {
    const int64_t v = (t << 2) | step;
    if (write(fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) _exit(4);
  };
  for (int64_t t = at->fine == 0 ? kCrashStart : at->fine + 60;; t += 60) {
    say(t, kWriting);
    if (Status st = store.Write(t, CrashSamples(t)); !st.ok()) fail("Write", st);
    say(t, kWritten);
    if ((t / 60) % kCrashMaintainEvery == 0) {
      say(t, kMaintaining);
      if (Status st = store.Maintain(t); !st.ok()) fail("Maintain", st);
      say(t, kMaintained);
    }
  }
}

struct KilledWriter {
  std::vector<int64_t> acks;  // times of the Writes acknowledged
  int64_t last = -1;          // the last thing said before the kill; -1: nothing (in Open)
  int64_t attempted = -1;     // the time of the last Write begun
};

// Kills a writer (forked from this process) at a moment `delay` after its start; fails the test
// if it died of anything but the kill.
KilledWriter RunAndKillWriter(const std::string& path, std::chrono::microseconds delay) {
  KilledWriter out;
  std::vector<int64_t>& acks = out.acks;
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return out;
  }
  if (pid == 0) {
    close(fds[0]);
    RunCrashWriter(path, fds[1]);
  }
  close(fds[1]);
  // Read acknowledgements while waiting, so the writer never blocks on a full pipe.
  std::string bytes;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + delay;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (left.count() < 2000) {
      usleep(static_cast<useconds_t>(left.count()));
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count() / 1000)) > 0) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) break;  // the writer is gone before its time: waitpid says why
      bytes.append(buf, static_cast<size_t>(n));
    }
  }
  kill(pid, SIGKILL);
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  EXPECT_TRUE(killed) << "the writer ended by itself (exit status "
                      << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ") before it was killed";
  for (size_t i = 0; i + sizeof(int64_t) <= bytes.size(); i += sizeof(int64_t)) {
    int64_t v;
    std::memcpy(&v, bytes.data() + i, sizeof v);
    if ((v & 3) == kWritten) acks.push_back(v >> 2);
    if ((v & 3) == kWriting) out.attempted = v >> 2;
    out.last = v;
  }
  return out;
}

// Writers are killed with SIGKILL at seeded random moments, in Open, in Write, in Maintain or in
// a checkpoint, each round a new writer on the same file continuing from where the file says it
// is. Afterwards the file opens, passes SQLite's integrity check, holds every acknowledged Write
// whole with its exact values, no Write in part, roll-ups of whole hours only, and takes more
// writes. CHAMBER_CRASH_SEED=<n> repeats a run's kill moments (roughly: timing still varies).
TEST_F(HistoryStoreTest, KilledWritersLoseNothingAcknowledged) {
  uint32_t seed = 20261204;
  if (const char* env = std::getenv("CHAMBER_CRASH_SEED"))
    seed = static_cast<uint32_t>(std::atol(env));
  SCOPED_TRACE("CHAMBER_CRASH_SEED=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::string path = Path();
  constexpr int kRounds = 40;
  std::set<int64_t> acked;
  int64_t attempted = -1;
  int rounds_with_wal = 0;
  std::map<std::string, int> killed_in;
  for (int round = 0; round < kRounds; ++round) {
    // Mostly some milliseconds of writing; now and then a kill within Open or the first Write.
    const int64_t us = rng() % 4 == 0 ? static_cast<int64_t>(rng() % 3000)
                                      : 5000 + static_cast<int64_t>(rng() % 40000);
    SCOPED_TRACE("round " + std::to_string(round) + ", kill after " + std::to_string(us) + " us");
    const KilledWriter w = RunAndKillWriter(path, std::chrono::microseconds(us));
    for (int64_t t : w.acks)
      if (!acked.insert(t).second) {
        ADD_FAILURE() << "the Write at " << t << " was acknowledged before: the file lost it, "
                      << "so this writer wrote it again";
        break;
      }
    attempted = std::max(attempted, w.attempted);
    ++killed_in[w.last < 0                     ? "Open"
                : (w.last & 3) == kWriting     ? "Write"
                : (w.last & 3) == kMaintaining ? "Maintain"
                                               : "between calls"];
    if (fs::exists(path + "-wal")) ++rounds_with_wal;
    if (HasFailure()) return;
  }
  ASSERT_FALSE(acked.empty()) << "no writer got a Write through";
  const int64_t last_ack = *acked.rbegin();

  // Open takes the file as the last writer left it, log beside it.
  auto opened = HistoryStore::Open(path, CrashOptions());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  HistoryStore& store = **opened;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    std::string result;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr) == SQLITE_OK)
      while (sqlite3_step(s) == SQLITE_ROW)
        result += (result.empty() ? "" : "; ") +
                  std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
    sqlite3_close(db);
    EXPECT_EQ(result, "ok") << "PRAGMA integrity_check";
  }

  // Fine rows: every stored time holds all the series of its Write with their exact values; the
  // times run without a gap up to the last acknowledged Write or later, but not past the last
  // Write begun: a writer killed after its commit but before its acknowledgement leaves one
  // Write more, and the next writer continues after it.
  std::map<int64_t, std::vector<HistoryRow>> fine;
  for (HistoryRow& r : AllRows(store, HistoryResolution::kFine)) fine[r.time].push_back(r);
  ASSERT_FALSE(fine.empty());
  for (const auto& [t, rows] : fine) {
    ASSERT_EQ(rows.size(), static_cast<size_t>(kCrashSeries))
        << "the Write at " << t << " is in part";
    std::map<std::string, HistoryRow> by_metric;
    for (const HistoryRow& r : rows) by_metric[r.metric] = r;
    for (int i = 0; i < kCrashSeries; ++i) {
      const HistoryRow& r = by_metric[CrashMetric(i)];
      EXPECT_EQ(r, (HistoryRow{CrashMetric(i), "cluster", t, CrashValue(t, i), 1})) << "at " << t;
    }
  }
  const int64_t oldest = fine.begin()->first, newest = fine.rbegin()->first;
  EXPECT_EQ(static_cast<int64_t>(fine.size()), (newest - oldest) / 60 + 1)
      << "a gap in the minutes";
  EXPECT_TRUE(newest >= last_ack && newest <= attempted)
      << "newest stored " << newest << ", last acknowledged " << last_ack << ", last begun "
      << attempted;

  // Coarse rows: exactly the hours before the roll-up mark, each of its 60 whole minutes.
  Result<HistoryBatch> coarse = store.Export(HistoryResolution::kCoarse, 0, 1000000);
  ASSERT_TRUE(coarse.ok()) << coarse.status().ToString();
  const int64_t rolled = coarse->rolled_up_until;
  std::map<int64_t, std::vector<HistoryRow>> hours;
  for (const HistoryRow& r : coarse->rows) hours[r.time].push_back(r);
  const int64_t whole_hours = rolled > kCrashStart ? (rolled - kCrashStart) / 3600 : 0;
  EXPECT_EQ(static_cast<int64_t>(hours.size()), whole_hours) << "roll-up mark " << rolled;
  for (const auto& [h, rows] : hours) {
    ASSERT_TRUE(h >= kCrashStart && h < rolled) << "an hour at " << h << ", mark " << rolled;
    ASSERT_EQ(rows.size(), static_cast<size_t>(kCrashSeries)) << "the hour at " << h << " in part";
    for (const HistoryRow& r : rows) {
      const int i = std::atoi(r.metric.c_str() + 1);
      double sum = 0;
      for (int64_t t = h; t < h + 3600; t += 60) sum += CrashValue(t, i);
      EXPECT_EQ(r, (HistoryRow{CrashMetric(i), "cluster", h, sum, 60})) << "hour " << h;
    }
  }

  // Every acknowledged Write is there: as its minute, or inside a rolled-up hour once its minute
  // may have expired (minutes within the retention of the newest are all kept).
  for (int64_t t : acked) {
    if (fine.count(t)) continue;
    EXPECT_LT(t, newest - CrashOptions().fine_retention_seconds)
        << "acknowledged " << t << " is lost";
    EXPECT_LT(t, rolled) << "acknowledged " << t << " expired without a roll-up";
  }
  // Reads agree: the newest minute's value, and the oldest hour's mean.
  Result<HistorySeries> series = store.Read(CrashMetric(7), "cluster", newest, newest);
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  EXPECT_EQ(series->points, (std::vector<HistoryPoint>{{newest, CrashValue(newest, 7)}}));
  if (!hours.empty() && hours.begin()->first + 3600 <= oldest) {
    const int64_t h = hours.begin()->first;
    series = store.Read(CrashMetric(7), "cluster", h, h + 3599);
    ASSERT_TRUE(series.ok()) << series.status().ToString();
    ASSERT_EQ(series->points.size(), 1u);
    EXPECT_EQ(series->points[0].time, h);
    EXPECT_DOUBLE_EQ(series->points[0].value, CrashValue(h, 7) + 59 * 60 * 1000 / 2.0);
  }

  // And the file goes on taking writes.
  ASSERT_TRUE(store.Write(newest + 60, CrashSamples(newest + 60)).ok());
  ASSERT_TRUE(store.Maintain(newest + 60).ok());
  series = store.Read(CrashMetric(0), "cluster", newest + 60, newest + 60);
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(series->points, (std::vector<HistoryPoint>{{newest + 60, CrashValue(newest + 60, 0)}}));

  std::cout << "[ crash    ] seed " << seed << ": " << kRounds << " kills (";
  for (const auto& [where, n] : killed_in) std::cout << n << " in " << where << ", ";
  std::cout << "a log beside the file after " << rounds_with_wal << "), " << acked.size()
            << " acknowledged Writes, " << fine.size() << " minutes and " << hours.size()
            << " hours kept\n";
}

}  // namespace
}  // namespace chamber::fleet
