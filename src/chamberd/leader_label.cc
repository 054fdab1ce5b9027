#include "chamberd/leader_label.h"

#include <spdlog/spdlog.h>

#include "kube/errors.h"

namespace chamber::chamberd {
namespace {

kube::Json LabelPatch(const std::string& uid, const std::string& resource_version, bool leader) {
  kube::Json meta = {{"labels", {{kLeaderLabel, leader ? "true" : "false"}}}};
  if (!uid.empty()) meta["uid"] = uid;
  if (!resource_version.empty()) meta["resourceVersion"] = resource_version;
  return {{"metadata", meta}};
}

}  // namespace

LeaderLabeler::LeaderLabeler(kube::Client* client, Options options,
                             std::function<bool()> serving_leader)
    : client_(client), options_(std::move(options)), serving_leader_(std::move(serving_leader)) {}

LeaderLabeler::~LeaderLabeler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

Status LeaderLabeler::SetOwn(bool leader) {
  const std::string where = options_.pod_namespace + "/" + options_.pod_name;
  if (uid_.empty()) {
    // A list by name: chamberd's informers may list pods already, a get would be a verb more.
    kube::ListOptions lo;
    lo.field_selector = "metadata.name=" + options_.pod_name;
    lo.limit = 0;
    auto pods = client_->List(kube::resources::kPods, options_.pod_namespace, lo);
    if (!pods.ok())
      return Status(pods.status().code(), "leader label: cannot read this replica's pod " + where +
                                              ": " + pods.status().message());
    if (pods->items.empty())
      return Status::NotFound("leader label: this replica's pod " + where +
                              " (--pod-name, $POD_NAME) does not exist");
    uid_ = pods->items[0].value("metadata", kube::Json::object()).value("uid", "");
  }
  auto r = client_->MergePatch(kube::resources::kPods, options_.pod_namespace, options_.pod_name,
                               LabelPatch(uid_, "", leader));
  if (!r.ok()) {
    // The pod was replaced under the same name (a StatefulSet would): read its UID again.
    if (kube::IsNotFound(r.status()) || kube::IsConflict(r.status())) uid_.clear();
    return Status(r.status().code(),
                  "leader label: cannot label pod " + where + ": " + r.status().message());
  }
  std::lock_guard lock(mu_);
  applied_ = leader;
  return Status::Ok();
}

Status LeaderLabeler::ClearOthers() {
  kube::ListOptions lo;
  lo.label_selector = std::string(kLeaderLabel) + "=true";
  CHAMBER_ASSIGN_OR_RETURN(kube::ObjectList pods,
                           client_->List(kube::resources::kPods, options_.pod_namespace, lo));
  Status first;
  for (const kube::Json& pod : pods.items) {
    const kube::Json& meta = pod.value("metadata", kube::Json::object());
    const std::string name = meta.value("name", "");
    if (name == options_.pod_name) continue;
    auto r = client_->MergePatch(
        kube::resources::kPods, options_.pod_namespace, name,
        LabelPatch(meta.value("uid", ""), meta.value("resourceVersion", ""), false));
    if (r.ok()) {
      spdlog::info("leader label: cleared the stale label on pod {}/{}", options_.pod_namespace,
                   name);
    } else if (!kube::IsNotFound(r.status()) && first.ok()) {
      // A conflict means the pod changed since the list: the next resync looks again.
      first = Status(r.status().code(), "leader label: cannot clear pod " + options_.pod_namespace +
                                            "/" + name + ": " + r.status().message());
    }
  }
  return first;
}

Status LeaderLabeler::Step() {
  std::lock_guard step(step_mu_);
  const bool want = serving_leader_();
  bool resync = false, known = false, same = false, cleared = false;
  {
    std::lock_guard lock(mu_);
    resync = options_.resync_steps > 0 && steps_ % options_.resync_steps == 0;
    ++steps_;
    known = applied_.has_value();
    same = known && *applied_ == want;
    cleared = others_cleared_;
  }
  // Others first, so that two pods say "true" for as short a time as possible.
  Status result;
  if (want && (!cleared || resync)) {
    result = ClearOthers();
    std::lock_guard lock(mu_);
    others_cleared_ = result.ok();
  } else if (!want) {
    std::lock_guard lock(mu_);
    others_cleared_ = false;
  }
  if (!same || resync) {
    Status s = SetOwn(want);
    if (result.ok()) result = s;
  }
  return result;
}

void LeaderLabeler::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      const Status s = Step();
      lock.lock();
      const std::string error = s.ok() ? "" : s.message();
      if (error != last_error_) {
        if (error.empty()) {
          spdlog::info("leader label: pod {}/{} labelled", options_.pod_namespace,
                       options_.pod_name);
        } else {
          spdlog::warn("{}", error);
        }
        last_error_ = error;
      }
      cv_.wait_for(lock, options_.period, [this] { return stop_ || poked_; });
      poked_ = false;
    }
  });
}

void LeaderLabeler::Poke() {
  std::lock_guard lock(mu_);
  poked_ = true;
  cv_.notify_all();
}

void LeaderLabeler::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard step(step_mu_);
  if (applied() == false) return;
  if (Status s = SetOwn(false); !s.ok()) spdlog::warn("{}", s.message());
}

std::optional<bool> LeaderLabeler::applied() const {
  std::lock_guard lock(mu_);
  return applied_;
}

}  // namespace chamber::chamberd
