#include "backend/kube/kube_backend.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/kube/queue_resource.h"
#include "common/cpu_time.h"
#include "common/gpu_share_ask.h"
#include "common/log.h"
#include "common/time.h"
#include "core/gpu_model_queues.h"
#include "kube/errors.h"

namespace chamber::backend {
namespace {

using kube::Json;

constexpr int64_t kMiB = int64_t{1} << 20;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

std::string NowText() { return FormatRfc3339(std::chrono::system_clock::now()); }

// The reason written on PodScheduled: the cluster autoscaler acts on `Unschedulable`, which
// says more nodes would help; the others (quota, limits, queue order) say they would not.
// An upstream PodGroup's conditions, as kube-scheduler writes them (scheduling.k8s.io).
constexpr char kInitiallyScheduled[] = "PodGroupInitiallyScheduled";
constexpr char kDisruptionTarget[] = "DisruptionTarget";

std::string ConditionReason(core::PendingReason r) {
  if (r == core::PendingReason::kNoNodeFits) return "Unschedulable";
  return std::string(core::PendingReasonName(r));
}

kube::InformerOptions Watching(const kube::ResourceType& type, std::string field_selector = "") {
  kube::InformerOptions o;
  o.type = type;
  o.field_selector = std::move(field_selector);
  return o;
}

// "job ml/train", "jobset ml/train": the object a suspend or resume writes, for logs.
std::string WhatToSuspend(const WorkloadSource& src) {
  return LowerKind(src.SuspendableType().kind) + " " + src.namespace_name() + "/" + src.name();
}

// GPU-hours as Events show them (two decimals), or with more: the kGpuHoursLost annotation
// keeps four (0.36 s of one GPU), so that the sum read back after a restart loses nothing a
// report shows.
std::string Hours(double h, int decimals = 2) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, h);
  return buf;
}

// The pod that replaces a bare pod of a gang rolled back after a failed bind: the same name,
// labels, annotations (less the GPUs chamberd chose) and spec, without its node, so it waits to
// be placed again. The priority fields are left to the Priority admission plugin to fill from
// the class name again, as on any new pod.
Json PendingCopy(const Json& bound) {
  const Json none = Json::object();
  const Json& from = bound.contains("metadata") ? bound["metadata"] : none;
  Json meta = Json::object();
  for (const char* field : {"name", "namespace", "labels", "annotations", "ownerReferences"})
    if (from.contains(field)) meta[field] = from[field];
  if (meta.contains("annotations") && meta["annotations"].is_object())
    for (const char* chosen : {keys::kGpuIndices, gpu_share::kVisibleDevicesKey,
                               gpu_share::kMpsThreadsKey, gpu_share::kMpsMemoryKey})
      meta["annotations"].erase(chosen);
  Json spec = bound.contains("spec") ? bound["spec"] : none;
  for (const char* field : {"nodeName", "priority", "preemptionPolicy"}) spec.erase(field);
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

// How often a gang member's bind is tried when the API server's answer is unknown or
// transient, and the pause before the next try (times the try's number).
constexpr int kBindAttempts = 3;
constexpr std::chrono::milliseconds kBindRetryDelay{150};
// A bind the fence refused while this replica still leads: the API server's copy of the Lease
// lags its takeover (the policy reads its parameters from a cache). Tried again this long.
constexpr std::chrono::milliseconds kFenceLagLimit{5'000};
constexpr std::chrono::milliseconds kFenceRetryDelay{200};
// Binds refused because the pod changed since the snapshot, tried again with its new version.
constexpr int kChangedPodAttempts = 3;
// A gang held back for a reservation pod (docs/sharing.md, "Reservation pods") is placed again
// this long after: the node's agent reports a new pod's GPU at once.
constexpr std::chrono::milliseconds kReservationWait{1'000};

// The chart's ValidatingAdmissionPolicy refused a binding: its leader term is not the Lease's.
bool FenceRefused(const Status& s) {
  return kube::IsForbidden(s) && s.message().find(keys::kLeaderTerm) != std::string::npos;
}

// Chamber's own labels and annotations of a pod: its queue, gang and shares.
std::map<std::string, std::string> ChamberKeys(const kube::ObjectMeta& m) {
  std::map<std::string, std::string> out;
  for (const auto* map : {&m.labels, &m.annotations})
    for (auto it = map->lower_bound("chamber.io/");
         it != map->end() && it->first.starts_with("chamber.io/"); ++it)
      out.emplace((map == &m.labels ? "l:" : "a:") + it->first, it->second);
  return out;
}

// Whether `now`, the pod as the API server holds it, is the pod chamberd placed (`placed`, as
// its snapshot held it, trimmed) in all that placed it: the same object, unbound, not being
// deleted, still chamberd's, asking for the same resources on the same terms, in the same queue
// and gang, and with the same status. Only the status tells a pod another replica of chamberd
// has written to (a successor leader's PodScheduled condition or nominated node), so a deposed
// leader never binds again a pod its successor has seen.
bool PlacedAsItIs(const kube::Pod& placed, const kube::Pod& now) {
  auto same_conditions = [](const std::vector<kube::Condition>& a,
                            const std::vector<kube::Condition>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const kube::Condition& x, const kube::Condition& y) {
                        return x.type == y.type && x.status == y.status && x.reason == y.reason &&
                               x.message == y.message &&
                               x.last_transition_time == y.last_transition_time;
                      });
  };
  return now.metadata.uid == placed.metadata.uid && now.node_name.empty() &&
         now.metadata.deletion_timestamp.empty() && now.scheduler_name == placed.scheduler_name &&
         now.Requests() == placed.Requests() && now.node_selector == placed.node_selector &&
         *now.tolerations == *placed.tolerations && now.affinity == placed.affinity &&
         now.priority == placed.priority && now.pod_group_name == placed.pod_group_name &&
         now.workload_ref == placed.workload_ref &&
         now.nominated_node_name == placed.nominated_node_name &&
         same_conditions(now.conditions, placed.conditions) &&
         ChamberKeys(now.metadata) == ChamberKeys(placed.metadata);
}

bool HasController(const kube::Pod& pod) {
  return std::any_of(pod.metadata.owner_references.begin(), pod.metadata.owner_references.end(),
                     [](const kube::OwnerReference& o) { return o.controller; });
}

// A JSON patch of a status subresource that sets condition `cond` on the object with uid `uid`
// (the patch tests it, so a recreated object is not written): in place of the condition at
// `index` (tested to be of the same type), else after the conditions there are, else as the
// first; an object with no status at all gets one, holding `status_fields` too.
Json ConditionPatch(const std::string& uid, const Json& cond, int index, bool has_conditions,
                    bool has_status, Json status_fields) {
  Json ops = Json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", uid}}});
  if (index >= 0) {
    const std::string path = "/status/conditions/" + std::to_string(index);
    ops.push_back({{"op", "test"}, {"path", path + "/type"}, {"value", cond.at("type")}});
    ops.push_back({{"op", "replace"}, {"path", path}, {"value", cond}});
  } else if (has_conditions) {
    ops.push_back({{"op", "add"}, {"path", "/status/conditions/-"}, {"value", cond}});
  } else if (has_status) {
    ops.push_back({{"op", "add"}, {"path", "/status/conditions"}, {"value", Json::array({cond})}});
  } else {
    status_fields["conditions"] = Json::array({cond});
    ops.push_back({{"op", "add"}, {"path", "/status"}, {"value", std::move(status_fields)}});
  }
  return ops;
}
}  // namespace

void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(threads, 1)));
  if (t == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::jthread> pool;
  pool.reserve(t);
  for (size_t k = 0; k < t; ++k)
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
}

KubeBackend::KubeBackend(kube::Client* client, KubeBackendOptions options)
    : client_(client), options_(std::move(options)), usage_(options_.usage_half_life) {}

KubeBackend::~KubeBackend() {
  if (preparer_.joinable()) {
    preparer_.request_stop();  // wakes it
    preparer_.join();
  }
  for (std::jthread& t : event_writers_) t.request_stop();
  event_writers_.clear();  // joins
  if (nodes_) nodes_->Stop();
  if (pods_) pods_->Stop();
  if (jobs_) jobs_->Stop();
  for (KindInformer& k : kinds_)
    if (k.informer) k.informer->Stop();
  if (queues_) queues_->Stop();
  if (priority_classes_) priority_classes_->Stop();
  if (namespaces_) namespaces_->Stop();
}

Result<std::unique_ptr<KubeBackend>> KubeBackend::Create(kube::Client* client,
                                                         KubeBackendOptions options,
                                                         std::chrono::milliseconds sync_timeout) {
  std::unique_ptr<KubeBackend> b(new KubeBackend(client, std::move(options)));
  b->nodes_ = std::make_unique<kube::Informer<kube::Node>>(
      client, Watching(kube::resources::kNodes), kube::Informer<kube::Node>::Handlers{},
      &kube::TrimNode);
  // Finished pods hold nothing; kube-scheduler leaves them out the same way.
  // The pod cache keeps trimmed pods (kube::TrimPod): 100,000 pods fit in a few hundred MiB.
  b->pods_ = std::make_unique<kube::Informer<kube::Pod>>(
      client, Watching(kube::resources::kPods, "status.phase!=Succeeded,status.phase!=Failed"),
      kube::Informer<kube::Pod>::Handlers{}, &kube::TrimPod);
  b->jobs_ = std::make_unique<kube::Informer<kube::Job>>(client, Watching(kube::resources::kJobs));
  b->queues_ = std::make_unique<kube::Informer<kube::Object>>(client, Watching(kQueues));
  b->priority_classes_ = std::make_unique<kube::Informer<kube::PriorityClass>>(
      client, Watching(kube::resources::kPriorityClasses));
  b->namespaces_ = std::make_unique<kube::Informer<kube::Namespace>>(
      client, Watching(kube::resources::kNamespaces));
  for (int i = 0; i < std::max(b->options_.event_writers, 1); ++i)
    b->event_writers_.emplace_back([p = b.get()](std::stop_token stop) { p->EventWriter(stop); });
  b->nodes_->Start();
  b->pods_->Start();
  b->jobs_->Start();
  b->queues_->Start();
  b->priority_classes_->Start();
  b->namespaces_->Start();
  const auto deadline = std::chrono::steady_clock::now() + sync_timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  const std::pair<const char*, std::function<bool()>> syncs[] = {
      {"nodes", [&] { return b->nodes_->WaitForSync(left()); }},
      {"pods", [&] { return b->pods_->WaitForSync(left()); }},
      {"jobs.batch", [&] { return b->jobs_->WaitForSync(left()); }},
      {"queues.chamber.io (is the CRD installed?)",
       [&] { return b->queues_->WaitForSync(left()); }},
      {"priorityclasses", [&] { return b->priority_classes_->WaitForSync(left()); }},
      {"namespaces", [&] { return b->namespaces_->WaitForSync(left()); }},
  };
  for (const auto& [what, wait] : syncs)
    if (!wait())
      return Status::Unavailable(std::string("could not list and watch ") + what + " within " +
                                 std::to_string(sync_timeout.count() / 1000) +
                                 " s; see the log for the API server's answers");
  for (const WorkloadKind& kind : WorkloadKinds())
    b->kinds_.push_back({&kind.type, &kind, nullptr});
  for (const kube::ResourceType& type : PodGroupTypes())
    b->kinds_.push_back({&type, nullptr, nullptr});
  b->kinds_.push_back({&WorkloadV1alpha1Type(), nullptr, nullptr});
  for (const KindInformer* k : b->DiscoverKinds()) {
    const std::string what = k->type->plural + "." + k->type->group;
    if (!k->informer->WaitForSync(left()))
      return Status::Unavailable("could not list and watch " + what + " within " +
                                 std::to_string(sync_timeout.count() / 1000) +
                                 " s; see the log for the API server's answers");
  }
  const double begin_cpu = ThreadCpuMs();
  const size_t derived = b->Prepare();
  // The first snapshot too: the first cycle then lends it memory and takes workloads over from
  // it, as every later cycle does from the one before.
  const size_t workloads = (*b->Refresh())->workloads.size();
  spdlog::info(
      "derived {} objects and built a snapshot of {} workloads before the first cycle "
      "in {:.0f}ms",
      derived, workloads, ThreadCpuMs() - begin_cpu);
  if (b->options_.prepare_every.count() > 0)
    b->preparer_ = std::jthread([p = b.get()](std::stop_token stop) {
      std::mutex m;
      std::unique_lock<std::mutex> l(m);
      while (true) {
        // Woken early only to free the snapshot a Refresh() is done with.
        const bool release = p->prepare_cv_.wait_for(l, stop, p->options_.prepare_every,
                                                     [p] { return p->release_retired_.load(); });
        if (stop.stop_requested()) return;
        if (release) {
          p->ReleaseRetired();
          continue;
        }
        const double begin = ThreadCpuMs();
        if (const size_t n = p->Prepare(); n > 0)
          spdlog::debug("prepared {} changed objects in {:.1f}ms", n, ThreadCpuMs() - begin);
      }
    });
  return b;
}

std::vector<daemon::BackendMetric> BackendMetrics(const KubeBackendStats& stats,
                                                  const std::vector<GpuReservation>& reservations) {
  std::vector<daemon::BackendMetric> out;
  auto add = [&](const char* name, const char* help, bool counter, int64_t value,
                 std::vector<std::pair<std::string, std::string>> labels = {}) {
    out.push_back({name, help, counter, std::move(labels), static_cast<double>(value)});
  };
  add("chamber_binds_total", "Pods bound to nodes.", true, stats.binds);
  add("chamber_bind_failures_total", "Binds that failed for good (after their tries).", true,
      stats.bind_failures);
  add("chamber_rolled_back_pods_total",
      "Bound pods undone because a bind of their gang failed (docs/reliability.md).", true,
      stats.rollbacks);
  add("chamber_leader_fence_refusals_total",
      "Binds the API server's leader fence refused while this replica led (tried again).", true,
      stats.fence_refusals);
  add("chamber_api_write_errors_total",
      "Writes to the API server that failed (binds, suspends, evictions, statuses, events).", true,
      stats.write_errors);
  // Reservation pods (docs/sharing.md, "Reservation pods"), by what they are now.
  std::array<int64_t, 4> states{};
  for (const GpuReservation& r : reservations)
    ++states[r.failed ? 3 : r.deleting ? 2 : r.gpu >= 0 ? 0 : 1];
  const char* state_names[] = {"reported", "unreported", "deleting", "ended"};
  for (size_t i = 0; i < states.size(); ++i)
    add("chamber_gpu_reservation_pods",
        "Reservation pods chamberd sees, by state: reported (the node's agent names the GPU the "
        "device plugin gave it), unreported (not yet), deleting, ended.",
        false, states[i], {{"state", state_names[i]}});
  add("chamber_gpu_reservation_pods_created_total", "Reservation pods made.", true,
      stats.reservations_made);
  for (size_t i = 0; i < std::size(kRemovalReasons); ++i)
    add("chamber_gpu_reservation_pods_deleted_total",
        "Reservation pods deleted, by reason: ended, unreported (past the report timeout), idle "
        "(no share past the grace), needed (by whole-GPU pods).",
        true, stats.reservations_deleted[i], {{"reason", std::string(kRemovalReasons[i])}});
  return out;
}

KubeBackendStats KubeBackend::stats() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return stats_;
}

void KubeBackend::CountError(const Status& s, const std::string& what) {
  {
    std::lock_guard<std::mutex> l(stats_mu_);
    stats_.write_errors++;
  }
  spdlog::warn("{}: {}", what, s.ToString());
}

std::vector<const KubeBackend::KindInformer*> KubeBackend::DiscoverKinds() {
  kinds_checked_ms_ = NowMs();
  std::vector<const KindInformer*> started;
  for (KindInformer& k : kinds_) {
    if (k.informer) continue;
    const kube::ResourceType& type = *k.type;
    // Another version of the same resource is watched already.
    if (std::any_of(kinds_.begin(), kinds_.end(), [&](const KindInformer& o) {
          return o.informer && o.type->group == type.group && o.type->plural == type.plural;
        }))
      continue;
    const std::string what = type.plural + "." + type.group + "/" + type.version;
    // A list that matches nothing: whether the API server serves the resource, at no cost.
    kube::ListOptions probe;
    probe.field_selector = "metadata.name=chamber-discovery-probe";
    probe.limit = 1;
    Result<kube::ObjectList> r = client_->List(type, "", probe);
    if (!r.ok()) {
      // Said once as a warning, then at every look (each kind_discovery_every) as debug.
      const auto level = k.warned ? spdlog::level::debug : spdlog::level::warn;
      if (kube::IsForbidden(r.status())) {
        spdlog::log(level,
                    "{} are served, but chamberd may not list them (its ClusterRole); {}: {}", what,
                    k.kind != nullptr ? type.kind + "s are not scheduled as one workload"
                                      : "pods that name a " + type.kind + " wait",
                    r.status().ToString());
        k.warned = true;
      } else if (!kube::IsNotFound(r.status())) {
        spdlog::log(level, "could not tell whether the cluster serves {}; looking again later: {}",
                    what, r.status().ToString());
        k.warned = true;
      }
      continue;
    }
    // The builder reads an object's kind from the object: each is stamped with the resource's
    // apiVersion and kind, which a list's items need not carry (those of built-in resources do
    // not; the API server keeps them on custom resources).
    k.informer = std::make_unique<kube::Informer<kube::Object>>(
        client_, Watching(type), kube::Informer<kube::Object>::Handlers{},
        [&type](kube::Object& o) {
          if (!o.raw.is_object()) return;
          o.raw["apiVersion"] = type.ApiVersion();
          o.raw["kind"] = type.kind;
        });
    k.informer->Start();
    if (k.kind != nullptr)
      spdlog::info("the cluster serves {}: chamberd schedules each {} as one workload", what,
                   type.kind);
    else
      spdlog::info("the cluster serves {}: chamberd schedules the pods of each {} as it says", what,
                   type.kind);
    started.push_back(&k);
  }
  return started;
}

ClusterObjects KubeBackend::ListObjects() const {
  ClusterObjects objects;
  objects.nodes = nodes_->List();
  objects.pods = pods_->List();
  objects.jobs = jobs_->List();
  for (const KindInformer& k : kinds_)
    if (k.informer) {
      auto listed = k.informer->List();
      auto& into = k.kind != nullptr ? objects.owners : objects.pod_groups;
      into.insert(into.end(), listed.begin(), listed.end());
    }
  objects.priority_classes = priority_classes_->List();
  objects.namespaces = namespaces_->List();
  return objects;
}

BuildOptions KubeBackend::BuildOptionsAt(int64_t now_ms) {
  BuildOptions bo;
  bo.scheduler_name = options_.scheduler_name;
  bo.gpu_resource = options_.gpu_resource;
  bo.now = core::Time(now_ms);
  bo.assumed = &assumed_;
  bo.suspending = &suspending_;
  bo.cache = &build_cache_;
  bo.reservation_namespace = options_.reservation_namespace;
  return bo;
}

size_t KubeBackend::Prepare() {
  BuiltSnapshot retired;  // freed here, between cycles, rather than in the next one
  std::lock_guard<std::mutex> l(build_mu_);
  retired = std::move(retired_);
  return build_cache_.Prepare(ListObjects(), BuildOptionsAt(NowMs()));
}

void KubeBackend::ReleaseRetired() {
  BuiltSnapshot retired;  // freed on return, after the lock
  std::lock_guard<std::mutex> l(build_mu_);
  release_retired_ = false;
  retired = std::move(retired_);
}

Result<const core::Snapshot*> KubeBackend::Refresh() {
  std::lock_guard<std::mutex> l(build_mu_);
  const auto begin = std::chrono::steady_clock::now();
  const double begin_cpu = ThreadCpuMs();
  if (NowMs() - kinds_checked_ms_ >= options_.kind_discovery_every.count()) DiscoverKinds();
  ClusterObjects objects = ListObjects();
  queue_errors_.clear();
  for (const auto& q : queues_->List()) {
    queue_generation_[q->metadata.name] = q->metadata.generation;
    Result<core::Queue> decoded = QueueFromResource(q->raw);
    if (!decoded.ok()) {
      queue_errors_[q->metadata.name] = decoded.status().message();
      continue;
    }
    objects.queues.push_back(std::move(*decoded));
    // A leader continues from where the last one left each queue's decayed usage, and each of
    // its GPU models' (the queues per model are named "<queue>/<model>").
    if (!usage_restored_ && usage_.enabled()) {
      if (std::optional<StoredUsage> u = DecayedUsageFromResource(q->raw))
        usage_.Restore(q->metadata.name, u->gpu_hours, core::Time(u->unix_ms));
      for (const auto& [model, u] : ModelDecayedUsageFromResource(q->raw))
        usage_.Restore(q->metadata.name + core::kGpuModelQueueSeparator + model, u.gpu_hours,
                       core::Time(u.unix_ms));
    }
  }
  usage_restored_ = true;
  std::sort(objects.queues.begin(), objects.queues.end(),
            [](const core::Queue& a, const core::Queue& b) { return a.name < b.name; });

  const double listed_ms = MsSince(begin);
  // Drop the assumptions that expired (a pod deleted before the informer showed its bind, or a
  // watch that lags); the build reports those the informer has caught up with.
  const size_t assumptions = assumed_.size();
  const int64_t now = NowMs();
  std::erase_if(assumed_, [now](const auto& kv) { return kv.second.expires_ms < now; });
  std::erase_if(suspending_, [now](const auto& kv) { return kv.second < now; });
  const double expiry_ms = MsSince(begin) - listed_ms;
  // The last snapshot lends its memory to the new one, and is freed by the preparer thread
  // (ReleaseRetired), or by Prepare() or the next Refresh() without one.
  retired_ = std::move(built_);
  BuildOptions bo = BuildOptionsAt(now);
  bo.recycle = &retired_;
  if (device_source_) {
    devices_ = device_source_();
    bo.devices = &devices_;
  }
  built_ = BuildSnapshot(objects, bo);
  // Gangs in bind backoff wait it out; the backoff of a workload gone is forgotten.
  if (!bind_backoff_.empty()) {
    std::unordered_set<std::string_view> present;
    for (core::Workload& w : built_.snapshot.workloads) {
      auto it = bind_backoff_.find(w.name);
      if (it == bind_backoff_.end()) continue;
      present.insert(it->first);
      if (w.state != core::WorkloadState::kPending && w.state != core::WorkloadState::kSuspended)
        continue;
      w.bind_retry_at = core::Time(it->second.retry_at_ms);
      w.bind_rollbacks = it->second.rollbacks;
      w.bind_failure = it->second.failure;
    }
    std::erase_if(bind_backoff_, [&](const auto& kv) { return !present.contains(kv.first); });
  }
  release_retired_ = true;
  prepare_cv_.notify_all();
  // What each queue's work held since the last cycle (snapshot times are Unix milliseconds).
  usage_.AdvanceByWorkloads(built_.snapshot.now, built_.snapshot.queues, built_.snapshot.workloads);
  usage_.Fill(built_.snapshot.queues);
  for (const std::string& uid : built_.assumptions_shown) assumed_.erase(uid);
  for (const std::string& uid : built_.suspensions_shown) suspending_.erase(uid);
  for (const std::string& p : built_.problems) spdlog::debug("{}", p);
  last_refresh_ms_ = MsSince(begin);
  spdlog::debug("refresh: list={:.1f}ms expiry={:.1f}ms build={:.1f}ms; assumed binds {} -> {}",
                listed_ms, expiry_ms, last_refresh_ms_ - listed_ms - expiry_ms, assumptions,
                assumed_.size());
  last_refresh_cpu_ms_ = ThreadCpuMs() - begin_cpu;
  last_derived_ = build_cache_.last_derived();
  last_reused_ = build_cache_.last_reused();
  return &built_.snapshot;
}

const KubeBackend::BindBackoff& KubeBackend::BackOff(const std::string& workload,
                                                     const std::string& failure) {
  BindBackoff& b = bind_backoff_[workload];
  b.rollbacks = std::min(b.rollbacks + 1, 30);
  int64_t wait = options_.bind_backoff.count();
  for (int i = 1; i < b.rollbacks && wait < options_.bind_backoff_max.count(); ++i) wait *= 2;
  b.retry_at_ms = NowMs() + std::min(wait, static_cast<int64_t>(options_.bind_backoff_max.count()));
  b.failure = failure;
  return b;
}

void KubeBackend::Event(const WorkloadSource& about, const std::string& reason,
                        const std::string& message, bool warning) {
  Event(about.Involved(), reason, message, warning);
}

void KubeBackend::Event(kube::Json involved, const std::string& reason, const std::string& message,
                        bool warning) {
  if (!options_.write_events || !WritesAllowed()) return;
  kube::EventSpec e;
  e.involved = std::move(involved);
  e.reason = reason;
  e.message = message;
  e.type = warning ? "Warning" : "Normal";
  e.component = "chamber-scheduler";
  {
    std::lock_guard<std::mutex> l(events_mu_);
    if (events_.size() >= options_.max_queued_events) {
      std::lock_guard<std::mutex> s(stats_mu_);
      stats_.events_dropped++;
      return;
    }
    events_.push_back(std::move(e));
  }
  events_cv_.notify_one();
}

void KubeBackend::EventWriter(std::stop_token stop) {
  while (true) {
    kube::EventSpec e;
    {
      std::unique_lock<std::mutex> l(events_mu_);
      events_cv_.wait(l, stop, [&] { return !events_.empty(); });
      if (stop.stop_requested() || events_.empty()) return;
      e = std::move(events_.front());
      events_.pop_front();
    }
    if (!WritesAllowed()) continue;
    Result<Json> r = client_->CreateEvent(e);
    if (!r.ok()) CountError(r.status(), "event " + e.reason);
  }
}

Status KubeBackend::Apply(const core::CycleResult& result) {
  const auto begin = std::chrono::steady_clock::now();
  if (!WritesAllowed()) return Status::Ok();
  // Preemptions first (they take time to release), then binds (the work people wait for), then
  // the bookkeeping writes.
  ApplyPreemptions(result);
  ApplyBinds(result);
  ApplyResumes(result);
  ApplyPending(result);
  ApplyQueueStatus(result);
  EvictShareOverruns();
  last_apply_ms_ = MsSince(begin);
  return Status::Ok();
}

void KubeBackend::ApplyBinds(const core::CycleResult& result) {
  struct BindCall {
    size_t decision;
    const PodRef* pod;
    std::string node;
    std::vector<int> gpus;
    std::map<std::string, std::string> annotations;  // written through the binding
    Status status;
    // Failed, but a try lost its answer and the API server could not be asked since: the pod
    // may be bound (docs/reliability.md, finding 7).
    bool maybe_bound = false;
  };
  std::vector<BindCall> calls;
  // On nodes whose agent reports pod resources, a share is bound only to a GPU a reservation
  // pod holds, and whole-GPU pods only where the device plugin has GPUs left (docs/sharing.md,
  // "Reservation pods"): a gang that must wait for either is held back whole.
  ReservationPlan reserving;
  // Nothing to plan, and no pass over the workloads, where no agent reports pod resources and
  // no reservation pod exists or was just made.
  if (!options_.reservation_namespace.empty() &&
      (!devices_.empty() || !built_.reservations.empty() || !made_reservations_.empty())) {
    const int64_t now = NowMs();
    // Reservation pods made that the snapshot does not show yet (rare: the informer lags).
    std::vector<int32_t> unseen;
    if (!made_reservations_.empty()) {
      for (const GpuReservation& r : built_.reservations) made_reservations_.erase(r.uid);
      std::erase_if(made_reservations_, [&](const auto& kv) { return kv.second.expires_ms < now; });
      for (const auto& [uid, made] : made_reservations_)
        for (size_t n = 0; n < built_.snapshot.nodes.size(); ++n)
          if (built_.snapshot.nodes[n].name == made.node) unseen.push_back(static_cast<int32_t>(n));
    }
    reserving = PlanReservations(built_, result, devices_, now, options_.reservations,
                                 reservation_idle_, unseen);
  }
  auto held = [&](size_t d) { return d < reserving.wait.size() && !reserving.wait[d].empty(); };
  for (size_t d = 0; d < result.binds.size(); ++d) {
    const core::BindDecision& bind = result.binds[d];
    const WorkloadSource& src = built_.sources[bind.workload.index()];
    if (held(d)) {
      const std::string& name = built_.snapshot.workloads[bind.workload.index()].name;
      bind_backoff_[name] = {NowMs() + kReservationWait.count(), 0, reserving.wait[d]};
      spdlog::debug("gang {}: not bound yet: {}", name, reserving.wait[d]);
      continue;
    }
    for (const core::PodAssignment& a : bind.pods) {
      if (a.pod_set < 0 || static_cast<size_t>(a.pod_set) >= src.pods.size() || a.replica < 0 ||
          static_cast<size_t>(a.replica) >= src.pods[a.pod_set].size())
        continue;  // the engine never names a pod the snapshot lacks; be safe anyway
      const core::Node& node = built_.snapshot.nodes[a.placement.node.index()];
      BindCall c{d,         &src.pods[a.pod_set][a.replica],
                 node.name, MaskToIndices(a.placement.gpu_mask),
                 {},        Status::Ok()};
      c.annotations[keys::kGpuIndices] = FormatIndexList(c.gpus);
      if (!options_.leader_term.empty()) {
        c.annotations[keys::kLeaderLease] = options_.leader_lease;
        c.annotations[keys::kLeaderTerm] = options_.leader_term;
      }
      const core::PodSet& set =
          built_.snapshot.workloads[bind.workload.index()].pod_sets[a.pod_set];
      if (set.request.gpu_share() && c.gpus.size() == 1) {
        // The container is given this GPU (docs/sharing.md): by UUID where the node's agent
        // reported them, else by its NVML index, which the NVIDIA runtime takes too.
        const auto g = static_cast<size_t>(c.gpus.front());
        const std::string uuid = g < node.gpus.size() ? node.gpus[g].uuid.str() : "";
        const bool known = !uuid.empty() && uuid.find('/') == std::string::npos;
        // A share of memory alone holds its memory's part of this GPU, which may be less than
        // the part of the smallest GPU it was charged while it waited.
        const int64_t held =
            set.gpu_memory_only && g < node.gpus.size()
                ? gpu_share::MemoryShareMilli(set.gpu_memory_mib, node.gpus[g].memory_mib)
                : 0;
        c.annotations.merge(
            gpu_share::BindAnnotations({.gpu_milli = held > 0 ? held : set.request.gpu_milli(),
                                        .gpu_memory_mib = set.gpu_memory_mib},
                                       known ? uuid : std::to_string(g)));
      }
      calls.push_back(std::move(c));
    }
  }
  std::atomic<int64_t> fence_refusals{0}, changed_rebinds{0};
  ParallelFor(calls.size(), options_.writers, [&](size_t i) {
    BindCall& c = calls[i];
    if (!WritesAllowed()) {
      c.status = Status::Unavailable("not the leader any more");
      return;
    }
    const std::map<std::string, std::string>& annotations = c.annotations;
    c.status = client_->Bind(c.pod->namespace_name(), c.pod->name(), c.pod->uid(), c.node,
                             annotations, c.pod->resource_version());
    // A try without an answer (a lost connection, a 5xx, overload) may or may not have reached
    // the API server.
    bool unanswered = c.status.code() == StatusCode::kUnavailable;
    // One the API server may not have seen is tried again before the gang is rolled back: a
    // rollback costs every bound member's pod.
    for (int attempt = 1; attempt < kBindAttempts && c.status.code() == StatusCode::kUnavailable;
         ++attempt) {
      std::this_thread::sleep_for(kBindRetryDelay * attempt);
      if (!WritesAllowed()) return;
      c.status = client_->Bind(c.pod->namespace_name(), c.pod->name(), c.pod->uid(), c.node,
                               annotations, c.pod->resource_version());
      unanswered |= c.status.code() == StatusCode::kUnavailable;
    }
    // Refused by the fence while this replica leads: the API server has not seen the Lease
    // it took yet. A deposed leader stops here (its leadership token is cancelled).
    for (const auto since = std::chrono::steady_clock::now();
         FenceRefused(c.status) && std::chrono::steady_clock::now() - since < kFenceLagLimit;) {
      ++fence_refusals;
      std::this_thread::sleep_for(kFenceRetryDelay);
      if (!WritesAllowed()) return;
      c.status = client_->Bind(c.pod->namespace_name(), c.pod->name(), c.pod->uid(), c.node,
                               annotations, c.pod->resource_version());
      unanswered |= c.status.code() == StatusCode::kUnavailable;
    }
    // Refused because the pod changed since the snapshot (its resourceVersion precondition): its
    // controller wrote a label or annotation as it made the pod, say (a LeaderWorkerSet's does).
    // Tried again with the new version while the pod is the same one, unbound, and asks for what
    // it was placed by; a rollback would cost the gang every bound member. Not after a try
    // without an answer: that one may have bound it (below).
    for (int attempt = 0;
         attempt < kChangedPodAttempts && !unanswered && kube::IsConflict(c.status); ++attempt) {
      Result<Json> fresh =
          client_->Get(kube::resources::kPods, c.pod->namespace_name(), c.pod->name());
      if (!fresh.ok()) break;
      Result<kube::Pod> now = kube::Pod::FromJson(std::move(*fresh));
      if (!now.ok() || !PlacedAsItIs(*c.pod->pod, *now)) break;
      if (!WritesAllowed()) return;
      ++changed_rebinds;
      c.status = client_->Bind(c.pod->namespace_name(), c.pod->name(), c.pod->uid(), c.node,
                               annotations, now->metadata.resource_version);
      unanswered |= c.status.code() == StatusCode::kUnavailable;
    }
    if (c.status.ok() || !unanswered) return;
    // A try that lost its answer may have bound the pod all the same, and the next ones then
    // fail (a conflict, or no answer again): the API server says which. When it cannot be
    // asked either, the pod may be bound and holds its GPUs as if it were, until the informer
    // shows it; were they taken for free, the next cycle could give them to another pod.
    const std::optional<bool> bound = BoundState(*c.pod, c.node);
    if (bound == true)
      c.status = Status::Ok();
    else if (!bound.has_value())
      c.maybe_bound = true;
  });

  if (fence_refusals > 0)
    spdlog::info(
        "{} bind tries refused by the leader fence while leading in term {} (the API server had "
        "not seen this term's Lease yet); tried again",
        fence_refusals.load(), options_.leader_term);
  const int64_t expires = NowMs() + options_.assume_timeout.count();
  std::vector<std::vector<const BindCall*>> by_decision(result.binds.size());
  for (const BindCall& c : calls) by_decision[c.decision].push_back(&c);
  int64_t binds = 0, failures = 0, rollbacks = 0;
  struct EventCall {
    const WorkloadSource* about;
    std::string reason, message;
    bool warning;
  };
  std::vector<EventCall> events;
  for (size_t d = 0; d < result.binds.size(); ++d) {
    if (held(d)) continue;
    const WorkloadSource& src = built_.sources[result.binds[d].workload.index()];
    const std::string& name = built_.snapshot.workloads[result.binds[d].workload.index()].name;
    std::string failed;
    std::set<std::string> nodes;
    int maybe_bound = 0;
    for (const BindCall* c : by_decision[d]) {
      // A pod that may be bound holds its GPUs as a bound one does.
      if (c->status.ok() || c->maybe_bound)
        assumed_[c->pod->uid()] = {c->pod->Key(), c->node, c->gpus, expires};
      if (c->status.ok()) {
        nodes.insert(c->node);
        ++binds;
        continue;
      }
      maybe_bound += c->maybe_bound ? 1 : 0;
      if (failed.empty()) failed = c->pod->Key() + ": " + c->status.message();
    }
    if (failed.empty()) {
      std::string where;
      for (const std::string& n : nodes) where += (where.empty() ? "" : ", ") + n;
      events.push_back({&src, "Scheduled",
                        "Bound " + std::to_string(by_decision[d].size()) + " pod(s) to " + where +
                            (result.binds[d].borrowing ? ", borrowing idle quota" : ""),
                        false});
      WritePodGroupCondition(src, kInitiallyScheduled, true, "Scheduled", events.back().message);
      bind_backoff_.erase(name);  // bound whole: its rollbacks in a row are over
      continue;
    }
    ++failures;
    if (!WritesAllowed()) {
      // Deposed half-way: a replica that is not the leader writes nothing, deletes included.
      // The pods already bound stay, as after a crash; the next leader sees the gang partly
      // running and binds the rest as they fit (snapshot_builder.cc).
      spdlog::warn(
          "gang {}: leadership lost half-way through its binds ({}); the next leader "
          "binds the rest",
          name, failed);
      continue;
    }
    const BindBackoff& backoff = BackOff(name, failed);
    spdlog::warn(
        "gang {}: bind failed ({}); rolling back{}; placed again in {} s at the earliest ({} "
        "rollback(s) in a row)",
        name, failed,
        maybe_bound > 0 ? ", " + std::to_string(maybe_bound) +
                              " pod(s) perhaps bound (the API server could not be asked)"
                        : "",
        (backoff.retry_at_ms - NowMs() + 999) / 1000, backoff.rollbacks);
    // All or nothing: a bound pod cannot be unbound, so the pods already bound are deleted and
    // the gang is placed again whole. A Job is suspended instead, and its pods are left to the
    // Job controller, which deletes the active pods of a Job it has seen suspended: it counts a
    // pod deleted under a running Job as a failure against its backoffLimit, and a pod deleted
    // here could reach it before the suspension does (two watches, no order between them). It
    // is resumed when it fits again. Pods of other suspendable kinds are deleted once their
    // object is suspended. A bare pod is recreated here, pending, from the object as the API
    // server holds it.
    // Pods that may be bound are rolled back as bound ones are.
    auto bound = [](const BindCall* c) { return c->status.ok() || c->maybe_bound; };
    const bool any_bound = std::any_of(by_decision[d].begin(), by_decision[d].end(), bound);
    if (src.Suspendable() && any_bound && SuspendForRollback(src)) {
      // Suspended from now on, whatever the informer shows until it shows that.
      suspending_[src.suspendable_uid()] = expires;
      std::vector<std::shared_ptr<const kube::Pod>> bound_pods;
      for (const BindCall* c : by_decision[d])
        if (bound(c)) bound_pods.push_back(c->pod->pod);
      SuspendPartJobs(src, bound_pods);
      int released = 0, stopping = 0;
      for (const BindCall* c : by_decision[d]) {
        if (!bound(c)) continue;
        ++rollbacks;
        // Held, as bound, until the Job controller deletes it: its assumed bind stays.
        if (JobController(*c->pod->pod) != nullptr) {
          ++stopping;
          continue;
        }
        kube::DeleteOptions del;
        del.uid = c->pod->uid();
        del.grace_period_seconds = 0;
        Status s =
            client_->Delete(kube::resources::kPods, c->pod->namespace_name(), c->pod->name(), del);
        // The bind stands until the delete does: a pod whose delete failed still holds its GPUs,
        // so its assumed bind stays until the informer shows it bound (or gone).
        if (s.ok() || kube::IsNotFound(s)) {
          assumed_.erase(c->pod->uid());
          ++released;
        } else {
          CountError(s, "rollback of " + c->pod->Key());
        }
      }
      std::string what = "gang bind failed and was rolled back (" + failed + "); suspended, ";
      if (stopping > 0)
        what += std::to_string(stopping) + " bound pod(s) left to the Job controller to stop";
      if (stopping > 0 && released > 0) what += " and ";
      if (released > 0) what += std::to_string(released) + " bound pod(s) released";
      events.push_back({&src, "FailedScheduling",
                        what + ", so they count as no failure; it is resumed when the gang fits "
                               "again",
                        true});
      continue;
    }
    int recreated = 0;
    std::string lost;
    for (const BindCall* c : by_decision[d]) {
      if (!bound(c)) continue;
      ++rollbacks;
      const std::shared_ptr<const kube::Pod> cached = pods_->Get(c->pod->Key());
      const bool bare = cached && cached->metadata.uid == c->pod->uid() && !HasController(*cached);
      Result<Json> current = Json();
      if (bare) {
        for (int attempt = 0; attempt < 3; ++attempt) {
          current = client_->Get(kube::resources::kPods, c->pod->namespace_name(), c->pod->name());
          if (current.ok() || kube::IsNotFound(current.status())) break;
        }
        if (!current.ok()) {
          if (!kube::IsNotFound(current.status()))
            CountError(current.status(), "rollback of " + c->pod->Key());
          continue;  // gone already, or unreadable: then it is left bound rather than lost
        }
        if (current->value("metadata", Json::object()).value("uid", "") != c->pod->uid()) continue;
        if (current->value("spec", Json::object()).value("nodeName", "").empty()) {
          assumed_.erase(c->pod->uid());  // perhaps bound, and it was not: nothing to undo
          continue;
        }
      }
      kube::DeleteOptions del;
      del.uid = c->pod->uid();
      del.grace_period_seconds = 0;
      Status s =
          client_->Delete(kube::resources::kPods, c->pod->namespace_name(), c->pod->name(), del);
      if (!s.ok() && !kube::IsNotFound(s)) {
        CountError(s, "rollback of " + c->pod->Key());
        continue;  // still bound: its assumed bind stays
      }
      assumed_.erase(c->pod->uid());
      if (!s.ok()) continue;
      if (!bare) continue;
      const Json copy = PendingCopy(*current);
      Result<Json> made = Json();
      // Deleted with no grace, the old object is gone at once unless a finalizer holds it.
      for (int attempt = 0; attempt < 20; ++attempt) {
        made = client_->Create(kube::resources::kPods, c->pod->namespace_name(), copy);
        if (made.ok() || !kube::IsAlreadyExists(made.status())) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (made.ok()) {
        ++recreated;
      } else {
        CountError(made.status(), "recreating " + c->pod->Key() + " after a rollback");
        lost += (lost.empty() ? "" : ", ") + c->pod->Key();
      }
    }
    std::string message = "gang bind failed and was rolled back (" + failed + ")";
    if (recreated > 0)
      message += "; " + std::to_string(recreated) + " bare pod(s) recreated, pending";
    if (!lost.empty()) message += "; could not recreate " + lost;
    events.push_back({&src, "FailedScheduling", message, true});
  }
  for (const EventCall& e : events) Event(*e.about, e.reason, e.message, e.warning);
  ApplyReservations(reserving);
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.binds += binds;
  stats_.bind_failures += failures;
  stats_.rollbacks += rollbacks;
  stats_.fence_refusals += fence_refusals;
  stats_.changed_pod_rebinds += changed_rebinds;
}

void KubeBackend::ApplyReservations(const ReservationPlan& plan) {
  const std::string& ns = options_.reservation_namespace;
  for (const ReservationPlan::Removal& r : plan.remove) {
    const GpuReservation& pod = built_.reservations[r.reservation];
    if (!WritesAllowed()) return;
    kube::DeleteOptions del;
    del.uid = pod.uid;
    del.grace_period_seconds = 0;
    const std::string name = pod.key.substr(pod.key.find('/') + 1);
    Status s = client_->Delete(kube::resources::kPods, ns, name, del);
    if (s.ok() || kube::IsNotFound(s)) {
      reservation_idle_.erase(pod.uid);
      {
        std::lock_guard<std::mutex> l(stats_mu_);
        const auto* reason =
            std::find(std::begin(kRemovalReasons), std::end(kRemovalReasons), r.reason);
        if (reason != std::end(kRemovalReasons))
          ++stats_.reservations_deleted[static_cast<size_t>(reason - std::begin(kRemovalReasons))];
      }
      spdlog::info("reservation pod {} on node {} deleted: {}", pod.key,
                   built_.snapshot.nodes[static_cast<size_t>(pod.node)].name, r.why);
    } else {
      CountError(s, "deleting reservation pod " + pod.key);
    }
  }
  for (int32_t n : plan.create) {
    if (!WritesAllowed()) return;
    const std::string& node = built_.snapshot.nodes[static_cast<size_t>(n)].name;
    Result<Json> made = client_->Create(
        kube::resources::kPods, ns,
        ReservationPod(ns, node, options_.reservation_image, options_.gpu_resource));
    if (made.ok()) {
      const Json& meta = (*made)["metadata"];
      made_reservations_[meta.value("uid", std::string())] = {
          node, NowMs() + options_.assume_timeout.count()};
      {
        std::lock_guard<std::mutex> l(stats_mu_);
        ++stats_.reservations_made;
      }
      spdlog::info("reservation pod {}/{} made on node {}, for shares of a GPU", ns,
                   meta.value("name", std::string()), node);
    } else {
      CountError(made.status(), "making a reservation pod on node " + node);
    }
  }
}

std::vector<std::string> KubeBackend::AssumedPods() const {
  std::vector<std::string> keys;
  for (const auto& [uid, bind] : assumed_) keys.push_back(bind.pod);
  std::sort(keys.begin(), keys.end());
  return keys;
}

const kube::OwnerReference* KubeBackend::JobController(const kube::Pod& pod) {
  for (const kube::OwnerReference& o : pod.metadata.owner_references)
    if (o.controller && o.kind == "Job" && o.api_version == "batch/v1") return &o;
  return nullptr;
}

void KubeBackend::SuspendPartJobs(const WorkloadSource& src,
                                  const std::vector<std::shared_ptr<const kube::Pod>>& pods) {
  if (src.kind != WorkloadSource::Kind::kOwner) return;
  // A TrainJob's JobSet first, as the Trainer will a moment later: its controller would resume
  // Jobs suspended under a JobSet that is not.
  if (src.part != nullptr && src.part_kind != nullptr && !src.part_kind->suspend_path.empty()) {
    Json patch = src.part_kind->SuspendPatch(true);
    patch["metadata"] = {{"uid", src.part->metadata.uid}};
    Result<Json> r = client_->MergePatch(src.part_kind->type, src.namespace_name(),
                                         src.part->metadata.name, patch);
    if (!r.ok() && !kube::IsNotFound(r.status()) && !kube::IsConflict(r.status()))
      CountError(r.status(), "suspend " + src.part_kind->LowerKind() + " " + src.namespace_name() +
                                 "/" + src.part->metadata.name + " of " + WhatToSuspend(src));
  }
  std::set<std::string> jobs;
  for (const auto& p : pods)
    if (const kube::OwnerReference* o = JobController(*p)) jobs.insert(o->name);
  for (const std::string& job : jobs) {
    Result<Json> r = client_->MergePatch(kube::resources::kJobs, src.namespace_name(), job,
                                         {{"spec", {{"suspend", true}}}});
    if (!r.ok() && !kube::IsNotFound(r.status()))
      CountError(r.status(),
                 "suspend job " + src.namespace_name() + "/" + job + " of " + WhatToSuspend(src));
  }
}

bool KubeBackend::SuspendForRollback(const WorkloadSource& src) {
  Json patch = src.SuspendPatch(true);
  patch["metadata"] = {{"uid", src.suspendable_uid()},
                       {"annotations", {{keys::kRolledBackAt, NowText()}}}};
  Result<Json> r =
      client_->MergePatch(src.SuspendableType(), src.namespace_name(), src.name(), patch);
  if (!r.ok() && !kube::IsNotFound(r.status()))
    CountError(r.status(), "suspend " + WhatToSuspend(src) + " for a rollback");
  return r.ok();
}

std::optional<bool> KubeBackend::BoundState(const PodRef& pod, const std::string& node) const {
  Result<Json> got = client_->Get(kube::resources::kPods, pod.namespace_name(), pod.name());
  if (kube::IsNotFound(got.status())) return false;  // gone: it holds nothing
  if (!got.ok()) return std::nullopt;
  const Json none = Json::object();
  return got->value("metadata", none).value("uid", "") == pod.uid() &&
         got->value("spec", none).value("nodeName", "") == node;
}

std::vector<std::shared_ptr<const kube::Pod>> KubeBackend::PodsOf(const WorkloadSource& src) const {
  std::vector<std::shared_ptr<const kube::Pod>> out;
  for (const auto& set : src.pods)
    for (const PodRef& ref : set)
      if (auto p = pods_->Get(ref.Key())) out.push_back(std::move(p));
  return out;
}

void KubeBackend::ApplyPreemptions(const core::CycleResult& result) {
  // The health controller records, with the fault, which workloads left which fenced GPU.
  if (fault_requeues_ && WritesAllowed()) {
    std::vector<FaultRequeue> requeued;
    const core::Snapshot& snap = built_.snapshot;
    for (const core::PreemptDecision& p : result.preemptions) {
      if (p.reason != core::PreemptReason::kHardwareFault) continue;
      const core::Workload& w = snap.workloads[p.workload.index()];
      core::ForEachHeldGpu(snap, w, [&](const core::Node& node, size_t g) {
        if (!node.gpus[g].healthy) requeued.push_back({node.name, static_cast<int>(g), w.name});
      });
    }
    if (!requeued.empty()) fault_requeues_(requeued);
  }
  for (const core::PreemptDecision& p : result.preemptions) {
    if (!WritesAllowed()) return;
    const WorkloadSource& src = built_.sources[p.workload.index()];
    const core::Workload& w = built_.snapshot.workloads[p.workload.index()];
    const std::string why = std::string(core::PreemptReasonName(p.reason)) + ": " + p.message +
                            "; " + Hours(p.gpu_hours_lost) + " GPU-hours since the last checkpoint";
    if (src.Suspendable()) {
      // The preemption budget (preemption.maxPerWindow) counts what a policy decided, not a
      // GPU that failed under the job: a fault leaves the history as it was.
      const bool fault = p.reason == core::PreemptReason::kHardwareFault;
      std::string history;
      const size_t keep = fault ? 10 : 9;
      const size_t from =
          w.recent_preemptions.size() > keep ? w.recent_preemptions.size() - keep : 0;
      for (size_t i = from; i < w.recent_preemptions.size(); ++i)
        history +=
            (history.empty() ? "" : ",") + std::to_string(w.recent_preemptions[i].count() / 1000);
      if (!fault) history += (history.empty() ? "" : ",") + std::to_string(NowMs() / 1000);
      Json annotations = {
          {keys::kPreemptedAt, NowText()},
          {keys::kPreemptionCount, std::to_string(src.stored_preemptions + 1)},
          {keys::kGpuHoursLost, Hours(src.stored_gpu_hours_lost + p.gpu_hours_lost, 4)}};
      if (!history.empty()) annotations[keys::kPreemptions] = history;
      Json patch = src.SuspendPatch(true);
      patch["metadata"] = {{"uid", src.suspendable_uid()},
                           {"resourceVersion", src.suspendable_resource_version()},
                           {"annotations", annotations}};
      Result<Json> r =
          client_->MergePatch(src.SuspendableType(), src.namespace_name(), src.name(), patch);
      if (!r.ok()) {
        if (!kube::IsConflict(r.status()) && !kube::IsNotFound(r.status()))
          CountError(r.status(), "suspend " + WhatToSuspend(src));
        continue;  // changed since the snapshot: the next cycle decides again
      }
      // The Job controller deletes the pods too (a JobSet's controller suspends its Jobs);
      // deleting them first sets the grace period.
      const std::vector<std::shared_ptr<const kube::Pod>> pods = PodsOf(src);
      SuspendPartJobs(src, pods);
      ParallelFor(pods.size(), options_.writers, [&](size_t i) {
        kube::DeleteOptions del;
        del.uid = pods[i]->metadata.uid;
        del.grace_period_seconds = p.grace_seconds;
        Status s = client_->Delete(kube::resources::kPods, pods[i]->metadata.namespace_name,
                                   pods[i]->metadata.name, del);
        if (!s.ok() && !kube::IsNotFound(s) && !kube::IsConflict(s))
          CountError(s, "delete pod " + pods[i]->metadata.Key());
      });
      {
        std::lock_guard<std::mutex> l(stats_mu_);
        stats_.suspends++;
      }
      const std::string message =
          "Suspended with " + std::to_string(p.grace_seconds) + " s to checkpoint. " + why;
      Event(src, "Preempted", message);
      WritePodGroupCondition(src, kDisruptionTarget, true, "PreemptionByScheduler", message);
      continue;
    }
    const std::vector<std::shared_ptr<const kube::Pod>> pods = PodsOf(src);
    std::atomic<int64_t> evicted{0}, blocked{0};
    ParallelFor(pods.size(), options_.writers, [&](size_t i) {
      kube::DeleteOptions del;
      del.uid = pods[i]->metadata.uid;
      del.grace_period_seconds = p.grace_seconds;
      Status s = client_->Evict(pods[i]->metadata.namespace_name, pods[i]->metadata.name, del);
      if (s.ok()) {
        ++evicted;
      } else if (kube::IsEvictionBlocked(s)) {
        ++blocked;
      } else if (!kube::IsNotFound(s)) {
        CountError(s, "evict pod " + pods[i]->metadata.Key());
      }
    });
    {
      std::lock_guard<std::mutex> l(stats_mu_);
      stats_.evictions += evicted;
      stats_.eviction_blocked += blocked;
    }
    if (blocked > 0)
      Event(src, "PreemptionBlocked",
            std::to_string(blocked.load()) +
                " pod(s) not evicted: a PodDisruptionBudget allows no disruption now. " + why,
            true);
    if (evicted > 0) {
      const std::string message = "Evicted " + std::to_string(evicted.load()) + " pod(s) with " +
                                  std::to_string(p.grace_seconds) + " s to checkpoint. " + why;
      Event(src, "Preempted", message);
      WritePodGroupCondition(src, kDisruptionTarget, true, "PreemptionByScheduler", message);
    }
  }
}

void KubeBackend::ApplyResumes(const core::CycleResult& result) {
  for (const core::ResumeDecision& r : result.resumes) {
    if (!WritesAllowed()) return;
    const WorkloadSource& src = built_.sources[r.workload.index()];
    if (!src.Suspendable()) continue;
    Json patch = src.SuspendPatch(false);
    patch["metadata"] = {
        {"uid", src.suspendable_uid()},
        {"resourceVersion", src.suspendable_resource_version()},
        {"annotations", {{keys::kPreemptedAt, nullptr}, {keys::kRolledBackAt, nullptr}}}};
    Result<Json> res =
        client_->MergePatch(src.SuspendableType(), src.namespace_name(), src.name(), patch);
    if (!res.ok()) {
      if (!kube::IsConflict(res.status()) && !kube::IsNotFound(res.status()))
        CountError(res.status(), "resume " + WhatToSuspend(src));
      continue;
    }
    {
      std::lock_guard<std::mutex> l(stats_mu_);
      stats_.resumes++;
    }
    Event(src, "Resumed",
          std::string("Capacity is free again") + (r.borrowing ? " (borrowing idle quota)" : "") +
              "; the " + src.SuspendableType().kind + "'s pods are scheduled as they are created");
  }
}

void KubeBackend::ApplyPending(const core::CycleResult& result) {
  struct Write {
    std::shared_ptr<const kube::Pod> pod;
    std::string reason, message;
    std::string nominated;  // status.nominatedNodeName to write ("" clears it)
  };
  // Where the engine holds room for a waiting preemptor's pods, written as their nominated node
  // as kube-scheduler does for its preemptors.
  std::unordered_map<std::string, std::string> nominated;
  for (const core::NominationDecision& n : result.nominations) {
    const WorkloadSource& src = built_.sources[n.workload.index()];
    for (const core::PodAssignment& a : n.pods)
      if (a.pod_set >= 0 && static_cast<size_t>(a.pod_set) < src.pods.size() && a.replica >= 0 &&
          static_cast<size_t>(a.replica) < src.pods[a.pod_set].size())
        nominated[src.pods[a.pod_set][a.replica].uid()] =
            built_.snapshot.nodes[a.placement.node.index()].name;
  }
  std::vector<Write> writes;
  const int64_t now = NowMs();
  std::set<std::string> live;
  for (const core::PendingDecision& d : result.pending) {
    const WorkloadSource& src = built_.sources[d.workload.index()];
    const std::string reason = ConditionReason(d.reason);
    const std::string message = std::string(core::PendingReasonName(d.reason)) + ": " + d.message();
    WritePodGroupCondition(src, kInitiallyScheduled, false, reason, message);
    for (const auto& set : src.pods)
      for (const PodRef& ref : set) {
        live.insert(ref.uid());
        if (static_cast<int32_t>(writes.size()) >= options_.max_condition_writes_per_cycle)
          continue;
        auto pod = pods_->Get(ref.Key());
        if (!pod || pod->metadata.uid != ref.uid() || !pod->node_name.empty()) continue;
        const auto held = nominated.find(ref.uid());
        std::string node = held == nominated.end() ? std::string() : held->second;
        const bool renominate = pod->nominated_node_name != node;
        const kube::Condition* current = nullptr;
        for (const kube::Condition& c : pod->conditions)
          if (c.type == "PodScheduled") current = &c;
        if (!renominate && current != nullptr && current->status == "False" &&
            current->reason == reason && current->message == message)
          continue;
        auto it = conditions_written_.find(ref.uid());
        if (!renominate && it != conditions_written_.end() && it->second.reason == reason &&
            now - it->second.at_ms < options_.condition_refresh.count())
          continue;  // only the message changed, and recently written
        writes.push_back({std::move(pod), reason, message, std::move(node)});
      }
  }
  // Forget pods that are no longer pending, and PodGroups that are gone. A gone PodGroup's uid
  // never comes back, so its entry is only memory: the walk over every source that finds them
  // waits until the map has grown by half since the last one.
  for (auto it = conditions_written_.begin(); it != conditions_written_.end();)
    it = live.count(it->first) ? std::next(it) : conditions_written_.erase(it);
  if (pod_group_conditions_.size() > pod_group_conditions_kept_ * 3 / 2 + 64) {
    std::set<std::string_view> groups;
    for (const WorkloadSource& src : built_.sources)
      if (src.pod_group) groups.insert(src.pod_group->metadata.uid);
    for (auto it = pod_group_conditions_.begin(); it != pod_group_conditions_.end();)
      it = groups.count(std::string_view(it->first).substr(0, it->first.find('/')))
               ? std::next(it)
               : pod_group_conditions_.erase(it);
    pod_group_conditions_kept_ = pod_group_conditions_.size();
  }

  std::atomic<int64_t> done{0};
  ParallelFor(writes.size(), options_.writers, [&](size_t i) {
    if (!WritesAllowed()) return;
    const Write& w = writes[i];
    Json cond = {{"type", "PodScheduled"},   {"status", "False"},
                 {"reason", w.reason},       {"message", w.message},
                 {"lastProbeTime", nullptr}, {"lastTransitionTime", NowText()}};
    int index = -1;
    for (size_t c = 0; c < w.pod->conditions.size(); ++c)
      if (w.pod->conditions[c].type == "PodScheduled") index = static_cast<int>(c);
    if (index >= 0 && w.pod->conditions[index].status == "False")
      cond["lastTransitionTime"] = w.pod->conditions[index].last_transition_time.Text();
    Json fresh = Json::object();
    if (!w.nominated.empty()) fresh["nominatedNodeName"] = w.nominated;
    Json ops = ConditionPatch(w.pod->metadata.uid, cond, index, !w.pod->conditions.empty(),
                              w.pod->has_status, std::move(fresh));
    const bool whole_status = ops.back().at("path") == "/status";
    if (!whole_status && !w.nominated.empty()) {
      ops.push_back({{"op", "add"}, {"path", "/status/nominatedNodeName"}, {"value", w.nominated}});
    } else if (w.nominated.empty() && !w.pod->nominated_node_name.empty()) {
      ops.push_back({{"op", "remove"}, {"path", "/status/nominatedNodeName"}});
    }
    Result<Json> r = client_->JsonPatch(kube::resources::kPods, w.pod->metadata.namespace_name,
                                        w.pod->metadata.name, ops, "status");
    if (r.ok())
      ++done;
    else if (!kube::IsNotFound(r.status()) && !kube::IsInvalid(r.status()))
      CountError(r.status(), "condition of pod " + w.pod->metadata.Key());
  });
  for (const Write& w : writes)
    conditions_written_[w.pod->metadata.uid] = {w.reason, w.message, now};
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.condition_writes += done;
}

void KubeBackend::WritePodGroupCondition(const WorkloadSource& src, const char* condition_type,
                                         bool value, const std::string& reason,
                                         const std::string& message) {
  if (!src.pod_group || !WritesAllowed()) return;
  const std::string kind = condition_type;
  const std::string truth = value ? "True" : "False";
  const kube::Object& group = *src.pod_group;
  const std::string written = value ? truth : truth + ":" + reason;
  std::string& last = pod_group_conditions_[group.metadata.uid + "/" + kind];
  if (last == written || last == "True") return;
  // The condition as the informer holds it: True is final; the same False reason is not
  // written again (the pods carry each cycle's message).
  const Json* status = nullptr;
  const Json* conditions = nullptr;
  int index = -1;
  if (auto st = group.raw.find("status"); st != group.raw.end() && st->is_object()) {
    status = &*st;
    if (auto cs = st->find("conditions"); cs != st->end() && cs->is_array()) {
      conditions = &*cs;
      for (size_t i = 0; i < cs->size(); ++i)
        if ((*cs)[i].is_object() && (*cs)[i].value("type", "") == kind) index = static_cast<int>(i);
    }
  }
  std::string transition = NowText();
  if (index >= 0) {
    const Json& current = (*conditions)[index];
    const std::string was = current.value("status", "");
    if (was == "True" || (was + ":" + current.value("reason", "")) == written) {
      last = was == "True" ? "True" : written;
      return;
    }
    if (was == truth) transition = current.value("lastTransitionTime", "");
  }
  Json cond = {{"type", kind},
               {"status", truth},
               {"reason", reason},
               {"message", message},
               {"lastTransitionTime", transition}};
  if (group.metadata.generation > 0) cond["observedGeneration"] = group.metadata.generation;
  const Json ops = ConditionPatch(group.metadata.uid, cond, index, conditions != nullptr,
                                  status != nullptr, Json::object());
  const std::string api_version = group.raw.value("apiVersion", "");
  const kube::ResourceType* type = &PodGroupTypes().front();
  for (const kube::ResourceType& t : PodGroupTypes())
    if (t.ApiVersion() == api_version) type = &t;
  Result<Json> r =
      client_->JsonPatch(*type, group.metadata.namespace_name, group.metadata.name, ops, "status");
  if (r.ok())
    last = written;
  else if (!kube::IsNotFound(r.status()) && !kube::IsInvalid(r.status()) &&
           !kube::IsConflict(r.status()))
    CountError(r.status(), "condition of podgroup " + group.metadata.Key());
}

namespace {

// The decayedUsage of GPU model `model` in a queue's status as written, or null.
const Json* ModelUsageIn(const Json& status, const std::string& model) {
  auto models = status.find("models");
  if (models == status.end() || !models->is_array()) return nullptr;
  for (const Json& m : *models)
    if (m.value("name", "") == model && m.contains("decayedUsage")) return &m["decayedUsage"];
  return nullptr;
}

}  // namespace

Json KubeBackend::UsageToWrite(const std::string& queue, const core::DecayedUsage::Entry& now,
                               const Json* written) const {
  // Decayed usage changes every cycle; it is written every usage_write_every, and in between
  // the last written figure stays.
  const int64_t at = now.at.count();
  auto last = usage_written_ms_.find(queue);
  if (written != nullptr && last != usage_written_ms_.end() &&
      at - last->second < options_.usage_write_every.count())
    return *written;
  return DecayedUsageJson(now.gpu_hours, at);
}

void KubeBackend::ApplyQueueStatus(const core::CycleResult& result) {
  std::map<std::string, core::QueueStatus> statuses;
  // A queue per GPU model is no object of its own: its figures go in its queue's status.models,
  // in the order of the queue's spec (the order of the snapshot's queues).
  std::map<std::string, Json> models;
  for (const core::QueueStatus& q : result.queues) {
    const std::string_view owner = core::GpuModelQueueOwner(q.name);
    if (owner.size() == q.name.size()) {
      statuses[q.name] = q;
      continue;
    }
    Json& list = models[std::string(owner)];
    if (!list.is_array()) list = Json::array();
    list.push_back(QueueModelStatusJson(q));
    // Its own decayed usage, for the next leader, written as often as the queue's (below).
    if (auto u = usage_.entries().find(q.name); u != usage_.entries().end()) {
      auto it = queue_status_written_.find(std::string(owner));
      list.back()["decayedUsage"] =
          UsageToWrite(q.name, u->second,
                       it == queue_status_written_.end()
                           ? nullptr
                           : ModelUsageIn(it->second, list.back()["name"].get<std::string>()));
    }
  }
  for (const auto& [name, error] : queue_errors_) {
    core::QueueStatus s;
    s.name = name;
    s.error = error;
    statuses[name] = s;
  }
  for (const auto& [name, s] : statuses) {
    if (!WritesAllowed()) return;
    auto gen = queue_generation_.find(name);
    Json status = QueueStatusJson(s, gen == queue_generation_.end() ? 0 : gen->second);
    // Null takes away a list written while the queue had GPU models (the status is merged).
    auto m = models.find(name);
    status["models"] = m != models.end() ? m->second : Json(nullptr);
    auto it = queue_status_written_.find(name);
    if (auto u = usage_.entries().find(name); u != usage_.entries().end())
      status["decayedUsage"] =
          UsageToWrite(name, u->second,
                       it != queue_status_written_.end() && it->second.contains("decayedUsage")
                           ? &it->second["decayedUsage"]
                           : nullptr);
    // The Valid condition keeps its lastTransitionTime while its status stays: from what this
    // leader wrote, else from what the API holds (written by an earlier leader).
    Json& valid = status["conditions"][0];
    std::string since;
    auto same_status = [&](const Json& conditions) {
      if (!conditions.is_array()) return;
      for (const Json& c : conditions)
        if (c.is_object() && c.value("type", "") == "Valid" &&
            c.value("status", "") == valid["status"] && c.contains("lastTransitionTime") &&
            c["lastTransitionTime"].is_string())
          since = c["lastTransitionTime"].get<std::string>();
    };
    if (it != queue_status_written_.end()) same_status(it->second.value("conditions", Json()));
    if (since.empty())
      if (auto q = queues_->Get(name);
          q && q->raw.contains("status") && q->raw["status"].is_object())
        same_status(q->raw["status"].value("conditions", Json()));
    valid["lastTransitionTime"] = since.empty() ? NowText() : since;
    if (it != queue_status_written_.end() && it->second == status) continue;
    Json patch = {{"status", status}};
    Result<Json> r = client_->MergePatch(kQueues, "", name, patch, "status");
    if (!r.ok()) {
      if (!kube::IsNotFound(r.status())) CountError(r.status(), "status of queue " + name);
      continue;
    }
    // When each decayed usage written anew was as of.
    const Json* before = it != queue_status_written_.end() ? &it->second : nullptr;
    if (status.contains("decayedUsage") &&
        (before == nullptr || before->value("decayedUsage", Json()) != status["decayedUsage"]))
      usage_written_ms_[name] = usage_.entries().at(name).at.count();
    if (status["models"].is_array())
      for (const Json& m : status["models"]) {
        if (!m.contains("decayedUsage")) continue;
        const std::string model = m["name"].get<std::string>();
        const Json* was = before != nullptr ? ModelUsageIn(*before, model) : nullptr;
        const std::string queue = name + core::kGpuModelQueueSeparator + model;
        if (was == nullptr || *was != m["decayedUsage"])
          usage_written_ms_[queue] = usage_.entries().at(queue).at.count();
      }
    queue_status_written_[name] = std::move(status);
    std::lock_guard<std::mutex> l(stats_mu_);
    stats_.queue_status_writes++;
  }
}

void ListWorkloadPods(const BuiltSnapshot& built, daemon::Observation& o) {
  o.workload_pods.assign(built.sources.size(), {});
  o.bare_pods.assign(built.sources.size(), false);
  for (size_t i = 0; i < built.sources.size(); ++i) {
    const WorkloadSource& s = built.sources[i];
    if (s.IsPodNamed(built.snapshot.workloads[i].name)) {
      o.bare_pods[i] = true;
    } else {
      o.workload_pods[i] = s.PodKeys();
    }
  }
}

namespace {

// A node label's value as a whole number; empty where the node has no such label or it is none.
std::optional<int64_t> IntLabel(const core::Node& node, std::string_view key) {
  for (const auto& [k, v] : *node.labels) {
    if (k != key) continue;
    int64_t out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || p != v.data() + v.size() || v.empty()) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

// A node's GPUs in MIG mode, which its snapshot does not list (the mixed strategy advertises
// their MIG devices instead): those its agent reports with MIG devices, in NVML's order; where
// no agent lists any, as many as GPU feature discovery counts beyond the whole GPUs the node
// advertises, and at least the fewest GPUs the node's MIG devices fit on, named
// "<node>/mig-gpu<k>", their devices not known.
std::vector<fleet::GpuInput> MigGpusOf(const core::Snapshot& s, const core::Node& node,
                                       const std::vector<const AgentGpuSample*>& reported) {
  std::vector<fleet::GpuInput> gpus;
  int64_t milli = 0;
  for (size_t l = 0; l < s.mig_profiles.size() && l < node.mig_devices.size(); ++l)
    milli += int64_t{node.mig_devices[l]} * s.mig_profiles[l].milli;
  if (milli == 0 && reported.empty()) return gpus;
  SharedString model;
  for (const auto& [k, v] : *node.labels)
    if (k == keys::kGpuProduct) model = SharedString(v);
  const int64_t memory_mib = IntLabel(node, keys::kGpuMemory).value_or(0);
  auto add = [&](std::string uuid) -> fleet::GpuInput& {
    fleet::GpuInput& g = gpus.emplace_back();
    g.uuid = std::move(uuid);
    g.model = model;
    g.mig = true;
    g.memory_total_bytes = memory_mib * 1048576;
    return g;
  };
  for (const AgentGpuSample* a : reported) {
    fleet::GpuInput& g =
        add(a->uuid.empty() ? node.name + "/gpu" + std::to_string(a->index) : a->uuid);
    g.utilization = a->sample.utilization;
    g.memory_used_bytes = a->sample.memory_used_bytes;
    g.mig_devices = a->sample.mig_devices;
  }
  if (!gpus.empty()) return gpus;
  int64_t count = (milli + fleet::kMilliPerGpu - 1) / fleet::kMilliPerGpu;
  if (auto c = IntLabel(node, keys::kGpuCount))
    count = std::max<int64_t>(*c - static_cast<int64_t>(node.gpus.size()), count);
  count = std::min<int64_t>(count, core::kMaxGpusPerNode);
  for (int64_t k = 0; k < count; ++k) add(node.name + "/mig-gpu" + std::to_string(k));
  return gpus;
}

}  // namespace

daemon::Observation KubeBackend::Observe() {
  daemon::Observation o;
  o.snapshot = &built_.snapshot;
  PoolAssignment pools = AssignPools(options_.pricing, built_.snapshot.nodes, pools_);
  pools_ = pools.pools;
  o.pools = std::move(pools.pools);
  o.node_pool = std::move(pools.node_pool);
  samples_.resize(built_.snapshot.nodes.size());
  o.mig_gpus.resize(built_.snapshot.nodes.size());
  const AgentGpuUsage usage = gpu_usage_ ? gpu_usage_() : AgentGpuUsage();
  for (size_t n = 0; n < built_.snapshot.nodes.size(); ++n) {
    const core::Node& node = built_.snapshot.nodes[n];
    samples_[n].assign(node.gpus.size(), daemon::GpuSample{});
    std::vector<const AgentGpuSample*> mig;
    if (auto u = usage.find(node.name); u != usage.end() && u->second) {
      // A GPU by its UUID where the node names its GPUs' UUIDs, else by its place among the
      // node's GPUs not in MIG mode: the device plugin advertises those as nvidia.com/gpu, in
      // NVML's order, and the agent reports every GPU in MIG mode (a GPU it skips, lost or idle
      // without processes, is not one).
      for (const AgentGpuSample& a : *u->second) {
        size_t g = node.gpus.size();
        for (size_t i = 0; i < node.gpus.size() && !a.uuid.empty(); ++i)
          if (node.gpus[i].uuid == a.uuid) g = i;
        const bool in_mig_mode = !a.sample.mig_devices.empty();
        if (g == node.gpus.size() && !in_mig_mode && a.index >= 0) {
          int mig_before = 0;
          for (const AgentGpuSample& b : *u->second)
            mig_before += !b.sample.mig_devices.empty() && b.index < a.index ? 1 : 0;
          const auto k = static_cast<size_t>(a.index - mig_before);
          if (k < g && node.gpus[k].uuid.str().find('/') != std::string::npos)
            g = k;  // no UUIDs on the node: "<node>/gpu<k>"
        }
        if (g < node.gpus.size())
          samples_[n][g] = a.sample;
        else if (in_mig_mode)
          mig.push_back(&a);
      }
    }
    o.mig_gpus[n] = MigGpusOf(built_.snapshot, node, mig);
  }
  o.samples = samples_;
  o.share_memory = MeasureShares(usage);
  // Why the unhealthy GPUs are fenced: the health controller's incidents, by the GPUs' names.
  if (gpu_faults_) {
    GpuFaultsByNode faults = gpu_faults_();
    for (const core::Node& node : built_.snapshot.nodes) {
      auto f = faults.find(node.name);
      if (f == faults.end()) continue;
      for (auto& [index, fault] : f->second)
        if (index >= 0 && static_cast<size_t>(index) < node.gpus.size())
          o.gpu_faults[node.gpus[index].uuid] = std::move(fault);
    }
  }
  ListWorkloadPods(built_, o);
  o.metrics = BackendMetrics(stats(), built_.reservations);
  o.stored_losses.resize(built_.sources.size());
  for (size_t i = 0; i < built_.sources.size(); ++i)
    o.stored_losses[i] = {built_.sources[i].stored_preemptions,
                          built_.sources[i].stored_gpu_hours_lost};
  return o;
}

std::unordered_map<std::string, daemon::Observation::ShareMemory> KubeBackend::MeasureShares(
    const AgentGpuUsage& usage) {
  const int64_t now = NowMs();
  std::unordered_map<std::string, daemon::Observation::ShareMemory> out;
  std::unordered_map<std::string, ShareOverrun> over;
  // Most cycles of a cluster whose agents attribute no processes end here.
  const bool any = std::any_of(usage.begin(), usage.end(), [](const auto& node) {
    return node.second &&
           std::any_of(node.second->begin(), node.second->end(),
                       [](const AgentGpuSample& a) { return !a.pod_memory.empty(); });
  });
  if (!any) {
    overruns_.clear();
    return out;
  }
  const core::Snapshot& snap = built_.snapshot;
  for (size_t i = 0; i < snap.workloads.size() && i < built_.sources.size(); ++i) {
    const core::Workload& w = snap.workloads[i];
    if (w.state != core::WorkloadState::kRunning || !w.AsksForShares()) continue;
    for (const std::shared_ptr<const kube::Pod>& pod : PodsOf(built_.sources[i])) {
      if (pod->node_name.empty() || pod->metadata.uid.empty()) continue;
      auto u = usage.find(pod->node_name);
      if (u == usage.end() || !u->second) continue;
      // A share's processes see one GPU; its memory is what they hold on any of the node's.
      bool measured = false;
      int64_t used = 0;
      for (const AgentGpuSample& a : *u->second)
        for (const auto& [uid, bytes] : a.pod_memory)
          if (uid == pod->metadata.uid) {
            measured = true;
            used += bytes;
          }
      if (!measured) continue;
      daemon::Observation::ShareMemory& m = out[pod->metadata.Key()];
      m.used_bytes = used;
      const Result<gpu_share::Ask> ask =
          gpu_share::ReadAsk(pod->metadata.annotations, pod->Request(options_.gpu_resource));
      if (!ask.ok() || ask->gpu_memory_mib <= 0) continue;
      const int64_t asked = ask->gpu_memory_mib * kMiB;
      if (used <= asked) continue;
      auto before = overruns_.find(pod->metadata.uid);
      ShareOverrun o{pod->metadata.namespace_name, pod->metadata.name, now, used, asked, false};
      if (before != overruns_.end()) {
        o.since_ms = before->second.since_ms;
        o.deleted = before->second.deleted;
      } else {
        spdlog::warn(
            "share {}: its processes hold {} MiB of GPU memory on node {}, more than "
            "the {} MiB it asked for (chamber.io/gpu-memory)",
            pod->metadata.Key(), used / kMiB, pod->node_name, asked / kMiB);
      }
      m.over_since_ms = o.since_ms;
      over.emplace(pod->metadata.uid, std::move(o));
    }
  }
  // An overrun ends with the first measurement at or under the share, or without one.
  overruns_ = std::move(over);
  return out;
}

void KubeBackend::EvictShareOverruns() {
  if (options_.share_memory_grace.count() <= 0) return;
  const int64_t now = NowMs();
  for (auto& [uid, o] : overruns_) {
    if (!WritesAllowed()) return;
    if (o.deleted || now - o.since_ms < options_.share_memory_grace.count()) continue;
    const std::string key = o.namespace_name + "/" + o.name;
    const std::string why = fmt::format(
        "its processes held {} MiB of GPU memory, more than the {} MiB its share asked "
        "for (chamber.io/gpu-memory), for {} s; the other pods on its GPU keep running",
        o.used_bytes / kMiB, o.asked_bytes / kMiB, (now - o.since_ms) / 1000);
    kube::DeleteOptions del;
    del.uid = uid;
    Status s = client_->Delete(kube::resources::kPods, o.namespace_name, o.name, del);
    if (!s.ok() && !kube::IsNotFound(s)) {
      if (!kube::IsConflict(s)) CountError(s, "delete pod " + key);
      continue;
    }
    o.deleted = true;
    {
      std::lock_guard<std::mutex> l(stats_mu_);
      stats_.share_memory_evictions++;
    }
    spdlog::warn("share {} deleted: {}", key, why);
    Event({{"apiVersion", "v1"},
           {"kind", "Pod"},
           {"metadata", {{"name", o.name}, {"namespace", o.namespace_name}, {"uid", uid}}}},
          "ShareMemoryExceeded", "Deleted: " + why, /*warning=*/true);
  }
}

Status KubeBackend::SetSchedulable(std::string_view node, bool schedulable) {
  Json patch = {{"spec", {{"unschedulable", !schedulable}}}};
  Result<Json> r = client_->MergePatch(kube::resources::kNodes, "", std::string(node), patch);
  if (!r.ok()) return r.status();
  return Status::Ok();
}

std::shared_ptr<const kube::Node> KubeBackend::NodeNamed(const std::string& name) const {
  return nodes_->Get(name);
}

std::vector<std::shared_ptr<const kube::Node>> KubeBackend::AllNodes() const {
  return nodes_->List();
}

}  // namespace chamber::backend
