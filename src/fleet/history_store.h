// The fleet's history: time series in an embedded SQLite file, kept at two resolutions.
//
// Samples land in fine buckets (default 1 minute): a bucket's value is the mean of the samples
// written into it. Maintain() rolls every complete coarse bucket (default 1 hour) up from the
// fine buckets (the mean of the fine buckets' values) and deletes what is older than each
// resolution's retention (default 2 days fine, 90 days coarse). Reads use fine points where
// they are still kept and coarse points before that, averaged into the requested step.
//
// The file identifies itself in a `chamber_meta` table. Opening a file that is not an SQLite
// database, is corrupt, or holds some other application's tables is an error; such a file is
// never written to. Thread-safe: one connection behind a mutex.
//
// Durability: the file is in WAL mode with synchronous=NORMAL, and every Write, Maintain,
// ApplyRetention and Import is one transaction. A commit is in the write-ahead log (in the
// operating system's page cache) before the call returns, so once Write returns OK its samples
// survive a crash of the process, SIGKILL included: the next Open replays the log left beside
// the file (`-wal`, `-shm`) and finds every acknowledged call whole and the one in flight either
// whole or absent, never in part. A power loss or a crash of the operating system keeps the
// file consistent too, but may lose the calls since the log was last synced (at a checkpoint):
// NORMAL does not sync the log at each commit, which FULL would do at the price of an fsync
// per cycle. The fleet's history tolerates losing its last seconds; it does not tolerate a
// corrupt file (HistoryStoreTest.KilledWritersLoseNothingAcknowledged).
//
// Replication (docs/fleet.md, "History on several replicas"): a standby copies the leader's
// buckets as they are stored, sum and count, with Export on the leader and Import on the
// standby. A bucket is keyed by (metric, scope, time), and Import replaces a bucket rather than
// adding to it, so copying the same rows again changes nothing; a standby asks again from the
// newest bucket it holds (Newest), which the leader may still be filling. The leader's roll-up
// mark travels with its coarse rows, so a standby that becomes the leader rolls up exactly the
// hours the old leader had not.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace chamber::fleet {

struct HistoryOptions {
  int64_t fine_step_seconds = 60;
  int64_t fine_retention_seconds = 2 * 24 * 3600;
  int64_t coarse_step_seconds = 3600;
  int64_t coarse_retention_seconds = 90 * 24 * 3600;
};
// Checks steps are positive, the coarse step a multiple of the fine one, and retentions at
// least one step of their resolution (the fine retention at least one coarse step, so that
// roll-ups see complete hours).
Status ValidateHistoryOptions(const HistoryOptions& o);

struct HistorySample {
  std::string metric;
  std::string scope;  // "cluster", "pool:<name>", "queue:<name>"
  double value = 0;
};

struct HistoryPoint {
  int64_t time = 0;  // unix seconds, the start of the point's step
  double value = 0;
  friend bool operator==(const HistoryPoint&, const HistoryPoint&) = default;
};

struct HistorySeries {
  int64_t step = 0;
  std::vector<HistoryPoint> points;
};

// One stored bucket: its value is sum / count.
struct HistoryRow {
  std::string metric;
  std::string scope;
  int64_t time = 0;
  double sum = 0;
  int64_t count = 0;
  friend bool operator==(const HistoryRow&, const HistoryRow&) = default;
};

enum class HistoryResolution { kFine, kCoarse };

// Rows of one resolution from `since` on, as Export reads them.
struct HistoryBatch {
  HistoryResolution resolution = HistoryResolution::kFine;
  int64_t fine_step = 0;
  int64_t coarse_step = 0;
  // Coarse buckets before this time are rolled up; read with the rows, so every coarse row
  // before it is in this batch or an earlier one.
  int64_t rolled_up_until = 0;
  std::vector<HistoryRow> rows;  // by time, then metric and scope
  bool more = false;             // the limit cut the rows short: ask again from `next`
  int64_t next = 0;
};

// The newest bucket held at each resolution (0 when none): where a follower asks from.
struct HistoryPosition {
  int64_t fine = 0;
  int64_t coarse = 0;
};

struct HistoryCatalogue {
  std::vector<std::string> metrics;
  std::vector<std::string> scopes;
};

class HistoryStore {
 public:
  // Opens (creating when absent) the history file at `path`.
  static Result<std::unique_ptr<HistoryStore>> Open(const std::string& path,
                                                    const HistoryOptions& options = {});
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  // Adds samples taken at `unix_seconds`, in one transaction.
  Status Write(int64_t unix_seconds, const std::vector<HistorySample>& samples);

  // Rolls complete coarse buckets before `now` up and applies retention relative to `now`.
  Status Maintain(int64_t now_unix_seconds);

  // Points of one series with time in [from, to], oldest first. step 0: the fine step when
  // only fine points are involved, else the coarse step. A step is the mean of the stored
  // points whose time falls in it; steps without data are absent.
  Result<HistorySeries> Read(const std::string& metric, const std::string& scope, int64_t from,
                             int64_t to, int64_t step = 0);

  Result<HistoryCatalogue> Catalogue();

  // Rows of `resolution` with time >= since, oldest first: whole buckets' times, stopping after
  // about `limit` rows (all rows of one time are always sent together, so a time with more rows
  // than `limit` comes alone).
  Result<HistoryBatch> Export(HistoryResolution resolution, int64_t since, size_t limit);
  // Stores a batch of another store's rows, each replacing the bucket of the same key, in one
  // transaction; a coarse batch also raises the roll-up mark to the batch's. Refused, storing
  // nothing, when the batch's steps are not this store's.
  Status Import(const HistoryBatch& batch);
  Result<HistoryPosition> Newest();
  // Retention alone (Maintain without the roll-up), for a store that copies its roll-ups.
  Status ApplyRetention(int64_t now_unix_seconds);

  // Rows at each resolution, for tests and the benchmark.
  Result<int64_t> CountFine();
  Result<int64_t> CountCoarse();

  const HistoryOptions& options() const { return options_; }
  const std::string& path() const { return path_; }

 private:
  HistoryStore(sqlite3* db, std::string path, const HistoryOptions& options)
      : db_(db), path_(std::move(path)), options_(options) {}
  Status Exec(const char* sql);
  // COMMIT, or ROLLBACK when that fails, so that a call that returns an error stored nothing
  // and leaves no transaction open behind it.
  Status Commit();
  Status Error(const std::string& what) const;
  Result<int64_t> QueryInt(const char* sql);
  Status Prepare();
  Status ApplyRetentionLocked(int64_t now);

  std::mutex mu_;
  sqlite3* db_ = nullptr;
  std::string path_;
  HistoryOptions options_;
  sqlite3_stmt* insert_fine_ = nullptr;
};

}  // namespace chamber::fleet
