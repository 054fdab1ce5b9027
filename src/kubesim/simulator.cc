#include "kubesim/simulator.h"

#include <spdlog/spdlog.h>

#include "kube/errors.h"

namespace chamber::kubesim {
namespace {

using namespace std::chrono_literals;

constexpr auto kConflictRetry = 100ms;
constexpr auto kErrorRetry = 1s;
constexpr int kExitCodeKilled = 137;  // SIGKILL, as a runtime reports a container it stopped

std::string UidKey(const kube::Pod& pod) { return pod.metadata.Key() + "/" + pod.metadata.uid; }

bool Terminal(const kube::Pod& pod) { return pod.phase == "Succeeded" || pod.phase == "Failed"; }

}  // namespace

Simulator::Simulator(kube::Client* client, SimulatorOptions options)
    : client_(client), options_(std::move(options)) {}

Simulator::~Simulator() { Stop(); }

Status Simulator::Start() {
  if (running_.exchange(true)) return Status::FailedPrecondition("simulator already started");
  kube::InformerOptions pod_opts;
  pod_opts.type = kube::resources::kPods;
  pod_opts.field_selector = "spec.nodeName!=";
  pod_opts.resync_period = options_.resync_period;
  auto enqueue = [this](const kube::Pod& p) { queue_.Add(p.metadata.Key()); };
  pods_ = std::make_unique<kube::Informer<kube::Pod>>(
      client_, pod_opts,
      kube::Informer<kube::Pod>::Handlers{
          enqueue, [enqueue](const kube::Pod&, const kube::Pod& p) { enqueue(p); },
          [this](const kube::Pod& p) {
            std::lock_guard<std::mutex> lock(mu_);
            started_at_.erase(UidKey(p));
            deleting_since_.erase(UidKey(p));
          }});
  pods_->AddIndex(kube::index::kNodeName, kube::index::PodsByNode);

  kube::InformerOptions node_opts;
  node_opts.type = kube::resources::kNodes;
  node_opts.label_selector = options_.node_selector;
  // A pod bound before its node was seen is revisited when the node arrives.
  auto node_added = [this](const kube::Node& n) {
    for (const auto& p : pods_->ByIndex(kube::index::kNodeName, n.metadata.name))
      queue_.Add(p->metadata.Key());
  };
  nodes_ = std::make_unique<kube::Informer<kube::Node>>(
      client_, node_opts, kube::Informer<kube::Node>::Handlers{node_added, nullptr, nullptr});

  pods_->Start();
  nodes_->Start();
  if (!pods_->WaitForSync(options_.sync_timeout) || !nodes_->WaitForSync(options_.sync_timeout)) {
    Stop();
    return Status::Unavailable("simulator: pods and nodes were not listed within the sync timeout");
  }
  for (int i = 0; i < std::max(1, options_.writers); ++i)
    workers_.emplace_back([this] { Worker(); });
  spdlog::info("kubesim: simulating pods on nodes matching {} ({} writers)", options_.node_selector,
               workers_.size());
  return Status::Ok();
}

void Simulator::Stop() {
  queue_.ShutDown();
  for (auto& w : workers_) w.join();
  workers_.clear();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
}

SimulatorStats Simulator::stats() const {
  return {started_.load(), succeeded_.load(), failed_.load(),
          deleted_.load(), conflicts_.load(), errors_.load()};
}

void Simulator::Worker() {
  std::string key;
  while (queue_.Get(&key)) {
    Process(key);
    queue_.Done(key);
  }
}

bool Simulator::OnFakeNode(const kube::Pod& pod, std::string* host_ip) const {
  if (pod.node_name.empty()) return false;
  std::shared_ptr<const kube::Node> node = nodes_->Get(pod.node_name);
  if (!node) return false;
  for (const auto& a : node->addresses)
    if (a.type == "InternalIP") *host_ip = a.address;
  return true;
}

void Simulator::Process(const std::string& key) {
  std::shared_ptr<const kube::Pod> pod = pods_->Get(key);
  std::string host_ip = "10.64.0.1";
  if (!pod || !OnFakeNode(*pod, &host_ip)) return;
  const Clock::time_point now = Clock::now();
  StepInput in{now, std::nullopt, std::nullopt, options_.grace_cap};
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string uid_key = UidKey(*pod);
    if (auto it = started_at_.find(uid_key); it != started_at_.end()) in.started_at = it->second;
    if (!pod->metadata.deletion_timestamp.empty())
      in.deleting_since = deleting_since_.emplace(uid_key, now).first->second;
  }
  const Result<PodPlan> plan = PlanFor(*pod);
  const Step step = NextStep(*pod, plan, in);
  if (step.action == Action::kNone) return;
  if (step.at > now) {
    queue_.AddAfter(key, std::chrono::duration_cast<WorkQueue::Clock::duration>(step.at - now));
    return;
  }
  const Status s = Apply(*pod, step.action, plan, host_ip);
  if (s.ok() || kube::IsNotFound(s)) return;
  if (kube::IsConflict(s)) {
    ++conflicts_;
    queue_.AddAfter(key, kConflictRetry);
    return;
  }
  ++errors_;
  spdlog::warn("kubesim: {} {}: {}", ActionName(step.action), key, s.ToString());
  queue_.AddAfter(key, kErrorRetry);
}

Status Simulator::Apply(const kube::Pod& pod, Action action, const Result<PodPlan>& plan,
                        const std::string& host_ip) {
  const std::string& ns = pod.metadata.namespace_name;
  const std::string& name = pod.metadata.name;
  const Clock::time_point now = Clock::now();
  auto patch = [&](const kube::Json& body) {
    return client_->MergePatch(kube::resources::kPods, ns, name, body, "status").status();
  };
  switch (action) {
    case Action::kNone:
      return Status::Ok();
    case Action::kStart: {
      CHAMBER_RETURN_IF_ERROR(patch(RunningPatch(pod, host_ip, now)));
      std::lock_guard<std::mutex> lock(mu_);
      started_at_[UidKey(pod)] = now;
      ++started_;
      return Status::Ok();
    }
    case Action::kFinish:
      CHAMBER_RETURN_IF_ERROR(patch(FinishedPatch(pod, plan->exit_code, now)));
      ++(plan->exit_code == 0 ? succeeded_ : failed_);
      return Status::Ok();
    case Action::kFailInvalid:
      spdlog::warn("kubesim: failing {}: {}", pod.metadata.Key(), plan.status().ToString());
      CHAMBER_RETURN_IF_ERROR(patch(InvalidPatch(pod, plan.status(), now)));
      ++failed_;
      return Status::Ok();
    case Action::kDelete: {
      // A kubelet stops the containers and reports the pod terminal before deleting it.
      if (!Terminal(pod)) {
        CHAMBER_RETURN_IF_ERROR(patch(FinishedPatch(pod, kExitCodeKilled, now)));
        ++failed_;
      }
      kube::DeleteOptions del;
      del.grace_period_seconds = 0;
      del.uid = pod.metadata.uid;
      CHAMBER_RETURN_IF_ERROR(client_->Delete(kube::resources::kPods, ns, name, del));
      ++deleted_;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace chamber::kubesim
