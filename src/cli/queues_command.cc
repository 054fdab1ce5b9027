// `chamber queues`: every queue's quota and standing, child queues under their parent
// (GET /api/v1/queues).
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/workload_text.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

Status RunQueues(const ApiClientOptions& o) {
  CHAMBER_ASSIGN_OR_RETURN(json queues, ApiGet(o, "/api/v1/queues"));
  if (o.output == "json") {
    std::cout << queues.dump(2) << "\n";
    return Status::Ok();
  }
  try {
    PrintTable(std::cout, kQueueColumns, QueueRows(queues.at("queues")));
  } catch (const json::exception& e) {
    return Status::Internal(o.server + "/api/v1/queues: unexpected answer: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

void RegisterQueuesCommand(CommandRegistry& registry) {
  auto o = std::make_shared<ApiClientOptions>();
  CLI::App* cmd = registry.Add("queues", "List queues with quota, fair share and standing (GPUs)",
                               [o] { return RunQueues(*o); });
  AddApiClientFlags(cmd, *o);
}

}  // namespace chamber::cli
