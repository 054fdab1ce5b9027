// `chamber cost`: what the fleet costs now and since the server started (GET /api/v1/cost).
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "cli/command.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

Status RunCost(const ApiClientOptions& o) {
  CHAMBER_ASSIGN_OR_RETURN(json cost, ApiGet(o, "/api/v1/cost"));
  if (o.output == "json") {
    std::cout << cost.dump(2) << "\n";
    return Status::Ok();
  }
  try {
    const std::string currency = cost.at("currency").get<std::string>();
    auto money = [&](const json& v) { return Money(v.get<double>(), currency); };
    const json& t = cost.at("totals");
    std::cout << "Cost at " << cost.at("time").get<std::string>() << "\n";
    PrintTable(std::cout, {"", "", "", ""},
               {{"Now", money(cost.at("per_hour")) + "/h",
                 "idle " + money(cost.at("idle_per_hour")) + "/h",
                 "(unallocated " + money(cost.at("unallocated_per_hour")) + "/h, allocated-idle " +
                     money(cost.at("allocated_idle_per_hour")) + "/h)"},
                {"Backfill", money(cost.at("backfill_savings_per_hour")) + "/h of work on",
                 "borrowed capacity"},
                {"Since " + t.at("since").get<std::string>(), money(t.at("cost")) + " spent",
                 money(t.at("idle_cost")) + " idle",
                 money(t.at("backfill_savings")) + " backfilled (" +
                     Number(t.at("backfill_gpu_hours")) + " GPU-h)"}});
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const json& p : cost.at("pools")) {
      std::string spent = "-";
      if (p.contains("totals")) spent = money(p.at("totals").at("cost"));
      rows.push_back({p.at("name").get<std::string>(), p.at("model").get<std::string>(),
                      p.at("pricing").get<std::string>(), money(p.at("price_per_gpu_hour")),
                      money(p.at("per_hour")), money(p.at("idle_per_hour")), spent});
    }
    PrintTable(std::cout, {"POOL", "MODEL", "PRICING", "PRICE/GPU-H", "COST/H", "IDLE/H", "SPENT"},
               rows);
    std::cout << "\n";
    rows.clear();
    for (const json& q : cost.at("queues"))
      rows.push_back({q.at("name").get<std::string>(), money(q.at("per_hour")),
                      money(q.at("backfill_per_hour"))});
    PrintTable(std::cout, {"QUEUE", "COST/H", "BACKFILL/H"}, rows);
  } catch (const json::exception& e) {
    return Status::Internal(o.server + "/api/v1/cost: unexpected answer: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

void RegisterCostCommand(CommandRegistry& registry) {
  auto o = std::make_shared<ApiClientOptions>();
  CLI::App* cmd = registry.Add("cost", "Show what the GPUs cost, idle cost and backfill savings",
                               [o] { return RunCost(*o); });
  AddApiClientFlags(cmd, *o);
}

}  // namespace chamber::cli
