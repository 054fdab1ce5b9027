// `chamber workloads`: waiting and running workloads, waiting ones first by queue position
// (GET /api/v1/workloads).
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/workload_text.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

struct WorkloadsOptions {
  ApiClientOptions api;
  std::string queue;
  std::string state;
  int64_t limit = 0;
};

Status RunWorkloads(const WorkloadsOptions& o) {
  std::string query;
  auto add = [&query](const std::string& key, const std::string& value) {
    query += (query.empty() ? "?" : "&") + key + "=" + UrlEncode(value);
  };
  if (!o.queue.empty()) add("queue", o.queue);
  if (!o.state.empty()) add("state", o.state);
  if (o.limit > 0) add("limit", std::to_string(o.limit));
  CHAMBER_ASSIGN_OR_RETURN(json answer, ApiGet(o.api, "/api/v1/workloads" + query));
  if (o.api.output == "json") {
    std::cout << answer.dump(2) << "\n";
    return Status::Ok();
  }
  try {
    const std::string now = answer.at("time").get<std::string>();
    std::vector<std::vector<std::string>> rows;
    for (const json& w : answer.at("workloads")) rows.push_back(WorkloadRow(w, now));
    PrintTable(std::cout, kWorkloadColumns, rows);
    const auto total = answer.at("total").get<size_t>();
    if (total > rows.size())
      std::cout << "(" << rows.size() << " of " << total << " shown; --limit shows more)\n";
  } catch (const json::exception& e) {
    return Status::Internal(o.api.server + "/api/v1/workloads: unexpected answer: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

void RegisterWorkloadsCommand(CommandRegistry& registry) {
  auto o = std::make_shared<WorkloadsOptions>();
  CLI::App* cmd = registry.Add("workloads", "List workloads: waiting ones first, by queue position",
                               [o] { return RunWorkloads(*o); });
  AddApiClientFlags(cmd, o->api);
  cmd->add_option("--queue", o->queue, "Only this queue's workloads");
  cmd->add_option("--state", o->state, "Only workloads in this state")
      ->check(CLI::IsMember({"pending", "running", "preempting", "suspended"}));
  cmd->add_option("--limit", o->limit, "At most this many (the server's default: 1000)")
      ->check(CLI::PositiveNumber);
}

}  // namespace chamber::cli
