// Top-level workload objects as the API server returns them (backend/kube/workload_kinds.h):
// every kind's reader, and the snapshot builder over the object and a pod it owns. Properties:
// an error names the kind's object ("jobset ns/name: ..."); a spec that reads has no negative
// counts and a minimum not below 0, and one whose gang is a part's (a TrainJob) no pod sets of
// its own; an upstream PodGroup (scheduling.k8s.io) reads as a gang with a minimum of 1 or more,
// or as basic, and its pod names it; so does each pod group of a 1.35 Workload (v1alpha1), named
// once each, whose pod names its first group; so does a Job's spec.scheduling, whose gang may
// leave its minimum to the Job's parallelism (0); the build makes at most one workload of the
// object and its pod, and every workload it makes has as many pods as its pod sets say. An input's
// "part" (a JobSet, say) is added as an object the top one controls, and the pod is then the
// part's: a TrainJob with its JobSet.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/kube/snapshot_builder.h"
#include "backend/kube/workload_kinds.h"
#include "common/fuzz/fuzz_check.h"

namespace {

// A string field, "" when absent or not a string.
std::string StringField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  namespace backend = chamber::backend;
  const nlohmann::json object =
      nlohmann::json::parse(fuzz::Text(data, size), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return 0;
  for (const backend::WorkloadKind& kind : backend::WorkloadKinds()) {
    chamber::Result<backend::KindSpec> spec = kind.read(object);
    if (!spec.ok()) {
      const std::string& m = spec.status().message();
      fuzz::Check(m.rfind(kind.LowerKind() + " ", 0) == 0, "the error does not name the object", m);
      continue;
    }
    fuzz::Check(!spec->gang_from_part || spec->pod_sets.empty(),
                "pod sets of its own besides a part's gang", kind.type.kind);
    fuzz::Check(spec->min_pods >= 0, "a negative minimum", kind.type.kind);
    fuzz::Check(spec->Pods() >= 0, "a negative number of pods", kind.type.kind);
    for (const backend::KindPodSet& s : spec->pod_sets)
      fuzz::Check(s.count >= 0 && !s.name.empty(), "a pod set without a name or pods",
                  kind.type.kind);
  }

  // The upstream PodGroup's reader: an error names the object; a gang has a minimum of 1 or more,
  // a basic group none.
  chamber::Result<backend::UpstreamPodGroup> group = backend::ReadPodGroup(object);
  if (!group.ok())
    fuzz::Check(group.status().message().rfind("podgroup ", 0) == 0,
                "the error does not name the object", group.status().message());
  else
    fuzz::Check(group->gang ? group->min_count >= 1 : group->min_count == 0,
                "a gang without a minimum, or a basic group with one", object.dump());

  // A 1.35 Workload's pod groups: an error names the object; each group has a name of its own
  // and reads as a PodGroup does.
  chamber::Result<std::vector<backend::WorkloadPodGroup>> workload = backend::ReadWorkload(object);
  if (!workload.ok()) {
    fuzz::Check(workload.status().message().rfind("workload ", 0) == 0,
                "the error does not name the object", workload.status().message());
  } else {
    fuzz::Check(!workload->empty(), "a Workload without pod groups", object.dump());
    for (size_t i = 0; i < workload->size(); ++i) {
      const backend::WorkloadPodGroup& g = (*workload)[i];
      fuzz::Check(!g.name.empty(), "a pod group without a name", object.dump());
      for (size_t j = 0; j < i; ++j)
        fuzz::Check((*workload)[j].name != g.name, "a pod group named twice", g.name);
      fuzz::Check(g.group.gang ? g.group.min_count >= 1 : g.group.min_count == 0,
                  "a gang without a minimum, or a basic group with one", object.dump());
    }
  }

  // A Job's own scheduling policy (spec.scheduling): an error names the Job; a gang's minimum is
  // 0 (all of its parallelism) or more, a basic policy has none.
  chamber::Result<std::optional<backend::UpstreamPodGroup>> job_policy =
      backend::ReadJobSchedulingPolicy(object);
  if (!job_policy.ok())
    fuzz::Check(job_policy.status().message().rfind("job ", 0) == 0,
                "the error does not name the Job", job_policy.status().message());
  else if (*job_policy)
    fuzz::Check((*job_policy)->gang ? (*job_policy)->min_count >= 0 : (*job_policy)->min_count == 0,
                "a gang with a negative minimum, or a basic policy with one", object.dump());

  // The builder, over the object (when it has metadata) and a pod it controls.
  chamber::Result<chamber::kube::Object> owner = chamber::kube::Object::FromJson(object);
  if (!owner.ok()) return 0;
  // The part, controlled by the object, and the pod's controller in its place.
  std::shared_ptr<const chamber::kube::Object> part;
  if (auto it = object.find("part");
      it != object.end() && it->is_object() &&
      (!it->contains("metadata") || it->at("metadata").is_object())) {
    nlohmann::json j = *it;
    j["metadata"]["ownerReferences"] = {{{"apiVersion", StringField(object, "apiVersion")},
                                         {"kind", StringField(object, "kind")},
                                         {"name", owner->metadata.name},
                                         {"uid", owner->metadata.uid},
                                         {"controller", true}}};
    if (chamber::Result<chamber::kube::Object> o = chamber::kube::Object::FromJson(j); o.ok())
      part = std::make_shared<const chamber::kube::Object>(std::move(*o));
  }
  const nlohmann::json& controller = part != nullptr ? part->raw : object;
  const chamber::kube::ObjectMeta& controller_meta =
      part != nullptr ? part->metadata : owner->metadata;
  const nlohmann::json pod = {
      {"metadata",
       {{"name", "p"},
        {"namespace",
         owner->metadata.namespace_name.empty() ? "ns" : owner->metadata.namespace_name},
        {"uid", "uid-p"},
        {"ownerReferences",
         {{{"apiVersion", StringField(controller, "apiVersion")},
           {"kind", StringField(controller, "kind")},
           {"name", controller_meta.name},
           {"uid", controller_meta.uid},
           {"controller", true}}}}}},
      {"spec",
       {{"schedulerName", "chamber"},
        {"containers",
         {{{"name", "main"}, {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}}}}}}}},
      {"status", {{"phase", "Pending"}}}};
  // A PodGroup's pod names it, a Workload's pod its first group (replica "0"), and the object is
  // offered as an upstream group too.
  nlohmann::json member = pod;
  if (StringField(object, "kind") == "PodGroup")
    member["spec"]["schedulingGroup"] = {{"podGroupName", owner->metadata.name}};
  if (StringField(object, "kind") == "Workload" && workload.ok())
    member["spec"]["workloadRef"] = {{"name", owner->metadata.name},
                                     {"podGroup", workload->front().name},
                                     {"podGroupReplicaKey", "0"}};
  chamber::Result<chamber::kube::Pod> p = chamber::kube::Pod::FromJson(member);
  if (!p.ok()) return 0;
  backend::ClusterObjects in;
  in.pod_groups = {std::make_shared<const chamber::kube::Object>(*owner)};
  in.owners = {std::make_shared<const chamber::kube::Object>(std::move(*owner))};
  if (part != nullptr) in.owners.push_back(part);
  in.pods = {std::make_shared<const chamber::kube::Pod>(std::move(*p))};
  backend::BuildOptions options;
  options.derive_threads = 1;
  const backend::BuiltSnapshot built = backend::BuildSnapshot(in, options);
  fuzz::Check(built.snapshot.workloads.size() <= 1, "more than one workload of one object");
  for (size_t i = 0; i < built.snapshot.workloads.size(); ++i) {
    int64_t pods = 0;
    for (const auto& set : built.sources[i].pods) pods += static_cast<int64_t>(set.size());
    fuzz::Check(pods == built.snapshot.workloads[i].TotalPods(),
                "a workload whose pod sets and pods differ");
  }
  return 0;
}
