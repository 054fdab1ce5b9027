#include "controller/snapshot_builder.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <set>
#include <unordered_map>

#include "kube/client.h"

namespace chamber::controller {
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

int64_t UnixMs(const std::string& rfc3339) {
  if (rfc3339.empty()) return 0;
  auto t = kube::ParseTime(rfc3339);
  if (!t.ok()) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count();
}

bool Terminal(const kube::Pod& p) { return p.phase == "Succeeded" || p.phase == "Failed"; }

core::TaintEffect Effect(const std::string& e) {
  if (e == "NoExecute") return core::TaintEffect::kNoExecute;
  if (e == "PreferNoSchedule") return core::TaintEffect::kPreferNoSchedule;
  return core::TaintEffect::kNoSchedule;
}

// Reads the annotations and labels of a pod or Job (annotation first, then label).
struct Meta {
  const kube::ObjectMeta* first;
  const kube::ObjectMeta* second = nullptr;  // e.g. a Job's template metadata
  const std::string* Get(const std::string& key) const {
    for (const kube::ObjectMeta* m : {first, second}) {
      if (m == nullptr) continue;
      if (const std::string* v = Find(m->annotations, key)) return v;
      if (const std::string* v = Find(m->labels, key)) return v;
    }
    return nullptr;
  }
};

class Builder {
 public:
  Builder(const ClusterObjects& objects, const BuildOptions& options)
      : objects_(objects), options_(options) {}

  BuiltSnapshot Build() {
    out_.snapshot.now = options_.now;
    out_.snapshot.queues = objects_.queues;
    IndexObjects();
    BuildNodes();
    CollectWorkloads();
    AccountBoundPods();
    return std::move(out_);
  }

 private:
  struct BoundPod {
    const kube::Pod* pod;
    int32_t node = -1;
    core::Resources request;     // GPUs, CPU and memory it holds
    std::vector<int> annotated;  // valid indices from the annotation (or the assumption)
    uint64_t mask = 0;           // assigned in AccountBoundPods
    int workload = -1;           // snapshot workload holding it, or -1: external
    size_t placement = 0;        // its index in that workload's placements
  };

  void Problem(std::string text) { out_.problems.push_back(std::move(text)); }

  void IndexObjects() {
    for (const auto& pc : objects_.priority_classes) {
      priority_classes_[pc->metadata.name] = pc->value;
      if (pc->global_default) default_priority_ = pc->value;
    }
    for (const auto& ns : objects_.namespaces)
      if (const std::string* q = Find(ns->metadata.labels, keys::kQueue))
        namespace_queue_[ns->metadata.name] = *q;
    for (const auto& job : objects_.jobs) jobs_by_uid_[job->metadata.uid] = job.get();
  }

  void BuildNodes() {
    std::vector<const kube::Node*> nodes;
    for (const auto& n : objects_.nodes) nodes.push_back(n.get());
    std::sort(nodes.begin(), nodes.end(),
              [](auto* a, auto* b) { return a->metadata.name < b->metadata.name; });
    for (const kube::Node* kn : nodes) {
      core::Node n;
      n.name = kn->metadata.name;
      for (const auto& [k, v] : kn->metadata.labels) n.labels.emplace_back(k, v);
      for (const kube::Taint& t : kn->taints)
        n.taints.push_back({t.key, t.value, Effect(t.effect)});
      n.unschedulable = kn->unschedulable || !kn->Ready();
      n.allocatable = Resources::Of(0, kn->allocatable.Get("cpu"), kn->allocatable.Get("memory"));
      n.max_pods = static_cast<int32_t>(
          kn->allocatable.values.count("pods") ? kn->allocatable.Get("pods") : 110);
      int64_t gpus = kn->allocatable.Get(options_.gpu_resource);
      if (gpus > core::kMaxGpusPerNode) {
        Problem("node " + n.name + ": " + std::to_string(gpus) + " GPUs; only the first " +
                std::to_string(core::kMaxGpusPerNode) + " are scheduled");
        gpus = core::kMaxGpusPerNode;
      }
      const std::string* product = Find(kn->metadata.labels, keys::kGpuProduct);
      int64_t memory_mib = 0;
      if (const std::string* m = Find(kn->metadata.labels, keys::kGpuMemory)) {
        if (auto v = ParseInt(*m); v.ok()) memory_mib = *v;
      }
      std::vector<std::string> uuids;
      if (const std::string* u = Find(kn->metadata.annotations, keys::kGpuUuids))
        uuids = SplitCommaList(*u);
      for (int64_t g = 0; g < gpus; ++g) {
        core::Gpu gpu;
        gpu.uuid = static_cast<size_t>(g) < uuids.size() && !uuids[g].empty()
                       ? uuids[g]
                       : n.name + "/gpu" + std::to_string(g);
        gpu.model = product ? *product : "";
        gpu.memory_mib = memory_mib;
        n.gpus.push_back(std::move(gpu));
      }
      if (const std::string* bad = Find(kn->metadata.annotations, keys::kUnhealthyGpus)) {
        Result<std::vector<int>> idx = ParseIndexList(*bad);
        if (!idx.ok()) {
          Problem("node " + n.name + ": annotation " + keys::kUnhealthyGpus + ": " +
                  idx.status().message() + "; every GPU of the node is taken as unhealthy");
          for (core::Gpu& g : n.gpus) g.healthy = false;
        } else {
          for (int i : *idx)
            if (i < static_cast<int>(n.gpus.size())) n.gpus[i].healthy = false;
        }
      }
      if (const std::string* v = Find(kn->metadata.labels, keys::kGpuClique))
        n.topology.nvlink_domain = *v;
      if (const std::string* v = Find(kn->metadata.labels, keys::kBlock)) n.topology.block = *v;
      if (const std::string* v = Find(kn->metadata.labels, keys::kZone)) n.topology.zone = *v;
      node_index_[n.name] = static_cast<int32_t>(out_.snapshot.nodes.size());
      out_.snapshot.nodes.push_back(std::move(n));
    }
  }

  // --- workloads ---

  std::string QueueOf(const Meta& meta, const std::string& ns) const {
    if (const std::string* q = meta.Get(keys::kQueue)) return *q;
    auto it = namespace_queue_.find(ns);
    return it == namespace_queue_.end() ? "" : it->second;
  }

  int32_t PriorityOfClass(const std::string& name) const {
    if (name.empty()) return default_priority_;
    auto it = priority_classes_.find(name);
    return it == priority_classes_.end() ? default_priority_ : it->second;
  }

  int32_t PodPriority(const kube::Pod& p) const {
    return p.priority ? *p.priority : PriorityOfClass(p.priority_class_name);
  }

  // Reads an integer annotation; a bad value is a problem and reads as empty.
  std::optional<int64_t> IntKey(const Meta& meta, const char* key, const std::string& what) {
    const std::string* v = meta.Get(key);
    if (v == nullptr) return std::nullopt;
    Result<int64_t> r = ParseInt(*v);
    if (!r.ok() || *r < 0) {
      Problem(what + ": " + key + ": " +
              (r.ok() ? "\"" + *v + "\" must not be negative" : r.status().message()) +
              "; ignored");
      return std::nullopt;
    }
    return *r;
  }

  core::PodSet PodSetOf(const kube::Pod& p, const Meta& meta) {
    core::PodSet s;
    s.name = p.metadata.name;
    const kube::ResourceList req = p.Requests();
    s.request = Resources::Of(req.Get(options_.gpu_resource), req.Get("cpu"), req.Get("memory"));
    for (const auto& [k, v] : p.node_selector) s.node_selector.emplace_back(k, v);
    for (const kube::Toleration& t : p.tolerations) {
      core::Toleration ct;
      ct.key = t.key;
      ct.op = t.op == "Exists" ? core::Toleration::Operator::kExists
                               : core::Toleration::Operator::kEqual;
      ct.value = t.value;
      if (!t.effect.empty()) ct.effect = Effect(t.effect);
      s.tolerations.push_back(std::move(ct));
    }
    if (const std::string* models = meta.Get(keys::kGpuModels))
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
    return k;
  }

  void CommonFields(core::Workload* w, const Meta& meta, const std::string& what) {
    if (auto g = IntKey(meta, keys::kCheckpointGrace, what))
      w->checkpoint_grace_seconds = static_cast<int32_t>(*g);
    if (const std::string* c = meta.Get(keys::kLastCheckpoint)) {
      auto t = kube::ParseTime(*c);
      if (t.ok())
        w->last_checkpoint_time = std::chrono::duration_cast<core::Time>(t->time_since_epoch());
      else
        Problem(what + ": " + keys::kLastCheckpoint + ": " + t.status().message() + "; ignored");
    }
  }

  // Adds a workload of `pods` (pending or bound), grouping pods of one shape into a pod set.
  // `uniform`: the pods share one shape (a Job's pods come from one template; a lone pod), so
  // the first pod's makes the one pod set and no shapes are compared.
  int AddWorkload(core::Workload w, WorkloadSource src, const std::vector<const kube::Pod*>& pods,
                  const Meta& meta, bool running, bool uniform) {
    auto ref = [](const kube::Pod* p) {
      return PodRef{p->metadata.namespace_name, p->metadata.name, p->metadata.uid,
                    p->metadata.resource_version};
    };
    if (uniform) {
      core::PodSet s = PodSetOf(*pods.front(), Meta{&pods.front()->metadata, meta.first});
      s.count = static_cast<int32_t>(pods.size());
      w.pod_sets.push_back(std::move(s));
      src.pods.emplace_back();
      src.pods[0].reserve(pods.size());
      for (const kube::Pod* p : pods) src.pods[0].push_back(ref(p));
    } else {
      std::map<std::string, size_t> set_of_shape;
      for (const kube::Pod* p : pods) {
        core::PodSet s = PodSetOf(*p, Meta{&p->metadata, meta.first});
        const std::string key = ShapeKey(s);
        auto [it, inserted] = set_of_shape.try_emplace(key, w.pod_sets.size());
        if (inserted) {
          s.count = 0;
          w.pod_sets.push_back(std::move(s));
          src.pods.emplace_back();
        }
        w.pod_sets[it->second].count++;
        src.pods[it->second].push_back(ref(p));
      }
    }
    const int id = static_cast<int>(out_.snapshot.workloads.size());
    if (running) {
      // Placements follow pod-set order; remember each bound pod's slot.
      w.placements.resize(pods.size());
      size_t slot = 0;
      for (const auto& set : src.pods)
        for (const PodRef& ref : set) {
          BoundPod& b = bound_[bound_by_uid_.at(ref.uid)];
          b.workload = id;
          b.placement = slot++;
        }
    }
    for (const auto& set : src.pods)
      for (const PodRef& ref : set) src.pod_keys.push_back(ref.Key());
    out_.snapshot.workloads.push_back(std::move(w));
    out_.sources.push_back(std::move(src));
    return id;
  }

  core::Time EarliestBind(const std::vector<const kube::Pod*>& pods) const {
    int64_t start = 0;
    for (const kube::Pod* p : pods) {
      const kube::Json* status =
          p->raw.is_object() && p->raw.contains("status") ? &p->raw["status"] : nullptr;
      const bool started = status != nullptr && status->is_object() &&
                           status->contains("startTime") && (*status)["startTime"].is_string();
      int64_t t = started ? UnixMs((*status)["startTime"].get<std::string>()) : 0;
      if (t == 0) t = options_.now.count();  // bound, not yet started
      if (start == 0 || t < start) start = t;
    }
    return core::Time(start);
  }

  void CollectWorkloads() {
    // Bound pods of every scheduler, and our pending pods by the gang they belong to.
    std::map<std::string, std::vector<const kube::Pod*>> job_pending, job_bound, job_terminating;
    std::map<std::string, std::vector<const kube::Pod*>> group_pending, group_bound;
    std::vector<const kube::Pod*> single_pending, single_bound;
    std::vector<const kube::Pod*> pods;
    for (const auto& p : objects_.pods) pods.push_back(p.get());
    std::sort(pods.begin(), pods.end(), [](auto* a, auto* b) {
      if (a->metadata.namespace_name != b->metadata.namespace_name)
        return a->metadata.namespace_name < b->metadata.namespace_name;
      return a->metadata.name < b->metadata.name;
    });
    for (const kube::Pod* p : pods) {
      if (Terminal(*p)) continue;
      std::string node = p->node_name;
      std::vector<int> annotated;
      if (options_.assumed != nullptr) {
        auto it = options_.assumed->find(p->metadata.uid);
        if (it != options_.assumed->end() && (node.empty() || node == it->second.node)) {
          node = it->second.node;
          annotated = it->second.gpu_indices;
        }
      }
      const bool ours = p->scheduler_name == options_.scheduler_name;
      if (!node.empty()) {
        auto n = node_index_.find(node);
        if (n == node_index_.end()) continue;  // on a node we do not know: holds nothing we see
        if (annotated.empty())
          if (const std::string* a = Find(p->metadata.annotations, keys::kGpuIndices)) {
            Result<std::vector<int>> idx = ParseIndexList(*a);
            if (idx.ok())
              annotated = *idx;
            else
              Problem("pod " + p->metadata.Key() + ": annotation " + keys::kGpuIndices + ": " +
                      idx.status().message() + "; given free GPU slots instead");
          }
        bound_by_uid_[p->metadata.uid] = bound_.size();
        const kube::ResourceList req = p->Requests();
        bound_.push_back(
            {p, n->second,
             core::Resources::Of(req.Get(options_.gpu_resource), req.Get("cpu"), req.Get("memory")),
             std::move(annotated)});
      }
      if (!ours) continue;
      const bool deleting = !p->metadata.deletion_timestamp.empty();
      const kube::Job* job = OwningJob(*p);
      if (job != nullptr) {
        const std::string key = job->metadata.uid;
        if (deleting) {
          if (!node.empty()) job_terminating[key].push_back(p);
        } else {
          (node.empty() ? job_pending : job_bound)[key].push_back(p);
        }
        continue;
      }
      if (deleting) continue;
      if (const std::string* g = Find(p->metadata.labels, keys::kPodGroup)) {
        (node.empty() ? group_pending : group_bound)[p->metadata.namespace_name + "/" + *g]
            .push_back(p);
        continue;
      }
      (node.empty() ? single_pending : single_bound).push_back(p);
    }

    std::vector<const kube::Job*> jobs;
    for (const auto& j : objects_.jobs) jobs.push_back(j.get());
    std::sort(jobs.begin(), jobs.end(),
              [](auto* a, auto* b) { return a->metadata.Key() < b->metadata.Key(); });
    for (const kube::Job* job : jobs)
      AddJob(*job, job_pending[job->metadata.uid], job_bound[job->metadata.uid],
             job_terminating[job->metadata.uid]);
    for (auto& [key, members] : group_bound) AddGroup(key, members, true);
    for (auto& [key, members] : group_pending) AddGroup(key, members, false);
    for (const kube::Pod* p : single_bound) AddSingle(*p, true);
    for (const kube::Pod* p : single_pending) AddSingle(*p, false);
  }

  const kube::Job* OwningJob(const kube::Pod& p) const {
    for (const kube::OwnerReference& o : p.metadata.owner_references)
      if (o.controller && o.kind == "Job") {
        auto it = jobs_by_uid_.find(o.uid);
        return it == jobs_by_uid_.end() ? nullptr : it->second;
      }
    return nullptr;
  }

  static bool JobFinished(const kube::Job& j) {
    for (const kube::Condition& c : j.conditions)
      if ((c.type == "Complete" || c.type == "Failed") && c.status == "True") return true;
    return false;
  }

  void AddJob(const kube::Job& job, const std::vector<const kube::Pod*>& pending,
              const std::vector<const kube::Pod*>& bound,
              const std::vector<const kube::Pod*>& terminating) {
    if (JobFinished(job)) return;
    const std::string what = "job " + job.metadata.Key();
    Result<kube::Pod> tmpl = kube::Pod::FromJson(job.template_spec);
    if (!tmpl.ok()) {
      Problem(what + ": spec.template: " + tmpl.status().message());
      return;
    }
    if (tmpl->scheduler_name != options_.scheduler_name) return;
    const Meta meta{&job.metadata, &tmpl->metadata};
    const bool preempted = Find(job.metadata.annotations, keys::kPreemptedAt) != nullptr;
    if (job.suspend && !preempted) return;  // paused by its owner

    core::Workload w;
    w.name = job.metadata.Key();
    w.queue = QueueOf(meta, job.metadata.namespace_name);
    w.priority = !pending.empty() ? PodPriority(*pending.front())
                 : !bound.empty() ? PodPriority(*bound.front())
                                  : PriorityOfClass(tmpl->priority_class_name);
    w.submit_time = core::Time(UnixMs(job.metadata.creation_timestamp));
    CommonFields(&w, meta, what);
    if (const std::string* p = Find(job.metadata.annotations, keys::kPreemptions)) {
      std::vector<std::string> items = SplitCommaList(*p);
      for (const std::string& s : items)
        if (auto v = ParseInt(s); v.ok()) w.recent_preemptions.push_back(core::Time(*v * 1000));
    }
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kJob;
    src.namespace_name = job.metadata.namespace_name;
    src.name = job.metadata.name;
    src.job_uid = job.metadata.uid;
    src.job_resource_version = job.metadata.resource_version;
    src.involved = {"batch/v1", "Job", job.metadata.name, job.metadata.uid};

    int32_t want = job.parallelism.value_or(1);
    if (job.completions) want = std::min(want, *job.completions - job.succeeded);
    if (auto m = IntKey(meta, keys::kMinMember, what)) w.min_member = static_cast<int32_t>(*m);

    if (job.suspend) {
      std::vector<const kube::Pod*> holding = bound;
      holding.insert(holding.end(), terminating.begin(), terminating.end());
      if (!holding.empty()) {  // our victim, still releasing its GPUs
        w.state = core::WorkloadState::kPreempting;
        w.start_time = EarliestBind(holding);
        AddWorkload(std::move(w), std::move(src), holding, meta, true, true);
        return;
      }
      w.state = core::WorkloadState::kSuspended;
      core::PodSet s = PodSetOf(*tmpl, meta);
      s.name = job.metadata.name;
      s.count = std::max(want, 1);
      w.pod_sets.push_back(std::move(s));
      src.pods.emplace_back();
      out_.snapshot.workloads.push_back(std::move(w));
      out_.sources.push_back(std::move(src));
      return;
    }
    if (!bound.empty()) {
      core::Workload running = w;
      running.state = core::WorkloadState::kRunning;
      running.start_time = EarliestBind(bound);
      running.min_member = 0;
      AddWorkload(std::move(running), src, bound, meta, true, true);
      if (pending.empty()) return;
      // Pods the Job added while it runs (replacements, later completions) join it one by one.
      w.name += "+pending";
      w.min_member = 1;
      AddWorkload(std::move(w), std::move(src), pending, meta, false, true);
      return;
    }
    if (want <= 0 || pending.empty()) return;
    const int32_t needed = w.min_member > 0 ? std::min(w.min_member, want) : want;
    if (static_cast<int32_t>(pending.size()) < needed) {
      ++out_.incomplete_gangs;  // the Job controller is still creating its pods
      return;
    }
    AddWorkload(std::move(w), std::move(src), pending, meta, false, true);
  }

  void AddGroup(const std::string& key, const std::vector<const kube::Pod*>& members,
                bool running) {
    const kube::Pod& first = *members.front();
    const Meta meta{&first.metadata};
    const std::string what = "pod group " + key;
    core::Workload w;
    w.name = key;
    w.queue = QueueOf(meta, first.metadata.namespace_name);
    w.priority = PodPriority(first);
    int64_t submit = 0;
    int64_t min_member = 0;
    for (const kube::Pod* p : members) {
      const int64_t t = UnixMs(p->metadata.creation_timestamp);
      if (submit == 0 || t < submit) submit = t;
      if (auto m = IntKey(Meta{&p->metadata}, keys::kMinMember, "pod " + p->metadata.Key()))
        min_member = std::max(min_member, *m);
    }
    w.submit_time = core::Time(submit);
    CommonFields(&w, meta, what);
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kPodGroup;
    src.namespace_name = first.metadata.namespace_name;
    src.name = key.substr(key.find('/') + 1);
    src.involved = {"v1", "Pod", first.metadata.name, first.metadata.uid};
    if (running) {
      w.state = core::WorkloadState::kRunning;
      w.start_time = EarliestBind(members);
      AddWorkload(std::move(w), std::move(src), members, meta, true, false);
      return;
    }
    // A group whose gang is partly running: the rest joins it one by one.
    for (const WorkloadSource& s : out_.sources)
      if (s.kind == WorkloadSource::Kind::kPodGroup && s.namespace_name == src.namespace_name &&
          s.name == src.name) {
        w.name += "+pending";
        min_member = 1;
        break;
      }
    if (static_cast<int64_t>(members.size()) < min_member) {
      ++out_.incomplete_gangs;
      return;
    }
    w.min_member = static_cast<int32_t>(min_member);
    AddWorkload(std::move(w), std::move(src), members, meta, false, false);
  }

  void AddSingle(const kube::Pod& p, bool running) {
    const Meta meta{&p.metadata};
    core::Workload w;
    w.name = p.metadata.Key();
    w.queue = QueueOf(meta, p.metadata.namespace_name);
    w.priority = PodPriority(p);
    w.submit_time = core::Time(UnixMs(p.metadata.creation_timestamp));
    CommonFields(&w, meta, "pod " + w.name);
    WorkloadSource src;
    src.kind = WorkloadSource::Kind::kPod;
    src.namespace_name = p.metadata.namespace_name;
    src.name = p.metadata.name;
    src.involved = {"v1", "Pod", p.metadata.name, p.metadata.uid};
    if (running) {
      w.state = core::WorkloadState::kRunning;
      w.start_time = EarliestBind({&p});
    }
    AddWorkload(std::move(w), std::move(src), {&p}, meta, running, true);
  }

  // --- holdings ---

  void AccountBoundPods() {
    // Per node: annotated claims first (in pod order), then the lowest free slots.
    std::vector<std::vector<size_t>> by_node(out_.snapshot.nodes.size());
    for (size_t i = 0; i < bound_.size(); ++i) by_node[bound_[i].node].push_back(i);
    for (size_t n = 0; n < by_node.size(); ++n) {
      core::Node& node = out_.snapshot.nodes[n];
      const int gpu_count = static_cast<int>(node.gpus.size());
      uint64_t taken = 0;
      std::vector<size_t> unplaced;
      for (size_t i : by_node[n]) {
        BoundPod& b = bound_[i];
        const int64_t want = b.request.gpu();
        uint64_t mask = 0;
        bool ok = static_cast<int64_t>(b.annotated.size()) == want;
        for (int g : b.annotated) {
          if (g < 0 || g >= gpu_count || (taken >> g & 1) || (mask >> g & 1)) ok = false;
          if (ok) mask |= uint64_t{1} << g;
        }
        if (!ok) {
          if (!b.annotated.empty())
            Problem("pod " + b.pod->metadata.Key() + ": annotation " + keys::kGpuIndices + "=" +
                    FormatIndexList(b.annotated) + " does not match its " + std::to_string(want) +
                    " GPUs on node " + node.name + "; given free GPU slots instead");
          unplaced.push_back(i);
          continue;
        }
        b.mask = mask;
        taken |= mask;
      }
      for (size_t i : unplaced) {
        BoundPod& b = bound_[i];
        int64_t want = b.request.gpu();
        for (int g = 0; g < gpu_count && want > 0; ++g)
          if (!(taken >> g & 1)) {
            b.mask |= uint64_t{1} << g;
            taken |= uint64_t{1} << g;
            --want;
          }
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
        node.allocatable -= Resources::Of(0, b.request.cpu_milli(), b.request.memory_bytes());
        node.max_pods -= 1;
      }
      for (core::Resource r : {core::Resource::kCpu, core::Resource::kMemory})
        node.allocatable[r] = std::max<int64_t>(node.allocatable[r], 0);
      node.max_pods = std::max(node.max_pods, 0);
    }
  }

  const ClusterObjects& objects_;
  const BuildOptions& options_;
  BuiltSnapshot out_;
  std::map<std::string, int32_t> priority_classes_;
  int32_t default_priority_ = 0;
  std::map<std::string, std::string> namespace_queue_;
  std::unordered_map<std::string, const kube::Job*> jobs_by_uid_;
  std::unordered_map<std::string, int32_t> node_index_;
  std::vector<BoundPod> bound_;
  std::unordered_map<std::string, size_t> bound_by_uid_;
};

}  // namespace

kube::Json WorkloadSource::Ref::ToJson(const std::string& namespace_name) const {
  return {{"apiVersion", api_version},
          {"kind", kind},
          {"metadata", {{"name", name}, {"namespace", namespace_name}, {"uid", uid}}}};
}

BuiltSnapshot BuildSnapshot(const ClusterObjects& objects, const BuildOptions& options) {
  return Builder(objects, options).Build();
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

}  // namespace chamber::controller
