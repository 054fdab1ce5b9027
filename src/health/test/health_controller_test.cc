#include "health/health_controller.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace chamber::health {
namespace {

using nlohmann::json;

// A report in the agent's schema (docs/agent.md), `gpus` GPUs, with the given open incidents.
json Report(const std::string& node, int gpus, json incidents = json::array(),
            json samples = nullptr) {
  json inv = json::array();
  json s = json::array();
  for (int i = 0; i < gpus; ++i) {
    inv.push_back({{"index", i}, {"uuid", "GPU-" + node + "-" + std::to_string(i)}});
    s.push_back({{"index", i},
                 {"uuid", "GPU-" + node + "-" + std::to_string(i)},
                 {"lost", false},
                 {"recovery_action", 0}});
  }
  return {{"kind", "chamber.io/agent-report/v1"},
          {"node", node},
          {"time", 1000.5},
          {"inventory", {{"gpu_count", gpus}, {"gpus", inv}}},
          {"samples", samples.is_null() ? s : samples},
          {"health", json::object()},
          {"incidents", incidents},
          {"closed_incidents", json::array()}};
}

json Incident(int id, int gpu, const std::string& cause, const std::string& severity,
              std::optional<int> xid = std::nullopt, double opened_at = 100) {
  return {{"id", id},
          {"gpu_index", gpu},
          {"gpu_uuid", "GPU-x-" + std::to_string(gpu)},
          {"pci_bus_id", "00000000:18:00.0"},
          {"cause", cause},
          {"severity", severity},
          {"xid", xid ? json(*xid) : json(nullptr)},
          {"message", "m"},
          {"opened_at", opened_at},
          {"last_seen", opened_at},
          {"closed_at", nullptr},
          {"occurrences", 1}};
}

AgentReport Parse(const json& j) {
  Result<AgentReport> r = ParseAgentReport(j);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : AgentReport{};
}

HealthControllerConfig Config() {
  HealthControllerConfig c;
  c.probation_s = 60;
  c.max_probation_s = 200;
  c.fault_window_s = 3600;
  c.hold_after_faults = 0;  // off unless a test turns it on
  c.stale_after_s = 1e6;    // the stale test sets its own
  return c;
}

const json kXid79 = json::array({Incident(1, 1, "xid-hardware", "fatal", 79)});

// The evidence an agent sends with an Xid 79 incident (docs/health.md, "Evidence").
const json kXid79Evidence = json::parse(R"([
  {"type": "xid", "xid": 79, "name": "GPU has fallen off the bus",
   "meaning": "the GPU is no longer reachable over PCIe", "class": "hardware",
   "source": "nvml-event", "count": null},
  {"type": "rule", "rule": "xid-hardware", "severity": "fatal",
   "condition": "a hardware Xid; severity from the Xid table",
   "threshold": "Xid 79 is a hardware Xid, fatal in the Xid table"}])");

json Xid79WithEvidence() {
  json incidents = kXid79;
  incidents[0]["message"] = "Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable";
  incidents[0]["evidence"] = kXid79Evidence;
  return incidents;
}

// --- parser

TEST(AgentReportParser, ReadsTheAgentSchema) {
  AgentReport r = Parse(Report("n1", 2, kXid79));
  EXPECT_EQ(r.node, "n1");
  EXPECT_DOUBLE_EQ(r.time, 1000.5);
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[1].uuid, "GPU-n1-1");
  ASSERT_EQ(r.incidents.size(), 1u);
  EXPECT_EQ(r.incidents[0].severity, Severity::kFatal);
  EXPECT_EQ(r.incidents[0].xid, 79);
  EXPECT_EQ(r.samples[0].recovery_action, 0);
}

TEST(AgentReportParser, ReadsIncidentEvidence) {
  AgentReport r = Parse(Report("n1", 2, Xid79WithEvidence()));
  ASSERT_EQ(r.incidents[0].evidence.size(), 2u);
  EXPECT_EQ(std::get<XidEvidence>(r.incidents[0].evidence[0]).meaning,
            "the GPU is no longer reachable over PCIe");
  EXPECT_EQ(std::get<RuleEvidence>(r.incidents[0].evidence[1]).rule, "xid-hardware");
  EXPECT_TRUE(Parse(Report("n1", 2, kXid79)).incidents[0].evidence.empty()) << "an older agent";
  json bad = Xid79WithEvidence();
  bad[0]["evidence"][0]["xid"] = "79";
  EXPECT_EQ(ParseAgentReport(Report("n1", 2, bad)).status().message(),
            "report.incidents[0].evidence[0].xid: expected an unsigned integer");
  bad[0]["evidence"] = "Xid 79";
  EXPECT_EQ(ParseAgentReport(Report("n1", 2, bad)).status().message(),
            "report.incidents[0].evidence: expected an array");
}

// docs/agent.md, "Pods on GPUs": who holds each GPU, as the device plugin gave it out.
TEST(AgentReportParser, ReadsWhichPodsHoldEachGpu) {
  json j = Report("n1", 2);
  j["samples"][0]["pods"] = {{{"namespace", "ml"},
                              {"pod", "train-0"},
                              {"container", "main"},
                              {"resource", "nvidia.com/gpu"},
                              {"device_id", "GPU-n1-0"},
                              {"mig_uuid", nullptr}},
                             {{"namespace", "ml"},
                              {"pod", "small"},
                              {"container", "main"},
                              {"resource", "nvidia.com/mig-1g.10gb"},
                              {"device_id", "MIG-1"},
                              {"mig_uuid", "MIG-1"}}};
  j["samples"][1]["pods"] = json::array();
  j["pod_resources"] = {{"state", "available"},
                        {"error", nullptr},
                        {"updated_at", 999.0},
                        {"unmatched", json::array()}};
  AgentReport r = Parse(j);
  EXPECT_TRUE(r.pod_resources_available);
  ASSERT_EQ(r.samples[0].pods.size(), 2u);
  EXPECT_EQ(r.samples[0].pods[0].namespace_name, "ml");
  EXPECT_EQ(r.samples[0].pods[0].pod, "train-0");
  EXPECT_EQ(r.samples[0].pods[0].resource, "nvidia.com/gpu");
  EXPECT_FALSE(r.samples[0].pods[0].mig);
  EXPECT_TRUE(r.samples[0].pods[1].mig);
  EXPECT_TRUE(r.samples[1].pods.empty());
  // Unavailable, or an agent that sends none: nothing is said about who holds the GPUs.
  j["pod_resources"]["state"] = "unavailable";
  EXPECT_FALSE(Parse(j).pod_resources_available);
  j.erase("pod_resources");
  EXPECT_FALSE(Parse(j).pod_resources_available);
  // Errors name the field.
  j["samples"][0]["pods"][1]["pod"] = 7;
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.samples[0].pods[1].pod: expected a string");
  j["samples"][0]["pods"] = "ml/train-0";
  EXPECT_EQ(ParseAgentReport(j).status().message(), "report.samples[0].pods: expected an array");
}

// The processes on each GPU with the pod each runs in (docs/agent.md, "Processes on GPUs"):
// those of no pod are dropped; memory may be null; errors name the field.
TEST(AgentReportParser, ReadsEachProcesssPodAndMemory) {
  json j = Report("n1", 2);
  j["samples"][0]["processes"] = {{{"pid", 10},
                                   {"used_memory_bytes", 1 << 30},
                                   {"sm_percent", 40},
                                   {"memory_percent", 5},
                                   {"gpu_instance_id", nullptr},
                                   {"compute_instance_id", nullptr},
                                   {"pod_uid", "uid-a"}},
                                  {{"pid", 11},
                                   {"used_memory_bytes", nullptr},
                                   {"sm_percent", nullptr},
                                   {"memory_percent", nullptr},
                                   {"gpu_instance_id", nullptr},
                                   {"compute_instance_id", nullptr},
                                   {"pod_uid", "uid-b"}},
                                  {{"pid", 12},
                                   {"used_memory_bytes", 4096},
                                   {"sm_percent", nullptr},
                                   {"memory_percent", nullptr},
                                   {"gpu_instance_id", nullptr},
                                   {"compute_instance_id", nullptr},
                                   {"pod_uid", nullptr}}};
  j["samples"][1]["processes"] = nullptr;  // the driver cannot list them
  AgentReport r = Parse(j);
  ASSERT_EQ(r.samples[0].processes.size(), 2u);
  EXPECT_EQ(r.samples[0].processes[0].pod_uid, "uid-a");
  EXPECT_EQ(r.samples[0].processes[0].used_memory_bytes, int64_t{1} << 30);
  EXPECT_EQ(r.samples[0].processes[1].pod_uid, "uid-b");
  EXPECT_FALSE(r.samples[0].processes[1].used_memory_bytes.has_value());
  EXPECT_TRUE(r.samples[1].processes.empty());
  j["samples"][0]["processes"][1]["pod_uid"] = 5;
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.samples[0].processes[1].pod_uid: expected a string or null");
  j["samples"][0]["processes"][1]["pod_uid"] = "uid-b";
  j["samples"][0]["processes"][0]["used_memory_bytes"] = -1;
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.samples[0].processes[0].used_memory_bytes: must be between 0 and "
            "1125899906842624");
  j["samples"][0]["processes"] = {{"not", "an object"}};
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.samples[0].processes: expected an array or null");
}

// A GPU in MIG mode lists its MIG devices in the inventory; a holder of one names it.
TEST(AgentReportParser, ReadsEachGpusMigDevices) {
  json j = Report("n1", 2);
  j["inventory"]["gpus"][1]["mig"] = {{"enabled", true},
                                      {"instances", 2},
                                      {"devices",
                                       {{{"index", 0},
                                         {"uuid", "MIG-a"},
                                         {"name", "NVIDIA H100 80GB HBM3 MIG 3g.40gb"},
                                         {"profile", "3g.40gb"},
                                         {"memory_total_bytes", 42144366592},
                                         {"gpu_instance_id", 2},
                                         {"compute_instance_id", 0}},
                                        {{"index", 1},
                                         {"uuid", "MIG-b"},
                                         {"name", "x"},
                                         {"profile", nullptr},
                                         {"memory_total_bytes", nullptr},
                                         {"gpu_instance_id", nullptr},
                                         {"compute_instance_id", nullptr}}}}};
  j["inventory"]["gpus"][0]["mig"] = {
      {"enabled", false}, {"instances", 0}, {"devices", json::array()}};
  j["samples"][1]["pods"] = {{{"namespace", "ml"},
                              {"pod", "infer"},
                              {"container", "main"},
                              {"resource", "nvidia.com/mig-3g.40gb"},
                              {"device_id", "MIG-a"},
                              {"mig_uuid", "MIG-a"}}};
  AgentReport r = Parse(j);
  EXPECT_TRUE(r.gpus[0].mig_devices.empty());
  ASSERT_EQ(r.gpus[1].mig_devices.size(), 2u);
  EXPECT_EQ(r.gpus[1].mig_devices[0].uuid, "MIG-a");
  EXPECT_EQ(r.gpus[1].mig_devices[0].profile, "3g.40gb");
  EXPECT_EQ(r.gpus[1].mig_devices[0].memory_total_bytes, int64_t{42144366592});
  EXPECT_EQ(r.gpus[1].mig_devices[1].profile, "");
  EXPECT_FALSE(r.gpus[1].mig_devices[1].memory_total_bytes.has_value());
  ASSERT_EQ(r.samples[1].pods.size(), 1u);
  EXPECT_EQ(r.samples[1].pods[0].mig_uuid, "MIG-a");
  j["inventory"]["gpus"][1]["mig"]["devices"][1]["uuid"] = 7;
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.inventory.gpus[1].mig.devices[1].uuid: expected a string");
  j["inventory"]["gpus"][1]["mig"]["devices"] = "MIG-a";
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.inventory.gpus[1].mig.devices: expected an array");
}

TEST(AgentReportParser, ErrorsNameTheField) {
  json j = Report("n1", 1,
                  json::array({Incident(1, 0, "x", "fatal"), Incident(2, 0, "x", "bad"),
                               Incident(3, 0, "x", "fatal")}));
  j["incidents"][2]["severity"] = 3;
  Result<AgentReport> r = ParseAgentReport(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "report.incidents[1].severity: expected healthy, degraded, unhealthy or fatal, got "
            "\"bad\"");
  j["incidents"][1]["severity"] = "fatal";
  r = ParseAgentReport(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "report.incidents[2].severity: expected a string");

  json k = Report("n1", 1);
  k["inventory"]["gpus"][0].erase("uuid");
  EXPECT_EQ(ParseAgentReport(k).status().message(), "report.inventory.gpus[0].uuid: missing");
  k = Report("n1", 1);
  k["kind"] = "other";
  EXPECT_EQ(ParseAgentReport(k).status().message(),
            "report.kind: expected \"chamber.io/agent-report/v1\", got \"other\"");
  k = Report("n1", 1);
  k["samples"][0]["lost"] = "no";
  EXPECT_EQ(ParseAgentReport(k).status().message(),
            "report.samples[0].lost: expected true or false");
  k = Report("n1", 1);
  k["samples"][0]["index"] = -2;
  EXPECT_EQ(ParseAgentReport(k).status().message(),
            "report.samples[0].index: must be between 0 and 1023");
  // A required member that is null is missing; recovery_action must be there, but null says the
  // driver does not know.
  k = Report("n1", 1);
  k["inventory"]["gpus"][0]["uuid"] = nullptr;
  EXPECT_EQ(ParseAgentReport(k).status().message(), "report.inventory.gpus[0].uuid: missing");
  k = Report("n1", 1);
  k["samples"][0]["recovery_action"] = nullptr;
  Result<AgentReport> unknown_action = ParseAgentReport(k);
  ASSERT_TRUE(unknown_action.ok()) << unknown_action.status().ToString();
  EXPECT_FALSE(unknown_action->samples[0].recovery_action);
  k["samples"][0].erase("recovery_action");
  EXPECT_EQ(ParseAgentReport(k).status().message(), "report.samples[0].recovery_action: missing");
  k = Report("n1", 1);
  k["samples"] = json::object();
  EXPECT_EQ(ParseAgentReport(k).status().message(), "report.samples: expected a list");
  EXPECT_EQ(ParseAgentReportText("{").status().message(), "report: not valid JSON");
  EXPECT_EQ(ParseAgentReportText("[]").status().message(), "report: expected an object");
}

TEST(AgentReportParser, KeepsOnlyTheAgentsOwnLabels) {
  EXPECT_FALSE(Parse(Report("n1", 1)).labels.has_value());  // no `labels`: leave them alone
  json j = Report("n1", 1);
  j["labels"] = {{"chamber.io/gpu.count", "1"},
                 {"chamber.io/gpu.model", "NVIDIA-H100-80GB-HBM3"},
                 {"chamber.io/queue", "team-a"},  // not the agent's to set
                 {"kubernetes.io/hostname", "n1"}};
  AgentReport r = Parse(j);
  ASSERT_TRUE(r.labels.has_value());
  EXPECT_EQ(*r.labels,
            (std::map<std::string, std::string>{
                {"chamber.io/gpu.count", "1"}, {"chamber.io/gpu.model", "NVIDIA-H100-80GB-HBM3"}}));
  j["labels"] = json::object();
  EXPECT_EQ(Parse(j).labels, (std::map<std::string, std::string>{}));
}

TEST(AgentReportParser, InvalidAgentLabelsNameTheKey) {
  json j = Report("n1", 1);
  j["labels"] = {{"chamber.io/gpu.model", "NVIDIA H100 80GB"}};
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.labels[\"chamber.io/gpu.model\"]: \"NVIDIA H100 80GB\" is not a valid label "
            "value (at most 63 of A-Z a-z 0-9 . _ -, alphanumeric at both ends)");
  j["labels"] = {{"chamber.io/gpu.count", 2}};
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.labels[\"chamber.io/gpu.count\"]: expected a string");
  j["labels"] = {{"chamber.io/gpu.bad-", "x"}};
  EXPECT_EQ(ParseAgentReport(j).status().message(),
            "report.labels[\"chamber.io/gpu.bad-\"]: not a valid label key");
  j["labels"] = {{"chamber.io/gpu.memory", std::string(64, '1')}};
  EXPECT_FALSE(ParseAgentReport(j).ok());
  j["labels"] = json::array();
  EXPECT_EQ(ParseAgentReport(j).status().message(), "report.labels: expected an object");
  j["labels"] = {{"chamber.io/gpu.driver", ""}};  // an empty value is a valid label value
  EXPECT_TRUE(ParseAgentReport(j).ok());
}

// Any mutation of a valid report is either accepted or rejected with an error naming a report
// field; the parser never throws or crashes.
RC_GTEST_PROP(AgentReportParser, MutatedReportsFailCleanly, ()) {
  json j = Report("n1", 2, json::array({Incident(1, 1, "xid-hardware", "fatal", 79)}));
  const std::vector<std::string> paths = {"/kind",
                                          "/node",
                                          "/time",
                                          "/inventory",
                                          "/inventory/gpus",
                                          "/inventory/gpus/0/index",
                                          "/inventory/gpus/1/uuid",
                                          "/samples",
                                          "/samples/0",
                                          "/samples/1/lost",
                                          "/samples/0/recovery_action",
                                          "/incidents",
                                          "/incidents/0",
                                          "/incidents/0/id",
                                          "/incidents/0/gpu_index",
                                          "/incidents/0/severity",
                                          "/incidents/0/xid",
                                          "/incidents/0/occurrences",
                                          "/incidents/0/opened_at",
                                          "/incidents/0/cause"};
  const int n = *rc::gen::inRange(1, 4);
  for (int k = 0; k < n; ++k) {
    const std::string path = *rc::gen::elementOf(paths);
    const json::json_pointer ptr(path);
    if (!j.contains(ptr)) continue;
    const int what = *rc::gen::inRange(0, 7);
    json v;
    switch (what) {
      case 0:
        v = nullptr;
        break;
      case 1:
        v = *rc::gen::arbitrary<int64_t>();
        break;
      case 2:
        v = *rc::gen::arbitrary<std::string>();
        break;
      case 3:
        v = *rc::gen::arbitrary<bool>();
        break;
      case 4:
        v = json::array();
        break;
      case 5:
        v = json::object();
        break;
      default:
        v = *rc::gen::arbitrary<double>();
        break;
    }
    if (what == 6 && j[ptr.parent_pointer()].is_object() && *rc::gen::arbitrary<bool>()) {
      // Remove the field instead.
      j[ptr.parent_pointer()].erase(ptr.back());
      continue;
    }
    j[ptr] = v;
  }
  Result<AgentReport> r = ParseAgentReport(j);
  if (!r.ok()) RC_ASSERT(r.status().message().rfind("report", 0) == 0);
  // Round trip through text too.
  Result<AgentReport> t =
      ParseAgentReportText(j.dump(-1, ' ', false, json::error_handler_t::replace));
  RC_ASSERT(t.ok() == r.ok());
}

// --- rules

TEST(HealthController, DesiredCarriesTheLastReportedLabels) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2)), 10);
  EXPECT_FALSE(c.Desired().at("n1").labels.has_value());
  json j = Report("n1", 2);
  j["labels"] = {{"chamber.io/gpu.count", "2"}, {"chamber.io/gpu.memory", "81559"}};
  c.Ingest(Parse(j), 11);
  EXPECT_EQ(c.Desired().at("n1").labels,
            (std::map<std::string, std::string>{{"chamber.io/gpu.count", "2"},
                                                {"chamber.io/gpu.memory", "81559"}}));
  c.Ingest(Parse(Report("n1", 2)), 12);  // a report without labels keeps the last ones
  EXPECT_EQ(c.Desired().at("n1").labels->size(), 2u);
  j["labels"] = {{"chamber.io/gpu.count", "2"}};
  c.Ingest(Parse(j), 13);
  EXPECT_EQ(c.Desired().at("n1").labels,
            (std::map<std::string, std::string>{{"chamber.io/gpu.count", "2"}}));
}

TEST(HealthController, DesiredCarriesTheInventorysUuidsByIndex) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2)), 1000);
  EXPECT_EQ(c.Desired().at("n1").gpu_uuids, (std::vector<std::string>{"GPU-n1-0", "GPU-n1-1"}));
  json r = Report("n1", 3);
  r["inventory"]["gpus"].erase(1);  // GPU 1 fell off the bus before the agent started
  c.Ingest(Parse(r), 1001);
  EXPECT_EQ(c.Desired().at("n1").gpu_uuids, (std::vector<std::string>{"GPU-n1-0", "", "GPU-n1-2"}));
}

TEST(HealthController, HardwareFaultFencesAtOnce) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 4, kXid79)), 1000);
  auto changes = c.Evaluate(1000);
  auto d = c.Desired().at("n1");
  EXPECT_EQ(d.unhealthy_gpus, std::vector<int>{1});
  EXPECT_EQ(d.taint, TaintEffect::kNoSchedule);
  EXPECT_EQ(d.condition.status, "False");
  EXPECT_EQ(d.condition.reason, "GpuFault");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kFenced);
}

// --- evidence: the incident says what was measured, which rule fired and what was done

TEST(HealthController, FenceRecordsTheEvidenceTheRuleAndTheAction) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2, Xid79WithEvidence())), 1000);
  auto changes = c.Evaluate(1000);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kFenced);
  EXPECT_EQ(changes[0].message,
            "GPU 1 (GPU-n1-1) fenced: fatal fault; Xid 79 (GPU has fallen off the bus): the GPU is "
            "no longer reachable over PCIe; rule xid-hardware (fatal): Xid 79 is a hardware Xid, "
            "fatal in the Xid table; node tainted NoSchedule");
  json want = kXid79Evidence;
  want.push_back({{"type", "action"},
                  {"gpu_fenced", true},
                  {"taint", "NoSchedule"},
                  {"breaker_held", false},
                  {"workloads_requeued", json::array()},
                  {"workloads_requeued_count", 0}});
  EXPECT_EQ(c.ToJson(1000)["incidents"][0]["evidence"], want);
  std::vector<FenceCause> causes = c.FenceCauses();
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].node, "n1");
  EXPECT_EQ(causes[0].gpu_index, 1);
  EXPECT_EQ(causes[0].cause, "xid-hardware");
  EXPECT_EQ(causes[0].severity, Severity::kFatal);
  EXPECT_EQ(causes[0].message,
            "Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable");
  EXPECT_EQ(EvidenceListJson(causes[0].evidence), want);
}

TEST(HealthController, RequeuedWorkloadsJoinTheActionAndAreAnnouncedOnce) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2, Xid79WithEvidence())), 1000);
  c.Evaluate(1000);
  c.RecordRequeued(
      {{"n1", 1, "team-a/train"}, {"n1", 1, "team-a/eval"}, {"n1", 0, "x/y"}, {"nope", 1, "x/z"}});
  auto changes = c.Evaluate(1001);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kRequeued);
  EXPECT_EQ(changes[0].node, "n1");
  EXPECT_EQ(changes[0].message,
            "GPU 1 (GPU-n1-1): 2 workloads requeued off the fenced GPU: team-a/train, "
            "team-a/eval; fault: Xid 79 (GPU has fallen off the bus): the GPU is no longer "
            "reachable over PCIe");
  c.RecordRequeued({{"n1", 1, "team-a/train"}});  // already counted
  EXPECT_TRUE(c.Evaluate(1002).empty());
  const json action = c.ToJson(1002)["incidents"][0]["evidence"].back();
  EXPECT_EQ(action["workloads_requeued"], json::array({"team-a/train", "team-a/eval"}));
  EXPECT_EQ(action["workloads_requeued_count"], 2);
  EXPECT_EQ(std::get<ActionEvidence>(c.FenceCauses()[0].evidence.back()).workloads_requeued_count,
            2);
}

TEST(HealthController, ActionSaysNoExecuteBreakerHeldOrReportedOnly) {
  HealthControllerConfig cfg = Config();
  cfg.fatal_no_execute = true;
  HealthController c(cfg);
  c.Ingest(Parse(Report("n1", 2, Xid79WithEvidence())), 1000);
  const auto changes = c.Evaluate(1000);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].message.find("; node tainted NoExecute"), std::string::npos)
      << changes[0].message;
  EXPECT_EQ(c.ToJson(1000)["incidents"][0]["evidence"].back()["taint"], "NoExecute");

  HealthController d(Config());
  d.Ingest(Parse(Report("n1", 2, json::array({Incident(1, 0, "thermal-slowdown", "degraded")}))),
           1000);
  json action = d.ToJson(1000)["incidents"][0]["evidence"].back();
  EXPECT_EQ(action["gpu_fenced"], false);
  EXPECT_EQ(action["breaker_held"], false);
  EXPECT_TRUE(action["taint"].is_null());

  cfg = Config();
  cfg.breaker_fraction = 0.1;
  cfg.breaker_min_nodes = 1;
  HealthController b(cfg);
  for (int i = 0; i < 3; ++i) b.Ingest(Parse(Report("n" + std::to_string(i), 2)), 1000);
  b.Ingest(Parse(Report("n0", 2, kXid79)), 1001);
  action = b.ToJson(1001)["incidents"][0]["evidence"].back();
  EXPECT_EQ(action["gpu_fenced"], false);
  EXPECT_EQ(action["breaker_held"], true);
}

TEST(HealthController, FatalFaultsTaintNoExecuteWhenConfigured) {
  HealthControllerConfig cfg = Config();
  cfg.fatal_no_execute = true;
  HealthController c(cfg);
  c.Ingest(Parse(Report("n1", 2, kXid79)), 1000);
  EXPECT_EQ(c.Desired().at("n1").taint, TaintEffect::kNoExecute);
  HealthController u(cfg);
  u.Ingest(Parse(Report("n1", 2, json::array({Incident(1, 0, "nvlink-down", "unhealthy")}))), 1000);
  EXPECT_EQ(u.Desired().at("n1").taint, TaintEffect::kNoSchedule);
}

TEST(HealthController, DegradedAndHealthyDoNotFence) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2, json::array({Incident(1, 0, "thermal-slowdown", "degraded")}))),
           1000);
  auto d = c.Desired().at("n1");
  EXPECT_TRUE(d.unhealthy_gpus.empty());
  EXPECT_EQ(d.taint, TaintEffect::kNone);
  EXPECT_EQ(d.condition.status, "True");
  ASSERT_EQ(c.Incidents().size(), 1u);  // logged, not fenced
  EXPECT_FALSE(c.Incidents()[0].fenced);
}

// One application Xid opens no agent incident at all (the agent's table); the report carries
// nothing, so nothing is fenced. Repeated ones arrive as xid-application-repeated (unhealthy).
TEST(HealthController, ApplicationXidDoesNotFenceUnlessRepeated) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2)), 1000);
  EXPECT_TRUE(c.Desired().at("n1").unhealthy_gpus.empty());
  c.Ingest(
      Parse(Report("n1", 2,
                   json::array({Incident(1, 0, "xid-application-repeated", "unhealthy", 13)}))),
      1001);
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, std::vector<int>{0});
}

TEST(HealthController, ProbationLiftsTheFenceOnlyAfterTheGpuStayedClean) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2, kXid79)), 1000);
  c.Evaluate(1000);
  c.Ingest(Parse(Report("n1", 2)), 1010);  // clean from 1010
  c.Evaluate(1050);
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, std::vector<int>{1});
  EXPECT_EQ(c.Desired().at("n1").condition.reason, "Probation");
  c.Ingest(Parse(Report("n1", 2)), 1060);
  c.Evaluate(1069);
  EXPECT_FALSE(c.Desired().at("n1").unhealthy_gpus.empty());
  c.Ingest(Parse(Report("n1", 2)), 1070);
  auto changes = c.Evaluate(1070);
  EXPECT_TRUE(c.Desired().at("n1").unhealthy_gpus.empty());
  EXPECT_EQ(c.Desired().at("n1").taint, TaintEffect::kNone);
  EXPECT_EQ(c.Desired().at("n1").condition.status, "True");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kUnfenced);
}

TEST(HealthController, ProbationWaitsForTheRecoveryActionToReadNone) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 1, json::array({Incident(1, 0, "xid-hardware", "fatal", 48)}))),
           1000);
  json samples =
      json::array({{{"index", 0}, {"uuid", "GPU-n1-0"}, {"lost", false}, {"recovery_action", 1}}});
  c.Ingest(Parse(Report("n1", 1, json::array(), samples)), 1001);  // reset still pending
  c.Evaluate(1200);
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, std::vector<int>{0});
  c.Ingest(Parse(Report("n1", 1)), 1200);  // action none from here
  c.Evaluate(1259);
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, std::vector<int>{0});
  c.Evaluate(1260);
  EXPECT_TRUE(c.Desired().at("n1").unhealthy_gpus.empty());
}

TEST(HealthController, FaultDuringProbationRestartsIt) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2, kXid79)), 1000);
  c.Ingest(Parse(Report("n1", 2)), 1010);
  c.Ingest(Parse(Report("n1", 2, json::array({Incident(7, 1, "gpu-lost", "fatal")}))), 1050);
  c.Ingest(Parse(Report("n1", 2)), 1060);
  c.Evaluate(1100);  // 1010 + 60 passed, but the clean period restarted at 1060
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, std::vector<int>{1});
}

TEST(HealthController, RepeatedFaultsBackOffExponentiallyUpToTheCap) {
  HealthController c(Config());  // probation 60, cap 200
  double t = 1000;
  std::vector<double> probations;
  for (int fault = 0; fault < 4; ++fault) {
    c.Ingest(Parse(Report("n1", 1,
                          json::array({Incident(fault + 1, 0, "xid-hardware", "fatal", 79, t)}))),
             t);
    probations.push_back(c.Nodes()[0].fenced.at(0).probation_s);
    c.Ingest(Parse(Report("n1", 1)), t + 1);
    // Not lifted a second before the probation ends; lifted when it does.
    c.Evaluate(t + 1 + probations.back() - 1);
    ASSERT_FALSE(c.Desired().at("n1").unhealthy_gpus.empty());
    c.Evaluate(t + 1 + probations.back());
    ASSERT_TRUE(c.Desired().at("n1").unhealthy_gpus.empty());
    t += 1 + probations.back() + 5;
  }
  EXPECT_EQ(probations, (std::vector<double>{60, 120, 200, 200}));
}

TEST(HealthController, OldFaultsLeaveTheWindowAndStopCounting) {
  HealthControllerConfig cfg = Config();
  cfg.fault_window_s = 100;
  HealthController c(cfg);
  c.Ingest(Parse(Report("n1", 1, json::array({Incident(1, 0, "gpu-lost", "fatal", {}, 1)}))), 1000);
  c.Ingest(Parse(Report("n1", 1)), 1001);
  c.Evaluate(1061);
  c.Ingest(Parse(Report("n1", 1, json::array({Incident(2, 0, "gpu-lost", "fatal", {}, 2)}))), 1500);
  EXPECT_EQ(c.Nodes()[0].fenced.at(0).probation_s, 60);
}

TEST(HealthController, NodeWithNFaultsIsHeldUntilAnOperatorClearsIt) {
  HealthControllerConfig cfg = Config();
  cfg.hold_after_faults = 2;
  HealthController c(cfg);
  c.Ingest(Parse(Report("n1", 2, json::array({Incident(1, 0, "gpu-lost", "fatal", {}, 1)}))), 1000);
  c.Ingest(Parse(Report("n1", 2)), 1001);
  c.Evaluate(1100);  // probation over: lifted
  EXPECT_TRUE(c.Desired().at("n1").unhealthy_gpus.empty());
  c.Ingest(Parse(Report("n1", 2, json::array({Incident(2, 1, "nvlink-down", "unhealthy")}))), 1200);
  auto changes = c.Evaluate(1200);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kHeld);
  c.Ingest(Parse(Report("n1", 2)), 1201);
  c.Evaluate(100000);  // long after any probation, but held
  DesiredNode d = c.Desired().at("n1");
  EXPECT_EQ(d.unhealthy_gpus, std::vector<int>{1});
  EXPECT_TRUE(d.held);
  EXPECT_EQ(d.condition.reason, "OperatorHold");
  EXPECT_EQ(c.Clear("nope", 100000).code(), StatusCode::kNotFound);
  ASSERT_TRUE(c.Clear("n1", 100000).ok());
  changes = c.Evaluate(100000);
  d = c.Desired().at("n1");
  EXPECT_TRUE(d.unhealthy_gpus.empty());
  EXPECT_FALSE(d.held);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kUnfenced);
  EXPECT_EQ(changes[1].kind, HealthChange::Kind::kCleared);
}

TEST(HealthController, ClearKeepsAGpuThatIsStillFaulty) {
  HealthControllerConfig cfg = Config();
  cfg.hold_after_faults = 1;
  HealthController c(cfg);
  c.Ingest(Parse(Report("n1", 2, kXid79)), 1000);
  ASSERT_TRUE(c.Clear("n1", 1001).ok());
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, std::vector<int>{1});
  EXPECT_FALSE(c.Desired().at("n1").held);
}

TEST(HealthController, CircuitBreakerStopsFencingNewNodesAndAlerts) {
  HealthControllerConfig cfg = Config();
  cfg.breaker_fraction = 0.2;
  cfg.breaker_min_nodes = 3;
  cfg.breaker_window_s = 300;
  HealthController c(cfg);
  for (int i = 0; i < 10; ++i) c.Ingest(Parse(Report("n" + std::to_string(i), 2)), 1000);
  // 2 of 10 may be fenced (2 < 3); the third newly fenced node would be 3 > 0.2 * 10.
  for (int i = 0; i < 4; ++i) c.Ingest(Parse(Report("n" + std::to_string(i), 2, kXid79)), 1010);
  auto changes = c.Evaluate(1010);
  auto d = c.Desired();
  EXPECT_EQ(d.at("n0").unhealthy_gpus, std::vector<int>{1});
  EXPECT_EQ(d.at("n1").unhealthy_gpus, std::vector<int>{1});
  EXPECT_TRUE(d.at("n2").unhealthy_gpus.empty());
  EXPECT_TRUE(d.at("n3").unhealthy_gpus.empty());
  EXPECT_EQ(d.at("n2").condition.reason, "CircuitBreakerOpen");
  BreakerState b = c.Breaker();
  EXPECT_TRUE(b.open);
  EXPECT_EQ(b.suppressed_nodes, (std::vector<std::string>{"n2", "n3"}));
  EXPECT_NE(b.message.find("circuit breaker open"), std::string::npos);
  int opened = 0;
  for (const HealthChange& ch : changes) opened += ch.kind == HealthChange::Kind::kBreakerOpened;
  EXPECT_EQ(opened, 1);
  // A second fault on an already fenced node is still fenced.
  c.Ingest(Parse(Report("n0", 2,
                        json::array({Incident(1, 1, "xid-hardware", "fatal", 79),
                                     Incident(2, 0, "gpu-lost", "fatal")}))),
           1020);
  EXPECT_EQ(c.Desired().at("n0").unhealthy_gpus, (std::vector<int>{0, 1}));
  // After the window the breaker closes and the next report fences n2.
  for (int i = 0; i < 10; ++i)
    c.Ingest(Parse(Report("n" + std::to_string(i), 2, i == 2 ? kXid79 : json::array())), 1320);
  changes = c.Evaluate(1320);
  EXPECT_FALSE(c.Breaker().open);
  c.Ingest(Parse(Report("n2", 2, kXid79)), 1321);
  EXPECT_EQ(c.Desired().at("n2").unhealthy_gpus, std::vector<int>{1});
}

TEST(HealthController, RepeatedReportsOfOneIncidentLogOneIncident) {
  HealthController c(Config());
  // A flapping NVLink: the agent keeps one incident open (hysteresis) and reports it every
  // push, with more occurrences each time.
  for (int k = 0; k < 30; ++k) {
    json inc = Incident(5, 0, "nvlink-errors", "unhealthy", {}, 500);
    inc["occurrences"] = k + 1;
    c.Ingest(Parse(Report("n1", 2, json::array({inc}))), 1000 + k);
  }
  ASSERT_EQ(c.Incidents().size(), 1u);
  EXPECT_EQ(c.Incidents()[0].incident.occurrences, 30);
  EXPECT_FALSE(c.Incidents()[0].incident.closed_at.has_value());
  auto changes = c.Evaluate(1030);
  EXPECT_TRUE(changes.size() == 1 && changes[0].kind == HealthChange::Kind::kFenced);
  c.Ingest(Parse(Report("n1", 2)), 1031);
  ASSERT_TRUE(c.Incidents()[0].incident.closed_at.has_value());
  EXPECT_EQ(*c.Incidents()[0].incident.closed_at, 1031);
}

TEST(HealthController, StaleAgentIsReportedNotFencedAndFencesFreeze) {
  HealthControllerConfig cfg = Config();
  cfg.stale_after_s = 30;
  HealthController c(cfg);
  c.Ingest(Parse(Report("n1", 2)), 1000);
  c.Ingest(Parse(Report("n2", 2, kXid79)), 1000);
  c.Ingest(Parse(Report("n2", 2)), 1001);  // clean; probation 60 s
  ASSERT_EQ(c.Evaluate(1001).size(), 1u);  // n2 fenced
  auto changes = c.Evaluate(1032);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, HealthChange::Kind::kStale);
  EXPECT_EQ(changes[0].node, "n1");
  auto d = c.Desired();
  EXPECT_TRUE(d.at("n1").unhealthy_gpus.empty());
  EXPECT_EQ(d.at("n1").taint, TaintEffect::kNone);
  EXPECT_EQ(d.at("n1").condition.status, "Unknown");
  EXPECT_EQ(d.at("n1").condition.reason, "AgentStale");
  c.Evaluate(2000);  // n2's probation would be over, but no data is not good news
  EXPECT_EQ(c.Desired().at("n2").unhealthy_gpus, std::vector<int>{1});
  json view = c.ToJson(2000);
  EXPECT_EQ(view["stale_agents"], json::array({"n1", "n2"}));
  c.Ingest(Parse(Report("n2", 2)), 2001);
  c.Evaluate(2001);
  EXPECT_TRUE(c.Desired().at("n2").unhealthy_gpus.empty());
}

TEST(HealthController, RestoredFencesServeAProbationFirst) {
  HealthController c(Config());
  c.Restore("n1", {0, 3}, /*held=*/false, {}, 1000);
  EXPECT_FALSE(c.Desired().contains("n1")) << "not written before its agent reports";
  c.Ingest(Parse(Report("n1", 4)), 1001);
  c.Evaluate(1050);
  EXPECT_EQ(c.Desired().at("n1").unhealthy_gpus, (std::vector<int>{0, 3}));
  c.Evaluate(1061);
  EXPECT_TRUE(c.Desired().at("n1").unhealthy_gpus.empty());
}

// A new leader that restores the fault history from the Node goes on exactly as the old one
// would have: the restored fence keeps its backed-off probation, and later faults count towards
// the backoff and the hold.
TEST(HealthController, FaultHistorySurvivesALeaderChange) {
  HealthControllerConfig cfg = Config();  // probation 60, cap 200, window 3600
  cfg.hold_after_faults = 3;
  auto fault = [](int id, int gpu, double at) {
    return Parse(Report("n1", 2, json::array({Incident(id, gpu, "gpu-lost", "fatal", {}, at)})));
  };
  HealthController old_leader(cfg);
  old_leader.Ingest(fault(1, 0, 1000), 1000);
  old_leader.Ingest(Parse(Report("n1", 2)), 1001);
  old_leader.Evaluate(1070);  // GPU 0's probation is over
  old_leader.Ingest(fault(2, 0, 1100), 1100);
  old_leader.Ingest(Parse(Report("n1", 2)), 1101);
  old_leader.Evaluate(1110);
  const DesiredNode written = old_leader.Desired().at("n1");
  EXPECT_EQ(written.unhealthy_gpus, std::vector<int>{0});
  EXPECT_EQ(written.fault_history, (FaultHistory{{0, {1000, 1100}}}));

  for (HealthController* c : {&old_leader, new HealthController(cfg)}) {
    std::unique_ptr<HealthController> owned(c == &old_leader ? nullptr : c);
    if (owned) c->Restore("n1", written.unhealthy_gpus, written.held, written.fault_history, 1120);
    SCOPED_TRACE(owned ? "new leader" : "old leader");
    c->Ingest(Parse(Report("n1", 2)), 1121);
    c->Evaluate(1121);
    ASSERT_EQ(c->Nodes()[0].fenced.size(), 1u);
    EXPECT_EQ(c->Nodes()[0].fenced[0].probation_s, 120);  // the second fault doubled it
    EXPECT_EQ(c->Nodes()[0].fenced[0].faults_in_window, 2);
    // The old leader saw the GPU clean since 1101; the new one starts its probation over.
    const double clean_since = owned ? 1121 : 1101;
    c->Evaluate(clean_since + 119);
    EXPECT_EQ(c->Desired().at("n1").unhealthy_gpus, std::vector<int>{0});
    c->Evaluate(clean_since + 120);
    EXPECT_TRUE(c->Desired().at("n1").unhealthy_gpus.empty());
    // The third fault of the node within the window holds it.
    c->Ingest(fault(3, 1, 1300), 1300);
    c->Evaluate(1300);
    EXPECT_TRUE(c->Desired().at("n1").held);
    EXPECT_EQ(c->Desired().at("n1").fault_history, (FaultHistory{{0, {1000, 1100}}, {1, {1300}}}));
    // Faults leave the history as they leave the window.
    c->Evaluate(1000 + 3600.5);
    EXPECT_EQ(c->Desired().at("n1").fault_history, (FaultHistory{{0, {1100}}, {1, {1300}}}));
  }
}

TEST(HealthController, RestoredHistoryOutsideTheWindowOrInTheFutureIsClamped) {
  HealthController c(Config());  // window 3600
  c.Restore("n1", {}, false, {{0, {10, 5000, 9000}}, {1, {100}}}, 5000);
  c.Ingest(Parse(Report("n1", 2)), 5001);
  // 10 and 100 are out of the window; 9000 (a later clock) counts as now.
  EXPECT_EQ(c.Desired().at("n1").fault_history, (FaultHistory{{0, {5000, 5000}}}));
}

TEST(HealthController, JsonViewShowsFencesAndIncidents) {
  HealthController c(Config());
  c.Ingest(Parse(Report("n1", 2, kXid79)), 1000);
  json v = c.ToJson(1005);
  ASSERT_EQ(v["nodes"].size(), 1u);
  EXPECT_EQ(v["nodes"][0]["taint"], "NoSchedule");
  EXPECT_EQ(v["nodes"][0]["fenced_gpus"][0]["index"], 1);
  EXPECT_EQ(v["nodes"][0]["fenced_gpus"][0]["severity"], "fatal");
  EXPECT_EQ(v["nodes"][0]["report_age_seconds"], 5.0);
  EXPECT_EQ(v["incidents"][0]["xid"], 79);
  EXPECT_EQ(v["incidents"][0]["fenced"], true);
  EXPECT_EQ(v["circuit_breaker"]["open"], false);
}

// --- configuration

TEST(HealthConfig, ReadsTheHealthSection) {
  Result<HealthControllerConfig> c = ParseHealthConfig(R"(
queueOrder: FairShare
health:
  probation: 2m
  maxProbation: 1h
  faultWindow: 1d
  holdAfterFaults: 4
  fatalNoExecute: true
  staleAfter: 45s
  circuitBreaker: {fraction: 0.25, minNodes: 5, window: 10m}
)",
                                                       "chamber.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->probation_s, 120);
  EXPECT_EQ(c->max_probation_s, 3600);
  EXPECT_EQ(c->fault_window_s, 86400);
  EXPECT_EQ(c->hold_after_faults, 4);
  EXPECT_TRUE(c->fatal_no_execute);
  EXPECT_EQ(c->stale_after_s, 45);
  EXPECT_EQ(c->breaker_fraction, 0.25);
  EXPECT_EQ(c->breaker_min_nodes, 5);
  EXPECT_EQ(c->breaker_window_s, 600);
  // The defaults round-trip through their YAML.
  Result<HealthControllerConfig> d =
      ParseHealthConfig(HealthConfigToYaml(HealthControllerConfig{}), "defaults");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->probation_s, HealthControllerConfig{}.probation_s);
  EXPECT_EQ(d->breaker_fraction, HealthControllerConfig{}.breaker_fraction);
  EXPECT_TRUE(ParseHealthConfig("queueOrder: FairShare\n", "x")->enabled);
}

TEST(HealthConfig, ErrorsNameFileLineAndField) {
  auto err = [](const char* text) { return ParseHealthConfig(text, "c.yaml").status().message(); };
  EXPECT_NE(err("health:\n  probaton: 1m\n").find("probaton"), std::string::npos);
  EXPECT_NE(err("health:\n  probation: soon\n").find("c.yaml:2"), std::string::npos);
  EXPECT_NE(err("health:\n  probation: soon\n").find("health.probation"), std::string::npos);
  EXPECT_NE(err("health:\n  probation: 10m\n  maxProbation: 1m\n")
                .find("health.maxProbation: must not be shorter than probation"),
            std::string::npos);
  EXPECT_NE(
      err("health:\n  circuitBreaker:\n    fraction: 0\n").find("health.circuitBreaker.fraction"),
      std::string::npos);
  EXPECT_NE(err("health:\n  staleAfter: 0s\n").find("health.staleAfter: must be longer than zero"),
            std::string::npos);
}

}  // namespace
}  // namespace chamber::health
