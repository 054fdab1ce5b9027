#include "fleet/history_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace chamber::fleet {
namespace {

constexpr const char* kFormat = "chamber-fleet-history";
constexpr int64_t kVersion = 1;

// Fine and coarse buckets hold a sum and a count so that a bucket's value is their mean.
constexpr const char* kSchema = R"sql(
CREATE TABLE chamber_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE points_fine (
  metric TEXT NOT NULL, scope TEXT NOT NULL, ts INTEGER NOT NULL,
  sum REAL NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (metric, scope, ts)) WITHOUT ROWID;
CREATE INDEX points_fine_ts ON points_fine (ts);
CREATE TABLE points_coarse (
  metric TEXT NOT NULL, scope TEXT NOT NULL, ts INTEGER NOT NULL,
  sum REAL NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (metric, scope, ts)) WITHOUT ROWID;
CREATE INDEX points_coarse_ts ON points_coarse (ts);
)sql";

int64_t FloorTo(int64_t t, int64_t step) {
  const int64_t q = t / step;
  return (t % step != 0 && t < 0 ? q - 1 : q) * step;
}

// RAII for one prepared statement.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
};

bool HasSqliteHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char header[16] = {};
  in.read(header, sizeof header);
  return in.gcount() == 16 && std::memcmp(header, "SQLite format 3\0", 16) == 0;
}

}  // namespace

Status ValidateHistoryOptions(const HistoryOptions& o) {
  if (o.fine_step_seconds <= 0 || o.coarse_step_seconds <= 0)
    return Status::InvalidArgument("history: steps must be positive");
  if (o.coarse_step_seconds % o.fine_step_seconds != 0)
    return Status::InvalidArgument(
        "history: the coarse step (" + std::to_string(o.coarse_step_seconds) +
        " s) must be a multiple of the fine step (" + std::to_string(o.fine_step_seconds) + " s)");
  if (o.fine_retention_seconds < o.coarse_step_seconds)
    return Status::InvalidArgument(
        "history: the fine retention must be at least one coarse step, so roll-ups see whole "
        "buckets");
  if (o.coarse_retention_seconds < o.coarse_step_seconds)
    return Status::InvalidArgument("history: the coarse retention must be at least one step");
  return Status::Ok();
}

Status HistoryStore::Error(const std::string& what) const {
  return Status::Internal(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status HistoryStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Internal(path_ + ": " + m);
  }
  return Status::Ok();
}

Status HistoryStore::Commit() {
  Status st = Exec("COMMIT");
  if (!st.ok()) (void)Exec("ROLLBACK");
  return st;
}

Result<int64_t> HistoryStore::QueryInt(const char* sql) {
  Stmt s(db_, sql);
  if (!s.ok()) return Error("query");
  const int rc = sqlite3_step(s.get());
  if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(s.get(), 0));
  if (rc == SQLITE_DONE) return int64_t{0};
  return Error("query");
}

Status HistoryStore::Prepare() {
  const char* sql =
      "INSERT INTO points_fine (metric, scope, ts, sum, count) VALUES (?1, ?2, ?3, ?4, 1) "
      "ON CONFLICT (metric, scope, ts) DO UPDATE SET sum = sum + excluded.sum, count = count + 1";
  if (sqlite3_prepare_v2(db_, sql, -1, &insert_fine_, nullptr) != SQLITE_OK)
    return Error("preparing the insert statement");
  return Status::Ok();
}

Result<std::unique_ptr<HistoryStore>> HistoryStore::Open(const std::string& path,
                                                         const HistoryOptions& options) {
  CHAMBER_RETURN_IF_ERROR(ValidateHistoryOptions(options));
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  const bool empty = !exists || std::filesystem::file_size(path, ec) == 0;
  if (exists && !empty && !HasSqliteHeader(path))
    return Status::FailedPrecondition(path +
                                      ": not an SQLite database, so not a Chamber history file; "
                                      "left untouched (move it away or choose another --data-dir)");
  sqlite3* db = nullptr;
  const int flags =
      SQLITE_OPEN_READWRITE | (empty ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::Unavailable(path + ": cannot open the history database: " + m);
  }
  std::unique_ptr<HistoryStore> store(new HistoryStore(db, path, options));
  sqlite3_busy_timeout(db, 5000);

  if (!empty) {
    // Never write before the file is known to be ours and sound.
    Result<int64_t> tables = store->QueryInt("SELECT count(*) FROM sqlite_master");
    if (!tables.ok())
      return Status::FailedPrecondition(path + ": corrupt history database (" + sqlite3_errmsg(db) +
                                        "); left untouched");
    Stmt check(db, "PRAGMA quick_check");
    if (!check.ok() || sqlite3_step(check.get()) != SQLITE_ROW ||
        std::string(reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0))) != "ok")
      return Status::FailedPrecondition(path +
                                        ": corrupt history database (integrity check "
                                        "failed); left untouched");
    Stmt meta(db, "SELECT key, value FROM chamber_meta");
    if (!meta.ok()) {
      std::string names;
      Stmt list(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
      while (list.ok() && sqlite3_step(list.get()) == SQLITE_ROW) {
        if (!names.empty()) names += ", ";
        names += reinterpret_cast<const char*>(sqlite3_column_text(list.get(), 0));
      }
      if (*tables > 0)
        return Status::FailedPrecondition(
            path + ": an SQLite database of another application (tables: " + names +
            "), not a Chamber history file; left untouched");
    } else {
      std::map<std::string, std::string> kv;
      while (sqlite3_step(meta.get()) == SQLITE_ROW)
        kv[reinterpret_cast<const char*>(sqlite3_column_text(meta.get(), 0))] =
            reinterpret_cast<const char*>(sqlite3_column_text(meta.get(), 1));
      if (kv["format"] != kFormat)
        return Status::FailedPrecondition(path + ": chamber_meta names format \"" + kv["format"] +
                                          "\", not " + kFormat + "; left untouched");
      if (kv["version"] != std::to_string(kVersion))
        return Status::FailedPrecondition(path + ": history format version " + kv["version"] +
                                          " is not supported (this build reads version " +
                                          std::to_string(kVersion) + "); left untouched");
      CHAMBER_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
      CHAMBER_RETURN_IF_ERROR(store->Prepare());
      return store;
    }
  }
  CHAMBER_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  CHAMBER_RETURN_IF_ERROR(store->Exec("BEGIN"));
  CHAMBER_RETURN_IF_ERROR(store->Exec(kSchema));
  const std::string meta = std::string("INSERT INTO chamber_meta VALUES ('format', '") + kFormat +
                           "'), ('version', '" + std::to_string(kVersion) +
                           "'), ('rolled_up_until', '0')";
  CHAMBER_RETURN_IF_ERROR(store->Exec(meta.c_str()));
  CHAMBER_RETURN_IF_ERROR(store->Exec("COMMIT"));
  CHAMBER_RETURN_IF_ERROR(store->Prepare());
  return store;
}

HistoryStore::~HistoryStore() {
  sqlite3_finalize(insert_fine_);
  sqlite3_close(db_);
}

Status HistoryStore::Write(int64_t unix_seconds, const std::vector<HistorySample>& samples) {
  std::lock_guard lock(mu_);
  const int64_t ts = FloorTo(unix_seconds, options_.fine_step_seconds);
  CHAMBER_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const HistorySample& s : samples) {
    sqlite3_reset(insert_fine_);
    sqlite3_bind_text(insert_fine_, 1, s.metric.data(), static_cast<int>(s.metric.size()),
                      SQLITE_STATIC);
    sqlite3_bind_text(insert_fine_, 2, s.scope.data(), static_cast<int>(s.scope.size()),
                      SQLITE_STATIC);
    sqlite3_bind_int64(insert_fine_, 3, ts);
    sqlite3_bind_double(insert_fine_, 4, s.value);
    if (sqlite3_step(insert_fine_) != SQLITE_DONE) {
      Status st = Error("writing a sample");
      sqlite3_reset(insert_fine_);
      (void)Exec("ROLLBACK");
      return st;
    }
  }
  sqlite3_reset(insert_fine_);
  return Commit();
}

Status HistoryStore::Maintain(int64_t now) {
  std::lock_guard lock(mu_);
  const int64_t coarse = options_.coarse_step_seconds;
  CHAMBER_ASSIGN_OR_RETURN(
      int64_t rolled,
      QueryInt("SELECT CAST(value AS INTEGER) FROM chamber_meta WHERE key = 'rolled_up_until'"));
  const int64_t until = FloorTo(now, coarse);  // buckets before this are complete
  CHAMBER_RETURN_IF_ERROR(Exec("BEGIN"));
  if (until > rolled) {
    Stmt roll(db_,
              "INSERT OR REPLACE INTO points_coarse (metric, scope, ts, sum, count) "
              "SELECT metric, scope, (ts - ((ts % ?3) + ?3) % ?3) AS bucket, "
              "SUM(sum / count), COUNT(*) FROM points_fine WHERE ts >= ?1 AND ts < ?2 "
              "GROUP BY metric, scope, bucket");
    if (!roll.ok()) {
      Status st = Error("preparing the roll-up");
      (void)Exec("ROLLBACK");
      return st;
    }
    roll.Bind(1, rolled);
    roll.Bind(2, until);
    roll.Bind(3, coarse);
    if (sqlite3_step(roll.get()) != SQLITE_DONE) {
      Status st = Error("rolling up");
      (void)Exec("ROLLBACK");
      return st;
    }
    Stmt mark(db_, "UPDATE chamber_meta SET value = ?1 WHERE key = 'rolled_up_until'");
    mark.Bind(1, std::to_string(until));
    if (sqlite3_step(mark.get()) != SQLITE_DONE) {
      Status st = Error("recording the roll-up");
      (void)Exec("ROLLBACK");
      return st;
    }
  }
  if (Status st = ApplyRetentionLocked(now); !st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Commit();
}

Status HistoryStore::ApplyRetentionLocked(int64_t now) {
  for (auto [table, retention] : {std::pair{"points_fine", options_.fine_retention_seconds},
                                  std::pair{"points_coarse", options_.coarse_retention_seconds}}) {
    const std::string sql = std::string("DELETE FROM ") + table + " WHERE ts < ?1";
    Stmt del(db_, sql.c_str());
    // A point expires when its whole step lies before now - retention.
    const int64_t step = std::string_view(table) == "points_fine" ? options_.fine_step_seconds
                                                                  : options_.coarse_step_seconds;
    del.Bind(1, now - retention - step + 1);
    if (!del.ok() || sqlite3_step(del.get()) != SQLITE_DONE) return Error("applying retention");
  }
  return Status::Ok();
}

Status HistoryStore::ApplyRetention(int64_t now) {
  std::lock_guard lock(mu_);
  CHAMBER_RETURN_IF_ERROR(Exec("BEGIN"));
  if (Status st = ApplyRetentionLocked(now); !st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Commit();
}

Result<HistoryBatch> HistoryStore::Export(HistoryResolution resolution, int64_t since,
                                          size_t limit) {
  if (limit == 0) return Status::InvalidArgument("limit must be at least 1");
  const bool fine = resolution == HistoryResolution::kFine;
  const std::string table = fine ? "points_fine" : "points_coarse";
  std::lock_guard lock(mu_);
  HistoryBatch b;
  b.resolution = resolution;
  b.fine_step = options_.fine_step_seconds;
  b.coarse_step = options_.coarse_step_seconds;
  // One read transaction: the roll-up mark and the rows agree.
  CHAMBER_RETURN_IF_ERROR(Exec("BEGIN"));
  auto body = [&]() -> Status {
    CHAMBER_ASSIGN_OR_RETURN(
        b.rolled_up_until,
        QueryInt("SELECT CAST(value AS INTEGER) FROM chamber_meta WHERE key = 'rolled_up_until'"));
    // The time of the row `limit` places on: rows from there on wait for the next batch, unless
    // that is the first time of all, which then comes alone.
    int64_t first = 0, cut = 0;
    bool have_first = false, have_cut = false;
    {
      const std::string sql = "SELECT min(ts) FROM " + table + " WHERE ts >= ?1";
      Stmt s(db_, sql.c_str());
      if (!s.ok()) return Error("exporting");
      s.Bind(1, since);
      if (sqlite3_step(s.get()) == SQLITE_ROW && sqlite3_column_type(s.get(), 0) != SQLITE_NULL) {
        first = sqlite3_column_int64(s.get(), 0);
        have_first = true;
      }
    }
    if (!have_first) {
      b.next = since;
      return Status::Ok();
    }
    {
      const std::string sql =
          "SELECT ts FROM " + table + " WHERE ts >= ?1 ORDER BY ts LIMIT 1 OFFSET ?2";
      Stmt s(db_, sql.c_str());
      if (!s.ok()) return Error("exporting");
      s.Bind(1, since);
      s.Bind(2, static_cast<int64_t>(limit));
      if (sqlite3_step(s.get()) == SQLITE_ROW) {
        cut = sqlite3_column_int64(s.get(), 0);
        have_cut = true;
      }
    }
    int64_t hi = INT64_MAX;  // rows with ts < hi
    if (have_cut) {
      hi = cut == first ? first + 1 : cut;
      b.more = true;
      b.next = hi;
    }
    const std::string sql = "SELECT metric, scope, ts, sum, count FROM " + table +
                            " WHERE ts >= ?1 AND ts < ?2 ORDER BY ts, metric, scope";
    Stmt s(db_, sql.c_str());
    if (!s.ok()) return Error("exporting");
    s.Bind(1, since);
    s.Bind(2, hi);
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      HistoryRow r;
      r.metric = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
      r.scope = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 1));
      r.time = sqlite3_column_int64(s.get(), 2);
      r.sum = sqlite3_column_double(s.get(), 3);
      r.count = sqlite3_column_int64(s.get(), 4);
      b.rows.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return Error("exporting");
    if (!b.more) b.next = b.rows.empty() ? since : b.rows.back().time;
    return Status::Ok();
  };
  Status st = body();
  (void)Exec(st.ok() ? "COMMIT" : "ROLLBACK");
  if (!st.ok()) return st;
  return b;
}

Status HistoryStore::Import(const HistoryBatch& batch) {
  if (batch.fine_step != options_.fine_step_seconds ||
      batch.coarse_step != options_.coarse_step_seconds)
    return Status::FailedPrecondition(
        path_ + ": the rows come in steps of " + std::to_string(batch.fine_step) + " s and " +
        std::to_string(batch.coarse_step) + " s, this history keeps " +
        std::to_string(options_.fine_step_seconds) + " s and " +
        std::to_string(options_.coarse_step_seconds) + " s; nothing copied");
  for (const HistoryRow& r : batch.rows)
    if (r.count < 1)
      return Status::InvalidArgument("history row " + r.metric + "/" + r.scope + " at " +
                                     std::to_string(r.time) + ": count must be at least 1");
  const bool fine = batch.resolution == HistoryResolution::kFine;
  const std::string sql = std::string("INSERT OR REPLACE INTO ") +
                          (fine ? "points_fine" : "points_coarse") +
                          " (metric, scope, ts, sum, count) VALUES (?1, ?2, ?3, ?4, ?5)";
  std::lock_guard lock(mu_);
  CHAMBER_RETURN_IF_ERROR(Exec("BEGIN"));
  auto body = [&]() -> Status {
    Stmt put(db_, sql.c_str());
    if (!put.ok()) return Error("preparing the copy");
    for (const HistoryRow& r : batch.rows) {
      sqlite3_reset(put.get());
      put.Bind(1, r.metric);
      put.Bind(2, r.scope);
      put.Bind(3, r.time);
      sqlite3_bind_double(put.get(), 4, r.sum);
      put.Bind(5, r.count);
      if (sqlite3_step(put.get()) != SQLITE_DONE) return Error("copying a row");
    }
    if (!fine) {
      Stmt mark(db_,
                "UPDATE chamber_meta SET value = ?1 WHERE key = 'rolled_up_until' AND "
                "CAST(value AS INTEGER) < ?2");
      mark.Bind(1, std::to_string(batch.rolled_up_until));
      mark.Bind(2, batch.rolled_up_until);
      if (!mark.ok() || sqlite3_step(mark.get()) != SQLITE_DONE)
        return Error("recording the roll-up");
    }
    return Status::Ok();
  };
  if (Status st = body(); !st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Commit();
}

Result<HistoryPosition> HistoryStore::Newest() {
  std::lock_guard lock(mu_);
  HistoryPosition p;
  CHAMBER_ASSIGN_OR_RETURN(p.fine, QueryInt("SELECT coalesce(max(ts), 0) FROM points_fine"));
  CHAMBER_ASSIGN_OR_RETURN(p.coarse, QueryInt("SELECT coalesce(max(ts), 0) FROM points_coarse"));
  return p;
}

Result<HistorySeries> HistoryStore::Read(const std::string& metric, const std::string& scope,
                                         int64_t from, int64_t to, int64_t step) {
  if (step < 0) return Status::InvalidArgument("step must not be negative");
  if (to < from) return Status::InvalidArgument("`to` is before `from`");
  std::lock_guard lock(mu_);
  // Fine points first; coarse points only for buckets that end before the oldest fine point.
  std::vector<HistoryPoint> fine, coarse;
  int64_t oldest_fine = INT64_MAX;
  {
    Stmt s(db_, "SELECT min(ts) FROM points_fine WHERE metric = ?1 AND scope = ?2");
    s.Bind(1, metric);
    s.Bind(2, scope);
    if (!s.ok()) return Error("reading");
    if (sqlite3_step(s.get()) == SQLITE_ROW && sqlite3_column_type(s.get(), 0) != SQLITE_NULL)
      oldest_fine = sqlite3_column_int64(s.get(), 0);
  }
  auto query = [&](const char* sql, int64_t lo, int64_t hi,
                   std::vector<HistoryPoint>& out) -> Status {
    Stmt s(db_, sql);
    if (!s.ok()) return Error("reading");
    s.Bind(1, metric);
    s.Bind(2, scope);
    s.Bind(3, lo);
    s.Bind(4, hi);
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW)
      out.push_back({sqlite3_column_int64(s.get(), 0), sqlite3_column_double(s.get(), 1)});
    if (rc != SQLITE_DONE) return Error("reading");
    return Status::Ok();
  };
  CHAMBER_RETURN_IF_ERROR(
      query("SELECT ts, sum / count FROM points_fine WHERE metric = ?1 AND scope = ?2 AND ts >= ?3 "
            "AND ts <= ?4 ORDER BY ts",
            from, to, fine));
  const int64_t coarse_hi =
      std::min(to, oldest_fine == INT64_MAX ? to : oldest_fine - options_.coarse_step_seconds);
  if (from <= coarse_hi)
    CHAMBER_RETURN_IF_ERROR(query(
        "SELECT ts, sum / count FROM points_coarse WHERE metric = ?1 AND scope = ?2 AND ts >= ?3 "
        "AND ts <= ?4 ORDER BY ts",
        from, coarse_hi, coarse));

  HistorySeries out;
  out.step = step > 0
                 ? step
                 : (coarse.empty() ? options_.fine_step_seconds : options_.coarse_step_seconds);
  std::vector<HistoryPoint> all = std::move(coarse);
  all.insert(all.end(), fine.begin(), fine.end());
  // Average into steps; the inputs are sorted and coarse points precede fine ones.
  double sum = 0;
  int64_t n = 0, bucket = 0;
  for (const HistoryPoint& p : all) {
    const int64_t b = FloorTo(p.time, out.step);
    if (n > 0 && b != bucket) {
      out.points.push_back({bucket, sum / static_cast<double>(n)});
      sum = 0;
      n = 0;
    }
    bucket = b;
    sum += p.value;
    ++n;
  }
  if (n > 0) out.points.push_back({bucket, sum / static_cast<double>(n)});
  return out;
}

Result<HistoryCatalogue> HistoryStore::Catalogue() {
  std::lock_guard lock(mu_);
  HistoryCatalogue c;
  for (auto [column, out] : {std::pair{"metric", &c.metrics}, std::pair{"scope", &c.scopes}}) {
    const std::string sql = std::string("SELECT DISTINCT ") + column + " FROM points_fine UNION " +
                            "SELECT DISTINCT " + column + " FROM points_coarse ORDER BY 1";
    Stmt s(db_, sql.c_str());
    if (!s.ok()) return Error("listing");
    while (sqlite3_step(s.get()) == SQLITE_ROW)
      out->push_back(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)));
  }
  return c;
}

Result<int64_t> HistoryStore::CountFine() {
  std::lock_guard lock(mu_);
  return QueryInt("SELECT count(*) FROM points_fine");
}

Result<int64_t> HistoryStore::CountCoarse() {
  std::lock_guard lock(mu_);
  return QueryInt("SELECT count(*) FROM points_coarse");
}

}  // namespace chamber::fleet
