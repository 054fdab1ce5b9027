// `chamber why <namespace>/<name>`: why a workload waits, or where it runs, from
// GET /api/v1/workloads/{namespace}/{name}. The name may be a workload's or one of its pods'.
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "cli/command.h"
#include "cli/workload_text.h"

namespace chamber::cli {
namespace {

using nlohmann::json;

struct WhyOptions {
  ApiClientOptions api;
  std::string name;
};

Status RunWhy(const WhyOptions& o) {
  const size_t slash = o.name.find('/');
  if (o.name.empty() || o.name.front() == '/' || o.name.back() == '/' ||
      (slash != std::string::npos && o.name.find('/', slash + 1) != std::string::npos))
    return Status::InvalidArgument("\"" + o.name +
                                   "\" is not a name like namespace/name (or a bare name)");
  std::string path = "/api/v1/workloads/";
  if (slash == std::string::npos)
    path += UrlEncode(o.name);
  else
    path += UrlEncode(o.name.substr(0, slash)) + "/" + UrlEncode(o.name.substr(slash + 1));
  Result<json> answer = ApiGet(o.api, path);
  if (answer.status().code() == StatusCode::kNotFound)
    return Status::NotFound("no workload or pod named \"" + o.name + "\" at " + o.api.server +
                            " (`chamber workloads` lists them)");
  if (!answer.ok()) return answer.status();
  if (o.api.output == "json") {
    std::cout << answer->dump(2) << "\n";
    return Status::Ok();
  }
  try {
    std::cout << ExplainWorkload(*answer);
  } catch (const json::exception& e) {
    return Status::Internal(o.api.server + path + ": unexpected answer: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

void RegisterWhyCommand(CommandRegistry& registry) {
  auto o = std::make_shared<WhyOptions>();
  CLI::App* cmd = registry.Add("why", "Explain why a workload (or a pod's workload) waits or runs",
                               [o] { return RunWhy(*o); });
  cmd->add_option("name", o->name, "namespace/name of a workload or one of its pods")->required();
  AddApiClientFlags(cmd, o->api);
}

}  // namespace chamber::cli
