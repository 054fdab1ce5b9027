#include "daemon/history_replication.h"

#include <httplib.h>

#include <ctime>

#include <spdlog/spdlog.h>

#include "common/json_reader.h"

namespace chamber::daemon {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "chamber-fleet-history";
constexpr int64_t kVersion = 1;

const char* ResolutionName(fleet::HistoryResolution r) {
  return r == fleet::HistoryResolution::kFine ? "fine" : "coarse";
}

// The batch's members are read with JsonReader (common/json_reader.h); ParseHistoryBatch puts
// "history batch: " before the path of an error ("rows[3][2]: expected an integer").
const JsonReader kBatch;

Status Require(const json& j, std::string_view key) {
  if (JsonReader::Find(j, key) == nullptr) return kBatch.Error(key, "missing");
  return Status::Ok();
}

Status RequiredInteger(const json& j, std::string_view key, int64_t* out) {
  CHAMBER_RETURN_IF_ERROR(Require(j, key));
  return kBatch.Integer(j, key, "", out);
}

// [metric, scope, time, sum, count], at `at`.
Status ReadRowAt(const json& r, std::string_view at, fleet::HistoryRow* row) {
  if (!r.is_array() || r.size() != 5)
    return kBatch.Error(at, "expected [metric, scope, time, sum, count]");
  CHAMBER_RETURN_IF_ERROR(kBatch.ElementValue(r[0], at, 0, &row->metric));
  CHAMBER_RETURN_IF_ERROR(kBatch.ElementValue(r[1], at, 1, &row->scope));
  CHAMBER_RETURN_IF_ERROR(kBatch.ElementValue(r[2], at, 2, &row->time));
  CHAMBER_RETURN_IF_ERROR(kBatch.ElementValue(r[3], at, 3, &row->sum));
  CHAMBER_RETURN_IF_ERROR(kBatch.ElementValue(r[4], at, 4, &row->count));
  if (row->count < 1)
    return kBatch.Error(JsonReader::Element(at, 4), "expected an integer of at least 1");
  return Status::Ok();
}

// Row `i` of the batch. Its path ("rows[3]") is made only for an error: a page holds many rows.
Status ReadRow(const json& r, size_t i, fleet::HistoryRow* row) {
  Status s = ReadRowAt(r, std::string_view(), row);
  return s.ok() ? s : ReadRowAt(r, JsonReader::Element("rows", i), row);
}

Status ReadBatch(const json& j, fleet::HistoryBatch* b) {
  if (!j.is_object()) return Status::InvalidArgument("expected an object");
  std::string format;
  CHAMBER_RETURN_IF_ERROR(kBatch.String(j, "format", "", &format));
  if (format != kFormat) return kBatch.Error("format", "expected \"" + std::string(kFormat) + "\"");
  int64_t version = 0;
  CHAMBER_RETURN_IF_ERROR(RequiredInteger(j, "version", &version));
  if (version != kVersion)
    return kBatch.Error("version", std::to_string(version) +
                                       " is not supported (this build reads " +
                                       std::to_string(kVersion) + ")");
  std::string resolution;
  CHAMBER_RETURN_IF_ERROR(kBatch.String(j, "resolution", "", &resolution));
  if (resolution == "fine") {
    b->resolution = fleet::HistoryResolution::kFine;
  } else if (resolution == "coarse") {
    b->resolution = fleet::HistoryResolution::kCoarse;
  } else {
    return kBatch.Error("resolution", "expected \"fine\" or \"coarse\"");
  }
  CHAMBER_RETURN_IF_ERROR(RequiredInteger(j, "fine_step", &b->fine_step));
  CHAMBER_RETURN_IF_ERROR(RequiredInteger(j, "coarse_step", &b->coarse_step));
  CHAMBER_RETURN_IF_ERROR(RequiredInteger(j, "rolled_up_until", &b->rolled_up_until));
  CHAMBER_RETURN_IF_ERROR(RequiredInteger(j, "next", &b->next));
  CHAMBER_RETURN_IF_ERROR(Require(j, "more"));
  CHAMBER_RETURN_IF_ERROR(kBatch.Bool(j, "more", "", &b->more));
  const json* rows = nullptr;
  CHAMBER_RETURN_IF_ERROR(Require(j, "rows"));
  CHAMBER_RETURN_IF_ERROR(kBatch.Array(j, "rows", "", &rows));
  b->rows.resize(rows->size());
  for (size_t i = 0; i < rows->size(); ++i)
    CHAMBER_RETURN_IF_ERROR(ReadRow((*rows)[i], i, &b->rows[i]));
  return Status::Ok();
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
  fleet::HistoryBatch b;
  if (Status s = ReadBatch(j, &b); !s.ok())
    return Status::InvalidArgument("history batch: " + s.message());
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
                                        std::function<Result<std::string>()> token,
                                        std::string ca_file) {
  return [base_url = std::move(base_url), token = std::move(token),
          ca_file = std::move(ca_file)](const std::string& target) -> Result<std::string> {
    httplib::Client client(base_url);
    if (!client.is_valid()) return Status::InvalidArgument(base_url + ": not a usable URL");
    client.enable_server_certificate_verification(true);
    if (!ca_file.empty()) client.set_ca_cert_path(ca_file);
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
