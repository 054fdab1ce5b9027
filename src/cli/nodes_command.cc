// `chamber nodes`: every node with its GPUs by state (GET /api/v1/nodes). A GPU that pods'
// shares divide counts by parts: its shares' sum allocated, the rest idle; SHARED counts such GPUs.
// A GPU in MIG mode counts so too, its MIG devices' charges its shares; MIG counts those GPUs.
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "cli/command.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

Status RunNodes(const ApiClientOptions& o) {
  CHAMBER_ASSIGN_OR_RETURN(json nodes, ApiGet(o, "/api/v1/nodes"));
  if (o.output == "json") {
    std::cout << nodes.dump(2) << "\n";
    return Status::Ok();
  }
  try {
    std::vector<std::vector<std::string>> rows;
    for (const json& n : nodes.at("nodes")) {
      const json& g = n.at("gpus");
      std::string state = n.at("healthy").get<bool>() ? "ok" : "unhealthy";
      if (!n.at("schedulable").get<bool>()) state += ",cordoned";
      rows.push_back(
          {n.at("name").get<std::string>(), n.at("pool").get<std::string>(),
           n.at("model").get<std::string>(), Number(g.at("capacity")), GpuAmount(g.at("allocated")),
           GpuAmount(g.at("idle")), GpuAmount(g.at("allocated_idle")), Number(g.at("unhealthy")),
           Number(g.at("shared")), Number(g.at("mig")), Percent(n.at("utilization")), state});
    }
    PrintTable(std::cout,
               {"NAME", "POOL", "MODEL", "GPUS", "ALLOCATED", "IDLE", "ALLOC-IDLE", "UNHEALTHY",
                "SHARED", "MIG", "UTIL", "STATE"},
               rows);
  } catch (const json::exception& e) {
    return Status::Internal(o.server + "/api/v1/nodes: unexpected answer: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

void RegisterNodesCommand(CommandRegistry& registry) {
  auto o = std::make_shared<ApiClientOptions>();
  CLI::App* cmd =
      registry.Add("nodes", "List nodes with their GPUs by state", [o] { return RunNodes(*o); });
  AddApiClientFlags(cmd, *o);
}

}  // namespace chamber::cli
