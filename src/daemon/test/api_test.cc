// The real server on a loopback port over the demo's simulated cluster. Every path in
// docs/openapi.yaml is requested and its answer checked against the document's schema; then
// authentication, the event stream and /metrics.
#include <httplib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "backend/sim/demo_cluster.h"
#include "daemon/api_json.h"
#include "daemon/history_replication.h"
#include "daemon/http_server.h"
#include "health/health_controller.h"

namespace chamber::daemon {
namespace {

using backend::DemoCluster;
using backend::DemoClusterOptions;
using backend::SimulatedBackend;

using nlohmann::json;

constexpr const char* kReadToken = "read-token-0123456789";
constexpr const char* kAdminToken = "admin-token-0123456789";
constexpr const char* kReplicaToken = "replica-token-0123456789";

// A small OpenAPI 3.0 schema checker: $ref, type, required, properties, items, enum, nullable,
// allOf, oneOf, minItems and maxItems.
class SchemaChecker {
 public:
  explicit SchemaChecker(YAML::Node doc) : doc_(std::move(doc)) {}

  YAML::Node Resolve(YAML::Node schema) const {
    while (schema["$ref"]) {
      const std::string ref = schema["$ref"].as<std::string>();
      const std::string prefix = "#/components/";
      EXPECT_EQ(ref.rfind(prefix, 0), 0u) << ref;
      const std::string rest = ref.substr(prefix.size());
      const size_t slash = rest.find('/');
      schema = doc_["components"][rest.substr(0, slash)][rest.substr(slash + 1)];
      EXPECT_TRUE(schema.IsDefined()) << "unresolved " << ref;
    }
    return schema;
  }

  void Check(YAML::Node schema, const json& v, const std::string& at,
             std::vector<std::string>& errors) const {
    schema = Resolve(schema);
    if (v.is_null()) {
      if (!(schema["nullable"] && schema["nullable"].as<bool>()))
        errors.push_back(at + ": null where the schema does not allow it");
      return;
    }
    if (schema["allOf"]) {
      for (const YAML::Node& part : schema["allOf"]) Check(part, v, at, errors);
      return;
    }
    if (schema["oneOf"]) {
      for (const YAML::Node& option : schema["oneOf"]) {
        std::vector<std::string> e;
        Check(option, v, at, e);
        if (e.empty()) return;
      }
      errors.push_back(at + ": matches none of oneOf");
      return;
    }
    const std::string type = schema["type"] ? schema["type"].as<std::string>() : "";
    if (type == "object") {
      if (!v.is_object()) return errors.push_back(at + ": not an object");
      if (schema["required"])
        for (const YAML::Node& r : schema["required"])
          if (!v.contains(r.as<std::string>()))
            errors.push_back(at + ": missing required field " + r.as<std::string>());
      if (schema["properties"])
        for (const auto& kv : schema["properties"]) {
          const std::string name = kv.first.as<std::string>();
          if (v.contains(name)) Check(kv.second, v[name], at + "." + name, errors);
        }
    } else if (type == "array") {
      if (!v.is_array()) return errors.push_back(at + ": not an array");
      if (schema["minItems"] && v.size() < schema["minItems"].as<size_t>())
        errors.push_back(at + ": too few items");
      if (schema["maxItems"] && v.size() > schema["maxItems"].as<size_t>())
        errors.push_back(at + ": too many items");
      for (size_t i = 0; i < v.size() && i < 50; ++i)  // the first 50 of large lists
        Check(schema["items"], v[i], at + "[" + std::to_string(i) + "]", errors);
    } else if (type == "string") {
      if (!v.is_string()) return errors.push_back(at + ": not a string");
      if (schema["enum"]) {
        bool found = false;
        for (const YAML::Node& e : schema["enum"]) found |= e.as<std::string>() == v;
        if (!found) errors.push_back(at + ": \"" + v.get<std::string>() + "\" not in enum");
      }
      if (schema["format"] && schema["format"].as<std::string>() == "date-time" &&
          !std::regex_match(v.get<std::string>(),
                            std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)")))
        errors.push_back(at + ": not an RFC 3339 UTC time: " + v.get<std::string>());
    } else if (type == "integer") {
      if (!v.is_number_integer()) errors.push_back(at + ": not an integer: " + v.dump());
    } else if (type == "number") {
      if (!v.is_number()) errors.push_back(at + ": not a number");
    } else if (type == "boolean") {
      if (!v.is_boolean()) errors.push_back(at + ": not a boolean");
    }
  }

 private:
  YAML::Node doc_;
};

class ApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("chamber-api-test-" + std::to_string(getpid())));
    std::filesystem::create_directories(*dir_);
    DemoClusterOptions o;
    o.seed = 5;
    o.start_unix_ms = 1'790'000'040'000;
    o.gpu_mtbf_hours = 0;
    auto backend = std::move(SimulatedBackend::Create(DemoCluster(o))).value();
    SimulatedBackend* b = backend.get();
    auto history = std::move(fleet::HistoryStore::Open((*dir_ / "history.db").string())).value();
    DaemonOptions d;
    d.tick = std::chrono::milliseconds(50);
    daemon_ = new Daemon(std::move(backend), d, std::move(history));
    for (int i = 0; i < 120; ++i) ASSERT_TRUE(daemon_->Tick().ok());
    b->FailGpu(1, 2);  // an open incident for /api/v1/health
    ASSERT_TRUE(daemon_->Tick().ok());

    auto tokens = TokenFileAuthenticator::Parse(std::string(kReadToken) + " read viewer\n" +
                                                    kAdminToken + " admin operator\n" +
                                                    kReplicaToken + " replica standby\n",
                                                "tokens");
    ASSERT_TRUE(tokens.ok());
    ServerOptions so;
    so.port = 0;
    so.keepalive = std::chrono::milliseconds(200);
    server_ =
        new ApiServer(*daemon_, std::shared_ptr<Authenticator>(std::move(tokens).value()), so);
    ASSERT_TRUE(server_->Start().ok());
    loop_ = new std::jthread([](std::stop_token st) { daemon_->Run(st); });
  }
  static void TearDownTestSuite() {
    delete loop_;  // requests stop and joins
    delete server_;
    delete daemon_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static httplib::Client Client(const char* token = kReadToken) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(10);
    if (token) c.set_bearer_token_auth(token);
    return c;
  }

  static std::filesystem::path* dir_;
  static Daemon* daemon_;
  static ApiServer* server_;
  static std::jthread* loop_;
};
std::filesystem::path* ApiTest::dir_ = nullptr;
Daemon* ApiTest::daemon_ = nullptr;
ApiServer* ApiTest::server_ = nullptr;
std::jthread* ApiTest::loop_ = nullptr;

std::string Substitute(std::string path, const std::string& workload = "job-1") {
  if (path.rfind("/api/v1/workloads/", 0) == 0) {
    path = std::regex_replace(path, std::regex(R"(\{namespace\})"), "ml");
    return std::regex_replace(path, std::regex(R"(\{name\})"), workload);
  }
  return std::regex_replace(path, std::regex(R"(\{name\})"), "h100-1");
}

// A workload of the demo that is still there a moment later: a waiting one if any (waits are
// long), else the one that started first.
std::string DemoWorkload(const FleetState& s) {
  const fleet::WorkloadInput* pick = nullptr;
  for (const fleet::WorkloadInput& w : s.input.workloads) {
    if (w.phase == fleet::WorkloadPhase::kPending || w.phase == fleet::WorkloadPhase::kSuspended)
      return w.name;
    if (!pick || w.started.value_or(INT64_MAX) < pick->started.value_or(INT64_MAX)) pick = &w;
  }
  return pick ? pick->name : "";
}

TEST_F(ApiTest, EveryDocumentedPathAnswersAsDocumented) {
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  const SchemaChecker checker(doc);
  int checked = 0;
  for (const auto& p : doc["paths"]) {
    // The demo's workload names have no namespace: NamespacedWorkloadTest checks that path.
    if (p.first.as<std::string>() == "/api/v1/workloads/{namespace}/{name}") continue;
    const std::string path = Substitute(p.first.as<std::string>(), DemoWorkload(*daemon_->state()));
    for (const auto& op : p.second) {
      const std::string method = op.first.as<std::string>();
      if (path == "/api/v1/events") continue;  // a stream: EventStreamDeliversFleetUpdates
      // The health controller's routes: chamberd only (cli_health_test, health_e2e_test).
      if (op.second["x-chamberd-only"]) continue;
      httplib::Client c = Client(method == "post" ? kAdminToken : kReadToken);
      httplib::Result r = method == "get" ? c.Get(path) : c.Post(path);
      ASSERT_TRUE(r) << method << " " << path;
      ASSERT_EQ(r->status, 200) << method << " " << path << ": " << r->body;
      const YAML::Node content = op.second["responses"]["200"]["content"];
      if (content["application/json"]) {
        EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << path;
        const json body = json::parse(r->body);
        std::vector<std::string> errors;
        checker.Check(content["application/json"]["schema"], body, path, errors);
        EXPECT_TRUE(errors.empty()) << path << ":\n" << ::testing::PrintToString(errors);
      } else {
        EXPECT_FALSE(r->body.empty()) << path;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 14);  // 12 GETs (all but the event stream and one workload path), 2 POSTs
}

// The injected fault's incident names its cause and carries the simulated fault's evidence as
// typed objects, field by field, and the schema of docs/openapi.yaml.
TEST_F(ApiTest, HealthIncidentsCarryTypedEvidence) {
  auto r = Client().Get("/api/v1/health");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json body = json::parse(r->body);
  ASSERT_FALSE(body["incidents"].empty());
  const json& i = body["incidents"].back();  // the oldest: the GPU failed before the server ran
  EXPECT_EQ(i["node"], "h100-1");
  EXPECT_EQ(i["gpu_index"], 2);
  EXPECT_EQ(i["uuid"], "GPU-h100-1-2");
  const Incident& kept = daemon_->state()->incidents.back();
  const GpuFault fault = SimulatedBackend::SimulatedFault("GPU-h100-1-2", kept.time_ms, true, 5);
  EXPECT_EQ(i["cause"], fault.cause);
  EXPECT_EQ(i["severity"], fault.severity);
  EXPECT_EQ(i["message"], "GPU 2 on h100-1: " + fault.message);
  json want = EvidenceListJson(fault.evidence);
  ASSERT_EQ(i["evidence"].size(), want.size() + 1) << i["evidence"].dump();
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(i["evidence"][k], want[k]) << k;
  const json& action = i["evidence"].back();
  EXPECT_EQ(action["type"], "action");
  EXPECT_EQ(action["gpu_fenced"], true);
  EXPECT_TRUE(action["taint"].is_null());
  EXPECT_EQ(action["breaker_held"], false);
  EXPECT_EQ(action["workloads_requeued_count"].get<int64_t>(),
            static_cast<int64_t>(action["workloads_requeued"].size()));
  const json& rule = i["evidence"][i["evidence"].size() - 2];
  EXPECT_EQ(rule["type"], "rule");
  EXPECT_EQ(rule["rule"], fault.cause);
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  std::vector<std::string> errors;
  SchemaChecker(doc).Check(doc["components"]["schemas"]["Incident"], i, "incident", errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
}

// chamberd's controller incidents (GET /api/v1/health, `controller`) as documented.
TEST(ControllerIncidentSchemaTest, IncidentsWithEvidenceMatchTheDocument) {
  health::HealthController c({});
  const json report = json::parse(R"({"kind": "chamber.io/agent-report/v1", "node": "gpu-7",
    "time": 1.0, "inventory": {"gpus": [{"index": 0, "uuid": "GPU-0"}]},
    "samples": [{"index": 0, "uuid": "GPU-0", "lost": false, "recovery_action": 0}],
    "incidents": [{"id": 1, "gpu_index": 0, "gpu_uuid": "GPU-0", "cause": "ecc-uncorrectable",
      "severity": "unhealthy", "xid": null, "message": "4 uncorrectable ECC errors",
      "opened_at": 1.0, "last_seen": 1.0, "occurrences": 1,
      "evidence": [
        {"type": "ecc", "volatile_single_bit": 2, "volatile_double_bit": 4,
         "aggregate_single_bit": null, "aggregate_double_bit": 9},
        {"type": "row_remap", "single_bit_rows": 0, "double_bit_rows": 1, "pending": true,
         "failed": false},
        {"type": "rule", "rule": "ecc-uncorrectable", "severity": "unhealthy",
         "condition": "volatile uncorrectable ECC count above zero",
         "threshold": "volatile double-bit ECC count > 0"}]}]})");
  auto parsed = health::ParseAgentReport(report);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  c.Ingest(*parsed, 1'790'000'000);
  const json view = c.ToJson(1'790'000'001);
  ASSERT_EQ(view["incidents"].size(), 1u);
  const json& evidence = view["incidents"][0]["evidence"];
  ASSERT_EQ(evidence.size(), 4u);
  EXPECT_EQ(evidence[0], report["incidents"][0]["evidence"][0]);
  EXPECT_EQ(evidence[3], json::parse(R"({"type": "action", "gpu_fenced": true,
    "taint": "NoSchedule", "breaker_held": false, "workloads_requeued": [],
    "workloads_requeued_count": 0})"));
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  std::vector<std::string> errors;
  SchemaChecker(doc).Check(doc["components"]["schemas"]["Health"]["properties"]["controller"], view,
                           "controller", errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
}

TEST_F(ApiTest, HistoryAnswersWithAStoredSeries) {
  httplib::Client c = Client();
  auto r = c.Get("/api/v1/history?metric=gpus_capacity&scope=cluster");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["step"], 60);
  ASSERT_GE(j["points"].size(), 50u);
  EXPECT_EQ(j["points"][0][1], 264);
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  std::vector<std::string> errors;
  SchemaChecker(doc).Check(doc["components"]["schemas"]["HistorySeries"], j, "history", errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  r = c.Get("/api/v1/history?metric=utilization&from=yesterday");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("parameter from"), std::string::npos) << r->body;
  r = c.Get("/api/v1/workloads?state=sleeping");
  EXPECT_EQ(r->status, 400);
  r = c.Get("/api/v1/workloads?state=pending&limit=3");
  ASSERT_EQ(r->status, 200);
  const json w = json::parse(r->body);
  EXPECT_LE(w["workloads"].size(), 3u);
  for (const json& x : w["workloads"]) EXPECT_EQ(x["state"], "pending");
}

// A standby's follower copies the history over HTTP with a replica token, which may read
// nothing else; a second round adds nothing.
TEST_F(ApiTest, AStandbyCopiesTheHistoryWithAReplicaToken) {
  auto copy = fleet::HistoryStore::Open((*dir_ / "standby.db").string());
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  HistoryFollower follower(
      copy->get(),
      HttpHistoryFetch("http://127.0.0.1:" + std::to_string(server_->port()),
                       [] { return Result<std::string>(std::string(kReplicaToken)); }),
      // Retention by the demo's clock, which runs ahead of the wall clock.
      {.page_rows = 50, .now_unix = [] { return daemon_->state()->time_ms / 1000; }});
  ASSERT_TRUE(follower.SyncOnce().ok());
  ASSERT_TRUE(follower.SyncOnce().ok());
  fleet::HistoryStore& leader = *daemon_->history();
  // The leader goes on writing: every bucket the standby holds but its newest is the leader's.
  const std::vector<fleet::HistoryRow> copied =
      (*copy)->Export(fleet::HistoryResolution::kFine, 0, 1000000)->rows;
  ASSERT_GE(copied.size(), 100u);
  const int64_t newest = copied.back().time;
  std::map<std::tuple<std::string, std::string, int64_t>, fleet::HistoryRow> kept;
  const std::vector<fleet::HistoryRow> leader_fine =
      leader.Export(fleet::HistoryResolution::kFine, 0, 1000000)->rows;
  for (const fleet::HistoryRow& r : leader_fine) kept[{r.metric, r.scope, r.time}] = r;
  size_t compared = 0;
  for (const fleet::HistoryRow& r : copied) {
    if (r.time == newest) continue;
    auto it = kept.find({r.metric, r.scope, r.time});
    ASSERT_NE(it, kept.end()) << r.metric << " " << r.scope << " " << r.time;
    EXPECT_EQ(r, it->second);
    ++compared;
  }
  EXPECT_GT(compared, 50u);
  // Rolled-up hours never change: every one copied is the leader's.
  kept.clear();
  const std::vector<fleet::HistoryRow> leader_coarse =
      leader.Export(fleet::HistoryResolution::kCoarse, 0, 1000000)->rows;
  for (const fleet::HistoryRow& r : leader_coarse) kept[{r.metric, r.scope, r.time}] = r;
  const std::vector<fleet::HistoryRow> copied_coarse =
      (*copy)->Export(fleet::HistoryResolution::kCoarse, 0, 1000000)->rows;
  for (const fleet::HistoryRow& r : copied_coarse) {
    auto it = kept.find({r.metric, r.scope, r.time});
    ASSERT_NE(it, kept.end()) << r.metric << " " << r.scope << " " << r.time;
    EXPECT_EQ(r, it->second);
  }

  // The replica token reads the stream and nothing else; a read token reads it too.
  EXPECT_EQ(Client(kReplicaToken).Get("/api/v1/history/replication?since=0&limit=1")->status, 200);
  auto r = Client(kReplicaToken).Get("/api/v1/fleet");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("has role replica: it may only read the history's replication stream"),
            std::string::npos)
      << r->body;
  EXPECT_EQ(Client(kReplicaToken).Post("/api/v1/nodes/h100-2/cordon")->status, 403);
  EXPECT_EQ(Client().Get("/api/v1/history/replication")->status, 200);
  r = Client().Get("/api/v1/history/replication?resolution=hourly");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("parameter resolution"), std::string::npos) << r->body;
  EXPECT_EQ(Client().Get("/api/v1/history/replication?limit=0")->status, 400);
}

// Browsers accept Brotli, which cpp-httplib would apply at its slowest quality (seconds for a
// large fleet's workload list): JSON goes out as it is.
TEST_F(ApiTest, JsonAnswersAreNotCompressed) {
  httplib::Client c = Client();
  const httplib::Headers browser = {{"Accept-Encoding", "gzip, deflate, br"}};
  const std::vector<std::string> paths = {"/api/v1/fleet",
                                          "/api/v1/gpus",
                                          "/api/v1/workloads",
                                          "/api/v1/workloads?limit=5000",
                                          "/api/v1/history",
                                          "/api/v1/history?metric=utilization",
                                          "/api/v1/workloads/" + DemoWorkload(*daemon_->state())};
  for (const std::string& path : paths) {
    auto r = c.Get(path, browser);
    ASSERT_TRUE(r) << path;
    ASSERT_EQ(r->status, 200) << path << ": " << r->body;
    EXPECT_FALSE(r->has_header("Content-Encoding"))
        << path << ": " << r->get_header_value("Content-Encoding");
    EXPECT_TRUE(json::accept(r->body)) << path;
  }
}

TEST_F(ApiTest, TokensAndRoles) {
  // Nothing but /healthz without a token.
  httplib::Client anonymous = Client(nullptr);
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  for (const auto& p : doc["paths"]) {
    const std::string path = Substitute(p.first.as<std::string>());
    for (const auto& op : p.second) {
      const bool open = op.second["security"] && op.second["security"].size() == 0;
      httplib::Result r =
          op.first.as<std::string>() == "get" ? anonymous.Get(path) : anonymous.Post(path);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, open ? 200 : 401) << path;
    }
  }
  EXPECT_EQ(anonymous.Get("/api/v1/nonexistent")->status, 401);
  httplib::Client wrong = Client("not-a-known-token-at-all");
  EXPECT_EQ(wrong.Get("/api/v1/fleet")->status, 401);
  // A read token may not cordon.
  auto r = Client(kReadToken).Post("/api/v1/nodes/h100-2/cordon");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("admin"), std::string::npos);
  // An admin may; an unknown node is 404.
  r = Client(kAdminToken).Post("/api/v1/nodes/h100-2/cordon");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["schedulable"], false);
  EXPECT_EQ(Client(kAdminToken).Post("/api/v1/nodes/nope/cordon")->status, 404);
  EXPECT_EQ(Client(kAdminToken).Post("/api/v1/nodes/h100-2/uncordon")->status, 200);
  // The token may also come as a query parameter (EventSource cannot set headers).
  EXPECT_EQ(anonymous.Get(std::string("/api/v1/fleet?access_token=") + kReadToken)->status, 200);
  // Unknown API paths are JSON 404s; other paths are the dashboard.
  EXPECT_EQ(Client().Get("/api/v1/nonexistent")->status, 404);
  auto page = anonymous.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
}

TEST_F(ApiTest, EventStreamDeliversFleetUpdates) {
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  httplib::Client c = Client();
  std::string buffer;
  std::vector<json> events;
  auto r = c.Get("/api/v1/events", [&](const char* data, size_t n) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string message = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (message.rfind("event: fleet\n", 0) != 0) continue;
      const size_t data_at = message.find("\ndata: ");
      if (data_at != std::string::npos) events.push_back(json::parse(message.substr(data_at + 7)));
    }
    return events.size() < 3;
  });
  ASSERT_EQ(events.size(), 3u);
  std::vector<std::string> errors;
  for (const json& e : events)
    SchemaChecker(doc).Check(doc["components"]["schemas"]["Fleet"], e, "event", errors);
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  // Each event is a newer state: simulated time moves on.
  EXPECT_LT(events[0]["time"].get<std::string>(), events[2]["time"].get<std::string>());
}

TEST_F(ApiTest, DisconnectedEventClientsAreReleased) {
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i)
    clients.emplace_back([] {
      httplib::Client c = Client();
      int chunks = 0;
      c.Get("/api/v1/events", [&](const char*, size_t) { return ++chunks < 2; });
    });
  for (std::thread& t : clients) t.join();
  // The server notices at its next write (an update or a keep-alive) and frees the thread.
  for (int i = 0; i < 100 && server_->event_clients() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server_->event_clients(), 0);
}

TEST_F(ApiTest, MetricsParse) {
  auto r = Client().Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+))");
  std::map<std::string, std::string> types;
  std::map<std::string, double> values;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      types[name] = type;
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, sample)) << line;
    ASSERT_TRUE(types.contains(m[1])) << "sample before its TYPE: " << line;
    if (!m[2].matched) values[m[1]] = std::stod(m[5]);
  }
  EXPECT_EQ(values["chamber_gpus_capacity"], 264);
  EXPECT_EQ(types["chamber_cost_total"], "counter");
  EXPECT_GT(values["chamber_scheduling_cycles_total"], 100);
  for (const char* name :
       {"chamber_gpus", "chamber_pool_gpus", "chamber_gpu_utilization",
        "chamber_queue_allocated_gpus", "chamber_wait_seconds", "chamber_efficiency",
        "chamber_idle_cost_per_hour", "chamber_backfill_savings_total"})
    EXPECT_TRUE(types.contains(name)) << name;
}

// A fixed cluster with namespaced workloads and pods, as a Kubernetes backend reports them:
// one node of 8 GPUs held by ml/train-1 (two pods), ml/train-2 waiting for 8 more.
class FixedBackend : public ClusterBackend {
 public:
  FixedBackend() {
    core::Node node;
    node.name = "gpu-0";
    node.allocatable = core::Resources::Of(0, 64000, int64_t{512} << 30);
    for (int g = 0; g < 8; ++g)
      node.gpus.push_back({"GPU-" + std::to_string(g), "H100-SXM5-80GB", 81920, true, 0, 0});
    snapshot_.nodes.push_back(node);
    core::Queue queue;
    queue.name = "ml";
    queue.res(core::Resource::kGpu).quota = core::Gpus(8);
    snapshot_.queues.push_back(queue);
    core::Workload running;
    running.name = "ml/train-1";
    running.queue = "ml";
    running.pod_sets.push_back(
        {.name = "worker", .count = 2, .request = core::Resources::Of(4, 0, 0)});
    running.state = core::WorkloadState::kRunning;
    running.placements = {{core::NodeId{0}, 0x0F}, {core::NodeId{0}, 0xF0}};
    running.recent_preemptions = {core::Time(1000)};
    snapshot_.workloads.push_back(running);
    core::Workload waiting;
    waiting.name = "ml/train-2";
    waiting.queue = "ml";
    waiting.submit_time = core::Time(2000);
    waiting.pod_sets.push_back(
        {.name = "worker", .count = 1, .request = core::Resources::Of(8, 0, 0)});
    snapshot_.workloads.push_back(waiting);
    core::Workload bare;  // a pod of its own
    bare.name = "ml/notebook";
    bare.queue = "ml";
    bare.submit_time = core::Time(3000);
    bare.pod_sets.push_back(
        {.name = "notebook", .count = 1, .request = core::Resources::Of(1, 0, 0)});
    snapshot_.workloads.push_back(bare);
  }
  std::string_view mode() const override { return "cluster"; }
  bool simulated_time() const override { return false; }
  Result<const core::Snapshot*> Refresh() override {
    snapshot_.now += core::Time(1000);
    return &snapshot_;
  }
  Status Apply(const core::CycleResult&) override { return Status::Ok(); }
  Observation Observe() override {
    Observation o;
    o.clock_offset_ms = 1'790'000'000'000;
    o.snapshot = &snapshot_;
    o.node_pool = {-1};
    o.samples = {std::vector<GpuSample>(8)};
    o.workload_pods = {{"ml/train-1-0", "ml/train-1-1"}, {"ml/train-2-0"}, {}};
    o.bare_pods = {false, false, true};
    o.metrics = {
        {"chamber_binds_total", "Pods bound.", true, {}, 3},
        {"chamber_gpu_reservation_pods", "Reservation pods.", false, {{"state", "a\"b"}}, 1},
        {"chamber_gpu_reservation_pods", "Reservation pods.", false, {{"state", "c"}}, 2}};
    return o;
  }
  Status SetSchedulable(std::string_view node, bool) override {
    return Status::NotFound(std::string(node));
  }

 private:
  core::Snapshot snapshot_;
};

// The backend's own counters and gauges follow the fleet's on /metrics: one family per name,
// its type and help from the backend, label values escaped.
TEST(BackendMetricsPageTest, TheBackendsMetricsAreServedAsItNamesThem) {
  Daemon daemon(std::make_unique<FixedBackend>(), DaemonOptions{}, nullptr);
  ASSERT_TRUE(daemon.Tick().ok());
  const std::string page = MetricsPage(*daemon.state());
  EXPECT_NE(page.find("# HELP chamber_binds_total Pods bound.\n# TYPE chamber_binds_total "
                      "counter\nchamber_binds_total 3\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("# TYPE chamber_gpu_reservation_pods gauge\n"
                      "chamber_gpu_reservation_pods{state=\"a\\\"b\"} 1\n"
                      "chamber_gpu_reservation_pods{state=\"c\"} 2\n"),
            std::string::npos)
      << page;
  size_t families = 0;
  for (size_t at = 0;
       (at = page.find("# TYPE chamber_gpu_reservation_pods ", at)) != std::string::npos; ++at)
    ++families;
  EXPECT_EQ(families, 1u);
}

TEST(NamespacedWorkloadTest, FoundByNameOrPodAndAnsweredAsDocumented) {
  Daemon daemon(std::make_unique<FixedBackend>(), DaemonOptions{}, nullptr);
  ASSERT_TRUE(daemon.Tick().ok());
  ServerOptions so;
  so.port = 0;
  so.anonymous = true;
  ApiServer server(daemon, nullptr, so);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  const YAML::Node schema = doc["paths"]["/api/v1/workloads/{namespace}/{name}"]["get"]["responses"]
                               ["200"]["content"]["application/json"]["schema"];
  ASSERT_TRUE(schema.IsDefined());
  auto get = [&](const std::string& path) {
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    const json j = json::parse(r->body);
    std::vector<std::string> errors;
    SchemaChecker(doc).Check(schema, j, path, errors);
    EXPECT_TRUE(errors.empty()) << path << ":\n" << ::testing::PrintToString(errors);
    return j;
  };

  json j = get("/api/v1/workloads/ml/train-2");
  const json& w = j["workload"];
  EXPECT_EQ(w["name"], "ml/train-2");
  EXPECT_EQ(w["state"], "pending");
  EXPECT_EQ(w["queue_position"], 1);
  EXPECT_TRUE(w["pending_reason"].is_string()) << w;
  EXPECT_EQ(w["pods"], json({"ml/train-2-0"}));
  EXPECT_EQ(w["submitted"], "2026-09-21T14:13:22Z");
  EXPECT_TRUE(j["pod"].is_null());
  EXPECT_EQ(j["queue"]["name"], "ml");
  EXPECT_EQ(j["queue"]["quota"], 8);
  EXPECT_EQ(j["queue"]["allocated"], 8);
  EXPECT_EQ(j["queue"]["pending_workloads"], 2);
  // The engine's details reach the answer as they are.
  const FleetState& s = *daemon.state();
  ASSERT_EQ(s.input.workloads.size(), 3u);
  EXPECT_EQ(w["pending_details"], json(s.input.workloads[1].pending->details));

  j = get("/api/v1/workloads/ml/train-1-1");  // a pod finds its workload
  EXPECT_EQ(j["pod"], "ml/train-1-1");
  EXPECT_EQ(j["workload"]["name"], "ml/train-1");
  EXPECT_EQ(j["workload"]["state"], "running");
  EXPECT_EQ(j["workload"]["nodes"], json({"gpu-0"}));
  EXPECT_EQ(j["workload"]["gpus"], 8);
  EXPECT_EQ(j["workload"]["reserved"], false);
  EXPECT_EQ(j["workload"]["preemptions"], json({"2026-09-21T14:13:21Z"}));
  EXPECT_TRUE(j["workload"]["pending_reason"].is_null());

  // A bare pod is its own workload: found by its name, listed as its one pod.
  j = get("/api/v1/workloads/ml/notebook");
  EXPECT_TRUE(j["pod"].is_null());
  EXPECT_EQ(j["workload"]["name"], "ml/notebook");
  EXPECT_EQ(j["workload"]["pods"], json({"ml/notebook"}));
  EXPECT_TRUE(s.input.workloads[2].pods.empty());  // stored once, as the name
  EXPECT_TRUE(s.input.workloads[2].bare_pod);

  for (const char* missing : {"/api/v1/workloads/ml/nope", "/api/v1/workloads/train-2"}) {
    auto r = c.Get(missing);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << missing;
    const std::string name = std::string(missing).substr(18);
    EXPECT_EQ(json::parse(r->body)["error"], "no workload or pod named \"" + name + "\"");
  }
  server.Stop();
}

// Two nodes of 8 GPUs in two pools (h-0: H100, pool h100; a-0: A100, pool a100), queues team-a
// (quota 0: everything it runs is borrowed) and team-b (quota 16), and workloads the test adds.
// The clock is the test's; decisions take effect at once: a preempted workload is suspended and
// frees its GPUs in the same cycle.
class ScriptedBackend : public ClusterBackend {
 public:
  static constexpr int64_t kOffsetMs = 1'790'000'000'000;

  ScriptedBackend() {
    for (const auto& [name, model] : {std::pair{"h-0", "H100"}, std::pair{"a-0", "A100"}}) {
      core::Node node;
      node.name = name;
      node.allocatable = core::Resources::Of(0, 64000, int64_t{512} << 30);
      for (int g = 0; g < 8; ++g)
        node.gpus.push_back(
            {std::string(name) + "-" + std::to_string(g), model, 81920, true, 0, 0});
      snapshot_.nodes.push_back(node);
    }
    core::Queue a, b;
    a.name = "team-a";
    b.name = "team-b";
    b.res(core::Resource::kGpu).quota = core::Gpus(16);
    snapshot_.queues = {a, b};
  }
  void Add(std::string name, std::string queue, int64_t gpus, std::string model,
           core::Time submitted) {
    core::Workload w;
    w.name = std::move(name);
    w.queue = std::move(queue);
    w.submit_time = submitted;
    w.pod_sets.push_back({.name = "pod",
                          .count = 1,
                          .request = core::Resources::Of(gpus, 0, 0),
                          .gpu_models = {std::move(model)}});
    snapshot_.workloads.push_back(std::move(w));
  }
  void Remove(const std::string& name) {
    std::erase_if(snapshot_.workloads, [&](const core::Workload& w) { return w.name == name; });
  }
  void set_now(core::Time t) { snapshot_.now = t; }
  // While set, preemptions are not carried out, as when the cluster is slow to act on them.
  void set_lagging(bool lagging) { lagging_ = lagging; }
  // What the cluster records of a workload's earlier preemptions (a Job's annotations).
  void set_stored_losses(const std::string& name, int64_t preemptions, double gpu_hours_lost) {
    stored_[name] = {preemptions, gpu_hours_lost};
  }

  std::string_view mode() const override { return "cluster"; }
  bool simulated_time() const override { return false; }
  Result<const core::Snapshot*> Refresh() override { return &snapshot_; }
  Status Apply(const core::CycleResult& r) override {
    auto start = [&](core::WorkloadId id, const std::vector<core::PodAssignment>& pods) {
      core::Workload& w = snapshot_.workloads[id.index()];
      w.state = core::WorkloadState::kRunning;
      w.start_time = snapshot_.now;
      w.placements.clear();
      for (const core::PodAssignment& a : pods) w.placements.push_back(a.placement);
    };
    for (const core::PreemptDecision& p : r.preemptions) {
      if (lagging_) break;
      core::Workload& w = snapshot_.workloads[p.workload.index()];
      w.state = core::WorkloadState::kSuspended;
      w.placements.clear();
      if (p.reason != core::PreemptReason::kHardwareFault)
        w.recent_preemptions.push_back(snapshot_.now);
    }
    preemption_decisions_ += static_cast<int>(r.preemptions.size());
    for (const core::BindDecision& b : r.binds) start(b.workload, b.pods);
    for (const core::ResumeDecision& b : r.resumes) start(b.workload, b.pods);
    return Status::Ok();
  }
  Observation Observe() override {
    Observation o;
    o.clock_offset_ms = kOffsetMs;
    o.snapshot = &snapshot_;
    o.pools = {{"h100", "H100", fleet::Pricing::kOnDemand, 3},
               {"a100", "A100", fleet::Pricing::kReserved, 1.5}};
    o.node_pool = {0, 1};
    o.samples = {std::vector<GpuSample>(8), std::vector<GpuSample>(8)};
    for (const core::Workload& w : snapshot_.workloads) {
      auto it = stored_.find(w.name);
      o.stored_losses.push_back(it == stored_.end() ? Observation::StoredLosses{} : it->second);
    }
    return o;
  }
  Status SetSchedulable(std::string_view node, bool) override {
    return Status::NotFound(std::string(node));
  }
  int preemption_decisions() const { return preemption_decisions_; }

 private:
  core::Snapshot snapshot_;
  std::map<std::string, Observation::StoredLosses> stored_;
  bool lagging_ = false;
  int preemption_decisions_ = 0;
};

// The value of the sample `series` (name and labels, as written) on a Prometheus page; NaN when
// it is missing.
double MetricValue(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nan("");
}

// Waits, preemptions and lost GPU-hours per queue and pool, by hand: known submission times give
// known waits and percentiles; a reclaimed workload of 8 GPUs that ran 30 minutes without a
// checkpoint loses 4 GPU-hours; after an hour its preemption leaves the recent figures and
// stays in the totals; a workload that leaves the cluster takes its own history with it.
TEST(LostWorkTest, WaitsAndLostGpuHoursPerQueueAndPool) {
  using std::chrono::minutes;
  using std::chrono::seconds;
  auto owned = std::make_unique<ScriptedBackend>();
  ScriptedBackend& cluster = *owned;
  Daemon daemon(std::move(owned), DaemonOptions{}, nullptr);
  const YAML::Node doc = YAML::LoadFile(CHAMBER_OPENAPI);
  auto check_schema = [&](const std::string& path, const json& body) {
    std::vector<std::string> errors;
    SchemaChecker(doc).Check(
        doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
        body, path, errors);
    EXPECT_TRUE(errors.empty()) << path << ":\n" << ::testing::PrintToString(errors);
  };
  auto queue = [&](const std::string& name) {
    const json queues = QueuesJson(*daemon.state());
    check_schema("/api/v1/queues", queues);
    for (const json& q : queues["queues"])
      if (q["name"] == name) return q;
    ADD_FAILURE() << "no queue " << name;
    return json();
  };
  auto pool = [&](size_t p) {
    const json fleet = FleetJson(*daemon.state());
    check_schema("/api/v1/fleet", fleet);
    return fleet["pools"][p];
  };
  auto metric = [&](const std::string& series) {
    return MetricValue(MetricsPage(*daemon.state()), series);
  };

  // Team a's six workloads start in the first cycle, two hours in: five of one H100 after 10,
  // 20, 30, 40 and 100 s; one of 8 A100 after 600 s.
  const core::Time t1 = std::chrono::hours(2);
  cluster.set_now(t1);
  for (const int wait : {40, 10, 100, 30, 20})
    cluster.Add("a-h" + std::to_string(wait), "team-a", 1, "H100", t1 - seconds(wait));
  cluster.Add("a-big", "team-a", 8, "A100", t1 - seconds(600));
  ASSERT_TRUE(daemon.Tick().ok());
  json a = queue("team-a");
  EXPECT_EQ(a["started_last_hour"], 6);
  EXPECT_EQ(a["wait_p50_seconds"], 30);  // 10 20 [30] 40 100 600
  EXPECT_EQ(a["wait_p95_seconds"], 600);
  EXPECT_EQ(a["preemptions_last_hour"], 0);
  EXPECT_EQ(pool(0)["wait_p50_seconds"], 30);  // h100: 10 20 [30] 40 100
  EXPECT_EQ(pool(0)["wait_p95_seconds"], 100);
  EXPECT_EQ(pool(1)["wait_p50_seconds"], 600);
  EXPECT_EQ(pool(1)["started_last_hour"], 1);
  EXPECT_EQ(metric(R"(chamber_queue_wait_seconds{queue="team-a",quantile="0.95"})"), 600);
  EXPECT_EQ(metric(R"(chamber_pool_wait_seconds{pool="h100",quantile="0.5"})"), 30);
  EXPECT_EQ(metric(R"(chamber_preemptions_total{queue="team-a",reason="Reclaim"})"), 0);

  // Half an hour later team b, within its quota, wants the A100s back.
  const core::Time t2 = t1 + minutes(30);
  cluster.set_now(t2);
  cluster.Add("b-big", "team-b", 8, "A100", t2);
  ASSERT_TRUE(daemon.Tick().ok());
  a = queue("team-a");
  EXPECT_EQ(a["preemptions_last_hour"], 1);
  EXPECT_DOUBLE_EQ(a["gpu_hours_lost_last_hour"].get<double>(), 4.0);
  EXPECT_EQ(a["preemptions_total"], 1);
  EXPECT_DOUBLE_EQ(a["gpu_hours_lost_total"].get<double>(), 4.0);
  EXPECT_EQ(a["preemptions_by_reason"]["Reclaim"],
            json({{"preemptions", 1}, {"gpu_hours_lost", 4.0}}));
  EXPECT_EQ(a["preemptions_by_reason"]["Priority"],
            json({{"preemptions", 0}, {"gpu_hours_lost", 0.0}}));
  EXPECT_EQ(queue("team-b")["preemptions_total"], 0);
  EXPECT_EQ(pool(1)["preemptions_last_hour"], 1);
  EXPECT_DOUBLE_EQ(pool(1)["gpu_hours_lost_last_hour"].get<double>(), 4.0);
  EXPECT_EQ(pool(0)["preemptions_last_hour"], 0);
  const json summary = FleetJson(*daemon.state())["summary"];
  EXPECT_EQ(summary["preemptions_last_hour"], 1);
  EXPECT_DOUBLE_EQ(summary["gpu_hours_lost_last_hour"].get<double>(), 4.0);
  EXPECT_EQ(metric(R"(chamber_preemptions_total{queue="team-a",reason="Reclaim"})"), 1);
  EXPECT_EQ(metric(R"(chamber_preemption_lost_gpu_hours_total{queue="team-a",reason="Reclaim"})"),
            4);
  EXPECT_EQ(metric(R"(chamber_preemptions_total{queue="team-b",reason="Reclaim"})"), 0);
  EXPECT_EQ(metric(R"(chamber_queue_preemptions_last_hour{queue="team-a"})"), 1);
  EXPECT_EQ(metric(R"(chamber_queue_lost_gpu_hours_last_hour{queue="team-a"})"), 4);
  EXPECT_EQ(metric(R"(chamber_pool_preemptions_last_hour{pool="a100"})"), 1);
  auto detail = [&](const std::string& name) {
    const std::optional<WorkloadMatch> m = FindWorkload(*daemon.state(), name);
    EXPECT_TRUE(m) << name;
    const json d = WorkloadDetailJson(*daemon.state(), m.value_or(WorkloadMatch{}));
    check_schema("/api/v1/workloads/{name}", d);
    return d["workload"];
  };
  json big = detail("a-big");
  EXPECT_EQ(big["state"], "suspended");
  EXPECT_EQ(big["preemption_count"], 1);
  EXPECT_DOUBLE_EQ(big["gpu_hours_lost"].get<double>(), 4.0);
  EXPECT_EQ(big["preemption_history"],
            json::array({{{"time", FormatRfc3339Ms(ScriptedBackend::kOffsetMs + t2.count())},
                          {"reason", "Reclaim"},
                          {"gpu_hours_lost", 4.0}}}));
  EXPECT_EQ(detail("a-h10")["gpu_hours_lost"], 0.0);
  EXPECT_EQ(detail("a-h10")["preemption_history"], json::array());

  // A minute later team b starts, after a minute's wait.
  cluster.set_now(t2 + minutes(1));
  ASSERT_TRUE(daemon.Tick().ok());
  EXPECT_EQ(detail("b-big")["state"], "running");
  EXPECT_EQ(queue("team-b")["started_last_hour"], 1);
  EXPECT_EQ(queue("team-b")["wait_p95_seconds"], 60);

  // 60.5 minutes after the preemption: it is out of the last hour, team b's start (59.5 minutes
  // ago) is not, and team a's starts (90.5 minutes ago) are.
  cluster.set_now(t2 + minutes(60) + seconds(30));
  ASSERT_TRUE(daemon.Tick().ok());
  a = queue("team-a");
  EXPECT_EQ(a["preemptions_last_hour"], 0);
  EXPECT_EQ(a["gpu_hours_lost_last_hour"], 0.0);
  EXPECT_EQ(a["started_last_hour"], 0);
  EXPECT_EQ(a["wait_p95_seconds"], 0);
  EXPECT_EQ(a["preemptions_total"], 1);
  EXPECT_DOUBLE_EQ(a["gpu_hours_lost_total"].get<double>(), 4.0);
  EXPECT_EQ(queue("team-b")["started_last_hour"], 1);
  EXPECT_EQ(pool(1)["preemptions_last_hour"], 0);
  EXPECT_EQ(metric(R"(chamber_queue_preemptions_last_hour{queue="team-a"})"), 0);
  EXPECT_EQ(metric(R"(chamber_preemption_lost_gpu_hours_total{queue="team-a",reason="Reclaim"})"),
            4);
  EXPECT_EQ(detail("a-big")["gpu_hours_lost"], 4.0);

  // The preempted workload leaves: its history goes with it, the queue's totals stay.
  cluster.Remove("a-big");
  cluster.set_now(t2 + minutes(61));
  ASSERT_TRUE(daemon.Tick().ok());
  EXPECT_FALSE(FindWorkload(*daemon.state(), "a-big"));
  EXPECT_DOUBLE_EQ(queue("team-a")["gpu_hours_lost_total"].get<double>(), 4.0);
  // A workload of the same name later starts afresh, and its start counts as a first start.
  cluster.Add("a-big", "team-a", 6, "H100", t2 + minutes(61) - seconds(5));
  cluster.Remove("a-h10");
  cluster.Remove("a-h20");
  cluster.Remove("a-h30");
  ASSERT_TRUE(daemon.Tick().ok());
  big = detail("a-big");
  EXPECT_EQ(big["state"], "running");
  EXPECT_EQ(big["preemption_count"], 0);
  EXPECT_EQ(big["gpu_hours_lost"], 0.0);
  EXPECT_EQ(queue("team-a")["started_last_hour"], 1);
  EXPECT_EQ(queue("team-a")["wait_p50_seconds"], 5);
}

// The engine preempts a workload again while the cluster has not acted on the first decision
// (a Job's suspension not yet seen, a workload still on a failed GPU): that is one preemption,
// of the run it ends, with the work lost when it was first decided.
TEST(LostWorkTest, ARunIsPreemptedOnceWhileTheClusterCatchesUp) {
  auto owned = std::make_unique<ScriptedBackend>();
  ScriptedBackend& cluster = *owned;
  Daemon daemon(std::move(owned), DaemonOptions{}, nullptr);
  const core::Time t1 = std::chrono::hours(1);
  cluster.set_now(t1);
  cluster.Add("a-big", "team-a", 8, "A100", t1);
  ASSERT_TRUE(daemon.Tick().ok());
  const core::Time t2 = t1 + std::chrono::minutes(15);
  cluster.set_now(t2);
  cluster.Add("b-big", "team-b", 8, "A100", t2);
  cluster.set_lagging(true);
  for (int i = 0; i < 3; ++i) {
    cluster.set_now(t2 + std::chrono::seconds(30 * i));
    ASSERT_TRUE(daemon.Tick().ok());
  }
  EXPECT_EQ(cluster.preemption_decisions(), 3);  // decided in each of the three cycles
  auto team_a = [&] {
    const json queues = QueuesJson(*daemon.state());
    for (const json& q : queues["queues"])
      if (q["name"] == "team-a") return q;
    return json();
  };
  EXPECT_EQ(team_a()["preemptions_total"], 1);
  EXPECT_DOUBLE_EQ(team_a()["gpu_hours_lost_total"].get<double>(), 2.0);  // 8 GPUs x 15 min
  EXPECT_EQ(FleetJson(*daemon.state())["summary"]["preemptions_last_hour"], 1);
  // The cluster acts on the fourth decision: still the same preemption.
  cluster.set_lagging(false);
  cluster.set_now(t2 + std::chrono::seconds(90));
  ASSERT_TRUE(daemon.Tick().ok());
  EXPECT_EQ(cluster.preemption_decisions(), 4);
  EXPECT_EQ(team_a()["preemptions_total"], 1);
  const json w = WorkloadDetailJson(*daemon.state(), *FindWorkload(*daemon.state(), "a-big"));
  EXPECT_EQ(w["workload"]["state"], "suspended");
  EXPECT_EQ(w["workload"]["preemption_history"].size(), 1u);
}

// A new server (a restart, a leader change) starts each workload's lost work from what the
// cluster records of it: a waiting workload shows it at once, and a preemption adds to it.
TEST(LostWorkTest, ANewServerStartsFromTheLossesTheClusterRecords) {
  auto owned = std::make_unique<ScriptedBackend>();
  ScriptedBackend& cluster = *owned;
  Daemon daemon(std::move(owned), DaemonOptions{}, nullptr);
  const core::Time t1 = std::chrono::hours(1);
  cluster.set_now(t1);
  cluster.Add("a-big", "team-a", 8, "A100", t1);
  cluster.Add("a-small", "team-a", 1, "H100", t1);
  cluster.set_stored_losses("a-big", 3, 7.25);
  ASSERT_TRUE(daemon.Tick().ok());
  auto detail = [&](const std::string& name) {
    return WorkloadDetailJson(*daemon.state(), *FindWorkload(*daemon.state(), name))["workload"];
  };
  EXPECT_EQ(detail("a-big")["preemption_count"], 3);
  EXPECT_DOUBLE_EQ(detail("a-big")["gpu_hours_lost"].get<double>(), 7.25);
  EXPECT_EQ(detail("a-small")["preemption_count"], 0);
  // Half an hour later team b reclaims the A100s: 8 GPUs x 30 min more.
  const core::Time t2 = t1 + std::chrono::minutes(30);
  cluster.set_now(t2);
  cluster.Add("b-big", "team-b", 8, "A100", t2);
  ASSERT_TRUE(daemon.Tick().ok());
  EXPECT_EQ(detail("a-big")["state"], "suspended");
  EXPECT_EQ(detail("a-big")["preemption_count"], 4);
  EXPECT_DOUBLE_EQ(detail("a-big")["gpu_hours_lost"].get<double>(), 11.25);
  EXPECT_EQ(detail("a-big")["preemption_history"].size(), 1u) << "the ones this server saw";
}

TEST(ParseTimeParamTest, UnixSecondsAndRfc3339) {
  EXPECT_EQ(*ParseTimeParam("1790000000"), 1790000000);
  EXPECT_EQ(*ParseTimeParam("2026-01-31T12:00:00Z"), 1769860800);
  EXPECT_EQ(*ParseTimeParam("2026-01-31T12:00:00.5Z"), 1769860800);
  EXPECT_EQ(*ParseTimeParam("2026-01-31T13:30:00+01:30"), 1769860800);
  EXPECT_FALSE(ParseTimeParam("2026-01-31T12:00:00").ok());
  EXPECT_FALSE(ParseTimeParam("soon").ok());
  EXPECT_EQ(ParseTimeParam("soon").status().message(),
            "\"soon\" is neither Unix seconds nor an RFC 3339 time (like 2026-01-02T03:04:05Z)");
  // The strptime reader stepped six characters past a short offset, beyond the end of the text,
  // and let the day run over the month's end.
  EXPECT_FALSE(ParseTimeParam("2026-01-31T12:00:00+01:0").ok());
  EXPECT_FALSE(ParseTimeParam("2026-02-31T12:00:00Z").ok());
  EXPECT_FALSE(ParseTimeParam(" 2026-01-31T12:00:00Z").ok());
}

// Found while writing the api_query fuzz harness: Unix seconds near the end of int64_t overflowed
// the history's default start, an hour before `to` (undefined behaviour).
TEST(ParseTimeParamTest, UnixSecondsStayInTheClocksYears) {
  EXPECT_EQ(*ParseTimeParam("9223372036"), 9223372036);
  EXPECT_EQ(*ParseTimeParam("-9223372036"), -9223372036);
  EXPECT_EQ(ParseTimeParam("9223372037").status().message(),
            "\"9223372037\" is out of range: Unix seconds from -9223372036 to 9223372036 (the "
            "years 1677 to 2262)");
  Result<HistoryQuery> q =
      ParseHistoryQuery({{"metric", "utilization"}, {"to", "-9223372036854775800"}}, 0);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(),
            "parameter to: \"-9223372036854775800\" is out of range: Unix seconds from "
            "-9223372036 to 9223372036 (the years 1677 to 2262)");
}

}  // namespace
}  // namespace chamber::daemon
