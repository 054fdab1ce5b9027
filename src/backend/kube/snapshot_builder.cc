#include "backend/kube/snapshot_builder.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/gpu_share_ask.h"
#include "common/time.h"
#include "core/gpu_model_queues.h"
#include "core/mig_profile.h"
#include "kube/client.h"

namespace chamber::backend {
namespace {

using core::NodeId;
using core::Resources;

const std::string* Find(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

std::vector<std::string> SplitCommaList(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

Result<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return Status::InvalidArgument("\"" + std::string(text) + "\" is not an integer");
  return v;
}

bool Terminal(const kube::Pod& p) { return p.phase == "Succeeded" || p.phase == "Failed"; }

core::TaintEffect Effect(const std::string& e) {
  if (e == "NoExecute") return core::TaintEffect::kNoExecute;
  if (e == "PreferNoSchedule") return core::TaintEffect::kPreferNoSchedule;
  return core::TaintEffect::kNoSchedule;
}

inline constexpr std::string_view kChamberPrefix = "chamber.io/";

// Orders "namespace/name" keys as (namespace, name): a namespace holds no '/'.
bool KeyLess(std::string_view a, std::string_view b) {
  const size_t i = a.find('/'), j = b.find('/');
  if (const int c = a.substr(0, i).compare(b.substr(0, j)); c != 0) return c < 0;
  return a.substr(i + 1) < b.substr(j + 1);
}

// A pod's `chamber.io/` annotations, then labels, in that order: the keys the builder reads.
using ChamberKeys = std::vector<std::pair<std::string_view, const std::string*>>;

ChamberKeys ChamberKeysOf(const kube::ObjectMeta& m) {
  ChamberKeys out;
  for (const auto* map : {&m.annotations, &m.labels})
    for (auto it = map->lower_bound(std::string(kChamberPrefix));
         it != map->end() && it->first.starts_with(kChamberPrefix); ++it)
      out.emplace_back(it->first, &it->second);
  return out;
}

// Reads the annotations and labels of a pod or Job (annotation first, then label). Every key
// read through it starts with `chamber.io/`.
struct Meta {
  const kube::ObjectMeta* first;
  const kube::ObjectMeta* second = nullptr;  // e.g. a Job's template metadata
  const ChamberKeys* first_keys = nullptr;   // `first`'s, when known
  const std::string* Get(std::string_view key) const {
    if (first_keys != nullptr) {
      for (const auto& [k, v] : *first_keys)
        if (k == key) return v;
    } else if (const std::string* v = FindIn(first, key)) {
      return v;
    }
    return FindIn(second, key);
  }

 private:
  static const std::string* FindIn(const kube::ObjectMeta* m, std::string_view key) {
    if (m == nullptr) return nullptr;
    const std::string k(key);
    if (const std::string* v = Find(m->annotations, k)) return v;
    return Find(m->labels, k);
  }
};

// The NVIDIA device plugin's MIG resources under its mixed strategy: nvidia.com/mig-<profile>.
constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

}  // namespace

// MIG profiles by name, in the order the build cache first met them: a pod shape's
// MigAsk::profile, a node entry's devices and a bound pod's ask index this table, not the
// snapshot's profiles, which each build orders afresh (FinishMig). Pods are derived on several
// threads.
struct MigNames {
  std::mutex mu;
  std::vector<std::string> names;
  // The profile's index, or -1 past the 127 an int8_t holds.
  int Intern(std::string_view name) {
    std::lock_guard lock(mu);
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return static_cast<int>(i);
    if (names.size() >= 127) return -1;
    names.emplace_back(name);
    return static_cast<int>(names.size() - 1);
  }
  std::string Name(int i) {
    std::lock_guard lock(mu);
    return names[static_cast<size_t>(i)];
  }
};

namespace {

// `read_share`: the pod is Chamber's (or a template of Chamber's pods), so its share
// annotations are read; another scheduler's pod holds only the GPUs its resources ask for.
core::PodSet PodShape(const kube::Pod& p, const Meta& meta, const std::string& gpu_resource,
                      MigNames& mig_names, bool read_share = true) {
  core::PodSet s;
  s.name = p.metadata.name;
  const int64_t whole_gpus = p.Request(gpu_resource);
  s.request = Resources::Of(whole_gpus, p.Request("cpu"), p.Request("memory"));
  // A share of one GPU, asked for by annotation (docs/sharing.md, "Asking for a share").
  if (read_share) {
    Result<gpu_share::Ask> ask = gpu_share::ReadAsk(p.metadata.annotations, whole_gpus);
    if (!ask.ok()) {
      s.invalid_reason = ask.status().message();
    } else if (ask->asked()) {
      // A share of memory alone holds a part of its GPU that ChargeMemoryShares sets once the
      // nodes are known; until then it is one thousandth, so that it is a share.
      s.request[core::Resource::kGpu] = ask->memory_alone() ? 1 : ask->gpu_milli;
      s.gpu_memory_mib = ask->gpu_memory_mib;
      s.gpu_memory_only = ask->memory_alone();
    }
  }

  // MIG devices of the NVIDIA device plugin's mixed strategy (nvidia.com/mig-1g.10gb: 2), of one
  // profile; counted per node, the kubelet choosing the devices (docs/sharing.md, "MIG devices").
  // Another scheduler's pod holds what it asks for.
  std::string mig_error;
  for (const auto& [name, quantity] : p.Requests().values) {
    if (!name.starts_with(kMigResourcePrefix) || quantity <= 0) continue;
    const std::string asked = name + ": " + std::to_string(quantity);
    const std::string_view profile = std::string_view(name).substr(kMigResourcePrefix.size());
    const int32_t milli = core::MigProfileMilli(profile);
    if (s.mig.devices > 0) {
      mig_error = "requests " + std::string(kMigResourcePrefix) + mig_names.Name(s.mig.profile) +
                  " and " + asked + "; a pod asks for MIG devices of one profile";
    } else if (milli == 0) {
      mig_error = "requests " + asked + ", which names no MIG profile (<slices>g.<memory>gb)";
    } else if (quantity > core::kMaxMigDevices) {
      mig_error = "requests " + asked + "; at most " + std::to_string(core::kMaxMigDevices) +
                  " MIG devices per pod";
    } else if (const int index = mig_names.Intern(profile); index < 0) {
      mig_error = "requests " + asked + "; the cluster names more MIG profiles than Chamber counts";
    } else {
      s.mig = {static_cast<int8_t>(index), static_cast<uint8_t>(quantity),
               static_cast<int16_t>(milli)};
      continue;
    }
    break;
  }
  if (read_share && s.invalid_reason.empty()) {
    if (!mig_error.empty()) {
      s.invalid_reason = mig_error;
    } else if (s.mig.devices > 0 && s.request.gpu_milli() > 0) {
      s.invalid_reason =
          "requests " + std::string(kMigResourcePrefix) + mig_names.Name(s.mig.profile) + ": " +
          std::to_string(s.mig.devices) +
          (s.request.gpu_share() ? " and a share of a GPU"
                                 : " and " + gpu_resource + ": " + std::to_string(whole_gpus)) +
          "; a pod asks for MIG devices, whole GPUs or a share of one";
    }
  }

  for (const auto& [k, v] : p.node_selector) s.node_selector.emplace_back(k, v);
  std::vector<core::Toleration> tolerations;
  for (const kube::Toleration& t : p.tolerations) {
    core::Toleration ct;
    ct.key = t.key;
    ct.op =
        t.op == "Exists" ? core::Toleration::Operator::kExists : core::Toleration::Operator::kEqual;
    ct.value = t.value;
    if (!t.effect.empty()) ct.effect = Effect(t.effect);
    tolerations.push_back(std::move(ct));
  }
  s.tolerations = Interned(std::move(tolerations));
  if (const std::string* models = meta.Get(keys::kGpuModels))
    s.gpu_models = SplitCommaList(*models);
  return s;
}

// A string field of an object, "" when absent or not a string (an informer's objects always
// have a string apiVersion and kind, but a build must not throw on one that does not).
std::string StringField(const kube::Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A pod template read as the pods made from it will read: the API server defaults a container's
// missing requests to its limits on a Pod, not on a template (a Job's, a JobSet's, a runtime's),
// so a template asking for `limits: {nvidia.com/gpu: 8}` alone asks for 8 GPUs, as its pods will.
Result<kube::Pod> TemplatePod(kube::Json t) {
  if (auto spec = t.find("spec"); spec != t.end() && spec->is_object())
    if (auto cs = spec->find("containers"); cs != spec->end() && cs->is_array())
      for (kube::Json& c : *cs) {
        if (!c.is_object()) continue;
        auto res = c.find("resources");
        if (res == c.end() || !res->is_object()) continue;
        auto limits = res->find("limits");
        if (limits == res->end() || !limits->is_object()) continue;
        const kube::Json given = *limits;
        kube::Json& requests = (*res)["requests"];
        if (requests.is_null()) requests = kube::Json::object();
        if (!requests.is_object()) continue;  // the parse below names the field
        for (const auto& [name, v] : given.items())
          if (!requests.contains(name)) requests[name] = v;
      }
  return kube::Pod::FromJson(std::move(t));
}

}  // namespace

// What a pod says on its own, whatever else the cluster holds. Pointers and views point into
// the pod, and are read only while a build holds it.
struct PodFacts {
  std::string key;  // "namespace/name"
  bool terminal = false;
  // It sets `chamber.io/checkpoint-grace-seconds` or `chamber.io/last-checkpoint`.
  bool checkpoint_keys = false;
  int64_t created_ms = 0, started_ms = 0;  // 0: none
  int64_t scheduled_ms = 0;  // PodScheduled=True since (the API server sets it on bind); 0: none
  const std::string* job_uid = nullptr;  // the controlling Job's, if any: in the pod
  // The controlling object's when it is of a kind in WorkloadKinds() that owns its pods
  // directly: in the pod.
  const std::string* owner_uid = nullptr;
  const std::string* pod_group = nullptr;  // the label, in the pod
  // `chamber.io/reserved-replicas` (annotation, then label), in the pod: how many of its
  // controller's pods run reserved.
  const std::string* reserved_replicas = nullptr;
  const std::string* controller_uid = nullptr;  // any controller's, in the pod
  // A LeaderWorkerSet's pod: its name and group index (labels), in the pod.
  const std::string* lws_name = nullptr;
  const std::string* lws_group = nullptr;
  // `chamber.io/queue` (annotation, then label), when the pod sets it: in the pod.
  const std::string* queue = nullptr;
  std::vector<int> gpu_indices;   // the annotation, when it parses
  std::string gpu_indices_error;  // why it does not
  std::string share_problem;      // a bound pod's share annotations that no longer read
  core::PodSet shape;             // gpu_models from the pod's own metadata only
  ChamberKeys chamber_keys;
};

struct BuildCache::State {
  // An entry holds its object weakly: the object itself is freed by whoever drops it last (the
  // informer), while the entry keeps its control block, so that no other object can take its
  // place under the same control block.
  template <typename T>
  struct Entry {
    const T* object = nullptr;  // valid while the build's ClusterObjects hold it
    std::weak_ptr<const T> owner;
    uint64_t seen = 0;     // the last build that saw the object
    uint64_t derived = 0;  // the build that derived the entry
  };
  struct NodeEntry : Entry<kube::Node> {
    core::Node node;
    std::vector<std::string> problems;
    // The MIG devices it advertises: (profile in mig_names, devices).
    std::vector<std::pair<int8_t, int32_t>> mig;
  };
  struct PodEntry : Entry<kube::Pod> {
    PodFacts facts;
    // Set by each build for a bound pod: its index among the build's bound pods.
    mutable size_t bound_index = 0;
    // Set by a build that made a workload of this pod alone (a bare pod), which reads nothing
    // else of the cluster's but what `Externals` covers: that build, the workload's index in its
    // snapshot, and whether it was running.
    mutable uint64_t single_generation = 0;
    mutable size_t single_index = 0;
    mutable bool single_running = false;
    // Set by a build for an entry new to it: the last build's entry of a pod of the same name
    // (gone now, and read only during this build), whose workload the pod may take over.
    mutable const PodEntry* previous = nullptr;
  };
  struct JobEntry : Entry<kube::Job> {
    std::optional<kube::Pod> pod_template;
    std::string template_error;
    // Its spec.scheduling.schedulingPolicy (ReadJobSchedulingPolicy), or why it does not read.
    std::optional<UpstreamPodGroup> scheduling;
    std::string scheduling_error;
  };
  // A top-level object of a kind in WorkloadKinds().
  struct OwnerEntry : Entry<kube::Object> {
    const WorkloadKind* kind = nullptr;
    std::optional<KindSpec> spec;
    std::vector<kube::Pod> pod_templates;  // parallel to spec->pod_sets
    std::string error;                     // why spec is empty
  };
  std::string gpu_resource;  // what the entries were derived with
  MigNames mig_names;
  uint64_t generation = 0;  // of the last build
  size_t reused = 0;        // workloads the last build moved over
  // What a bare pod's workload reads beyond the pod, as the last build saw it: the values, not
  // the objects, so that a namespace that changed in other ways (its status, another label, one
  // being deleted) or a PriorityClass of the same value leaves the workloads as they were.
  struct Externals {
    std::map<std::string, std::string> namespace_queue;  // a namespace's default queue
    std::map<std::string, int32_t> priority_classes;     // value by name
    int32_t default_priority = 0;
    std::string scheduler;
    friend bool operator==(const Externals&, const Externals&) = default;
  };
  std::optional<Externals> externals;  // empty before the first build
  size_t derived = 0;
  // Deriving ahead of the next build (Prepare): entries count as derived by that build, and
  // are not marked seen, so that one gone before it is dropped then.
  bool preparing = false;

  // The entry of `object`, and whether it must be derived (it is new, or was reset).
  template <typename E, typename T>
  std::pair<E*, bool> Lookup(std::unordered_map<const T*, E>& map,
                             const std::shared_ptr<const T>& object) {
    auto [it, inserted] = map.try_emplace(object.get());
    E& e = it->second;
    // An entry is used again only for the object it was derived from, and only if the last
    // build saw it, or it was derived for the coming build (an entry left by an older build
    // and not swept yet is not in the last build's order).
    const uint64_t next = preparing ? generation + 1 : generation;
    const bool same = !inserted && !e.owner.owner_before(object) && !object.owner_before(e.owner) &&
                      (e.seen + 1 == next || e.seen == next || e.derived == next);
    if (!same) {
      // An entry the last build saw stays marked so while preparing: the build's order may
      // still point to it, so it is not dropped before the next build.
      const uint64_t seen = e.seen;
      e = E{};
      e.object = object.get();
      e.owner = object;
      e.derived = preparing ? generation + 1 : generation;
      if (preparing) e.seen = seen;
      ++derived;
    }
    if (!preparing) e.seen = generation;
    return {&e, !same};
  }
  std::unordered_map<const kube::Node*, NodeEntry> nodes;
  std::unordered_map<const kube::Pod*, PodEntry> pods;
  std::unordered_map<const kube::Job*, JobEntry> jobs;
  std::unordered_map<const kube::Object*, OwnerEntry> owners;
  // The last build's nodes by name and pods by (namespace, name): the next build sorts only
  // the objects new to it and merges them in.
  std::vector<const NodeEntry*> node_order;
  std::vector<const PodEntry*> pod_order;

  // `order` less the entries gone or derived again, merged with `fresh` (sorted by `less`).
  template <typename E, typename Less>
  void Reorder(std::vector<const E*>* order, const std::vector<const E*>& fresh, Less less) const {
    std::erase_if(*order,
                  [this](const E* e) { return e->seen != generation || e->derived == generation; });
    const auto kept = static_cast<std::ptrdiff_t>(order->size());
    order->insert(order->end(), fresh.begin(), fresh.end());
    std::inplace_merge(order->begin(), order->begin() + kept, order->end(), less);
  }

  // Drops the entries derived ahead (Prepare) since the last build whose objects are gone
  // already (a pod bound, then started, before a build saw it bound), so that the next build
  // does not free them; but not those the last build's order points to.
  void DropUnseenGone() {
    auto drop = [this](auto& map) {
      std::erase_if(map, [this](const auto& kv) {
        return kv.second.derived == generation + 1 && kv.second.seen != generation &&
               kv.second.owner.expired();
      });
    };
    drop(nodes);
    drop(pods);
    drop(jobs);
    drop(owners);
  }

  // Drops the entries of objects the last build did not see (but those derived since for the
  // next one). A build leaves this to Prepare, which chamberd calls between cycles, or else to
  // the next build.
  bool sweep_pending = false;
  void Sweep() {
    if (!sweep_pending) return;
    sweep_pending = false;
    auto sweep = [this](auto& map) {
      std::erase_if(map, [this](const auto& kv) {
        return kv.second.seen != generation && kv.second.derived != generation + 1;
      });
    };
    sweep(nodes);
    sweep(pods);
    sweep(jobs);
    sweep(owners);
  }
};

BuildCache::BuildCache() : state_(std::make_unique<State>()) {}
BuildCache::~BuildCache() = default;
size_t BuildCache::size() const {
  return state_->nodes.size() + state_->pods.size() + state_->jobs.size() + state_->owners.size();
}
size_t BuildCache::last_derived() const { return state_->derived; }
size_t BuildCache::last_reused() const { return state_->reused; }

class Builder {
 public:
  Builder(const ClusterObjects& objects, const BuildOptions& options, BuildCache::State* cache)
      : objects_(objects), options_(options), cache_(*cache) {}

  BuiltSnapshot Build() {
    Reset();
    cache_.Sweep();
    ++cache_.generation;
    cache_.derived = 0;
    cache_.reused = 0;
    out_.generation = cache_.generation;
    out_.snapshot.now = options_.now;
    out_.snapshot.queues = objects_.queues;
    IndexObjects();
    // The workloads of the snapshot lent to this build are where its pods' entries say.
    take_over_ =
        options_.recycle != nullptr && options_.recycle->generation + 1 == cache_.generation;
    reuse_singles_ = ExternalsUnchanged() && take_over_;
    BuildNodes();
    CollectWorkloads();
    AccountBoundPods();
    ChargeMemoryShares();
    ChargeDividedUnits();
    FinishMig();
    // Queues per GPU model (docs/queues.md): the workloads of a queue with GPU models move to
    // them, their pods narrowed to the model, afresh each build (AddSingle keeps none over).
    core::SplitGpuModelQueues(out_.snapshot);
    cache_.sweep_pending = true;
    return std::move(out_);
  }

  size_t Prepare() {
    Reset();
    cache_.Sweep();
    const size_t by_last_build = cache_.derived;
    cache_.derived = 0;
    cache_.preparing = true;
    for (const auto& n : objects_.nodes)
      if (auto [e, derive] = cache_.Lookup(cache_.nodes, n); derive)
        e->node = NodeOf(*n, &e->problems, &e->mig);
    DerivePods();
    for (const auto& j : objects_.jobs) JobOf(j);
    for (const auto& o : objects_.owners) OwnerOf(o);
    cache_.preparing = false;
    if (cache_.derived > 0) cache_.DropUnseenGone();
    const size_t derived = cache_.derived;
    cache_.derived = by_last_build;
    return derived;
  }

 private:
  // An upstream PodGroup that reads, or a pod group of a 1.35 Workload that reads.
  struct UpstreamGroup {
    std::shared_ptr<const kube::Object> object;  // the PodGroup, or the Workload
    UpstreamPodGroup group;
    bool in_workload = false;  // a Workload's pod group
    // The object whose status conditions say how the gang fares: a PodGroup's own; a 1.35
    // Workload has no status.
    std::shared_ptr<const kube::Object> StatusObject() const {
      return in_workload ? nullptr : object;
    }
  };

  // The upstream group a pod names: its key in pod_groups_ ("namespace/name" of a PodGroup,
  // "namespace/<workload>:<group>" of a Workload's), the name of the gang the pod is in (the
  // same, or with ":<replicaKey>" for a Workload group's replica), and the field that names it.
  struct UpstreamRef {
    std::string group, gang;
    const char* field = "";
  };
  // `ns`: the pod's namespace (a template's is its object's).
  static std::optional<UpstreamRef> UpstreamRefOf(const kube::Pod& p, const std::string& ns) {
    if (!p.pod_group_name.empty()) {
      std::string key = ns + "/" + p.pod_group_name;
      return UpstreamRef{key, key, "spec.schedulingGroup.podGroupName"};
    }
    if (p.workload_ref.workload.empty()) return std::nullopt;
    return UpstreamRef{ns + "/" + WorkloadGroupName(p.workload_ref, false),
                       ns + "/" + WorkloadGroupName(p.workload_ref, true), "spec.workloadRef"};
  }

  // Why a pod that names an upstream group no group here answers waits.
  std::string MissingGroup(const kube::Pod& p, const UpstreamRef& ref) const {
    const std::string& ns = p.metadata.namespace_name;
    if (p.workload_ref.workload.empty())
      return std::string(ref.field) + ": PodGroup " + ref.group +
             " does not exist, or does not read; the pod waits for it";
    const std::string workload = ns + "/" + p.workload_ref.workload;
    if (!workloads_.contains(workload))
      return std::string(ref.field) + ": Workload " + workload +
             " does not exist, or does not read; the pod waits for it";
    return std::string(ref.field) + ".podGroup: Workload " + workload + " has no pod group \"" +
           p.workload_ref.pod_group + "\"; the pod waits until it has";
  }

  using PodEntry = BuildCache::State::PodEntry;

  // Entries derived for another GPU resource name are of no use.
  void Reset() {
    if (cache_.gpu_resource == options_.gpu_resource) return;
    cache_.nodes.clear();
    cache_.pods.clear();
    cache_.jobs.clear();
    cache_.owners.clear();
    cache_.node_order.clear();
    cache_.pod_order.clear();
    cache_.gpu_resource = options_.gpu_resource;
  }

  struct BoundPod {
    const kube::Pod* pod;
    int32_t node = -1;
    core::Resources request;  // GPUs, CPU and memory it holds
    // Valid indices from the annotation (or the assumption): the pod's entry's or the assumed
    // bind's, both held for the whole build.
    const std::vector<int>* annotated = nullptr;
    uint64_t mask = 0;      // assigned in AccountBoundPods
    int workload = -1;      // snapshot workload holding it, or -1: external
    size_t placement = 0;   // its index in that workload's placements
    core::MigAsk mig = {};  // its MIG devices (profile in the cache's mig_names)
  };

  void Problem(std::string text) { out_.problems.push_back(std::move(text)); }

  // Whether what bare pods' workloads read beyond the pods is as the last build saw it; records
  // it for the next build.
  bool ExternalsUnchanged() {
    auto& last = cache_.externals;
    if (last && last->namespace_queue == namespace_queue_ &&
        last->priority_classes == priority_classes_ &&
        last->default_priority == default_priority_ && last->scheduler == options_.scheduler_name)
      return true;
    last = BuildCache::State::Externals{namespace_queue_, priority_classes_, default_priority_,
                                        options_.scheduler_name};
    return false;
  }

  void IndexObjects() {
    for (const auto& pc : objects_.priority_classes) {
      priority_classes_[pc->metadata.name] = pc->value;
      if (pc->global_default) default_priority_ = pc->value;
    }
    for (const auto& ns : objects_.namespaces)
      if (const std::string* q = Find(ns->metadata.labels, keys::kQueue))
        namespace_queue_[ns->metadata.name] = *q;
    for (const auto& job : objects_.jobs) jobs_by_uid_[job->metadata.uid] = job.get();
    for (const auto& o : objects_.owners) owners_by_uid_[o->metadata.uid] = o.get();
    for (const auto& g : objects_.pod_groups) {
      if (StringField(g->raw, "kind") == WorkloadV1alpha1Type().kind) {
        Result<std::vector<WorkloadPodGroup>> read = ReadWorkload(g->raw);
        if (!read.ok()) {
          Problem(read.status().message() + "; its pods wait");
          continue;
        }
        const std::string key = g->metadata.Key();
        workloads_.insert(key);
        for (WorkloadPodGroup& w : *read)
          pod_groups_.emplace(key + ":" + w.name, UpstreamGroup{g, std::move(w.group), true});
        continue;
      }
      Result<UpstreamPodGroup> read = ReadPodGroup(g->raw);
      if (read.ok())
        pod_groups_.emplace(g->metadata.Key(), UpstreamGroup{g, std::move(*read)});
      else
        Problem(read.status().message() + "; its pods wait");
    }
    for (const auto& o : objects_.owners) {
      top_of_[o.get()] = TopOf(o.get());
      if (StringField(o->raw, "kind") == "LeaderWorkerSet")
        lws_by_name_[o->metadata.Key()] = o.get();
      if (const kube::OwnerReference* up = KnownController(o->metadata))
        if (auto it = owners_by_uid_.find(up->uid); it != owners_by_uid_.end())
          parts_[it->second].push_back(&o);
    }
  }

  // The part whose gang is that of `object` (KindSpec::gang_from_part: a TrainJob's JobSet):
  // the object of a known kind it controls, the one of its own name first; null for none.
  const std::shared_ptr<const kube::Object>* GangPart(const kube::Object* object) const {
    auto it = parts_.find(object);
    if (it == parts_.end()) return nullptr;
    for (const auto* part : it->second)
      if ((*part)->metadata.name == object->metadata.name) return part;
    return it->second.front();
  }

  // The controller reference of `m` to an object of a kind in WorkloadKinds(), if any.
  static const kube::OwnerReference* KnownController(const kube::ObjectMeta& m) {
    for (const kube::OwnerReference& o : m.owner_references)
      if (o.controller && FindWorkloadKind(o.api_version, o.kind) != nullptr) return &o;
    return nullptr;
  }

  // The workload an object of a known kind belongs to: itself, or the topmost object of a known
  // kind up its controller chain (a RayJob's RayCluster belongs to the RayJob); null when a
  // controller of a known kind is not in this view.
  const kube::Object* TopOf(const kube::Object* o) const {
    for (int depth = 0; depth < 8; ++depth) {
      const kube::OwnerReference* up = KnownController(o->metadata);
      if (up == nullptr) return o;
      auto it = owners_by_uid_.find(up->uid);
      if (it == owners_by_uid_.end()) return nullptr;
      o = it->second;
    }
    return nullptr;  // a cycle of controllers
  }

  // The workload (a top-level object) of the object with `uid`, controller of a pod or Job;
  // null when it or one above it is not in this view.
  const kube::Object* WorkloadOf(const std::string& uid) const {
    auto it = owners_by_uid_.find(uid);
    return it == owners_by_uid_.end() ? nullptr : top_of_.at(it->second);
  }

  const BuildCache::State::OwnerEntry& OwnerOf(const std::shared_ptr<const kube::Object>& owner) {
    auto [entry, derive] = cache_.Lookup(cache_.owners, owner);
    BuildCache::State::OwnerEntry& e = *entry;
    if (!derive) return e;
    const kube::Json& raw = owner->raw;
    const std::string api_version = StringField(raw, "apiVersion"), kind = StringField(raw, "kind");
    e.kind = FindWorkloadKind(api_version, kind);
    if (e.kind == nullptr) {
      e.error = "kind " + api_version + " " + kind + " is not one Chamber schedules";
      return e;
    }
    Result<KindSpec> spec = e.kind->read(raw);
    if (!spec.ok()) {
      e.error = spec.status().message();
      return e;
    }
    for (size_t i = 0; i < spec->pod_sets.size(); ++i) {
      // A template may leave out its metadata (a custom resource's schema keeps it as written).
      kube::Json& t = spec->pod_sets[i].pod_template;
      if (t.is_object() && !t.contains("metadata")) t["metadata"] = kube::Json::object();
      Result<kube::Pod> tmpl = TemplatePod(std::move(t));  // kept parsed only
      if (!tmpl.ok()) {
        e.error = e.kind->LowerKind() + " " + owner->metadata.Key() + ": pod set " +
                  spec->pod_sets[i].name + ": template: " + tmpl.status().message();
        e.pod_templates.clear();
        return e;
      }
      e.pod_templates.push_back(std::move(*tmpl));
    }
    e.spec = std::move(*spec);
    return e;
  }

  // The top-level object (of a kind in WorkloadKinds()) a Job belongs to, when its controller
  // is of such a kind. `known` says whether it is, whether that object is in this view or not.
  const kube::Object* OwnerOfJob(const kube::Job& job, bool* known) const {
    const kube::OwnerReference* up = KnownController(job.metadata);
    *known = up != nullptr;
    return up == nullptr ? nullptr : WorkloadOf(up->uid);
  }

  const BuildCache::State::JobEntry& JobOf(const std::shared_ptr<const kube::Job>& job) {
    auto [entry, derive] = cache_.Lookup(cache_.jobs, job);
    BuildCache::State::JobEntry& e = *entry;
    if (!derive) return e;
    Result<kube::Pod> tmpl = TemplatePod(job->template_spec);
    if (tmpl.ok())
      e.pod_template = std::move(*tmpl);
    else
      e.template_error = tmpl.status().message();
    Result<std::optional<UpstreamPodGroup>> scheduling = ReadJobSchedulingPolicy(job->raw);
    if (scheduling.ok())
      e.scheduling = std::move(*scheduling);
    else
      e.scheduling_error = scheduling.status().message();
    return e;
  }

  const PodEntry& PodOf(const std::shared_ptr<const kube::Pod>& pod) {
    auto [entry, derive] = cache_.Lookup(cache_.pods, pod);
    if (derive) DerivePod(entry);
    return *entry;
  }

  // Looks every pod up, then derives the new ones, on several threads when there are many (the
  // cycle after a mass bind, or a restart): each derivation reads its pod and writes its entry
  // only. Returns every pod's entry, in the order of objects_.pods.
  std::vector<PodEntry*> DerivePods() {
    std::vector<PodEntry*> all, todo;
    all.reserve(objects_.pods.size());
    for (const auto& p : objects_.pods) {
      auto [e, derive] = cache_.Lookup(cache_.pods, p);
      all.push_back(e);
      if (derive) todo.push_back(e);
    }
    constexpr size_t kPerThread = 1024;
    const size_t limit = options_.derive_threads > 0
                             ? static_cast<size_t>(options_.derive_threads)
                             : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
    const size_t threads = std::min(todo.size() / kPerThread, limit);
    if (threads <= 1) {
      for (PodEntry* e : todo) DerivePod(e);
      return all;
    }
    auto run = [&](size_t part) {
      for (size_t i = part; i < todo.size(); i += threads) DerivePod(todo[i]);
    };
    std::vector<std::thread> workers;
    std::vector<size_t> unstarted;  // parts whose thread could not be created: done here
    for (size_t t = 1; t < threads; ++t) {
      try {
        workers.emplace_back(run, t);
      } catch (const std::system_error&) {
        unstarted.push_back(t);
      }
    }
    run(0);
    for (size_t t : unstarted) run(t);
    for (std::thread& w : workers) w.join();
    return all;
  }

  // What a pod says on its own (PodFacts). Reads only the pod and the options.
  void DerivePod(PodEntry* entry) const {
    PodEntry& e = *entry;
    const kube::Pod& p = *e.object;
    PodFacts& f = e.facts;
    f.key = p.metadata.Key();
    f.chamber_keys = ChamberKeysOf(p.metadata);
    f.terminal = Terminal(p);
    f.created_ms = p.metadata.creation_timestamp.unix_ms();
    f.started_ms = p.start_time.unix_ms();
    f.scheduled_ms = p.scheduled_time.unix_ms();
    for (const kube::OwnerReference& o : p.metadata.owner_references) {
      if (!o.controller) continue;
      f.controller_uid = &o.uid;
      if (o.kind == "Job")
        f.job_uid = &o.uid;
      else if (FindWorkloadKind(o.api_version, o.kind) != nullptr)
        f.owner_uid = &o.uid;
      break;
    }
    f.pod_group = Find(p.metadata.labels, keys::kPodGroup);
    f.lws_name = Find(p.metadata.labels, kLwsNameLabel);
    f.lws_group = Find(p.metadata.labels, kLwsGroupIndexLabel);
    if (const std::string* a = Find(p.metadata.annotations, keys::kGpuIndices)) {
      Result<std::vector<int>> idx = ParseIndexList(*a);
      if (idx.ok())
        f.gpu_indices = std::move(*idx);
      else
        f.gpu_indices_error = idx.status().message();
    }
    const Meta meta{&p.metadata, nullptr, &f.chamber_keys};
    f.queue = meta.Get(keys::kQueue);
    f.reserved_replicas = meta.Get(keys::kReservedReplicas);
    f.checkpoint_keys = meta.Get(keys::kCheckpointGrace) || meta.Get(keys::kLastCheckpoint);
    f.shape = PodShape(p, meta, options_.gpu_resource, cache_.mig_names,
                       /*read_share=*/p.scheduler_name == options_.scheduler_name);
    if (!p.node_name.empty()) {
      // Bound: it holds what it was bound with. Share annotations that no longer read are
      // reported, and the pod is taken to hold its GPUs whole (never less than it may use).
      if (!f.shape.invalid_reason.empty()) {
        const bool mig = f.shape.mig.devices > 0 && f.shape.request.gpu_milli() == 0;
        f.share_problem = "pod " + f.key + ": " + f.shape.invalid_reason + "; taken as holding " +
                          (mig                                ? "its MIG devices"
                           : f.shape.request.whole_gpus() > 0 ? "its GPUs whole"
                                                              : "one GPU whole");
        if (f.shape.request.whole_gpus() == 0 && !mig)
          f.shape.request[core::Resource::kGpu] = core::Gpus(1);
        f.shape.invalid_reason.clear();
      }
    } else if (f.shape.request.gpu_share() && f.shape.invalid_reason.empty()) {
      // A share is bound only once its containers take their GPU from the binding's
      // annotations: else a CUDA image's NVIDIA_VISIBLE_DEVICES=all would show every GPU.
      const std::string* env = Find(p.metadata.annotations, gpu_share::kEnvKey);
      if (env == nullptr || *env != gpu_share::kEnvGiven)
        f.shape.invalid_reason =
            std::string(
                "asks for a share of a GPU but its containers were not given the GPU's "
                "environment (annotation ") +
            gpu_share::kEnvKey + ": " + gpu_share::kEnvGiven +
            ", set by chamberd's admission webhook; docs/sharing.md): created while the "
            "webhook did not answer? Delete the pod so that it is created again";
    }
  }

  void BuildNodes() {
    using NodeEntry = BuildCache::State::NodeEntry;
    std::vector<const NodeEntry*> fresh;
    for (const auto& n : objects_.nodes) {
      auto [e, derive] = cache_.Lookup(cache_.nodes, n);
      if (derive) e->node = NodeOf(*n, &e->problems, &e->mig);
      if (e->derived == cache_.generation) fresh.push_back(e);
    }
    auto by_name = [](const NodeEntry* a, const NodeEntry* b) {
      return a->node.name < b->node.name;
    };
    std::sort(fresh.begin(), fresh.end(), by_name);
    // The snapshot lent, when the last build made it, holds at index i the node of that
    // build's entry i.
    std::vector<const NodeEntry*> lent_order;
    if (options_.recycle != nullptr && options_.recycle->generation + 1 == cache_.generation)
      lent_order = cache_.node_order;
    cache_.Reorder(&cache_.node_order, fresh, by_name);
    // Assigning over the nodes of an earlier snapshot reuses their strings' and vectors' memory.
    std::vector<core::Node>& nodes = out_.snapshot.nodes;
    if (options_.recycle != nullptr) nodes = std::move(options_.recycle->snapshot.nodes);
    const size_t lent = std::min(lent_order.size(), nodes.size());
    nodes.resize(cache_.node_order.size());
    node_index_.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeEntry* e = cache_.node_order[i];
      for (const std::string& p : e->problems) Problem(p);
      node_index_[e->node.name] = static_cast<int32_t>(i);
      if (i < lent && lent_order[i] == e && e->derived != cache_.generation) {
        // The same node as in the snapshot lent: only what AccountBoundPods changed differs.
        nodes[i].allocatable = e->node.allocatable;
        nodes[i].max_pods = e->node.max_pods;
        nodes[i].external_gpu_mask = e->node.external_gpu_mask;
        nodes[i].reserved_gpu_mask = e->node.reserved_gpu_mask;
        continue;
      }
      nodes[i] = e->node;
    }
  }

  // Whether the node's device plugin divides its GPUs itself, as GPU feature discovery labels
  // it: more than one replica of each GPU (time-slicing or MPS), a sharing strategy other than
  // "none", or MIG devices advertised as nvidia.com/gpu (the single strategy).
  static bool DevicePluginShares(const std::map<std::string, std::string>& labels,
                                 const std::string* product) {
    if (const std::string* r = Find(labels, keys::kGpuReplicas))
      if (auto v = ParseInt(*r); v.ok() && *v > 1) return true;
    if (const std::string* s = Find(labels, keys::kGpuSharingStrategy))
      if (!s->empty() && *s != "none") return true;
    if (const std::string* m = Find(labels, keys::kMigStrategy))
      if (*m == "single" && product != nullptr && product->find("-MIG-") != std::string::npos)
        return true;
    return false;
  }

  // The engine's node for a Kubernetes node, before the pods bound to it are accounted.
  core::Node NodeOf(const kube::Node& kn, std::vector<std::string>* problems,
                    std::vector<std::pair<int8_t, int32_t>>* mig) const {
    auto problem = [problems](std::string text) { problems->push_back(std::move(text)); };
    core::Node n;
    n.name = kn.metadata.name;
    n.labels = core::Labels(kn.metadata.labels.begin(), kn.metadata.labels.end());
    for (const kube::Taint& t : kn.taints) n.taints.push_back({t.key, t.value, Effect(t.effect)});
    n.unschedulable = kn.unschedulable || !kn.Ready();
    n.allocatable = Resources::Of(0, kn.allocatable.Get("cpu"), kn.allocatable.Get("memory"));
    n.max_pods = static_cast<int32_t>(
        kn.allocatable.values.count("pods") ? kn.allocatable.Get("pods") : 110);
    int64_t gpus = kn.allocatable.Get(options_.gpu_resource);
    if (gpus > core::kMaxGpusPerNode) {
      problem("node " + n.name + ": " + std::to_string(gpus) + " GPUs; only the first " +
              std::to_string(core::kMaxGpusPerNode) + " are scheduled");
      gpus = core::kMaxGpusPerNode;
    }
    const std::string* product = Find(kn.metadata.labels, keys::kGpuProduct);
    n.device_plugin_shares = DevicePluginShares(kn.metadata.labels, product);
    int64_t memory_mib = 0;
    if (const std::string* m = Find(kn.metadata.labels, keys::kGpuMemory)) {
      if (auto v = ParseInt(*m); v.ok()) memory_mib = *v;
    }
    std::vector<std::string> uuids;
    if (const std::string* u = Find(kn.metadata.annotations, keys::kGpuUuids))
      uuids = SplitCommaList(*u);
    const SharedString model = product ? SharedString(*product) : SharedString();
    for (int64_t g = 0; g < gpus; ++g) {
      core::Gpu gpu;
      gpu.uuid = static_cast<size_t>(g) < uuids.size() && !uuids[g].empty()
                     ? std::move(uuids[g])
                     : n.name + "/gpu" + std::to_string(g);
      gpu.model = model;
      gpu.memory_mib = memory_mib;
      n.gpus.push_back(std::move(gpu));
    }
    if (const std::string* bad = Find(kn.metadata.annotations, keys::kUnhealthyGpus)) {
      Result<std::vector<int>> idx = ParseIndexList(*bad);
      if (!idx.ok()) {
        problem("node " + n.name + ": annotation " + keys::kUnhealthyGpus + ": " +
                idx.status().message() + "; every GPU of the node is taken as unhealthy");
        for (core::Gpu& g : n.gpus) g.healthy = false;
      } else {
        for (int i : *idx)
          if (i < static_cast<int>(n.gpus.size())) n.gpus[i].healthy = false;
      }
    }
    // MIG devices of the device plugin's mixed strategy, per profile (FinishMig counts them).
    for (const auto& [name, count] : kn.allocatable.values) {
      if (!name.starts_with(kMigResourcePrefix) || count <= 0) continue;
      const std::string_view profile = std::string_view(name).substr(kMigResourcePrefix.size());
      const int index = core::MigProfileMilli(profile) > 0 ? cache_.mig_names.Intern(profile) : -1;
      if (index < 0) {
        problem("node " + n.name + ": allocatable " + name +
                " names no MIG profile Chamber counts; its devices are not scheduled");
        continue;
      }
      mig->emplace_back(static_cast<int8_t>(index),
                        static_cast<int32_t>(std::min<int64_t>(count, core::kMaxMigDevices)));
      n.mig_model = model;  // GPU feature discovery's product: the GPU's, not a device's
      if (count > core::kMaxMigDevices)
        problem("node " + n.name + ": allocatable " + name + ": " + std::to_string(count) +
                "; only " + std::to_string(core::kMaxMigDevices) + " are scheduled");
    }
    if (const std::string* v = Find(kn.metadata.labels, keys::kGpuClique))
      n.topology.nvlink_domain = *v;
    if (const std::string* v = Find(kn.metadata.labels, keys::kBlock)) n.topology.block = *v;
    if (const std::string* v = Find(kn.metadata.labels, keys::kZone)) n.topology.zone = *v;
    return n;
  }

  // --- workloads ---

  std::string QueueOf(const Meta& meta, const std::string& ns) const {
    if (const std::string* q = meta.Get(keys::kQueue)) return *q;
    auto it = namespace_queue_.find(ns);
    return it == namespace_queue_.end() ? "" : it->second;
  }

  // A pod's queue when it is a workload of its own.
  const std::string& QueueOf(const PodEntry& e) const {
    static const std::string kNone;
    if (e.facts.queue) return *e.facts.queue;
    auto it = namespace_queue_.find(e.object->metadata.namespace_name);
    return it == namespace_queue_.end() ? kNone : it->second;
  }

  int32_t PriorityOfClass(const std::string& name) const {
    if (name.empty()) return default_priority_;
    auto it = priority_classes_.find(name);
    return it == priority_classes_.end() ? default_priority_ : it->second;
  }

  int32_t PodPriority(const kube::Pod& p) const {
    return p.priority ? *p.priority : PriorityOfClass(p.priority_class_name);
  }

  // Reads an integer annotation; a bad value is a problem about "<what_kind> <what_name>" (e.g.
  // "pod ml/x") and reads as empty.
  std::optional<int64_t> IntKey(const Meta& meta, const char* key, std::string_view what_kind,
                                const std::string& what_name) {
    const std::string* v = meta.Get(key);
    if (v == nullptr) return std::nullopt;
    Result<int64_t> r = ParseInt(*v);
    if (!r.ok() || *r < 0) {
      Problem(std::string(what_kind) + " " + what_name + ": " + key + ": " +
              (r.ok() ? "\"" + *v + "\" must not be negative" : r.status().message()) +
              "; ignored");
      return std::nullopt;
    }
    return *r;
  }

  // The pod's shape; the GPU models may also come from its gang's metadata (`meta.first`).
  static core::PodSet PodSetOf(const PodEntry& e, const Meta& meta) {
    core::PodSet s = e.facts.shape;
    if (s.gpu_models.empty() && meta.first != &e.object->metadata)
      if (const std::string* models = Meta{meta.first}.Get(keys::kGpuModels))
        s.gpu_models = SplitCommaList(*models);
    return s;
  }

  // Pods that share a shape form one pod set.
  static std::string ShapeKey(const core::PodSet& s) {
    std::string k;
    for (int64_t v : s.request.v) k += std::to_string(v) + ",";
    for (const auto& [a, b] : s.node_selector) k += a + "=" + b + ";";
    for (const auto& t : s.tolerations)
      k += t.key + (t.op == core::Toleration::Operator::kExists ? "?" : "=") + t.value + ":" +
           (t.effect ? std::to_string(static_cast<int>(*t.effect)) : "*") + ";";
    for (const auto& m : s.gpu_models) k += m + "|";
    k += std::to_string(s.gpu_memory_mib) + (s.gpu_memory_only ? "m|" : "|") + s.invalid_reason;
    return k;
  }

  void CommonFields(core::Workload* w, const Meta& meta, std::string_view what_kind,
                    const std::string& what_name) {
    if (auto g = IntKey(meta, keys::kCheckpointGrace, what_kind, what_name))
      w->checkpoint_grace_seconds = static_cast<int32_t>(*g);
    if (const std::string* c = meta.Get(keys::kLastCheckpoint)) {
      auto t = ParseRfc3339(*c);
      if (t.ok())
        w->last_checkpoint_time = std::chrono::duration_cast<core::Time>(t->time_since_epoch());
      else
        Problem(std::string(what_kind) + " " + what_name + ": " + keys::kLastCheckpoint + ": " +
                t.status().message() + "; ignored");
    }
  }

  // Adds a workload of `pods` (pending or bound), grouping pods of one shape into a pod set.
  // `uniform`: the pods share one shape (a Job's pods come from one template; a lone pod), so
  // the first pod's makes the one pod set and no shapes are compared.
  int AddWorkload(core::Workload w, WorkloadSource src, const std::vector<const PodEntry*>& pods,
                  const Meta& meta, bool running, bool uniform) {
    auto ref = [](const PodEntry* e) { return PodRef{e->owner.lock()}; };
    std::vector<const PodEntry*> in_set_order;  // pods in pod-set order, when they differ
    if (uniform) {
      core::PodSet s = PodSetOf(*pods.front(), meta);
      s.count = static_cast<int32_t>(pods.size());
      w.pod_sets.push_back(std::move(s));
      src.pods.emplace_back();
      src.pods[0].reserve(pods.size());
      for (const PodEntry* e : pods) src.pods[0].push_back(ref(e));
    } else {
      std::vector<std::vector<const PodEntry*>> members;
      std::map<std::string, size_t> set_of_shape;
      for (const PodEntry* e : pods) {
        core::PodSet s = PodSetOf(*e, meta);
        const std::string key = ShapeKey(s);
        auto [it, inserted] = set_of_shape.try_emplace(key, w.pod_sets.size());
        if (inserted) {
          s.count = 0;
          w.pod_sets.push_back(std::move(s));
          src.pods.emplace_back();
          members.emplace_back();
        }
        w.pod_sets[it->second].count++;
        src.pods[it->second].push_back(ref(e));
        members[it->second].push_back(e);
      }
      for (const auto& m : members) in_set_order.insert(in_set_order.end(), m.begin(), m.end());
    }
    const int id = static_cast<int>(out_.snapshot.workloads.size());
    if (running) {
      // Placements follow pod-set order; remember each bound pod's slot.
      w.placements.resize(pods.size());
      size_t slot = 0;
      for (const PodEntry* e : uniform ? pods : in_set_order) {
        BoundPod& b = bound_[e->bound_index];
        b.workload = id;
        b.placement = slot++;
      }
    }
    out_.snapshot.workloads.push_back(std::move(w));
    out_.sources.push_back(std::move(src));
    return id;
  }

  // When a bound pod began to hold its node: its start, else (not started yet) its bind; 0 for
  // neither (a bind only assumed, which counts from `now`).
  // When a bound pod started: the kubelet's startTime, else when it was bound (PodScheduled),
  // else, for a pod its creator placed on its node (spec.nodeName set at creation, so no
  // PodScheduled condition) whose kubelet has not reported yet, its creation. 0 for a pod whose
  // bind is only assumed (its own nodeName is still empty).
  static int64_t StartMs(const PodEntry& e) {
    if (e.facts.started_ms != 0) return e.facts.started_ms;
    if (e.facts.scheduled_ms != 0) return e.facts.scheduled_ms;
    return e.object->node_name.empty() ? 0 : e.facts.created_ms;
  }

  core::Time EarliestBind(const std::vector<const PodEntry*>& pods) const {
    int64_t start = 0;
    for (const PodEntry* e : pods) {
      int64_t t = StartMs(*e);
      if (t == 0) t = options_.now.count();  // assumed bound
      if (start == 0 || t < start) start = t;
    }
    return core::Time(start);
  }

  void CollectWorkloads() {
    // Bound pods of every scheduler, and our pending pods by the gang they belong to.
    using Pods = std::vector<const PodEntry*>;
    struct JobPods {
      Pods pending, bound, terminating;
    };
    std::unordered_map<const kube::Job*, JobPods> job_pods;
    std::unordered_map<const kube::Object*, JobPods> owner_pods;
    // A Job that belongs to a top-level object: that object (null: not in this view).
    std::unordered_map<const kube::Job*, const kube::Object*> job_owner;
    for (const auto& j : objects_.jobs) {
      bool known = false;
      const kube::Object* owner = OwnerOfJob(*j, &known);
      if (!known) continue;
      job_owner[j.get()] = owner;
      // A top-level object's controller suspends it by suspending its Jobs (a JobSet's, a
      // TrainJob's JobSet's): until each Job that has not finished says the Job controller has
      // stopped it, the object is still being stopped.
      if (owner != nullptr && !JobFinished(*j) && !JobSuspendSeen(*j)) stopping_.insert(owner);
    }
    auto add_to = [](JobPods& jp, const PodEntry* e, bool bound, bool deleting) {
      if (deleting) {
        if (bound) jp.terminating.push_back(e);
      } else {
        (bound ? jp.bound : jp.pending).push_back(e);
      }
    };
    std::map<std::string, Pods> group_pending, group_bound;
    std::map<std::string, Pods> upstream_pending, upstream_bound;  // by UpstreamRef::gang
    // Pods of basic PodGroups, each a workload of its own, with their group.
    std::vector<std::pair<const PodEntry*, const UpstreamGroup*>> basic_pending, basic_bound;
    std::map<std::string, Pods> lws_pending, lws_bound;  // by "namespace/name-<group>"
    Pods single_pending, single_bound, single_releasing;
    out_.snapshot.workloads.reserve(objects_.pods.size() + objects_.jobs.size());
    out_.sources.reserve(objects_.pods.size() + objects_.jobs.size());
    const Pods& pods = SortedPods();
    for (const PodEntry* e : pods) {
      const kube::Pod* p = e->object;
      const PodFacts& f = e->facts;
      if (ReadReservation(*p, f)) continue;
      if (f.terminal) continue;
      const std::string* node = &p->node_name;
      const std::vector<int>* annotated = &f.gpu_indices;
      if (options_.assumed != nullptr) {
        auto it = options_.assumed->find(p->metadata.uid);
        if (it != options_.assumed->end()) {
          if (!node->empty()) {
            out_.assumptions_shown.push_back(it->first);  // the informer caught up
          } else {
            node = &it->second.node;
            annotated = &it->second.gpu_indices;
          }
        }
      }
      const bool ours = p->scheduler_name == options_.scheduler_name;
      if (!node->empty()) {
        auto n = node_index_.find(*node);
        if (n == node_index_.end()) continue;  // on a node we do not know: holds nothing we see
        if (annotated == &f.gpu_indices && !f.gpu_indices_error.empty())
          Problem("pod " + f.key + ": annotation " + keys::kGpuIndices + ": " +
                  f.gpu_indices_error + "; given free GPU slots instead");
        if (!f.share_problem.empty()) Problem(f.share_problem);
        e->bound_index = bound_.size();
        bound_.push_back({p, n->second, f.shape.request, annotated});
        bound_.back().mig = f.shape.mig;
      }
      if (!ours) continue;
      const bool deleting = !p->metadata.deletion_timestamp.empty();
      if (const kube::Job* job = JobNamed(f.job_uid)) {
        if (auto o = job_owner.find(job); o != job_owner.end()) {
          // A pod of a top-level object's Job whose object this view does not hold waits, as
          // below.
          if (o->second != nullptr) add_to(owner_pods[o->second], e, !node->empty(), deleting);
          continue;
        }
        add_to(job_pods[job], e, !node->empty(), deleting);
        continue;
      }
      if (f.owner_uid != nullptr) {
        if (const kube::Object* o = WorkloadOf(*f.owner_uid))
          add_to(owner_pods[o], e, !node->empty(), deleting);
        continue;
      }
      // A pod a Job controls whose Job this view does not hold (not seen yet after a relist, or
      // being deleted) waits: the Job decides its gang, queue and priority, and scheduled alone
      // it would be judged without them. So does a top-level object's pod.
      if (f.job_uid != nullptr) continue;
      if (f.lws_name != nullptr && f.lws_group != nullptr) {
        // A LeaderWorkerSet's group, found by its pods' labels; its pods wait for the object.
        const std::string ns_name = p->metadata.namespace_name + "/" + *f.lws_name;
        if (!deleting && lws_by_name_.contains(ns_name))
          (node->empty() ? lws_pending : lws_bound)[ns_name + "-" + *f.lws_group].push_back(e);
        continue;
      }
      if (deleting) {
        // A bare pod's share in its grace period (a victim leaving) still holds its share of
        // the GPU, which only a workload can say: it is one, releasing. A pod held whole is
        // counted as holding its GPUs outside the engine until it is gone (AccountBoundPods).
        if (!node->empty() && f.shape.request.gpu_share() && f.pod_group == nullptr &&
            p->pod_group_name.empty() && p->workload_ref.workload.empty())
          single_releasing.push_back(e);
        continue;
      }
      if (std::optional<UpstreamRef> ref = UpstreamRefOf(*p, p->metadata.namespace_name)) {
        // A pod that names an upstream group waits for it, as kube-scheduler's pods do; a
        // gang's pods (of one replica, in a Workload's group) are one workload; a basic group's
        // are each their own.
        auto g = pod_groups_.find(ref->group);
        if (g == pod_groups_.end()) {
          if (node->empty()) Problem("pod " + f.key + ": " + MissingGroup(*p, *ref));
          continue;
        }
        if (g->second.group.gang)
          (node->empty() ? upstream_pending : upstream_bound)[ref->gang].push_back(e);
        else
          (node->empty() ? basic_pending : basic_bound).emplace_back(e, &g->second);
        continue;
      }
      if (f.pod_group != nullptr) {
        (node->empty() ? group_pending
                       : group_bound)[p->metadata.namespace_name + "/" + *f.pod_group]
            .push_back(e);
        continue;
      }
      (node->empty() ? single_pending : single_bound).push_back(e);
    }

    std::vector<const std::shared_ptr<const kube::Job>*> jobs;
    jobs.reserve(objects_.jobs.size());
    for (const auto& j : objects_.jobs) jobs.push_back(&j);
    std::sort(jobs.begin(), jobs.end(), [](auto* a, auto* b) {
      const kube::ObjectMeta &x = (*a)->metadata, &y = (*b)->metadata;
      if (x.namespace_name != y.namespace_name) return x.namespace_name < y.namespace_name;
      return x.name < y.name;
    });
    static const JobPods kNone;
    for (const auto* job : jobs) {
      const BuildCache::State::JobEntry& entry = JobOf(*job);  // kept, as Prepare derives it
      if (job_owner.contains(job->get())) continue;  // part of its top-level object's gang
      auto it = job_pods.find(job->get());
      const JobPods& jp = it == job_pods.end() ? kNone : it->second;
      AddJob(*job, entry, jp.pending, jp.bound, jp.terminating);
    }
    std::vector<const std::shared_ptr<const kube::Object>*> owners;
    owners.reserve(objects_.owners.size());
    for (const auto& o : objects_.owners) owners.push_back(&o);
    // By namespace and name, then UID: objects of two kinds may share a name.
    std::sort(owners.begin(), owners.end(), [](auto* a, auto* b) {
      const kube::ObjectMeta &x = (*a)->metadata, &y = (*b)->metadata;
      if (x.namespace_name != y.namespace_name) return x.namespace_name < y.namespace_name;
      if (x.name != y.name) return x.name < y.name;
      return x.uid < y.uid;
    });
    for (const auto* owner : owners) {
      const BuildCache::State::OwnerEntry& entry = OwnerOf(*owner);  // kept, as Prepare does
      // A part of another workload (a RayJob's RayCluster), or of one not in this view.
      if (top_of_.at(owner->get()) != owner->get()) continue;
      if (entry.spec && entry.spec->groups > 0) continue;  // a gang per group, below
      auto it = owner_pods.find(owner->get());
      const JobPods& op = it == owner_pods.end() ? kNone : it->second;
      if (entry.spec && entry.spec->gang_from_part) {
        const auto* part = GangPart(owner->get());
        AddOwner(*owner, entry, part != nullptr ? &OwnerOf(*part) : nullptr, op.pending, op.bound,
                 op.terminating);
        continue;
      }
      AddOwner(*owner, entry, nullptr, op.pending, op.bound, op.terminating);
    }
    for (auto& [key, members] : lws_bound) AddLwsGroup(key, members, true);
    for (auto& [key, members] : lws_pending) AddLwsGroup(key, members, false);
    for (auto& [key, members] : group_bound) AddGroup(key, members, true);
    for (auto& [key, members] : group_pending) AddGroup(key, members, false);
    for (auto& [key, members] : upstream_bound) AddUpstreamGroup(key, members, true);
    for (auto& [key, members] : upstream_pending) AddUpstreamGroup(key, members, false);
    ReserveReplicas(single_bound, single_pending);
    for (const PodEntry* e : single_bound) AddSingle(*e, true);
    for (const PodEntry* e : single_pending) AddSingle(*e, false);
    for (const PodEntry* e : single_releasing) AddSingle(*e, true, nullptr, /*releasing=*/true);
    for (const auto& [e, group] : basic_bound) AddSingle(*e, true, group);
    for (const auto& [e, group] : basic_pending) AddSingle(*e, false, group);
  }

  // Every pod, by namespace and name: the last build's order less the pods gone, merged with
  // the pods new to this build.
  const std::vector<const PodEntry*>& SortedPods() {
    std::vector<const PodEntry*> fresh;
    for (const PodEntry* e : DerivePods())
      if (e->derived == cache_.generation) fresh.push_back(e);
    auto by_key = [](const PodEntry* a, const PodEntry* b) {
      return KeyLess(a->facts.key, b->facts.key);
    };
    // Informers list pods by name, so this is mostly sorted already.
    if (!std::is_sorted(fresh.begin(), fresh.end(), by_key))
      std::sort(fresh.begin(), fresh.end(), by_key);
    // A pod that changed is a new object with a new entry: it takes the place of its entry in
    // the last build, whose name it shares, and remembers it (`previous`). The other pods new
    // to this build are merged in.
    std::vector<const PodEntry*>& order = cache_.pod_order;
    std::vector<const PodEntry*> unplaced;
    auto f = fresh.begin();
    size_t kept = 0;
    for (const PodEntry* old : order) {
      // Derived again since (for a new object at a freed one's address): in `fresh` if that
      // object is still here.
      if (old->derived == cache_.generation) continue;
      if (old->seen == cache_.generation) {
        order[kept++] = old;  // unchanged
        continue;
      }
      for (; f != fresh.end() && KeyLess((*f)->facts.key, old->facts.key); ++f)
        unplaced.push_back(*f);
      if (f != fresh.end() && (*f)->facts.key == old->facts.key) {
        (*f)->previous = old;
        order[kept++] = *f++;
      }
    }
    unplaced.insert(unplaced.end(), f, fresh.end());
    order.resize(kept);
    order.insert(order.end(), unplaced.begin(), unplaced.end());
    std::inplace_merge(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept),
                       order.end(), by_key);
    return order;
  }

  const kube::Job* JobNamed(const std::string* uid) const {
    if (uid == nullptr || uid->empty()) return nullptr;
    auto it = jobs_by_uid_.find(*uid);
    return it == jobs_by_uid_.end() ? nullptr : it->second;
  }

  // A Job or top-level object that suspends as a whole: what AddGang needs of it.
  struct Gang {
    const kube::ObjectMeta* object = nullptr;  // the Job's or top-level object's
    std::string what;                          // "job", "jobset": for problems
    Meta meta;                                 // its metadata, then its (first) pod template's
    bool suspend = false;                      // spec.suspend (or the kind's field)
    // Its controller has acted on the suspension (the Suspended condition of the Job, or of
    // every Job of the object): until then resuming it could meet the Job controller still
    // stopping its pods (and counting them failed).
    bool suspend_seen = true;
    int32_t want = 0;  // pods its spec asks for now
    // The gang is the pods that exist (their sets are created one after the other).
    bool in_order = false;
    int32_t min_pods = 0;  // the kind's own minimum (KindSpec::min_pods); 0: all
    // Each pod set's template, pods and name, for a suspended one that has no pods to read.
    struct Template {
      const kube::Pod* pod;
      int32_t count;
      std::string name;
    };
    std::vector<Template> templates;
  };

  static bool JobFinished(const kube::Job& j) {
    for (const kube::Condition& c : j.conditions)
      if ((c.type == "Complete" || c.type == "Failed") && c.status == "True") return true;
    return false;
  }

  // The Job controller has acted on spec.suspend: it stopped the Job's pods and set its
  // Suspended condition.
  static bool JobSuspendSeen(const kube::Job& j) {
    for (const kube::Condition& c : j.conditions)
      if (c.type == "Suspended") return c.status == "True";
    return false;
  }

  // Whether an object the informer shows `suspended` is to be taken as suspended: so, or
  // suspended by chamberd a moment ago (an assumed suspension); records a suspension the object
  // now shows.
  bool Suspended(const std::string& uid, bool suspended) {
    if (options_.suspending == nullptr || !options_.suspending->contains(uid)) return suspended;
    if (suspended) out_.suspensions_shown.push_back(uid);  // the informer caught up
    return true;
  }

  // Suspended by Chamber: preempted, or rolled back after a failed bind.
  static bool SuspendedByUs(const kube::ObjectMeta& m) {
    return Find(m.annotations, keys::kPreemptedAt) != nullptr ||
           Find(m.annotations, keys::kRolledBackAt) != nullptr;
  }

  void AddJob(const std::shared_ptr<const kube::Job>& job_object,
              const BuildCache::State::JobEntry& entry, const std::vector<const PodEntry*>& pending,
              const std::vector<const PodEntry*>& bound,
              const std::vector<const PodEntry*>& terminating) {
    const kube::Job& job = *job_object;
    if (JobFinished(job)) return;
    const std::string job_key = job.metadata.Key();
    if (!entry.pod_template) {
      Problem("job " + job_key + ": spec.template: " + entry.template_error);
      return;
    }
    const kube::Pod* tmpl = &*entry.pod_template;
    const bool suspended_by_us = SuspendedByUs(job.metadata);
    // The Job is Chamber's when its template names Chamber, when its pods do (the admission
    // webhook sets the scheduler on the pods of opted-in Jobs, docs/admission.md), or when
    // Chamber suspended it and so deleted its pods.
    if (tmpl->scheduler_name != options_.scheduler_name && pending.empty() && bound.empty() &&
        terminating.empty() && !suspended_by_us)
      return;
    if (job.suspend && !suspended_by_us) return;  // paused by its owner
    const bool suspend = Suspended(job.metadata.uid, job.suspend);

    Gang g;
    g.object = &job.metadata;
    g.what = "job";
    g.meta = Meta{&job.metadata, &tmpl->metadata};
    g.suspend = suspend;
    g.suspend_seen = !suspend || (job.suspend && JobSuspendSeen(job));
    g.want = job.parallelism.value_or(1);
    if (job.completions) g.want = std::min(g.want, *job.completions - job.succeeded);
    g.templates.push_back({tmpl, std::max(g.want, 1), job.metadata.name});
    if (std::optional<UpstreamRef> ref = UpstreamRefOf(*tmpl, job.metadata.namespace_name)) {
      // Its pods name an upstream group with a gang policy: the gang's minimum is its minCount.
      if (const UpstreamGroup* group = GangGroup(ref->group)) g.min_pods = group->group.min_count;
    } else if (!entry.scheduling_error.empty()) {
      Problem(entry.scheduling_error + "; the Job is scheduled as one gang of all its pods");
    } else if (entry.scheduling) {
      // Its own policy, which the Job controller also gives the PodGroup it makes for it: a
      // gang's minimum is its minCount; basic, each pod may start on its own (a minimum of 1).
      g.min_pods = entry.scheduling->gang ? entry.scheduling->min_count : 1;
    }
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kJob;
    src.job = job_object;
    src.pod_group =
        JobsGangPodGroup(*tmpl, job.metadata.namespace_name, {&pending, &bound, &terminating});
    AddGang(g, std::move(src), pending, bound, terminating);
  }

  // The upstream group of that key (UpstreamRef::group) if it exists, reads and has a gang
  // policy; else null.
  const UpstreamGroup* GangGroup(const std::string& key) const {
    auto it = pod_groups_.find(key);
    return it == pod_groups_.end() || !it->second.group.gang ? nullptr : &it->second;
  }

  // The gang PodGroup a Job's pods name, whose status conditions say how its gang fares: the one
  // its template names, else the one the Job controller made for it and named on its pods
  // (WorkloadWithJob). Null for none, a basic one, or a Workload's group (no status).
  std::shared_ptr<const kube::Object> JobsGangPodGroup(
      const kube::Pod& tmpl, const std::string& ns,
      std::initializer_list<const std::vector<const PodEntry*>*> pod_lists) const {
    std::optional<UpstreamRef> ref = UpstreamRefOf(tmpl, ns);
    // The first pod that names one is enough: the controller names the same on each.
    for (auto pods = pod_lists.begin(); !ref && pods != pod_lists.end(); ++pods)
      for (const PodEntry* e : **pods)
        if ((ref = UpstreamRefOf(*e->object, ns))) break;
    const UpstreamGroup* group = ref ? GangGroup(ref->group) : nullptr;
    return group != nullptr ? group->StatusObject() : nullptr;
  }

  // The gang group every pod template of a top-level object names: one group for the whole
  // gang. Templates naming different groups, or some none, say nothing the gang can follow
  // (the kind's own gang holds); nor do the PodGroups a controller names on the pods of its
  // parts (the Job controller's, one per child Job of a JobSet).
  const UpstreamGroup* OwnersGangPodGroup(const std::vector<kube::Pod>& templates,
                                          const std::string& ns) const {
    if (templates.empty()) return nullptr;
    const std::optional<UpstreamRef> ref = UpstreamRefOf(templates.front(), ns);
    if (!ref) return nullptr;
    for (const kube::Pod& t : templates) {
      const std::optional<UpstreamRef> other = UpstreamRefOf(t, ns);
      if (!other || other->group != ref->group) return nullptr;
    }
    return GangGroup(ref->group);
  }

  // A top-level object's workload. `part`: for a kind whose gang is that of a part
  // (KindSpec::gang_from_part, a TrainJob), that part's entry (its JobSet's), null while it does
  // not exist: the pod sets, the order and the minimum are the part's, while suspended and
  // finished are the object's own (the part's controller follows the object).
  void AddOwner(const std::shared_ptr<const kube::Object>& object,
                const BuildCache::State::OwnerEntry& entry,
                const BuildCache::State::OwnerEntry* part,
                const std::vector<const PodEntry*>& pending,
                const std::vector<const PodEntry*>& bound,
                const std::vector<const PodEntry*>& terminating) {
    if (!entry.spec) {
      // Its pods wait (they are not scheduled alone): say why.
      if (!pending.empty() || !bound.empty()) Problem(entry.error);
      return;
    }
    const KindSpec& own = *entry.spec;
    if (own.finished) return;
    const bool suspended_by_us = SuspendedByUs(object->metadata);
    const std::string what = entry.kind->LowerKind() + " " + object->metadata.Key();
    const BuildCache::State::OwnerEntry& gang = part != nullptr ? *part : entry;
    if (own.gang_from_part) {
      // Until its controller has made the part, it has no pods and holds nothing, as a Job
      // before its pods; one that is Chamber's (suspended by it, or queued) says what it waits
      // for.
      if (part == nullptr) {
        if (suspended_by_us || Meta{&object->metadata}.Get(keys::kQueue) != nullptr)
          Problem(what + ": waits for " + own.part_of + "; it has no pods yet");
        return;
      }
      if (!part->spec) {
        if (!pending.empty() || !bound.empty()) Problem(what + ": " + part->error);
        return;
      }
      if (part->spec->finished) return;
    }
    const KindSpec& spec = *gang.spec;
    bool ours = suspended_by_us || !pending.empty() || !bound.empty() || !terminating.empty();
    for (const kube::Pod& t : gang.pod_templates)
      ours = ours || t.scheduler_name == options_.scheduler_name;
    if (!ours) return;
    if (own.suspended && !suspended_by_us) return;  // paused by its owner
    const bool suspend = Suspended(object->metadata.uid, own.suspended);

    Gang g;
    g.object = &object->metadata;
    g.what = entry.kind->LowerKind();
    g.meta = Meta{&object->metadata,
                  gang.pod_templates.empty() ? nullptr : &gang.pod_templates.front().metadata};
    g.suspend = suspend;
    g.suspend_seen = !suspend || (own.suspended && !stopping_.contains(object.get()));
    g.want = spec.Pods();
    g.in_order = spec.in_order;
    if (g.in_order) g.want = std::max(g.want, static_cast<int32_t>(pending.size()));
    g.min_pods = spec.min_pods;
    for (size_t i = 0; i < spec.pod_sets.size(); ++i)
      if (spec.pod_sets[i].count > 0)
        g.templates.push_back({&gang.pod_templates[i], spec.pod_sets[i].count,
                               object->metadata.name + "/" + spec.pod_sets[i].name});
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kOwner;
    src.owner = object;
    src.owner_kind = entry.kind;
    src.owner_suspendable = own.suspendable;
    if (part != nullptr) {
      src.part = part->owner.lock();
      src.part_kind = part->kind;
    }
    // Its pods name an upstream gang PodGroup (docs/workloads/podgroup.md): its minCount is the
    // gang's minimum in place of the kind's own, and it carries the gang's conditions.
    if (const UpstreamGroup* group =
            OwnersGangPodGroup(gang.pod_templates, object->metadata.namespace_name)) {
      g.min_pods = group->group.min_count;
      src.pod_group = group->StatusObject();
    }
    AddGang(g, std::move(src), pending, bound, terminating);
  }

  // A Job's or top-level object's workloads: suspended (by Chamber), being preempted, running
  // (and its pods added since, one by one), or pending as one gang.
  // `pods` in the order of the gang's templates whose requests and node selector they have
  // (unmatched last): the engine's minimum is the first pods in pod-set order, so a RayCluster's
  // head comes before its workers and a Master before its Workers. Tolerations are not compared:
  // the API server adds its default ones to every pod, not to templates.
  std::vector<const PodEntry*> InTemplateOrder(const Gang& g,
                                               const std::vector<const PodEntry*>& pods) const {
    auto key = [](const core::PodSet& s) {
      std::string k;
      for (int64_t v : s.request.v) k += std::to_string(v) + ",";
      for (const auto& [a, b] : s.node_selector) k += a + "=" + b + ";";
      return k + std::to_string(s.gpu_memory_mib);
    };
    std::vector<std::string> shapes;
    for (const Gang::Template& t : g.templates)
      shapes.push_back(key(PodShape(*t.pod, Meta{g.meta.first, &t.pod->metadata},
                                    options_.gpu_resource, cache_.mig_names)));
    std::vector<std::pair<size_t, const PodEntry*>> ranked;
    for (const PodEntry* e : pods) {
      const std::string shape = key(e->facts.shape);
      ranked.emplace_back(std::find(shapes.begin(), shapes.end(), shape) - shapes.begin(), e);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<const PodEntry*> out;
    for (const auto& [rank, e] : ranked) out.push_back(e);
    return out;
  }

  void AddGang(const Gang& g, WorkloadSource src, const std::vector<const PodEntry*>& pending_pods,
               const std::vector<const PodEntry*>& bound,
               const std::vector<const PodEntry*>& terminating) {
    const kube::ObjectMeta& object = *g.object;
    const std::string key = object.Key();
    const Meta& meta = g.meta;
    // A Job's pods come from one template; a top-level object's sets may differ.
    const bool uniform = g.templates.size() <= 1;
    const std::vector<const PodEntry*> pending =
        uniform ? pending_pods : InTemplateOrder(g, pending_pods);
    core::Workload w;
    w.name = key;
    w.queue = QueueOf(meta, object.namespace_name);
    w.priority = !pending.empty() ? PodPriority(*pending.front()->object)
                 : !bound.empty() ? PodPriority(*bound.front()->object)
                 : !g.templates.empty()
                     ? PriorityOfClass(g.templates.front().pod->priority_class_name)
                     : default_priority_;
    w.submit_time = core::Time(object.creation_timestamp.unix_ms());
    CommonFields(&w, meta, g.what, key);
    if (const std::string* p = Find(object.annotations, keys::kPreemptions)) {
      std::vector<std::string> items = SplitCommaList(*p);
      for (const std::string& s : items)
        if (auto v = ParseInt(s); v.ok()) w.recent_preemptions.push_back(core::Time(*v * 1000));
    }
    if (auto n = IntKey(Meta{&object}, keys::kPreemptionCount, g.what, key))
      src.stored_preemptions = *n;
    if (const std::string* h = Find(object.annotations, keys::kGpuHoursLost)) {
      double v = 0;
      const auto [end, ec] = std::from_chars(h->data(), h->data() + h->size(), v);
      if (ec != std::errc() || end != h->data() + h->size() || !std::isfinite(v) || v < 0)
        Problem(g.what + " " + key + ": " + keys::kGpuHoursLost + ": \"" + *h +
                "\" is not a non-negative number of GPU-hours; ignored");
      else
        src.stored_gpu_hours_lost = v;
    }
    if (auto m = IntKey(meta, keys::kMinMember, g.what, key))
      w.min_member = static_cast<int32_t>(*m);
    else if (g.min_pods > 0 && g.min_pods < g.want)
      w.min_member = g.min_pods;

    if (g.suspend) {
      std::vector<const PodEntry*> holding = bound;
      holding.insert(holding.end(), terminating.begin(), terminating.end());
      if (!holding.empty()) {  // our victim, still releasing its GPUs
        w.state = core::WorkloadState::kPreempting;
        w.start_time = EarliestBind(holding);
        AddWorkload(std::move(w), std::move(src), holding, meta, true, uniform);
        return;
      }
      // Resumed only once its controller has seen the suspension; until then it is still
      // being preempted, and holds nothing.
      w.state = g.suspend_seen ? core::WorkloadState::kSuspended : core::WorkloadState::kPreempting;
      for (const Gang::Template& t : g.templates) {
        core::PodSet s = PodShape(*t.pod, Meta{meta.first, &t.pod->metadata}, options_.gpu_resource,
                                  cache_.mig_names);
        s.name = t.name;
        s.count = t.count;
        w.pod_sets.push_back(std::move(s));
        src.pods.emplace_back();
      }
      out_.snapshot.workloads.push_back(std::move(w));
      out_.sources.push_back(std::move(src));
      return;
    }
    if (!bound.empty()) {
      core::Workload running = w;
      running.state = core::WorkloadState::kRunning;
      running.start_time = EarliestBind(bound);
      running.min_member = 0;
      AddWorkload(std::move(running), src, bound, meta, true, uniform);
      if (pending.empty()) return;
      // Pods added while it runs (replacements, later completions) join it one by one; a set
      // created after the last one runs (in order) joins whole.
      w.name += "+pending";
      w.min_member = g.in_order ? 0 : 1;
      AddWorkload(std::move(w), std::move(src), pending, meta, false, uniform);
      return;
    }
    if (g.want <= 0 || pending.empty()) return;
    const int32_t needed = w.min_member > 0 ? std::min(w.min_member, g.want) : g.want;
    if (!g.in_order && static_cast<int32_t>(pending.size()) < needed) {
      // The controller is still creating its pods, or waits out its backoff after pod
      // failures: the pods that exist wait, and say so.
      ++out_.incomplete_gangs;
      w.awaited_pods = needed - static_cast<int32_t>(pending.size());
      w.min_member = 0;
    }
    AddWorkload(std::move(w), std::move(src), pending, meta, false, uniform);
  }

  // A LeaderWorkerSet's group ("namespace/name-<index>", the leader pod's name): a gang of the
  // leader and its workers, elastic like a serving replica (evicted when preempted, and
  // reserved when its index is below `chamber.io/reserved-replicas`).
  void AddLwsGroup(const std::string& key, const std::vector<const PodEntry*>& members,
                   bool running) {
    const PodEntry& first = *members.front();
    const kube::Object& lws =
        *lws_by_name_.at(first.object->metadata.namespace_name + "/" + *first.facts.lws_name);
    const BuildCache::State::OwnerEntry& entry = cache_.owners.at(&lws);
    if (!entry.spec) {
      Problem(entry.error);
      return;
    }
    const Meta meta{&lws.metadata,
                    entry.pod_templates.empty() ? nullptr : &entry.pod_templates.front().metadata};
    core::Workload w;
    w.name = key;
    w.queue = QueueOf(meta, lws.metadata.namespace_name);
    w.priority = PodPriority(*first.object);
    int64_t index = -1;
    if (auto i = ParseInt(*first.facts.lws_group); i.ok()) index = *i;
    if (auto n = IntKey(meta, keys::kReservedReplicas, "leaderworkerset", lws.metadata.Key());
        n && index >= 0 && index < *n)
      w.priority = std::max(w.priority, core::kReservedPriority);
    w.submit_time = core::Time(lws.metadata.creation_timestamp.unix_ms());
    CommonFields(&w, meta, "leaderworkerset", lws.metadata.Key());
    AddGroupWorkload(std::move(w), key, members, meta, running, entry.spec->Pods());
  }

  void AddGroup(const std::string& key, const std::vector<const PodEntry*>& members, bool running) {
    const kube::Pod& first = *members.front()->object;
    const Meta meta{&first.metadata, nullptr, &members.front()->facts.chamber_keys};
    core::Workload w;
    w.name = key;
    w.queue = QueueOf(meta, first.metadata.namespace_name);
    w.priority = PodPriority(first);
    int64_t submit = 0;
    int64_t min_member = 0;
    for (const PodEntry* e : members) {
      const int64_t t = e->facts.created_ms;
      if (submit == 0 || t < submit) submit = t;
      if (auto m = IntKey(Meta{&e->object->metadata, nullptr, &e->facts.chamber_keys},
                          keys::kMinMember, "pod", e->facts.key))
        min_member = std::max(min_member, *m);
    }
    w.submit_time = core::Time(submit);
    CommonFields(&w, meta, "pod group", key);
    AddGroupWorkload(std::move(w), key, members, meta, running, min_member);
  }

  // An upstream group with a gang policy (UpstreamRef::gang: a PodGroup's "namespace/name", a
  // Workload group's replica "namespace/<workload>:<group>[:<replicaKey>]"): all or nothing
  // above its minCount; its queue and Chamber's keys from the PodGroup (or Workload), then its
  // first pod; its priority the PodGroup's when it names a PriorityClass, else its first pod's.
  void AddUpstreamGroup(const std::string& key, const std::vector<const PodEntry*>& members,
                        bool running) {
    const kube::Pod& first = *members.front()->object;
    const UpstreamGroup& g =
        pod_groups_.at(UpstreamRefOf(first, first.metadata.namespace_name)->group);
    const Meta meta{&g.object->metadata, &first.metadata};
    core::Workload w;
    w.name = key;
    w.queue = QueueOf(meta, first.metadata.namespace_name);
    // The API server sets spec.priority on every PodGroup (0 without a class): it is the
    // group's own only when it names a PriorityClass.
    w.priority = g.group.priority_class_name.empty() ? PodPriority(first)
                 : g.group.priority                  ? *g.group.priority
                                                     : PriorityOfClass(g.group.priority_class_name);
    int64_t submit = g.object->metadata.creation_timestamp.unix_ms();
    for (const PodEntry* e : members)
      if (submit == 0 || (e->facts.created_ms != 0 && e->facts.created_ms < submit))
        submit = e->facts.created_ms;
    w.submit_time = core::Time(submit);
    const char* what = g.in_workload ? "workload pod group" : "podgroup";
    CommonFields(&w, meta, what, key);
    int64_t min_member = g.group.min_count;
    if (auto m = IntKey(meta, keys::kMinMember, what, key)) min_member = *m;
    AddGroupWorkload(std::move(w), key, members, meta, running, min_member, g.StatusObject());
  }

  // A group's workload ("namespace/name"): running with its bound members; or pending, all or
  // nothing above `min_member` (0: every member), its members waiting for the rest when fewer
  // exist; or, beside a running part of the same group, joining it one by one. `pod_group`: the
  // upstream PodGroup it is, if any.
  void AddGroupWorkload(core::Workload w, const std::string& key,
                        const std::vector<const PodEntry*>& members, const Meta& meta, bool running,
                        int64_t min_member,
                        std::shared_ptr<const kube::Object> pod_group = nullptr) {
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kPodGroup;
    src.group = key.substr(key.find('/') + 1);
    src.pod_group = std::move(pod_group);
    if (running) {
      w.state = core::WorkloadState::kRunning;
      w.start_time = EarliestBind(members);
      running_groups_.insert(key);
      AddWorkload(std::move(w), std::move(src), members, meta, true, false);
      return;
    }
    if (running_groups_.contains(key)) {
      // A group whose gang is partly running: the rest joins it one by one.
      w.name += "+pending";
      min_member = 1;
    }
    if (static_cast<int64_t>(members.size()) < min_member) {
      ++out_.incomplete_gangs;  // the members that exist wait, and say so
      w.awaited_pods = static_cast<int32_t>(min_member - static_cast<int64_t>(members.size()));
      min_member = 0;
    }
    w.min_member = static_cast<int32_t>(min_member);
    AddWorkload(std::move(w), std::move(src), members, meta, false, false);
  }

  // Replicas of a serving workload (a Deployment's or StatefulSet's pods, each a workload of its
  // own) of which `chamber.io/reserved-replicas` run reserved: per controller, that many of its
  // pods, the bound ones first, then the oldest.
  void ReserveReplicas(const std::vector<const PodEntry*>& bound,
                       const std::vector<const PodEntry*>& pending) {
    std::map<std::string_view, std::vector<const PodEntry*>> by_controller;
    for (const auto* list : {&bound, &pending})
      for (const PodEntry* e : *list)
        if (e->facts.reserved_replicas != nullptr && e->facts.controller_uid != nullptr)
          by_controller[*e->facts.controller_uid].push_back(e);
    for (auto& [uid, pods] : by_controller) {
      const PodEntry& first = *pods.front();
      Result<int64_t> n = ParseInt(*first.facts.reserved_replicas);
      if (!n.ok() || *n < 0) {
        Problem("pod " + first.facts.key + ": " + keys::kReservedReplicas + ": " +
                (n.ok() ? "\"" + *first.facts.reserved_replicas + "\" must not be negative"
                        : n.status().message()) +
                "; no replica is reserved");
        continue;
      }
      // Bound pods came first; within each, the oldest first.
      std::stable_sort(pods.begin(), pods.end(), [](const PodEntry* a, const PodEntry* b) {
        const bool ab = !a->object->node_name.empty(), bb = !b->object->node_name.empty();
        if (ab != bb) return ab;
        if (a->facts.created_ms != b->facts.created_ms)
          return a->facts.created_ms < b->facts.created_ms;
        return KeyLess(a->facts.key, b->facts.key);
      });
      for (size_t i = 0; i < pods.size() && static_cast<int64_t>(i) < *n; ++i)
        reserved_.insert(pods[i]);
    }
  }

  // A pod that is a workload of its own. `group`: the basic PodGroup it names, whose queue it
  // takes when it names none itself; such a pod's workload reads the PodGroup, and is made
  // afresh.
  // `releasing`: a bound pod being deleted, whose workload holds its placement as a victim in
  // its grace period (kPreempting) does.
  // A workload that SplitGpuModelQueues moved to a queue per GPU model and narrowed to its model:
  // the next build makes it afresh, so that waiting work chooses its model again.
  static bool InGpuModelQueue(const core::Workload& w) {
    return w.queue.find(core::kGpuModelQueueSeparator) != std::string::npos;
  }

  void AddSingle(const PodEntry& e, bool running, const UpstreamGroup* group = nullptr,
                 bool releasing = false) {
    // A workload that depends on more than its own pod is made afresh: a serving replica's (its
    // siblings decide whether it is reserved) and a basic PodGroup member's (its PodGroup may
    // name the queue); so is a releasing one, which is not kept for the next build, and a MIG
    // pod's: its pod set names the snapshot's profiles, which each build orders.
    const bool afresh = e.facts.reserved_replicas != nullptr || group != nullptr || releasing ||
                        e.facts.shape.mig.devices > 0;
    // Unchanged since the last build: its workload moves over from that build's snapshot. A pod
    // whose bind is only assumed takes `now` as its start, which moves on.
    if (!afresh && reuse_singles_ && e.single_generation + 1 == cache_.generation &&
        e.single_running == running && !(running && StartMs(e) == 0) &&
        e.single_index < options_.recycle->snapshot.workloads.size() &&
        !InGpuModelQueue(options_.recycle->snapshot.workloads[e.single_index])) {
      const int id = static_cast<int>(out_.snapshot.workloads.size());
      if (running) {
        BoundPod& b = bound_[e.bound_index];
        b.workload = id;
        b.placement = 0;
      }
      out_.snapshot.workloads.push_back(
          std::move(options_.recycle->snapshot.workloads[e.single_index]));
      out_.sources.push_back(std::move(options_.recycle->sources[e.single_index]));
      e.single_generation = cache_.generation;
      e.single_index = static_cast<size_t>(id);
      ++cache_.reused;
      return;
    }
    if (!afresh && TakeOverPrevious(e, running)) return;
    const size_t problems = out_.problems.size();
    const kube::Pod& p = *e.object;
    const Meta meta{&p.metadata, nullptr, &e.facts.chamber_keys};
    core::Workload w;
    w.name = e.facts.key;
    w.queue = e.facts.queue == nullptr && group != nullptr
                  ? QueueOf(Meta{&group->object->metadata}, p.metadata.namespace_name)
                  : QueueOf(e);
    w.priority = PodPriority(p);
    if (reserved_.contains(&e)) w.priority = std::max(w.priority, core::kReservedPriority);
    w.submit_time = core::Time(e.facts.created_ms);
    CommonFields(&w, meta, "pod", w.name);
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kPod;
    if (running) {
      w.state = releasing ? core::WorkloadState::kPreempting : core::WorkloadState::kRunning;
      w.start_time = EarliestBind({&e});
    }
    const int id = AddWorkload(std::move(w), std::move(src), {&e}, meta, running, true);
    // A workload that raised a problem is made again, so that the problem is raised again.
    e.single_generation = out_.problems.size() == problems && !releasing ? cache_.generation : 0;
    e.single_index = static_cast<size_t>(id);
    e.single_running = running;
  }

  // A pod that changed since the last build, as when it is bound (node, the GPU slots'
  // annotation, its status and resourceVersion) or its PodScheduled condition is written: its
  // workload in the snapshot lent to this build is moved over and brought up to date, when all
  // that the pod's workload takes from the pod besides those is as it was. The result is the
  // workload AddSingle would make afresh.
  bool TakeOverPrevious(const PodEntry& e, bool running) {
    // Queue and priority are compared below, so this holds when the externals changed too.
    const PodEntry* old = take_over_ && e.derived == cache_.generation ? e.previous : nullptr;
    if (old == nullptr || old->single_generation + 1 != cache_.generation ||
        old->single_index >= options_.recycle->snapshot.workloads.size())
      return false;
    core::Workload& w = options_.recycle->snapshot.workloads[old->single_index];
    WorkloadSource& src = options_.recycle->sources[old->single_index];
    const kube::Pod& p = *e.object;
    if (src.pods.size() != 1 || src.pods[0].size() != 1 || src.pods[0][0].uid() != p.metadata.uid ||
        w.pod_sets.size() != 1 || !SameShape(w.pod_sets[0], e.facts.shape))
      return false;
    const Meta meta{&p.metadata, nullptr, &e.facts.chamber_keys};
    if (w.priority != PodPriority(p) || w.submit_time != core::Time(e.facts.created_ms) ||
        w.queue != QueueOf(e))
      return false;
    core::Workload checkpoint;
    if (e.facts.checkpoint_keys) {
      const size_t problems = out_.problems.size();
      CommonFields(&checkpoint, meta, "pod", e.facts.key);
      if (out_.problems.size() != problems) {  // made afresh, which raises them again
        out_.problems.resize(problems);
        return false;
      }
    }
    if (w.checkpoint_grace_seconds != checkpoint.checkpoint_grace_seconds ||
        w.last_checkpoint_time != checkpoint.last_checkpoint_time)
      return false;

    const int id = static_cast<int>(out_.snapshot.workloads.size());
    w.state = running ? core::WorkloadState::kRunning : core::WorkloadState::kPending;
    w.start_time = running ? EarliestBind({&e}) : core::Time{0};
    w.placements.assign(running ? 1 : 0, core::PodPlacement{});
    if (running) {
      BoundPod& b = bound_[e.bound_index];
      b.workload = id;
      b.placement = 0;
    }
    src.pods[0][0].pod = e.owner.lock();
    out_.snapshot.workloads.push_back(std::move(w));
    out_.sources.push_back(std::move(src));
    old->single_generation = 0;  // taken
    e.single_generation = cache_.generation;
    e.single_index = static_cast<size_t>(id);
    e.single_running = running;
    ++cache_.reused;
    return true;
  }

  // Whether a workload's pod set (of one pod) is what AddWorkload makes of `shape`.
  static bool SameShape(const core::PodSet& set, const core::PodSet& shape) {
    return set.count == 1 && set.name == shape.name && set.request == shape.request &&
           set.node_selector == shape.node_selector && set.tolerations == shape.tolerations &&
           set.gpu_models == shape.gpu_models && set.gpu_memory_mib == shape.gpu_memory_mib &&
           set.gpu_memory_only == shape.gpu_memory_only &&
           set.invalid_reason == shape.invalid_reason;
  }

  // --- holdings ---

  // The snapshot's MIG profiles: those its nodes advertise and its pods ask for, by name, so
  // that a build gives the same snapshot whatever the cache met before; at most
  // kMaxMigProfiles of them, the rest reported. Nodes count their devices of each, less those
  // other schedulers' pods hold, and pod sets name them by their index.
  void FinishMig() {
    core::Snapshot& snap = out_.snapshot;
    // No node or pod has named a profile since the cache began: nothing to count or number,
    // and no node, lent or not, holds a device.
    if (cache_.mig_names.names.empty()) return;
    std::vector<int> used;  // profiles in mig_names
    auto use = [&](int p) {
      if (p >= 0 && std::find(used.begin(), used.end(), p) == used.end()) used.push_back(p);
    };
    for (size_t i = 0; i < snap.nodes.size(); ++i)
      for (const auto& [p, count] : cache_.node_order[i]->mig) use(p);
    for (const core::Workload& w : snap.workloads)
      for (const core::PodSet& ps : w.pod_sets)
        if (ps.mig.devices > 0) use(ps.mig.profile);
    snap.mig_profiles.clear();
    if (used.empty()) {
      for (core::Node& n : snap.nodes) n.mig_devices = {};
      return;
    }
    std::vector<std::pair<std::string, int>> named;
    for (int p : used) named.emplace_back(cache_.mig_names.Name(p), p);
    std::sort(named.begin(), named.end());
    std::vector<int> lane(cache_.mig_names.names.size(), -1);
    for (const auto& [name, p] : named) {
      if (snap.mig_profiles.size() == static_cast<size_t>(core::kMaxMigProfiles)) {
        Problem("MIG profile " + name + ": the cluster names more than " +
                std::to_string(core::kMaxMigProfiles) +
                " MIG profiles; its devices are not scheduled");
        continue;
      }
      lane[static_cast<size_t>(p)] = static_cast<int>(snap.mig_profiles.size());
      snap.mig_profiles.push_back({name, core::MigProfileMilli(name)});
    }
    for (size_t i = 0; i < snap.nodes.size(); ++i) {
      core::Node& node = snap.nodes[i];
      node.mig_devices = {};
      for (const auto& [p, count] : cache_.node_order[i]->mig)
        if (const int l = lane[static_cast<size_t>(p)]; l >= 0)
          node.mig_devices[static_cast<size_t>(l)] = static_cast<uint8_t>(count);
    }
    for (const auto& [n, ask] : external_mig_) {
      const int l = lane[static_cast<size_t>(ask.profile)];
      if (l < 0) continue;
      uint8_t& devices = snap.nodes[n].mig_devices[static_cast<size_t>(l)];
      devices = static_cast<uint8_t>(std::max(0, devices - ask.devices));
    }
    for (core::Workload& w : snap.workloads) {
      for (core::PodSet& ps : w.pod_sets) {
        if (ps.mig.devices == 0) continue;
        const int l = lane[static_cast<size_t>(ps.mig.profile)];
        if (l < 0 && ps.invalid_reason.empty())
          ps.invalid_reason = "requests " + std::string(kMigResourcePrefix) +
                              cache_.mig_names.Name(ps.mig.profile) + "; the cluster names more " +
                              "than " + std::to_string(core::kMaxMigProfiles) + " MIG profiles";
        ps.mig.profile = static_cast<int8_t>(l);
      }
    }
  }

  // A reservation pod of chamberd's (docs/sharing.md, "Reservation pods"): recorded, its GPU
  // marked reserved where the node's agent reports it, its CPU, memory and pod slot left out of
  // the node's; never a workload, nor another scheduler's pod holding a GPU. Whether `p` is one.
  bool ReadReservation(const kube::Pod& p, const PodFacts& f) {
    if (options_.reservation_namespace.empty() ||
        p.metadata.namespace_name != options_.reservation_namespace ||
        !p.metadata.labels.contains(keys::kGpuReservation))
      return false;
    auto n = node_index_.find(p.node_name);
    if (n == node_index_.end()) return true;  // on no node we know: holds nothing we see
    GpuReservation r;
    r.key = f.key;
    r.uid = p.metadata.uid;
    r.node = n->second;
    r.deleting = !p.metadata.deletion_timestamp.empty();
    r.failed = f.terminal;
    r.created_ms = p.metadata.creation_timestamp.unix_ms();
    core::Node& node = out_.snapshot.nodes[static_cast<size_t>(r.node)];
    if (options_.devices != nullptr) {
      auto d = options_.devices->find(node.name);
      if (d != options_.devices->end() && d->second != nullptr) {
        auto it = d->second->find(r.key);
        const int gpus = static_cast<int>(node.gpus.size());
        if (it != d->second->end() && std::popcount(it->second) == 1 &&
            std::countr_zero(it->second) < gpus)
          r.gpu = std::countr_zero(it->second);
      }
    }
    if (!r.failed) {
      if (r.gpu >= 0 && !r.deleting) node.reserved_gpu_mask |= uint64_t{1} << r.gpu;
      node.allocatable -=
          Resources::Of(0, f.shape.request.cpu_milli(), f.shape.request.memory_bytes());
      node.max_pods -= 1;
    }
    out_.reservations.push_back(std::move(r));
    return true;
  }

  void AccountBoundPods() {
    // Per node: the device plugin's own assignment of whole GPUs where the node's agent reports
    // it, then annotated claims (in pod order), then the lowest free slots. A pod holding a
    // share of a GPU names one GPU, which other shares may hold too but no pod whole.
    std::vector<std::vector<size_t>> by_node(out_.snapshot.nodes.size());
    for (size_t i = 0; i < bound_.size(); ++i) by_node[bound_[i].node].push_back(i);
    for (size_t n = 0; n < by_node.size(); ++n) {
      core::Node& node = out_.snapshot.nodes[n];
      const int gpu_count = static_cast<int>(node.gpus.size());
      const uint64_t all = gpu_count >= 64 ? ~uint64_t{0} : (uint64_t{1} << gpu_count) - 1;
      uint64_t taken = 0;   // held whole
      uint64_t shared = 0;  // holding shares
      std::array<const kube::Pod*, core::kMaxGpusPerNode> whole_holder{};
      auto hold_whole = [&](const BoundPod& b) {
        taken |= b.mask;
        for (uint64_t m = b.mask; m != 0; m &= m - 1) whole_holder[std::countr_zero(m)] = b.pod;
      };
      std::vector<bool> placed(by_node[n].size(), false);
      if (options_.devices != nullptr) {
        auto d = options_.devices->find(node.name);
        if (d != options_.devices->end() && d->second != nullptr) {
          for (size_t k = 0; k < by_node[n].size(); ++k) {
            BoundPod& b = bound_[by_node[n][k]];
            if (b.request.gpu_share() || b.request.whole_gpus() == 0) continue;
            auto it = d->second->find(b.pod->metadata.Key());
            if (it == d->second->end()) continue;
            const uint64_t mask = it->second & all;
            if (mask == 0 || (mask & taken) != 0 || std::popcount(mask) != b.request.whole_gpus())
              continue;  // not as it asks (a stale report): its annotation or free slots below
            b.mask = mask;
            hold_whole(b);
            placed[k] = true;
          }
        }
      }
      std::vector<size_t> unplaced;
      for (size_t k = 0; k < by_node[n].size(); ++k) {
        if (placed[k]) continue;
        const size_t i = by_node[n][k];
        BoundPod& b = bound_[i];
        const bool share = b.request.gpu_share();
        const int64_t want = share ? 1 : b.request.whole_gpus();
        // A share holds the GPU its container was given, whoever else holds it; whole GPUs are
        // taken only where nothing else is.
        const uint64_t closed = share ? 0 : taken | shared;
        uint64_t mask = 0;
        bool ok = static_cast<int64_t>(b.annotated->size()) == want;
        for (int g : *b.annotated) {
          if (g < 0 || g >= gpu_count || (closed >> g & 1) || (mask >> g & 1)) ok = false;
          if (ok) mask |= uint64_t{1} << g;
        }
        if (!ok) {
          if (!b.annotated->empty())
            Problem("pod " + b.pod->metadata.Key() + ": annotation " + keys::kGpuIndices + "=" +
                    FormatIndexList(*b.annotated) + " does not match its " +
                    (share ? std::string("share of one GPU") : std::to_string(want) + " GPUs") +
                    " on node " + node.name + "; given free GPU slots instead");
          unplaced.push_back(i);
          continue;
        }
        b.mask = mask;
        if (share && (mask & taken) != 0)
          Problem("pod " + b.pod->metadata.Key() + ": its share of GPU " +
                  std::to_string(std::countr_zero(mask)) + " on node " + node.name +
                  " is beside pod " + whole_holder[std::countr_zero(mask)]->metadata.Key() +
                  ", which holds that GPU whole");
        if (share)
          shared |= mask;
        else
          hold_whole(b);
      }
      for (size_t i : unplaced) {
        BoundPod& b = bound_[i];
        const bool share = b.request.gpu_share();
        int64_t want = share ? 1 : b.request.whole_gpus();
        const uint64_t closed = share ? taken : taken | shared;
        for (int g = 0; g < gpu_count && want > 0; ++g)
          if (!(closed >> g & 1) && !(b.mask >> g & 1)) {
            b.mask |= uint64_t{1} << g;
            --want;
          }
        if (share)
          shared |= b.mask;
        else
          hold_whole(b);
        if (want > 0)
          Problem("node " + node.name + ": pod " + b.pod->metadata.Key() +
                  " holds more GPUs than "
                  "the node has free");
      }
      for (size_t i : by_node[n]) {
        BoundPod& b = bound_[i];
        if (b.workload >= 0) {
          out_.snapshot.workloads[b.workload].placements[b.placement] = {
              NodeId{static_cast<int32_t>(n)}, b.mask};
          continue;
        }
        node.external_gpu_mask |= b.mask;
        if (b.mig.devices > 0) external_mig_.push_back({n, b.mig});
        node.allocatable -= Resources::Of(0, b.request.cpu_milli(), b.request.memory_bytes());
        node.max_pods -= 1;
      }
      for (core::Resource r : {core::Resource::kCpu, core::Resource::kMemory})
        node.allocatable[r] = std::max<int64_t>(node.allocatable[r], 0);
      node.max_pods = std::max(node.max_pods, 0);
    }
  }

  // Shares of memory alone (docs/sharing.md, "A share of memory alone"): each pod set's part of
  // a GPU, its memory over the GPU's rounded up. A running pod set's, by the smallest GPU its
  // pods are on; a waiting one's, by the smallest GPU it may go on (memory known and at least
  // its own, on a node that takes shares, of a model it names): never less than it will hold.
  // Made afresh each build, as it depends on the nodes.
  void ChargeMemoryShares() {
    core::Snapshot& snap = out_.snapshot;
    // The GPUs a waiting share may go on, found once and only when needed.
    std::optional<core::ShareableGpuMemories> kinds;
    auto smallest = [&](const core::PodSet& ps) {
      if (!kinds) kinds.emplace(snap.nodes);
      return kinds->SmallestFor(ps);
    };
    for (core::Workload& w : snap.workloads) {
      size_t first = 0;  // the pod set's first placement (a running workload's)
      for (core::PodSet& ps : w.pod_sets) {
        const size_t end = first + static_cast<size_t>(ps.count);
        if (!ps.gpu_memory_only) {
          first = end;
          continue;
        }
        if (ps.invalid_reason.starts_with(kNoGpuForMemory)) ps.invalid_reason.clear();
        int64_t milli = 0;
        for (size_t i = first; i < end && i < w.placements.size(); ++i) {
          const core::PodPlacement& pl = w.placements[i];
          if (!pl.node.valid() || pl.node.index() >= snap.nodes.size() || pl.gpu_mask == 0)
            continue;
          const core::Node& n = snap.nodes[pl.node.index()];
          const auto g = static_cast<size_t>(std::countr_zero(pl.gpu_mask));
          if (g < n.gpus.size())
            milli = std::max(milli,
                             gpu_share::MemoryShareMilli(ps.gpu_memory_mib, n.gpus[g].memory_mib));
        }
        if (milli == 0) milli = gpu_share::MemoryShareMilli(ps.gpu_memory_mib, smallest(ps));
        if (milli == 0) {
          milli = 999;  // waits, invalid, holding nothing
          if (ps.invalid_reason.empty())
            ps.invalid_reason = std::string(kNoGpuForMemory) + std::to_string(ps.gpu_memory_mib) +
                                " MiB alone: no GPU it may go on has that much memory (GPU memory "
                                "is read from the nodes' nvidia.com/gpu.memory label)";
        }
        ps.request[core::Resource::kGpu] = milli;
        first = end;
      }
    }
  }
  static constexpr std::string_view kNoGpuForMemory = "annotation chamber.io/gpu-memory asks for ";

  // What one unit of `gpu_resource` a node advertises is worth, in thousandths of a GPU
  // (docs/sharing.md, "Nodes whose device plugin divides GPUs"): a GPU's time over its replicas
  // (rounded down), a MIG device of the single strategy its profile's part, or both; 1,000 for a
  // node whose device plugin does not divide its GPUs.
  static int32_t UnitMilli(const core::Node& n) {
    if (!n.device_plugin_shares) return core::kMilliPerGpu;
    auto label = [&](std::string_view key) -> const std::string* {
      for (const auto& [k, v] : *n.labels)
        if (k == key) return &v;
      return nullptr;
    };
    int64_t milli = core::kMilliPerGpu;
    const std::string* strategy = label(keys::kMigStrategy);
    const std::string* product = label(keys::kGpuProduct);
    if (strategy != nullptr && *strategy == "single" && product != nullptr)
      if (const size_t at = product->find("-MIG-"); at != std::string::npos)
        if (const int32_t m = core::MigProfileMilli(std::string_view(*product).substr(at + 5));
            m > 0)
          milli = m;
    if (const std::string* r = label(keys::kGpuReplicas))
      if (auto v = ParseInt(*r); v.ok() && *v > 1) milli /= *v;
    return static_cast<int32_t>(std::max<int64_t>(milli, 1));
  }

  // Pods of whole GPUs on nodes whose device plugin divides GPUs are charged the part of a GPU
  // their units are (PodSet::gpu_charge_milli): once bound, the most any pod of the set holds;
  // waiting, the largest unit of the nodes the pod may go on (its node selector and GPU models
  // match), so never less than it will hold. Made afresh each build; nothing to do where no
  // node divides its GPUs.
  void ChargeDividedUnits() {
    core::Snapshot& snap = out_.snapshot;
    std::vector<int32_t> unit(snap.nodes.size(), core::kMilliPerGpu);
    bool any = false;
    for (size_t n = 0; n < snap.nodes.size(); ++n) {
      unit[n] = UnitMilli(snap.nodes[n]);
      any = any || unit[n] != core::kMilliPerGpu;
    }
    // The largest unit a waiting pod set may go on, by its node selector and GPU models.
    std::map<std::string, int32_t> largest_for;
    auto largest = [&](const core::PodSet& ps) {
      std::string key;
      for (const auto& [k, v] : ps.node_selector) key += k + "=" + v + ";";
      for (const std::string& m : ps.gpu_models) key += m + "|";
      auto [it, inserted] = largest_for.try_emplace(key, 0);
      if (!inserted) return it->second;
      for (size_t n = 0; n < snap.nodes.size() && it->second < core::kMilliPerGpu; ++n) {
        const core::Node& node = snap.nodes[n];
        if (node.gpus.empty() || unit[n] <= it->second) continue;
        if (!ps.gpu_models.empty() && std::find(ps.gpu_models.begin(), ps.gpu_models.end(),
                                                node.gpus[0].model.str()) == ps.gpu_models.end())
          continue;
        const bool selected =
            std::all_of(ps.node_selector.begin(), ps.node_selector.end(), [&](const auto& want) {
              return std::find(node.labels->begin(), node.labels->end(), want) !=
                     node.labels->end();
            });
        if (selected) it->second = unit[n];
      }
      return it->second;
    };
    for (core::Workload& w : snap.workloads) {
      size_t first = 0;  // the pod set's first placement (a running workload's)
      for (core::PodSet& ps : w.pod_sets) {
        const size_t end = first + static_cast<size_t>(ps.count);
        ps.gpu_charge_milli = 0;
        const int64_t k = ps.request.whole_gpus();
        if (!any || k == 0 || ps.request.gpu_share()) {
          first = end;
          continue;
        }
        int64_t charge = 0;
        for (size_t i = first; i < end && i < w.placements.size(); ++i) {
          const core::PodPlacement& pl = w.placements[i];
          if (pl.node.valid() && pl.node.index() < snap.nodes.size())
            charge = std::max(charge, k * unit[pl.node.index()]);
        }
        if (charge == 0) charge = k * largest(ps);
        if (charge > 0 && charge < k * core::kMilliPerGpu)
          ps.gpu_charge_milli = static_cast<int32_t>(charge);
        first = end;
      }
    }
  }

  const ClusterObjects& objects_;
  const BuildOptions& options_;
  BuiltSnapshot out_;
  std::map<std::string, int32_t> priority_classes_;
  int32_t default_priority_ = 0;
  std::map<std::string, std::string> namespace_queue_;
  std::unordered_map<std::string, const kube::Job*> jobs_by_uid_;
  std::unordered_map<std::string, const kube::Object*> owners_by_uid_;
  std::unordered_map<const kube::Object*, const kube::Object*> top_of_;  // TopOf each owner
  // Top-level objects with a Job that has not finished and whose suspension the Job controller
  // has not acted on (Gang::suspend_seen).
  std::unordered_set<const kube::Object*> stopping_;
  std::unordered_map<std::string, const kube::Object*> lws_by_name_;  // by "namespace/name"
  // The upstream PodGroups that read, by "namespace/name".
  std::unordered_map<std::string, UpstreamGroup> pod_groups_;  // by UpstreamRef::group
  std::unordered_set<std::string> workloads_;  // 1.35 Workloads that read, "namespace/name"
  // The objects of known kinds each one controls (a TrainJob's JobSet, a RayJob's RayCluster).
  std::unordered_map<const kube::Object*, std::vector<const std::shared_ptr<const kube::Object>*>>
      parts_;
  BuildCache::State& cache_;
  std::unordered_map<std::string, int32_t> node_index_;
  // MIG devices other schedulers' bound pods hold: (node, ask), the profile in mig_names.
  std::vector<std::pair<size_t, core::MigAsk>> external_mig_;
  std::vector<BoundPod> bound_;
  std::set<std::string> running_groups_;
  std::unordered_set<const PodEntry*> reserved_;  // serving replicas that run reserved
  bool take_over_ = false;      // a changed bare pod may take over its workload (TakeOverPrevious)
  bool reuse_singles_ = false;  // and an unchanged one moves its workload over (AddSingle)
};

namespace {

const std::string kNoString;

// What a source's workload is about: its Job, else its first pod; null for neither.
const kube::ObjectMeta* Subject(const WorkloadSource& s) {
  if (s.job) return &s.job->metadata;
  if (s.owner) return &s.owner->metadata;
  return s.pods.empty() || s.pods[0].empty() ? nullptr : &s.pods[0][0].pod->metadata;
}

}  // namespace

const std::string& WorkloadSource::namespace_name() const {
  const kube::ObjectMeta* m = Subject(*this);
  return m != nullptr ? m->namespace_name : kNoString;
}

const std::string& WorkloadSource::name() const {
  if (kind == Kind::kPodGroup) return group;
  const kube::ObjectMeta* m = Subject(*this);
  return m != nullptr ? m->name : kNoString;
}

const kube::ResourceType& WorkloadSource::SuspendableType() const {
  return kind == Kind::kOwner && owner_kind != nullptr ? owner_kind->type : kube::resources::kJobs;
}

const std::string& WorkloadSource::suspendable_uid() const {
  return Suspendable() && Subject(*this) != nullptr ? Subject(*this)->uid : kNoString;
}

const std::string& WorkloadSource::suspendable_resource_version() const {
  return Suspendable() && Subject(*this) != nullptr ? Subject(*this)->resource_version : kNoString;
}

kube::Json WorkloadSource::SuspendPatch(bool suspend) const {
  if (kind == Kind::kOwner && owner_kind != nullptr) return owner_kind->SuspendPatch(suspend);
  return {{"spec", {{"suspend", suspend}}}};
}

kube::Json WorkloadSource::Involved() const {
  const kube::ObjectMeta* m = Subject(*this);
  const kube::ObjectMeta none;
  if (m == nullptr) m = &none;
  const kube::ResourceType& type = job || owner ? SuspendableType() : kube::resources::kPods;
  return {{"apiVersion", type.ApiVersion()},
          {"kind", type.kind},
          {"metadata", {{"name", m->name}, {"namespace", m->namespace_name}, {"uid", m->uid}}}};
}

size_t BuildCache::Prepare(const ClusterObjects& objects, const BuildOptions& options) {
  return Builder(objects, options, state_.get()).Prepare();
}

BuiltSnapshot BuildSnapshot(const ClusterObjects& objects, const BuildOptions& options) {
  if (options.cache != nullptr)
    return Builder(objects, options, options.cache->state_.get()).Build();
  BuildCache once;
  return Builder(objects, options, once.state_.get()).Build();
}

std::vector<std::string> WorkloadSource::PodKeys() const {
  std::vector<std::string> out;
  for (const auto& set : pods)
    for (const PodRef& ref : set) out.push_back(ref.Key());
  return out;
}

bool WorkloadSource::IsPodNamed(std::string_view key) const {
  if (kind != Kind::kPod || pods.size() != 1 || pods[0].size() != 1) return false;
  const PodRef& p = pods[0][0];
  return key.size() == p.namespace_name().size() + 1 + p.name().size() &&
         key.starts_with(p.namespace_name()) && key[p.namespace_name().size()] == '/' &&
         key.ends_with(p.name());
}

Result<std::vector<int>> ParseIndexList(std::string_view text) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (const std::string& item : SplitCommaList(text)) {
    Result<int64_t> v = ParseInt(item);
    if (!v.ok() || *v < 0 || *v >= core::kMaxGpusPerNode)
      return Status::InvalidArgument("\"" + item + "\" is not a GPU index (0 to " +
                                     std::to_string(core::kMaxGpusPerNode - 1) + ")");
    if (std::find(out.begin(), out.end(), *v) != out.end())
      return Status::InvalidArgument("GPU index " + item + " appears twice");
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

std::string FormatIndexList(const std::vector<int>& indices) {
  std::string out;
  for (int i : indices) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

std::vector<int> MaskToIndices(uint64_t mask) {
  std::vector<int> out;
  while (mask != 0) {
    out.push_back(std::countr_zero(mask));
    mask &= mask - 1;
  }
  return out;
}

}  // namespace chamber::backend
