#include "daemon/history_replication.h"

#include <httplib.h>

#include <ctime>

#include <spdlog/spdlog.h>

namespace chamber::daemon {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "chamber-fleet-history";
constexpr int64_t kVersion = 1;

const char* ResolutionName(fleet::HistoryResolution r) {
  return r == fleet::HistoryResolution::kFine ? "fine" : "coarse";
}

Status FieldError(const std::string& field, const std::string& what) {
  return Status::InvalidArgument("history batch: " + field + ": " + what);
}

Result<int64_t> IntField(const json& j, const char* name) {
  if (!j.contains(name)) return FieldError(name, "missing");
  if (!j[name].is_number_integer()) return FieldError(name, "expected an integer");
  return j[name].get<int64_t>();
}

}  // namespace

json HistoryBatchJson(const fleet::HistoryBatch& b) {
  json rows = json::array();
  for (const fleet::HistoryRow& r : b.rows)
    rows.push_back({r.metric, r.scope, r.time, r.sum, r.count});
  return {{"format", kFormat},
          {"version", kVersion},
          {"resolution", ResolutionName(b.resolution)},
          {"fine_step", b.fine_step},
          {"coarse_step", b.coarse_step},
          {"rolled_up_until", b.rolled_up_until},
          {"rows", std::move(rows)},
          {"more", b.more},
          {"next", b.next}};
}

Result<fleet::HistoryBatch> ParseHistoryBatch(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("history batch: expected an object");
  if (j.value("format", "") != kFormat)
    return FieldError("format", "expected \"" + std::string(kFormat) + "\"");
  CHAMBER_ASSIGN_OR_RETURN(int64_t version, IntField(j, "version"));
  if (version != kVersion)
    return FieldError("version", std::to_string(version) + " is not supported (this build reads " +
                                     std::to_string(kVersion) + ")");
  fleet::HistoryBatch b;
  const std::string resolution = j.value("resolution", "");
  if (resolution == "fine") {
    b.resolution = fleet::HistoryResolution::kFine;
  } else if (resolution == "coarse") {
    b.resolution = fleet::HistoryResolution::kCoarse;
  } else {
    return FieldError("resolution", "expected \"fine\" or \"coarse\"");
  }
  CHAMBER_ASSIGN_OR_RETURN(b.fine_step, IntField(j, "fine_step"));
  CHAMBER_ASSIGN_OR_RETURN(b.coarse_step, IntField(j, "coarse_step"));
  CHAMBER_ASSIGN_OR_RETURN(b.rolled_up_until, IntField(j, "rolled_up_until"));
  CHAMBER_ASSIGN_OR_RETURN(b.next, IntField(j, "next"));
  if (!j.contains("more") || !j["more"].is_boolean())
    return FieldError("more", "expected a boolean");
  b.more = j["more"].get<bool>();
  if (!j.contains("rows") || !j["rows"].is_array()) return FieldError("rows", "expected an array");
  const json& rows = j["rows"];
  b.rows.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    const std::string at = "rows[" + std::to_string(i) + "]";
    if (!r.is_array() || r.size() != 5)
      return FieldError(at, "expected [metric, scope, time, sum, count]");
    if (!r[0].is_string() || !r[1].is_string())
      return FieldError(at, "metric and scope must be strings");
    if (!r[2].is_number_integer()) return FieldError(at + "[2]", "expected an integer");
    if (!r[3].is_number()) return FieldError(at + "[3]", "expected a number");
    if (!r[4].is_number_integer() || r[4].get<int64_t>() < 1)
      return FieldError(at + "[4]", "expected an integer of at least 1");
    b.rows.push_back({r[0].get<std::string>(), r[1].get<std::string>(), r[2].get<int64_t>(),
                      r[3].get<double>(), r[4].get<int64_t>()});
  }
  return b;
}

HistoryFollower::HistoryFollower(fleet::HistoryStore* store, Fetch fetch, Options options)
    : store_(store), fetch_(std::move(fetch)), options_(std::move(options)) {}

HistoryFollower::~HistoryFollower() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

Status HistoryFollower::Copy(fleet::HistoryResolution resolution) {
  int64_t since = 0;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return Status::FailedPrecondition("stopped");
    CHAMBER_ASSIGN_OR_RETURN(fleet::HistoryPosition newest, store_->Newest());
    since = resolution == fleet::HistoryResolution::kFine ? newest.fine : newest.coarse;
  }
  for (;;) {
    const std::string target = std::string("/api/v1/history/replication?resolution=") +
                               ResolutionName(resolution) + "&since=" + std::to_string(since) +
                               "&limit=" + std::to_string(options_.page_rows);
    CHAMBER_ASSIGN_OR_RETURN(std::string body, fetch_(target));
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return Status::Unavailable("GET " + target + ": the answer is not JSON");
    CHAMBER_ASSIGN_OR_RETURN(fleet::HistoryBatch batch, ParseHistoryBatch(j));
    if (batch.resolution != resolution)
      return Status::InvalidArgument("GET " + target + ": the answer holds " +
                                     ResolutionName(batch.resolution) + " rows");
    {
      std::lock_guard lock(mu_);
      if (stopped_) return Status::FailedPrecondition("stopped");
      CHAMBER_RETURN_IF_ERROR(store_->Import(batch));
    }
    rows_ += static_cast<int64_t>(batch.rows.size());
    if (!batch.more) return Status::Ok();
    if (batch.next <= since)
      return Status::Internal("GET " + target + ": the next page starts at " +
                              std::to_string(batch.next) + ", not after " + std::to_string(since));
    since = batch.next;
  }
}

Status HistoryFollower::SyncOnce() {
  // Fine rows first: the coarse answer's roll-up mark then covers every hour whose minutes
  // this copy may lack.
  CHAMBER_RETURN_IF_ERROR(Copy(fleet::HistoryResolution::kFine));
  CHAMBER_RETURN_IF_ERROR(Copy(fleet::HistoryResolution::kCoarse));
  const int64_t now =
      options_.now_unix ? options_.now_unix() : static_cast<int64_t>(std::time(nullptr));
  {
    std::lock_guard lock(mu_);
    if (stopped_) return Status::FailedPrecondition("stopped");
    CHAMBER_RETURN_IF_ERROR(store_->ApplyRetention(now));
  }
  ++rounds_;
  return Status::Ok();
}

void HistoryFollower::Start() {
  thread_ = std::thread([this] {
    std::string failing;  // the last failure logged; empty while rounds work
    for (;;) {
      Status st = SyncOnce();
      {
        std::lock_guard lock(mu_);
        if (stopped_) return;
      }
      if (!st.ok() && st.message() != failing) {
        spdlog::warn("history: copying the leader's history: {}; retrying every {} ms",
                     st.message(), options_.period.count());
        failing = st.message();
      } else if (st.ok() && !failing.empty()) {
        spdlog::info("history: copying the leader's history works again");
        failing.clear();
      }
      spdlog::debug("history: {} rows copied from the leader in {} rounds", rows_.load(),
                    rounds_.load());
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, options_.period, [this] { return stopped_; });
      if (stopped_) return;
    }
  });
}

void HistoryFollower::Stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
}

HistoryFollower::Fetch HttpHistoryFetch(std::string base_url,
                                        std::function<Result<std::string>()> token) {
  return [base_url = std::move(base_url),
          token = std::move(token)](const std::string& target) -> Result<std::string> {
    httplib::Client client(base_url);
    if (!client.is_valid()) return Status::InvalidArgument(base_url + ": not a usable URL");
    client.set_connection_timeout(2);
    client.set_read_timeout(10);
    httplib::Headers headers;
    if (token) {
      CHAMBER_ASSIGN_OR_RETURN(std::string t, token());
      if (!t.empty()) headers.emplace("Authorization", "Bearer " + t);
    }
    httplib::Result res = client.Get(target, headers);
    if (!res)
      return Status::Unavailable("GET " + base_url + target + ": " +
                                 httplib::to_string(res.error()));
    if (res->status != 200) {
      const json e = json::parse(res->body, nullptr, false);
      const std::string why = e.is_object() && e.contains("error") && e["error"].is_string()
                                  ? e["error"].get<std::string>()
                                  : res->body.substr(0, 200);
      return Status::Unavailable("GET " + base_url + target + ": HTTP " +
                                 std::to_string(res->status) + ": " + why);
    }
    return std::move(res->body);
  };
}

}  // namespace chamber::daemon
