// `chamber status`: the fleet summary from chamberd's API (GET /api/v1/fleet).
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "cli/command.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

Status RunStatus(const ApiClientOptions& o) {
  CHAMBER_ASSIGN_OR_RETURN(json fleet, ApiGet(o, "/api/v1/fleet"));
  if (o.output == "json") {
    std::cout << fleet.dump(2) << "\n";
    return Status::Ok();
  }
  try {
    const json& s = fleet.at("summary");
    const json& g = s.at("gpus");
    const std::string currency = s.at("cost").at("currency").get<std::string>();
    const json& q = s.at("queue");
    std::cout << "Fleet at " << fleet.at("time").get<std::string>() << " ("
              << fleet.at("mode").get<std::string>()
              << (fleet.value("simulated", false) ? ", simulated time" : "") << ")\n";
    PrintTable(
        std::cout, {"", "", "", "", "", "", ""},
        {{"GPUs", Number(g.at("capacity")) + " capacity", Number(g.at("allocated")) + " allocated",
          Number(g.at("used")) + " used", Number(g.at("idle")) + " idle",
          Number(g.at("allocated_idle")) + " allocated-idle",
          Number(g.at("unhealthy")) + " unhealthy"},
         {"Utilization", Percent(s.at("utilization")), "allocation " + Percent(s.at("allocation")),
          "idle " + Percent(s.at("idle_fraction"))},
         {"Efficiency", "used/capacity " + Percent(s.at("efficiency").at("used_over_capacity")),
          "used/allocated " + Percent(s.at("efficiency").at("used_over_allocated"))},
         {"Cost", Money(s.at("cost").at("per_hour"), currency) + "/h",
          "idle " + Money(s.at("cost").at("idle_per_hour"), currency) + "/h"},
         {"Queue", Number(q.at("pending_workloads")) + " pending",
          Number(q.at("pending_gpus")) + " GPUs waiting",
          "wait p50 " + DurationText(q.at("wait_p50_seconds")),
          "p95 " + DurationText(q.at("wait_p95_seconds"))},
         {"Preemptions", Number(s.at("preemptions_last_hour")) + " in the last hour",
          Number(s.value("gpu_hours_lost_last_hour", 0.0)) + " GPU-hours lost"}});
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const json& p : fleet.at("pools")) {
      const json& pg = p.at("gpus");
      rows.push_back({p.at("name").get<std::string>(), p.at("model").get<std::string>(),
                      p.at("pricing").get<std::string>(), Number(pg.at("capacity")),
                      Number(pg.at("allocated")), Number(pg.at("idle")),
                      Number(pg.at("allocated_idle")), Number(pg.at("unhealthy")),
                      Percent(p.at("utilization")), Money(p.at("cost").at("per_hour"), currency),
                      Money(p.at("cost").at("idle_per_hour"), currency),
                      p.value("started_last_hour", 0) > 0
                          ? DurationText(p.value("wait_p95_seconds", 0.0))
                          : std::string("-"),
                      Number(p.value("preemptions_last_hour", 0.0))});
    }
    PrintTable(std::cout,
               {"POOL", "MODEL", "PRICING", "GPUS", "ALLOCATED", "IDLE", "ALLOC-IDLE", "UNHEALTHY",
                "UTIL", "COST/H", "IDLE/H", "WAIT-P95", "PREEMPT-1H"},
               rows);
  } catch (const json::exception& e) {
    return Status::Internal(o.server + "/api/v1/fleet: unexpected answer: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

void RegisterStatusCommand(CommandRegistry& registry) {
  auto o = std::make_shared<ApiClientOptions>();
  CLI::App* cmd = registry.Add("status", "Show the fleet summary from chamberd (or chamber demo)",
                               [o] { return RunStatus(*o); });
  AddApiClientFlags(cmd, *o);
}

}  // namespace chamber::cli
