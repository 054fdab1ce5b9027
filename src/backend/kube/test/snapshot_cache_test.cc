// The build cache changes nothing but the time a build takes: over random clusters that change
// between builds (pods bound, finished, relabelled, deleted and created; nodes replaced; Jobs
// suspended), a build with the cache of the earlier builds equals a build without one.
#include <rapidcheck.h>

#include <functional>
#include <sstream>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "backend/kube/snapshot_builder.h"

namespace chamber::backend {
namespace {

using kube::Json;

// Everything a build returns, as text, so that two builds compare field by field.
std::string Dump(const BuiltSnapshot& b) {
  std::ostringstream o;
  auto res = [&](const core::Resources& r) {
    for (int64_t v : r.v) o << v << ",";
  };
  for (const core::Node& n : b.snapshot.nodes) {
    o << "node " << n.name << " unsched=" << n.unschedulable << " pods=" << n.max_pods
      << " ext=" << n.external_gpu_mask << " alloc=";
    res(n.allocatable);
    for (const auto& [k, v] : n.labels) o << " l:" << k << "=" << v;
    for (const core::Taint& t : n.taints)
      o << " t:" << t.key << "=" << t.value << ":" << static_cast<int>(t.effect);
    for (const core::Gpu& g : n.gpus)
      o << " g:" << g.uuid << "/" << g.model << "/" << g.memory_mib << "/" << g.healthy;
    o << " topo:" << n.topology.nvlink_domain << "/" << n.topology.block << "/" << n.topology.zone;
    for (uint8_t d : n.mig_devices) o << " mig:" << int{d};
    o << "\n";
  }
  for (const core::MigResource& m : b.snapshot.mig_profiles)
    o << "mig-profile " << m.name << " " << m.milli << "\n";
  for (const core::Queue& q : b.snapshot.queues) o << "queue " << q.name << "\n";
  for (size_t i = 0; i < b.snapshot.workloads.size(); ++i) {
    const core::Workload& w = b.snapshot.workloads[i];
    o << "workload " << w.name << " q=" << w.queue << " prio=" << w.priority
      << " submit=" << w.submit_time.count() << " min=" << w.min_member
      << " awaited=" << w.awaited_pods << " state=" << static_cast<int>(w.state)
      << " start=" << w.start_time.count()
      << " ckpt=" << (w.last_checkpoint_time ? w.last_checkpoint_time->count() : -1)
      << " grace=" << w.checkpoint_grace_seconds.value_or(-1) << " preempted=";
    for (core::Time t : w.recent_preemptions) o << t.count() << ",";
    for (const core::PodSet& s : w.pod_sets) {
      o << " set:" << s.name << "x" << s.count << " req=";
      res(s.request);
      for (const auto& [k, v] : s.node_selector) o << " sel:" << k << "=" << v;
      for (const core::Toleration& t : s.tolerations)
        o << " tol:" << t.key << static_cast<int>(t.op) << t.value
          << (t.effect ? static_cast<int>(*t.effect) : -1);
      for (const std::string& m : s.gpu_models) o << " model:" << m;
      o << " mig:" << int{s.mig.profile} << "x" << int{s.mig.devices} << "@" << s.mig.milli;
      if (!s.invalid_reason.empty()) o << " invalid:" << s.invalid_reason;
    }
    for (const core::PodPlacement& p : w.placements)
      o << " at:" << p.node.value << "/" << p.gpu_mask;
    const WorkloadSource& src = b.sources[i];
    o << " src:" << static_cast<int>(src.kind) << " " << src.namespace_name() << "/" << src.name()
      << " job=" << src.suspendable_uid() << "@" << src.suspendable_resource_version()
      << " about=" << src.Involved().dump();
    for (const auto& set : src.pods) {
      o << " [";
      for (const PodRef& r : set)
        o << r.namespace_name() << "/" << r.name() << "#" << r.uid() << "@" << r.resource_version()
          << " ";
      o << "]";
    }
    o << "\n";
  }
  for (const std::string& p : b.problems) o << "problem " << p << "\n";
  o << "incomplete " << b.incomplete_gangs << "\n";
  return o.str();
}

// A small random cluster, described by numbers so that a change is a new number.
struct PodSpec {
  int ns = 0, gpus = 1, node = -1;  // node: -1 pending, 0..: bound, 99: an unknown node
  int scheduler = 0;                // 0: ours
  int phase = 0;                    // 0 Pending, 1 Running, 2 Succeeded
  int group = -1, job = -1, queue = -1, min_member = 0;
  int indices = 0;               // 0: none, 1: valid slot, 2: malformed, 3: slot 0
  int extra = 0;                 // 0: nothing, 1: checkpoint annotations, 2: bad grace, 3: deleting
  int started = 1, version = 0;  // started: 0 no, 1 startTime, 2 PodScheduled=True only
  int mig = 0;                   // MIG devices, with no GPU: 0 none, 1 a 3g.40gb, 2 a 1g.10gb
};

std::shared_ptr<const kube::Pod> MakePod(int id, const PodSpec& s) {
  Json labels = Json::object(), annotations = Json::object();
  if (s.queue >= 0) labels["chamber.io/queue"] = "team-" + std::to_string(s.queue);
  if (s.group >= 0) labels["chamber.io/pod-group"] = "g" + std::to_string(s.group);
  if (s.min_member > 0) annotations["chamber.io/min-member"] = std::to_string(s.min_member);
  if (s.indices == 1) annotations["chamber.io/gpu-indices"] = std::to_string(id % 4);
  if (s.indices == 2) annotations["chamber.io/gpu-indices"] = "x,1";
  if (s.indices == 3) annotations["chamber.io/gpu-indices"] = "0";
  if (s.extra == 1) {
    annotations["chamber.io/checkpoint-grace-seconds"] = "30";
    annotations["chamber.io/last-checkpoint"] = "2026-11-30T09:30:00Z";
  }
  if (s.extra == 2) annotations["chamber.io/checkpoint-grace-seconds"] = "-4";
  const std::string ns = "ns" + std::to_string(s.ns);
  const std::string name = "p-" + std::to_string(id);
  Json meta = {{"name", name},
               {"namespace", ns},
               {"uid", "uid-" + std::to_string(id)},
               {"resourceVersion", std::to_string(s.version)},
               {"creationTimestamp", "2026-11-30T10:0" + std::to_string(id % 10) + ":00Z"},
               {"labels", labels},
               {"annotations", annotations}};
  if (s.extra == 3) meta["deletionTimestamp"] = "2026-11-30T11:00:00Z";
  if (s.job == 9) {  // a serving replica of ReplicaSet rs0, of which 2 are reserved
    meta["annotations"]["chamber.io/reserved-replicas"] = "2";
    meta["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                {"kind", "ReplicaSet"},
                                {"name", "rs0"},
                                {"uid", "uid-rs0"},
                                {"controller", true}}};
  } else if (s.job >= 0)
    meta["ownerReferences"] = {{{"apiVersion", "batch/v1"},
                                {"kind", "Job"},
                                {"name", "j" + std::to_string(s.job)},
                                {"uid", "uid-job-" + std::to_string(s.job)},
                                {"controller", true}}};
  // Pods of ns1 take their priority from the default PriorityClass, if any.
  Json requests = {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", std::to_string(s.gpus)}};
  if (s.mig != 0) {
    requests.erase("nvidia.com/gpu");
    requests[s.mig == 1 ? "nvidia.com/mig-3g.40gb" : "nvidia.com/mig-1g.10gb"] = "1";
  }
  Json spec = {{"schedulerName", s.scheduler == 0 ? "chamber" : "default-scheduler"},
               {"containers", {{{"name", "main"}, {"resources", {{"requests", requests}}}}}}};
  if (s.ns == 0) spec["priority"] = 0;
  if (s.node >= 0) spec["nodeName"] = "n" + std::to_string(s.node);
  Json status = {{"phase", s.phase == 0 ? "Pending" : s.phase == 1 ? "Running" : "Succeeded"}};
  if (s.node >= 0 && s.started == 1) status["startTime"] = "2026-11-30T10:30:00Z";
  if (s.node >= 0 && s.started == 2)  // bound, not started yet: the API server's condition
    status["conditions"] = {{{"type", "PodScheduled"},
                             {"status", "True"},
                             {"lastTransitionTime", "2026-11-30T10:20:00Z"}}};
  Json j = {{"metadata", meta}, {"spec", spec}, {"status", status}};
  return std::make_shared<const kube::Pod>(kube::Pod::FromJson(j).value());
}

std::shared_ptr<const kube::Node> MakeNode(int id, int variant) {
  Json annotations = Json::object();
  if (variant == 1) annotations["chamber.io/unhealthy-gpus"] = "1";
  if (variant == 2) annotations["chamber.io/unhealthy-gpus"] = "nope";
  if (variant == 3) annotations["chamber.io/gpu-uuids"] = "GPU-a,GPU-b";
  Json allocatable = {{"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}};
  // MIG devices beside its GPUs (the device plugin's mixed strategy), of one profile or two.
  if (variant == 6) allocatable["nvidia.com/mig-3g.40gb"] = "2";
  if (variant == 7) {
    allocatable["nvidia.com/mig-1g.10gb"] = "3";
    allocatable["nvidia.com/mig-3g.40gb"] = "1";
  }
  Json j = {
      {"metadata",
       {{"name", "n" + std::to_string(id)},
        {"uid", "node-" + std::to_string(id)},
        {"labels",
         {{"nvidia.com/gpu.product", variant == 4 ? "A100" : "H100"},
          {"chamber.io/block", "b" + std::to_string(id % 2)}}},
        {"annotations", annotations}}},
      {"spec", variant == 5 ? Json{{"unschedulable", true}} : Json::object()},
      {"status",
       {{"allocatable", allocatable}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  return std::make_shared<const kube::Node>(kube::Node::FromJson(j).value());
}

std::shared_ptr<const kube::Job> MakeJob(int id, int variant) {
  Json tmpl = {
      {"metadata", {{"labels", {{"chamber.io/queue", "team-0"}}}}},
      {"spec",
       {{"schedulerName", "chamber"},
        {"containers",
         {{{"name", "main"}, {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  Json annotations = Json::object();
  if (variant == 2) annotations["chamber.io/preempted-at"] = "2026-11-30T10:40:00Z";
  if (variant == 3) annotations["chamber.io/gpu-models"] = "A100";
  Json j = {
      {"metadata",
       {{"name", "j" + std::to_string(id)},
        {"namespace", "ns0"},
        {"uid", "uid-job-" + std::to_string(id)},
        {"resourceVersion", std::to_string(variant)},
        {"creationTimestamp", "2026-11-30T09:00:00Z"},
        {"annotations", annotations}}},
      {"spec",
       {{"parallelism", 2}, {"completions", 2}, {"suspend", variant >= 1}, {"template", tmpl}}},
      {"status", Json::object()}};
  if (id == 2)  // the Job of JobSet js0
    j["metadata"]["ownerReferences"] = {{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                                         {"kind", "JobSet"},
                                         {"name", "js0"},
                                         {"uid", "uid-js0"},
                                         {"controller", true}}};
  return std::make_shared<const kube::Job>(kube::Job::FromJson(j).value());
}

// JobSet js0 (of Job j2): `variant` 0 none, 1 as its controller made it, 2 suspended by
// Chamber, 3 with a bad spec.
std::vector<std::shared_ptr<const kube::Object>> MakeJobSets(int variant) {
  if (variant == 0) return {};
  Json tmpl = {
      {"metadata", Json::object()},
      {"spec",
       {{"schedulerName", "chamber"},
        {"containers",
         {{{"name", "main"}, {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  Json j = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
            {"kind", "JobSet"},
            {"metadata",
             {{"name", "js0"},
              {"namespace", "ns0"},
              {"uid", "uid-js0"},
              {"resourceVersion", std::to_string(variant)},
              {"creationTimestamp", "2026-11-30T08:00:00Z"},
              {"labels", {{"chamber.io/queue", "team-0"}}}}},
            {"spec",
             {{"suspend", variant == 2},
              {"replicatedJobs",
               {{{"name", "w"},
                 {"replicas", variant == 3 ? Json("two") : Json(1)},
                 {"template", {{"spec", {{"parallelism", 2}, {"template", tmpl}}}}}}}}}}};
  if (variant == 2)
    j["metadata"]["annotations"] = {{"chamber.io/preempted-at", "2026-11-30T10:40:00Z"}};
  return {std::make_shared<const kube::Object>(kube::Object::FromJson(j).value())};
}

// ns0 and ns1; `queue` >= 0: ns1's default queue is team-<queue>.
std::vector<std::shared_ptr<const kube::Namespace>> MakeNamespaces(int queue) {
  std::vector<std::shared_ptr<const kube::Namespace>> out;
  for (int n = 0; n < 2; ++n) {
    Json labels = Json::object();
    if (n == 1 && queue >= 0) labels["chamber.io/queue"] = "team-" + std::to_string(queue);
    Json j = {{"metadata", {{"name", "ns" + std::to_string(n)}, {"labels", labels}}}};
    out.push_back(std::make_shared<const kube::Namespace>(kube::Namespace::FromJson(j).value()));
  }
  return out;
}

// `value` < 0: none; else the cluster's default PriorityClass with that value.
std::vector<std::shared_ptr<const kube::PriorityClass>> MakePriorityClasses(int value) {
  if (value < 0) return {};
  Json j = {{"metadata", {{"name", "default-" + std::to_string(value)}}},
            {"value", value},
            {"globalDefault", true}};
  return {std::make_shared<const kube::PriorityClass>(kube::PriorityClass::FromJson(j).value())};
}

PodSpec RandomPodSpec() {
  PodSpec s;
  s.ns = *rc::gen::inRange(0, 2);
  s.gpus = *rc::gen::inRange(0, 3);
  s.node = *rc::gen::element(-1, -1, 0, 1, 2, 99);
  s.scheduler = *rc::gen::element(0, 0, 0, 1);
  s.phase = *rc::gen::element(0, 1, 1, 2);
  s.group = *rc::gen::element(-1, -1, 0, 1);
  s.job = *rc::gen::element(-1, -1, 0, 1, 2, 5, 9, 9);
  s.queue = *rc::gen::element(-1, 0, 1);
  s.min_member = *rc::gen::inRange(0, 3);
  s.indices = *rc::gen::inRange(0, 4);
  s.extra = *rc::gen::element(0, 0, 1, 2, 3);
  s.started = *rc::gen::inRange(0, 3);
  if (*rc::gen::inRange(0, 4) == 0) s.mig = *rc::gen::inRange(1, 3);
  return s;
}

RC_GTEST_PROP(SnapshotCacheTest, ACachedBuildEqualsAFreshOne, ()) {
  std::vector<PodSpec> specs(*rc::gen::inRange(0, 24));
  for (PodSpec& s : specs) s = RandomPodSpec();
  std::vector<std::shared_ptr<const kube::Pod>> pods;
  for (size_t i = 0; i < specs.size(); ++i) pods.push_back(MakePod(static_cast<int>(i), specs[i]));
  ClusterObjects in;
  for (int n = 0; n < 3; ++n) in.nodes.push_back(MakeNode(n, *rc::gen::inRange(0, 8)));
  for (int j = 0; j < 3; ++j) in.jobs.push_back(MakeJob(j, *rc::gen::inRange(0, 4)));
  in.owners = MakeJobSets(*rc::gen::inRange(0, 4));
  in.namespaces = MakeNamespaces(*rc::gen::element(-1, 0, 1));
  in.priority_classes = MakePriorityClasses(*rc::gen::element(-1, 5, 150));
  core::Queue q;
  q.name = "team-0";
  in.queues.push_back(q);

  BuildCache cache;
  BuiltSnapshot previous;  // lends its memory to the next build
  AssumedBinds assumed;
  for (int round = 0; round < 6; ++round) {
    in.pods.clear();
    for (const auto& p : pods)
      if (p) in.pods.push_back(p);
    BuildOptions fresh;
    fresh.now = core::Time(1'796'000'000'000 + round * 1000);
    fresh.assumed = &assumed;
    BuildOptions cached = fresh;
    cached.cache = &cache;
    cached.recycle = &previous;
    BuiltSnapshot got = BuildSnapshot(in, cached);
    RC_ASSERT(Dump(got) == Dump(BuildSnapshot(in, fresh)));
    // Now and then the snapshot lent is not the last one (chamberd always lends the last).
    if (*rc::gen::inRange(0, 5) != 0) previous = std::move(got);
    cached.recycle = nullptr;
    // Entries of objects gone are dropped by the next Prepare, or else by the next build.
    const size_t objects = in.nodes.size() + in.pods.size() + in.jobs.size() + in.owners.size();
    RC_ASSERT(cache.size() >= objects);
    if (*rc::gen::arbitrary<bool>()) {
      RC_ASSERT(cache.Prepare(in, cached) == 0u);
      RC_ASSERT(cache.size() == objects);
    }

    // Change the cluster: every changed object is a new object, as informers hand them out.
    const int changes = *rc::gen::inRange(0, 8);
    for (int c = 0; c < changes && !pods.empty(); ++c) {
      if (*rc::gen::inRange(0, 4) == 0) {  // chamberd derives ahead between cycles
        ClusterObjects now = in;
        now.pods.clear();
        for (const auto& p : pods)
          if (p) now.pods.push_back(p);
        cache.Prepare(now, cached);
      }
      const size_t i = *rc::gen::inRange<size_t>(0, pods.size());
      switch (*rc::gen::inRange(0, 7)) {
        case 0:  // bound, finished or relabelled
          specs[i].node = *rc::gen::element(-1, 0, 1, 2);
          specs[i].phase = *rc::gen::inRange(0, 3);
          specs[i].queue = *rc::gen::element(-1, 0, 1);
          ++specs[i].version;
          pods[i] = MakePod(static_cast<int>(i), specs[i]);
          break;
        case 1:  // deleted
          pods[i] = nullptr;
          break;
        case 2:  // created
          specs.push_back(RandomPodSpec());
          pods.push_back(MakePod(static_cast<int>(specs.size() - 1), specs.back()));
          break;
        case 3:  // a node replaced
          in.nodes[*rc::gen::inRange<size_t>(0, in.nodes.size())] =
              MakeNode(*rc::gen::inRange(0, 3), *rc::gen::inRange(0, 8));
          break;
        case 5:  // a namespace's default queue, or the default PriorityClass, changed
          if (*rc::gen::arbitrary<bool>())
            in.namespaces = MakeNamespaces(*rc::gen::element(-1, 0, 1));
          else
            in.priority_classes = MakePriorityClasses(*rc::gen::element(-1, 5, 150));
          break;
        case 6:  // an assumed bind expired, or the informer showed it; or the JobSet changed
          if (*rc::gen::arbitrary<bool>())
            in.owners = MakeJobSets(*rc::gen::inRange(0, 4));
          else if (!assumed.empty())
            assumed.erase(assumed.begin());
          break;
        default:  // a Job changed, or a bind assumed
          if (*rc::gen::arbitrary<bool>()) {
            in.jobs[*rc::gen::inRange<size_t>(0, in.jobs.size())] =
                MakeJob(*rc::gen::inRange(0, 3), *rc::gen::inRange(0, 4));
          } else if (pods[i]) {
            assumed[pods[i]->metadata.uid] = {pods[i]->metadata.Key(), "n1", {3}, 0};
          }
      }
    }
    // Keep names unique among the nodes.
    std::map<std::string, std::shared_ptr<const kube::Node>> by_name;
    for (const auto& n : in.nodes) by_name[n->metadata.name] = n;
    in.nodes.clear();
    for (const auto& [name, n] : by_name) in.nodes.push_back(n);
    std::map<std::string, std::shared_ptr<const kube::Job>> jobs;
    for (const auto& j : in.jobs) jobs[j->metadata.name] = j;
    in.jobs.clear();
    for (const auto& [name, j] : jobs) in.jobs.push_back(j);
  }
}

// The value a Dump gives `field` of the workload `name` ("" when it has none).
std::string FieldIn(const std::string& dump, const std::string& name, const std::string& field) {
  const size_t line = dump.find("workload " + name + " ");
  if (line == std::string::npos) return "";
  const size_t at = dump.find(" " + field + "=", line);
  if (at == std::string::npos || at > dump.find('\n', line)) return "";
  const size_t from = at + field.size() + 2;
  return dump.substr(from, dump.find(' ', from) - from);
}
std::string StateIn(const std::string& dump, const std::string& name) {
  return FieldIn(dump, name, "state");
}

// Builds as chamberd does: cached, each lending its memory to the next. Each result must equal
// a fresh build's.
class ChainedBuilds {
 public:
  std::string Next(const ClusterObjects& in, const AssumedBinds& assumed) {
    BuildOptions fresh;
    fresh.assumed = &assumed;
    BuildOptions cached = fresh;
    cached.cache = &cache_;
    cached.recycle = &previous_;
    BuiltSnapshot got = BuildSnapshot(in, cached);
    const std::string dump = Dump(got);
    EXPECT_EQ(dump, Dump(BuildSnapshot(in, fresh)));
    previous_ = std::move(got);
    return dump;
  }
  size_t reused() const { return cache_.last_reused(); }
  BuildCache* cache() { return &cache_; }

 private:
  BuildCache cache_;
  BuiltSnapshot previous_;
};

TEST(SnapshotCacheTest, UnchangedBarePodsKeepTheirWorkloadsAcrossBuilds) {
  ClusterObjects in;
  in.nodes = {MakeNode(0, 0), MakeNode(1, 0)};
  for (int i = 0; i < 8; ++i) {
    PodSpec s;
    if (i < 2) {  // bound and started
      s.node = i;
      s.phase = 1;
    }
    if (i >= 6) {  // bound, not started: p-6 with the bind's PodScheduled=True, p-7 without
      s.node = 0;
      s.started = i == 6 ? 2 : 0;
    }
    in.pods.push_back(MakePod(i, s));
  }
  in.namespaces = MakeNamespaces(0);
  AssumedBinds assumed;
  ChainedBuilds builds;
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 0u);
  // All of them: p-7, created on its node with no start or bind time, holds it from its
  // creation, not from each build's `now`.
  const std::string second = builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 8u);
  // p-6 holds its node since its bind (10:20), and p-7 since its creation (10:07).
  EXPECT_EQ(FieldIn(second, "ns0/p-6", "start"), "1796034000000");
  EXPECT_EQ(FieldIn(second, "ns0/p-7", "start"), "1796033220000");

  // A pending pod assumed bound runs (made afresh: its start is `now`), then goes back to
  // pending when the assumption expires (made afresh again: it was running).
  assumed[in.pods[4]->metadata.uid] = {in.pods[4]->metadata.Key(), "n1", {3}, 0};
  EXPECT_EQ(StateIn(builds.Next(in, assumed), "ns0/p-4"), "1");  // kRunning
  EXPECT_EQ(builds.reused(), 7u);
  assumed.clear();
  EXPECT_EQ(StateIn(builds.Next(in, assumed), "ns0/p-4"), "0");  // kPending
  EXPECT_EQ(builds.reused(), 7u);

  // New namespace objects with the same default queues (another label, a status, a namespace
  // being deleted) leave the workloads as they were.
  in.namespaces = MakeNamespaces(0);
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 8u);
  Json other = {{"metadata", {{"name", "ns2"}, {"labels", {{"team", "a"}}}}}};
  in.namespaces.push_back(
      std::make_shared<const kube::Namespace>(kube::Namespace::FromJson(other).value()));
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 8u);
  in.namespaces.pop_back();  // and gone again
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 8u);
  // A namespace's default queue changed: every workload is made afresh.
  in.namespaces = MakeNamespaces(1);
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 0u);
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 8u);
}

// A changed pod is a new object. When what its workload takes from it is the same but for the
// bind (node, GPU slots, status, resourceVersion), it takes over its workload from the last
// snapshot; otherwise, or when it is another pod of the same name, the workload is made afresh.
TEST(SnapshotCacheTest, AChangedBarePodTakesOverItsWorkloadWhenOnlyItsBindMoved) {
  ClusterObjects in;
  in.nodes = {MakeNode(0, 0), MakeNode(1, 0)};
  std::vector<PodSpec> specs(6);
  for (size_t i = 0; i < specs.size(); ++i)
    in.pods.push_back(MakePod(static_cast<int>(i), specs[i]));
  in.namespaces = MakeNamespaces(0);
  AssumedBinds assumed;
  ChainedBuilds builds;
  builds.Next(in, assumed);
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 6u);

  // p-0 and p-1 bound (as chamber binds: slot annotation, then started), p-2 bound and not
  // started yet, p-3 still pending but with a new resourceVersion, p-4 relabelled to another
  // queue, p-5 deleted and created again under the same name (a new UID).
  auto change = [&](int i, const std::function<void(PodSpec&)>& edit) {
    edit(specs[i]);
    ++specs[i].version;
    in.pods[i] = MakePod(i, specs[i]);
  };
  change(0, [](PodSpec& s) { s.node = 0, s.phase = 1, s.indices = 3; });
  change(1, [](PodSpec& s) { s.node = 1, s.phase = 1, s.indices = 1; });
  change(2, [](PodSpec& s) { s.node = 1, s.started = 2; });
  change(3, [](PodSpec&) {});
  change(4, [](PodSpec& s) { s.queue = 1; });
  Json j = in.pods[5]->raw;
  j["metadata"]["uid"] = "uid-5-again";
  in.pods[5] = std::make_shared<const kube::Pod>(kube::Pod::FromJson(j).value());
  const std::string after = builds.Next(in, assumed);  // equals a fresh build (Next checks)
  EXPECT_EQ(builds.reused(), 4u);                      // p-0 to p-3
  EXPECT_EQ(StateIn(after, "ns0/p-0"), "1");
  EXPECT_EQ(FieldIn(after, "ns0/p-0", "start"), "1796034600000");  // startTime 10:30
  EXPECT_EQ(FieldIn(after, "ns0/p-2", "start"), "1796034000000");  // PodScheduled 10:20
  EXPECT_EQ(FieldIn(after, "ns0/p-4", "q"), "team-1");
  EXPECT_NE(after.find("#uid-5-again@"), std::string::npos);
  // Unchanged since, all six move over as before.
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 6u);
}

// The default PriorityClass is replaced by a new object: of the same value, the pods' workloads
// move over; of another value, they are made afresh, and the pod that changed meanwhile does
// not take over its workload either.
TEST(SnapshotCacheTest, WorkloadsMoveOverWhileThePriorityClassesValuesStay) {
  ClusterObjects in;
  in.nodes = {MakeNode(0, 0)};
  PodSpec s;
  s.ns = 1;  // priority from the default PriorityClass
  in.pods.push_back(MakePod(0, s));
  in.pods.push_back(MakePod(1, s));
  in.namespaces = MakeNamespaces(0);
  in.priority_classes = MakePriorityClasses(150);
  AssumedBinds assumed;
  ChainedBuilds builds;
  EXPECT_EQ(FieldIn(builds.Next(in, assumed), "ns1/p-0", "prio"), "150");
  EXPECT_EQ(FieldIn(builds.Next(in, assumed), "ns1/p-0", "prio"), "150");
  EXPECT_EQ(builds.reused(), 2u);
  in.priority_classes.clear();                     // the informer drops the old object...
  in.priority_classes = MakePriorityClasses(150);  // ...and hands out a new one
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 2u);
  in.priority_classes = MakePriorityClasses(5);
  ++s.version;
  in.pods[1] = MakePod(1, s);
  const std::string after = builds.Next(in, assumed);  // equals a fresh build (Next checks)
  EXPECT_EQ(FieldIn(after, "ns1/p-0", "prio"), "5");
  EXPECT_EQ(FieldIn(after, "ns1/p-1", "prio"), "5");
  EXPECT_EQ(builds.reused(), 0u);
}

TEST(SnapshotCacheTest, OnlyChangedObjectsAreDerivedAgain) {
  ClusterObjects in;
  in.nodes = {MakeNode(0, 0), MakeNode(1, 0)};
  for (int i = 0; i < 10; ++i) {
    PodSpec s;
    in.pods.push_back(MakePod(i, s));
  }
  BuildCache cache;
  BuildOptions o;
  o.cache = &cache;
  const std::string first = Dump(BuildSnapshot(in, o));
  EXPECT_EQ(cache.last_derived(), 12u);
  EXPECT_EQ(Dump(BuildSnapshot(in, o)), first);
  EXPECT_EQ(cache.last_derived(), 0u);

  PodSpec bound;
  bound.node = 1;
  bound.phase = 1;
  bound.indices = 1;
  bound.version = 1;
  in.pods[3] = MakePod(3, bound);  // p-3 is bound to n1 slot 3
  in.pods.pop_back();              // p-9 is gone
  const BuiltSnapshot b = BuildSnapshot(in, o);
  EXPECT_EQ(cache.last_derived(), 1u);
  // p-3's old entry and p-9's are dropped by the next Prepare (or build), not in this build.
  EXPECT_EQ(cache.size(), 2u + 11u);
  EXPECT_EQ(cache.Prepare(in, o), 0u);
  EXPECT_EQ(cache.size(), 2u + 9u);
  ASSERT_EQ(b.snapshot.workloads.size(), 9u);
  const auto running = std::find_if(b.snapshot.workloads.begin(), b.snapshot.workloads.end(),
                                    [](const core::Workload& w) { return w.name == "ns0/p-3"; });
  ASSERT_NE(running, b.snapshot.workloads.end());
  EXPECT_EQ(running->state, core::WorkloadState::kRunning);
  ASSERT_EQ(running->placements.size(), 1u);
  EXPECT_EQ(running->placements[0].gpu_mask, uint64_t{1} << 3);
  BuildOptions fresh;
  EXPECT_EQ(Dump(b), Dump(BuildSnapshot(in, fresh)));

  // Derived ahead, a changed pod costs the next build nothing.
  in.pods[4] = MakePod(4, bound);
  EXPECT_EQ(cache.Prepare(in, o), 1u);
  EXPECT_EQ(cache.Prepare(in, o), 0u);
  const BuiltSnapshot c = BuildSnapshot(in, o);
  EXPECT_EQ(cache.last_derived(), 0u);
  EXPECT_EQ(Dump(c), Dump(BuildSnapshot(in, fresh)));
}

TEST(SnapshotCacheTest, ManyChangedPodsDerivedOnSeveralThreadsGiveTheSameSnapshot) {
  ClusterObjects in;
  for (int n = 0; n < 40; ++n) in.nodes.push_back(MakeNode(n, n % 3));
  in.namespaces = MakeNamespaces(1);
  in.priority_classes = MakePriorityClasses(7);
  auto spec = [](int i, int version) {
    PodSpec s;
    s.ns = i % 3;
    s.gpus = 1 + i % 2;
    s.node = i % 5 == 0 ? -1 : i % 40;
    s.phase = s.node < 0 ? 0 : 1;
    s.queue = i % 7 == 0 ? -1 : i % 4;
    s.group = i % 11 == 0 ? i % 13 : -1;
    s.indices = i % 4;
    s.extra = i % 9 == 0 ? 1 : 0;
    s.started = i % 3;
    s.version = version;
    return s;
  };
  for (int i = 0; i < 5000; ++i) in.pods.push_back(MakePod(i, spec(i, 0)));
  BuildCache serial_cache, parallel_cache;
  BuildOptions serial, parallel;
  serial.cache = &serial_cache;
  serial.derive_threads = 1;
  parallel.cache = &parallel_cache;
  parallel.derive_threads = 4;
  const std::string first = Dump(BuildSnapshot(in, serial));
  EXPECT_EQ(Dump(BuildSnapshot(in, parallel)), first);
  EXPECT_EQ(parallel_cache.last_derived(), 5040u);
  // Every pod changes (as after a mass bind), once derived in the build and once ahead of it.
  for (int i = 0; i < 5000; ++i) in.pods[i] = MakePod(i, spec(i, 1));
  const std::string second = Dump(BuildSnapshot(in, serial));
  EXPECT_NE(second, first);
  EXPECT_EQ(Dump(BuildSnapshot(in, parallel)), second);
  for (int i = 0; i < 5000; ++i) in.pods[i] = MakePod(i, spec(i, 2));
  EXPECT_EQ(parallel_cache.Prepare(in, parallel), 5000u);
  EXPECT_EQ(Dump(BuildSnapshot(in, parallel)), Dump(BuildSnapshot(in, serial)));
  EXPECT_EQ(parallel_cache.last_derived(), 0u);
}

// An object built apart from its control block can be freed while the cache still holds its
// entry, and a new object may then sit at the same address: it is not mistaken for the old one.
TEST(SnapshotCacheTest, ANewObjectAtAFreedObjectsAddressIsDerivedAgain) {
  ClusterObjects in;
  in.nodes = {MakeNode(0, 0)};
  PodSpec spec;
  std::shared_ptr<const kube::Pod> first(new kube::Pod(*MakePod(1, spec)));
  const kube::Pod* address = first.get();
  in.pods = {first};
  BuildCache cache;
  BuildOptions o;
  o.cache = &cache;
  BuildSnapshot(in, o);
  in.pods.clear();
  first.reset();  // the Pod is freed; the entry keeps only the control block
  spec.gpus = 3;
  std::shared_ptr<const kube::Pod> second(new kube::Pod(*MakePod(2, spec)));
  in.pods = {second};
  const BuiltSnapshot b = BuildSnapshot(in, o);
  EXPECT_EQ(cache.last_derived(), 1u) << "same address: " << (second.get() == address);
  ASSERT_EQ(b.snapshot.workloads.size(), 1u);
  EXPECT_EQ(b.snapshot.workloads[0].name, "ns0/p-2");
  EXPECT_EQ(b.snapshot.workloads[0].pod_sets[0].request.whole_gpus(), 3);
}

// An entry of the last build's order is derived again, ahead of the next build, for a new
// object that the allocator put where its old object was; that object is gone too before the
// build. The entry must stay until the build has let go of it, and the build must equal a
// fresh one.
TEST(SnapshotCacheTest, AnObjectDerivedAheadAndGoneBeforeTheBuildLeavesNoTrace) {
  ClusterObjects in;
  in.nodes = {MakeNode(0, 0)};
  PodSpec spec;
  std::shared_ptr<const kube::Pod> first(new kube::Pod(*MakePod(1, spec)));
  const kube::Pod* address = first.get();
  in.pods = {MakePod(0, spec), first, MakePod(3, spec)};
  ChainedBuilds builds;
  AssumedBinds assumed;
  builds.Next(in, assumed);
  BuildCache* cache = builds.cache();
  in.pods.erase(in.pods.begin() + 1);
  first.reset();  // the Pod is freed; the entry keeps only the control block
  std::shared_ptr<const kube::Pod> second(new kube::Pod(*MakePod(2, spec)));
  const kube::Pod* second_address = second.get();
  in.pods.insert(in.pods.begin() + 1, second);
  BuildOptions o;
  o.cache = cache;
  EXPECT_EQ(cache->Prepare(in, o), 1u);
  in.pods.erase(in.pods.begin() + 1);
  second.reset();
  in.pods.push_back(MakePod(4, spec));  // derived ahead: the gone objects' entries are dropped
  EXPECT_EQ(cache->Prepare(in, o), 1u);
  // But not p-1's (or, at its address, p-2's): the last build's order points to it.
  EXPECT_EQ(cache->size(), 1u + 4u);
  const std::string dump = builds.Next(in, assumed);  // equals a fresh build (Next checks)
  RecordProperty("same_address", second_address == address ? "yes" : "no");
  EXPECT_EQ(dump.find("p-1 "), std::string::npos);
  EXPECT_EQ(dump.find("p-2 "), std::string::npos);
  EXPECT_NE(dump.find("workload ns0/p-4 "), std::string::npos);
  builds.Next(in, assumed);
  EXPECT_EQ(builds.reused(), 3u);
}

}  // namespace
}  // namespace chamber::backend
