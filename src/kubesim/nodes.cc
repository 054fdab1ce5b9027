#include "kubesim/nodes.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/quantity.h"
#include "common/time.h"
#include "kube/errors.h"

namespace chamber::kubesim {
namespace {

using kube::Json;

bool IsDnsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

// Runs fn(0..n-1) on `threads` threads; returns the first error, after which no new item starts.
Status ParallelFor(int n, int threads, const std::function<Status(int)>& fn) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first = Status::Ok();
  auto worker = [&] {
    for (int i = next++; i < n && !failed.load(); i = next++) {
      Status s = fn(i);
      if (s.ok()) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (!failed.exchange(true)) first = std::move(s);
    }
  };
  std::vector<std::thread> pool;
  const int count = std::clamp(threads, 1, std::max(n, 1));
  for (int t = 0; t < count; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return first;
}

// The admission plugin TaintNodesByCondition gives every new node the not-ready taint; the
// node lifecycle controller, which would lift it once the node reports Ready, is not running
// where kubelets are not (see docs/kubesim.md).
Status RemoveNotReadyTaints(kube::Client& client, Json node) {
  const std::string name = node["metadata"].value("name", "");
  for (int attempt = 0;; ++attempt) {
    const Json& spec = node.contains("spec") ? node["spec"] : Json::object();
    if (!spec.is_object() || !spec.contains("taints")) return Status::Ok();
    Json kept = Json::array();
    for (const Json& t : spec["taints"]) {
      const std::string key = t.value("key", "");
      if (key != "node.kubernetes.io/not-ready" && key != "node.kubernetes.io/unreachable")
        kept.push_back(t);
    }
    if (kept.size() == spec["taints"].size()) return Status::Ok();
    const Json patch = {
        {"metadata", {{"resourceVersion", node["metadata"].value("resourceVersion", "")}}},
        {"spec", {{"taints", kept}}}};
    Status s = client.MergePatch(kube::resources::kNodes, "", name, patch).status();
    if (!kube::IsConflict(s) || attempt == 4) return s;
    CHAMBER_ASSIGN_OR_RETURN(node, client.Get(kube::resources::kNodes, "", name));
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status Validate(const NodePoolSpec& spec) {
  if (spec.count < 0) return Status::InvalidArgument("field count: must not be negative");
  if (spec.first_index < 0)
    return Status::InvalidArgument("field first_index: must not be negative");
  if (spec.gpus < 0) return Status::InvalidArgument("field gpus: must not be negative");
  if (spec.pods <= 0) return Status::InvalidArgument("field pods: must be positive");
  const std::string& p = spec.prefix;
  if (p.empty() || p.size() > 50 || !std::all_of(p.begin(), p.end(), IsDnsLabelChar) ||
      p.front() == '-' || p.back() == '-')
    return Status::InvalidArgument(fmt::format(
        "field prefix: \"{}\" is not 1-50 lowercase letters, digits and '-' starting and ending "
        "with a letter or digit",
        p));
  if (Result<int64_t> cpu = ParseCpuMilli(spec.cpu); !cpu.ok() || *cpu <= 0)
    return Status::InvalidArgument(
        fmt::format("field cpu: \"{}\" is not a positive quantity", spec.cpu));
  if (Result<int64_t> mem = ParseBytes(spec.memory); !mem.ok() || *mem <= 0)
    return Status::InvalidArgument(
        fmt::format("field memory: \"{}\" is not a positive quantity", spec.memory));
  if (spec.gpu_model.empty() || spec.gpu_model.size() > 63)
    return Status::InvalidArgument("field gpu_model: must be 1-63 characters (a label value)");
  for (const auto& t : spec.taints) {
    if (t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" && t.effect != "NoExecute")
      return Status::InvalidArgument(fmt::format(
          "field taints: effect \"{}\" of taint {} is not NoSchedule, PreferNoSchedule or "
          "NoExecute",
          t.effect, t.key));
  }
  return Status::Ok();
}

Result<std::pair<std::string, std::string>> ParseLabel(std::string_view text,
                                                       std::string_view what) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return Status::InvalidArgument(
        fmt::format("{}: \"{}\" is not key=value", what, std::string(text)));
  return std::pair<std::string, std::string>{std::string(text.substr(0, eq)),
                                             std::string(text.substr(eq + 1))};
}

Result<kube::Taint> ParseTaint(std::string_view text, std::string_view what) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return Status::InvalidArgument(
        fmt::format("{}: \"{}\" is not key[=value]:Effect", what, std::string(text)));
  kube::Taint taint;
  taint.effect = std::string(text.substr(colon + 1));
  const std::string_view kv = text.substr(0, colon);
  const size_t eq = kv.find('=');
  taint.key = std::string(kv.substr(0, eq));
  if (eq != std::string_view::npos) taint.value = std::string(kv.substr(eq + 1));
  if (taint.key.empty())
    return Status::InvalidArgument(
        fmt::format("{}: \"{}\" has an empty key", what, std::string(text)));
  if (taint.effect != "NoSchedule" && taint.effect != "PreferNoSchedule" &&
      taint.effect != "NoExecute")
    return Status::InvalidArgument(
        fmt::format("{}: \"{}\": effect \"{}\" is not NoSchedule, PreferNoSchedule or NoExecute",
                    what, std::string(text), taint.effect));
  return taint;
}

std::string FakeNodeName(const NodePoolSpec& spec, int index) {
  return fmt::format("{}-{}", spec.prefix, index);
}

std::string FakeNodeAddress(int index) {
  const auto i = static_cast<uint32_t>(index);
  return fmt::format("10.{}.{}.{}", 64 + ((i >> 16) & 63), (i >> 8) & 255, i & 255);
}

Json FakeNodeObject(const NodePoolSpec& spec, int index) {
  const std::string name = FakeNodeName(spec, index);
  const std::string now = FormatRfc3339(std::chrono::system_clock::now());
  Json labels = {{"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {kGpuProductLabel, spec.gpu_model},
                 {"nvidia.com/gpu.count", std::to_string(spec.gpus)},
                 {kFakeNodeLabel, "true"}};
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  Json taints = Json::array();
  for (const auto& t : spec.taints) {
    Json taint = {{"key", t.key}, {"effect", t.effect}};
    if (!t.value.empty()) taint["value"] = t.value;
    taints.push_back(std::move(taint));
  }
  Json resources = {{"cpu", spec.cpu},
                    {"memory", spec.memory},
                    {"pods", std::to_string(spec.pods)},
                    {kGpuResource, std::to_string(spec.gpus)},
                    {"ephemeral-storage", "1Ti"}};
  for (const auto& [name, quantity] : spec.resources) resources[name] = quantity;
  auto condition = [&](const char* type, const char* status, const char* reason,
                       const char* message) {
    return Json{{"type", type},       {"status", status},         {"reason", reason},
                {"message", message}, {"lastHeartbeatTime", now}, {"lastTransitionTime", now}};
  };
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"labels", labels}}},
               {"spec", Json::object()},
               {"status",
                {{"capacity", resources},
                 {"allocatable", resources},
                 {"phase", "Running"},
                 {"conditions",
                  {condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                             "kubelet has sufficient memory available"),
                   condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                             "kubelet has no disk pressure"),
                   condition("PIDPressure", "False", "KubeletHasSufficientPID",
                             "kubelet has sufficient PID available"),
                   condition("Ready", "True", "KubeletReady", "simulated by chamber-kubesim")}},
                 {"addresses",
                  {{{"type", "InternalIP"}, {"address", FakeNodeAddress(index)}},
                   {{"type", "Hostname"}, {"address", name}}}},
                 {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
                 {"nodeInfo",
                  {{"machineID", fmt::format("{:032x}", index)},
                   {"systemUUID", fmt::format("00000000-0000-0000-0000-{:012x}", index)},
                   {"bootID", fmt::format("00000000-0000-0000-0000-{:012x}", index)},
                   {"kernelVersion", "6.1.0"},
                   {"osImage", "chamber-kubesim"},
                   {"containerRuntimeVersion", "fake://chamber-kubesim"},
                   {"kubeletVersion", "fake"},
                   {"kubeProxyVersion", "fake"},
                   {"operatingSystem", "linux"},
                   {"architecture", "amd64"}}}}}};
  if (!taints.empty()) node["spec"]["taints"] = std::move(taints);
  return node;
}

Result<NodeWriteStats> CreateFakeNodes(kube::Client& client, const NodePoolSpec& spec,
                                       int threads) {
  CHAMBER_RETURN_IF_ERROR(Validate(spec));
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> created{0}, existing{0};
  Status s = ParallelFor(spec.count, threads, [&](int i) -> Status {
    const Json node = FakeNodeObject(spec, spec.first_index + i);
    Result<Json> made = client.Create(kube::resources::kNodes, "", node);
    if (!made.ok()) {
      if (!kube::IsAlreadyExists(made.status())) return made.status();
      ++existing;
      return Status::Ok();
    }
    ++created;
    const std::string name = node["metadata"]["name"];
    if (!made->contains("status") || !(*made)["status"].contains("allocatable")) {
      Result<Json> patched = client.MergePatch(kube::resources::kNodes, "", name,
                                               {{"status", node["status"]}}, "status");
      if (!patched.ok()) return patched.status();
      made = std::move(patched);
    }
    return RemoveNotReadyTaints(client, std::move(*made));
  });
  CHAMBER_RETURN_IF_ERROR(s);
  return NodeWriteStats{created.load(), existing.load(), 0, SecondsSince(start)};
}

Result<NodeWriteStats> DeleteFakeNodes(kube::Client& client, int threads,
                                       const std::string& extra_selector) {
  const auto start = std::chrono::steady_clock::now();
  kube::ListOptions options;
  options.label_selector = kFakeNodeSelector;
  if (!extra_selector.empty()) options.label_selector += "," + extra_selector;
  CHAMBER_ASSIGN_OR_RETURN(kube::ObjectList nodes,
                           client.List(kube::resources::kNodes, "", options));
  std::atomic<int> deleted{0};
  Status s = ParallelFor(static_cast<int>(nodes.items.size()), threads, [&](int i) -> Status {
    const Json& meta = nodes.items[static_cast<size_t>(i)]["metadata"];
    kube::DeleteOptions del;
    del.uid = meta.value("uid", "");
    Status d = client.Delete(kube::resources::kNodes, "", meta.value("name", ""), del);
    if (!d.ok() && !kube::IsNotFound(d)) return d;
    ++deleted;
    return Status::Ok();
  });
  CHAMBER_RETURN_IF_ERROR(s);
  return NodeWriteStats{0, 0, deleted.load(), SecondsSince(start)};
}

}  // namespace chamber::kubesim
