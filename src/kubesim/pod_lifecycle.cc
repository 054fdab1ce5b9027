#include "kubesim/pod_lifecycle.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "common/time.h"

namespace chamber::kubesim {
namespace {

using kube::Json;
using std::chrono::milliseconds;

constexpr double kMaxDurationSeconds = 10 * 365 * 86400.0;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int> Int(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

Json Condition(const char* type, bool status, const std::string& now, const char* reason = "") {
  Json c = {{"type", type}, {"status", status ? "True" : "False"}, {"lastTransitionTime", now}};
  if (*reason != '\0') c["reason"] = reason;
  return c;
}

std::string StartTime(const kube::Pod& pod, const std::string& fallback) {
  const Json& status = pod.raw.contains("status") ? pod.raw["status"] : Json::object();
  return status.is_object() ? status.value("startTime", fallback) : fallback;
}

Json PatchBase(const kube::Pod& pod) {
  return {{"metadata", {{"resourceVersion", pod.metadata.resource_version}}}};
}

const Json& Containers(const kube::Pod& pod, const char* field) {
  static const Json kEmpty = Json::array();
  const Json& spec = pod.raw.contains("spec") ? pod.raw["spec"] : kEmpty;
  if (!spec.is_object() || !spec.contains(field) || !spec[field].is_array()) return kEmpty;
  return spec[field];
}

Json ContainerStatus(const Json& c, Json state, bool ready) {
  const std::string name = c.value("name", "");
  return {{"name", name},
          {"image", c.value("image", "")},
          {"imageID", "fake://" + c.value("image", "")},
          {"containerID", "fake://" + name},
          {"ready", ready},
          {"started", ready},
          {"restartCount", 0},
          {"state", std::move(state)}};
}

Json Terminated(int exit_code, const std::string& started, const std::string& finished) {
  return {{"terminated",
           {{"exitCode", exit_code},
            {"reason", exit_code == 0 ? "Completed" : "Error"},
            {"startedAt", started},
            {"finishedAt", finished}}}};
}

}  // namespace

Result<milliseconds> ParseDurationSeconds(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("\"{}\" {}", std::string(text), why));
  };
  // Digits with at most one '.', so no sign, exponent, "inf" or "nan" gets through.
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (text.empty() || (whole.empty() && frac.empty()) || (!whole.empty() && !AllDigits(whole)) ||
      (dot != std::string_view::npos && !frac.empty() && !AllDigits(frac)))
    return bad("is not a non-negative number of seconds such as \"30\" or \"2.5\"");
  double seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds))
    return bad("is not a non-negative number of seconds such as \"30\" or \"2.5\"");
  if (seconds > kMaxDurationSeconds) return bad("is more than ten years");
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

Result<int> ParseExitCode(std::string_view text) {
  std::optional<int> v = AllDigits(text) && text.size() <= 3 ? Int(text) : std::nullopt;
  if (!v || *v > 255)
    return Status::InvalidArgument(
        fmt::format("\"{}\" is not an exit code from 0 to 255", std::string(text)));
  return *v;
}

Result<PodPlan> PlanFor(const kube::Pod& pod) {
  PodPlan plan;
  const auto& a = pod.metadata.annotations;
  auto context = [&](const char* annotation) {
    return fmt::format("pod {}: annotation {}", pod.metadata.Key(), annotation);
  };
  if (auto it = a.find(kDurationAnnotation); it != a.end()) {
    Result<milliseconds> d = ParseDurationSeconds(it->second);
    if (!d.ok()) return d.status().WithContext(context(kDurationAnnotation));
    plan.duration = *d;
  }
  if (auto it = a.find(kExitCodeAnnotation); it != a.end()) {
    Result<int> code = ParseExitCode(it->second);
    if (!code.ok()) return code.status().WithContext(context(kExitCodeAnnotation));
    plan.exit_code = *code;
  }
  return plan;
}

std::string_view ActionName(Action action) {
  switch (action) {
    case Action::kNone:
      return "none";
    case Action::kStart:
      return "start";
    case Action::kFinish:
      return "finish";
    case Action::kFailInvalid:
      return "fail-invalid";
    case Action::kDelete:
      return "delete";
  }
  return "?";
}

Step NextStep(const kube::Pod& pod, const Result<PodPlan>& plan, const StepInput& in) {
  if (!pod.metadata.deletion_timestamp.empty()) {
    const Json& meta = pod.raw.contains("metadata") ? pod.raw["metadata"] : Json::object();
    int64_t grace_s = 30;
    if (meta.is_object() && meta.contains("deletionGracePeriodSeconds") &&
        meta["deletionGracePeriodSeconds"].is_number_integer())
      grace_s = std::max<int64_t>(0, meta["deletionGracePeriodSeconds"].get<int64_t>());
    if (grace_s == 0) return {Action::kNone, in.now};
    if (pod.phase == "Succeeded" || pod.phase == "Failed") return {Action::kDelete, in.now};
    const milliseconds wait = std::min<milliseconds>(std::chrono::seconds(grace_s), in.grace_cap);
    return {Action::kDelete, in.deleting_since.value_or(in.now) + wait};
  }
  if (pod.phase.empty() || pod.phase == "Pending")
    return {plan.ok() ? Action::kStart : Action::kFailInvalid, in.now};
  if (pod.phase == "Running" && plan.ok() && plan->duration) {
    Clock::time_point started = in.started_at.value_or(in.now);
    if (!in.started_at)
      if (Result<Clock::time_point> t = ParseRfc3339(StartTime(pod, "")); t.ok()) started = *t;
    return {Action::kFinish, started + *plan->duration};
  }
  return {Action::kNone, in.now};
}

std::string FakePodIp(const std::string& uid) {
  const size_t h = std::hash<std::string>{}(uid);
  return fmt::format("10.{}.{}.{}", 128 + ((h >> 16) & 63), (h >> 8) & 255,
                     std::max<size_t>(h & 255, 1));
}

Json RunningPatch(const kube::Pod& pod, const std::string& host_ip, Clock::time_point now) {
  const std::string t = FormatRfc3339(now);
  const std::string ip = FakePodIp(pod.metadata.uid);
  Json patch = PatchBase(pod);
  Json init = Json::array(), main = Json::array();
  for (const Json& c : Containers(pod, "initContainers"))
    init.push_back(ContainerStatus(c, Terminated(0, t, t), false));
  for (const Json& c : Containers(pod, "containers"))
    main.push_back(ContainerStatus(c, {{"running", {{"startedAt", t}}}}, true));
  patch["status"] = {{"phase", "Running"},
                     {"startTime", t},
                     {"hostIP", host_ip},
                     {"hostIPs", {{{"ip", host_ip}}}},
                     {"podIP", ip},
                     {"podIPs", {{{"ip", ip}}}},
                     {"conditions",
                      {Condition("PodReadyToStartContainers", true, t),
                       Condition("Initialized", true, t), Condition("Ready", true, t),
                       Condition("ContainersReady", true, t), Condition("PodScheduled", true, t)}},
                     {"containerStatuses", std::move(main)}};
  if (!init.empty()) patch["status"]["initContainerStatuses"] = std::move(init);
  return patch;
}

Json FinishedPatch(const kube::Pod& pod, int exit_code, Clock::time_point now) {
  const std::string t = FormatRfc3339(now);
  const std::string started = StartTime(pod, t);
  Json patch = PatchBase(pod);
  Json main = Json::array();
  for (const Json& c : Containers(pod, "containers"))
    main.push_back(ContainerStatus(c, Terminated(exit_code, started, t), false));
  patch["status"] = {
      {"phase", exit_code == 0 ? "Succeeded" : "Failed"},
      {"conditions",
       {Condition("PodReadyToStartContainers", false, t), Condition("Initialized", true, t),
        Condition("Ready", false, t, "PodCompleted"),
        Condition("ContainersReady", false, t, "PodCompleted"),
        Condition("PodScheduled", true, t)}},
      {"containerStatuses", std::move(main)}};
  return patch;
}

Json InvalidPatch(const kube::Pod& pod, const Status& why, Clock::time_point now) {
  Json patch = FinishedPatch(pod, 1, now);
  patch["status"]["reason"] = "InvalidSimulation";
  patch["status"]["message"] = why.message();
  return patch;
}

}  // namespace chamber::kubesim
