// The fleet history on several chamberd replicas (docs/fleet.md, "History on several replicas").
//
// Only the leader measures the fleet and writes the history, into its own file (each replica
// has a volume of its own). A standby copies the leader's buckets as they are stored through the
// leader's API, GET /api/v1/history/replication, every period: fine rows from the newest fine
// bucket it holds on, then coarse rows and the leader's roll-up mark. Copied buckets replace
// buckets of the same key (HistoryStore::Import), so a copy repeated after a lost answer or a
// restart adds nothing; the newest bucket, which the leader may still be filling, is copied
// again each round. When a standby becomes the leader it stops copying and writes on into the
// same file: its history continues from the old leader's up to the last round before the
// failover. A replica that restarts opens its file again and copies only what it lacks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "fleet/history_store.h"

namespace chamber::daemon {

// The answer of GET /api/v1/history/replication, and back. Parse errors name the field
// ("history batch: rows[3][4]: expected an integer of at least 1").
nlohmann::json HistoryBatchJson(const fleet::HistoryBatch& batch);
Result<fleet::HistoryBatch> ParseHistoryBatch(const nlohmann::json& j);

// Copies the leader's history into `store` while this replica is a standby.
class HistoryFollower {
 public:
  // GETs `target` (a path with its query) from the leader: the body of a 200 answer, else an
  // error saying why.
  using Fetch = std::function<Result<std::string>(const std::string& target)>;
  struct Options {
    std::chrono::milliseconds period{5000};
    size_t page_rows = 5000;                      // rows asked for per request
    std::function<int64_t()> now_unix = nullptr;  // retention's clock; null: the system clock
  };

  HistoryFollower(fleet::HistoryStore* store, Fetch fetch, Options options);
  ~HistoryFollower();  // Stop(), then waits for the thread
  HistoryFollower(const HistoryFollower&) = delete;
  HistoryFollower& operator=(const HistoryFollower&) = delete;

  // One round: every fine row from the newest fine bucket held on, page by page, then every
  // coarse row likewise, then retention. Rows already copied stay when a later page fails.
  Status SyncOnce();
  // Rounds every period on a thread of its own, logging failures (once until a round works).
  void Start();
  // No round starts, and the store is not touched again, once this returns; a request in
  // flight is left to finish on its own and its answer dropped.
  void Stop();

  // Rows copied and rounds that completed since the start.
  int64_t rows_copied() const { return rows_.load(); }
  int64_t rounds() const { return rounds_.load(); }

 private:
  Status Copy(fleet::HistoryResolution resolution);

  fleet::HistoryStore* const store_;
  const Fetch fetch_;
  const Options options_;
  std::mutex mu_;  // held while the store is used; `stopped_` is read and set under it
  bool stopped_ = false;
  std::condition_variable wake_;
  std::atomic<int64_t> rows_{0}, rounds_{0};
  std::thread thread_;
};

// Fetch over HTTP or HTTPS from `base_url` ("http://host:port" or "https://host:port"), with the
// bearer token `token()` returns ("" sends none) on every request. Over HTTPS the leader's
// certificate must chain to a certificate in `ca_file` (PEM; empty: the system's trust store) and
// name the URL's host. Time-outs: 2 s to connect, 10 s to read.
HistoryFollower::Fetch HttpHistoryFetch(std::string base_url,
                                        std::function<Result<std::string>()> token,
                                        std::string ca_file = "");

}  // namespace chamber::daemon
