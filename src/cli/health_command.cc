// `chamber health`: fenced nodes and GPUs, stale agents, the circuit breaker and the incident
// log (GET /api/v1/health), then the evidence of each open incident; `chamber health clear
// <node>` lifts an operator hold (admin token).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/api_client.h"
#include "cli/command.h"
#include "common/gpu_evidence.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

// Each open incident's evidence, one line per item, in the words the dashboard and the Events use:
//   gpu-07  GPU 1  xid-hardware  fatal
//     xid              Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable ...
void PrintEvidence(const json& incidents, bool (*is_open)(const json&)) {
  bool any = false;
  for (const json& i : incidents) {
    if (!is_open(i)) continue;
    const json* ev = i.contains("evidence") ? &i.at("evidence") : nullptr;
    if (!ev || ev->empty()) continue;
    if (!any) std::cout << "\nEVIDENCE OF OPEN INCIDENTS\n";
    any = true;
    std::cout << fmt::format("{}  GPU {}  {}  {}\n", i.at("node").get<std::string>(),
                             i.at("gpu_index").get<int>(), Str(i, "cause"), Str(i, "severity"));
    Result<EvidenceList> list = ParseEvidenceList(*ev, "evidence");
    if (!list.ok()) {
      std::cout << "  (unreadable: " << list.status().message() << ")\n";
      continue;
    }
    for (const Evidence& e : *list)
      std::cout << fmt::format("  {:<15}  {}\n", EvidenceType(e), EvidenceText(e));
  }
}

void PrintController(const json& c) {
  const json& breaker = c.at("circuit_breaker");
  if (breaker.at("open").get<bool>())
    std::cout << "ALERT: " << breaker.at("message").get<std::string>() << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const json& n : c.at("nodes")) {
    std::string gpus;
    for (const json& g : n.at("fenced_gpus"))
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g.at("index").get<int>());
    const json& cond = n.at("condition");
    std::string state = n.at("stale").get<bool>()  ? "stale"
                        : n.at("held").get<bool>() ? "held"
                                                   : cond.at("reason").get<std::string>();
    if (gpus.empty() && state == "GpusHealthy") continue;  // only what needs attention
    rows.push_back({n.at("node").get<std::string>(), gpus.empty() ? "-" : gpus, Str(n, "taint"),
                    state, DurationText(n.at("report_age_seconds").get<double>()),
                    cond.at("message").get<std::string>()});
  }
  if (rows.empty()) {
    std::cout << "No fenced nodes; " << c.at("stale_agents").size() << " stale agents.\n";
  } else {
    PrintTable(std::cout, {"NODE", "FENCED-GPUS", "TAINT", "STATE", "LAST-REPORT", "MESSAGE"},
               rows);
  }
  rows.clear();
  for (const json& i : c.at("incidents")) {
    rows.push_back({Str(i, "opened_at"), i.at("node").get<std::string>(),
                    std::to_string(i.at("gpu_index").get<int>()), i.at("cause").get<std::string>(),
                    i.at("severity").get<std::string>(), Str(i, "xid"),
                    i.at("closed_at").is_null() ? "open" : "closed",
                    i.at("fenced").get<bool>() ? "yes" : "no",
                    std::to_string(i.at("occurrences").get<int64_t>())});
  }
  std::cout << "\n";
  if (rows.empty()) {
    std::cout << "No incidents.\n";
  } else {
    PrintTable(std::cout,
               {"OPENED", "NODE", "GPU", "CAUSE", "SEVERITY", "XID", "STATE", "FENCED", "COUNT"},
               rows);
  }
  PrintEvidence(c.at("incidents"), [](const json& i) { return i.at("closed_at").is_null(); });
}

Status RunHealth(const ApiClientOptions& o) {
  CHAMBER_ASSIGN_OR_RETURN(json h, ApiGet(o, "/api/v1/health"));
  if (o.output == "json") {
    std::cout << h.dump(2) << "\n";
    return Status::Ok();
  }
  try {
    if (h.contains("controller")) {
      PrintController(h.at("controller"));
      return Status::Ok();
    }
    // A server without a health controller (the demo): the GPUs its snapshot marks unhealthy.
    std::vector<std::vector<std::string>> rows;
    for (const json& g : h.at("fenced_gpus"))
      rows.push_back({g.at("node").get<std::string>(), std::to_string(g.at("index").get<int>()),
                      g.at("uuid").get<std::string>()});
    if (rows.empty()) {
      std::cout << "No unhealthy GPUs.\n";
    } else {
      PrintTable(std::cout, {"NODE", "GPU", "UUID"}, rows);
    }
    rows.clear();
    for (const json& i : h.at("incidents"))
      rows.push_back({i.at("time").get<std::string>(), i.at("node").get<std::string>(),
                      std::to_string(i.at("gpu_index").get<int>()),
                      i.at("resolved").get<bool>() ? "resolved" : "open",
                      i.at("message").get<std::string>()});
    if (!rows.empty()) {
      std::cout << "\n";
      PrintTable(std::cout, {"TIME", "NODE", "GPU", "STATE", "MESSAGE"}, rows);
    }
    PrintEvidence(h.at("incidents"), [](const json& i) { return !i.at("resolved").get<bool>(); });
  } catch (const json::exception& e) {
    return Status::Internal(o.server + "/api/v1/health: unexpected answer: " + e.what());
  }
  return Status::Ok();
}

Status RunClear(const ApiClientOptions& o, const std::string& node) {
  CHAMBER_ASSIGN_OR_RETURN(json r, ApiPost(o, "/api/v1/health/nodes/" + node + "/clear"));
  if (o.output == "json") {
    std::cout << r.dump(2) << "\n";
  } else {
    std::cout << "node " << node
              << " cleared: its hold is lifted and GPUs that read healthy return now\n";
  }
  return Status::Ok();
}

}  // namespace

void RegisterHealthCommand(CommandRegistry& registry) {
  auto o = std::make_shared<ApiClientOptions>();
  CLI::App* cmd = registry.Add("health", "Fenced nodes and GPUs, stale agents and incidents",
                               [o] { return RunHealth(*o); });
  AddApiClientFlags(cmd, *o);
  auto node = std::make_shared<std::string>();
  CLI::App* clear =
      registry.Add(*cmd, "clear", "Lift a node's operator hold (needs an admin token)",
                   [o, node] { return RunClear(*o, *node); });
  clear->add_option("node", *node, "the node")->required();
  AddApiClientFlags(clear, *o);
}

}  // namespace chamber::cli
