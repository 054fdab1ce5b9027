#include "admission/opt_in.h"

#include <algorithm>
#include <cctype>

#include "common/gpu_share_ask.h"
#include "common/json_reader.h"
#include "kube/errors.h"

namespace chamber::admission {
namespace {

constexpr char kDefaultScheduler[] = "default-scheduler";

// The queue an object names (annotation, then label, as the scheduler reads it); null if none.
const std::string* QueueOf(const kube::ObjectMeta& m, const std::string& key) {
  if (auto it = m.annotations.find(key); it != m.annotations.end()) return &it->second;
  if (auto it = m.labels.find(key); it != m.labels.end()) return &it->second;
  return nullptr;
}

const kube::OwnerReference* ControllerOf(const kube::ObjectMeta& m) {
  for (const kube::OwnerReference& ref : m.owner_references)
    if (ref.controller) return &ref;
  return nullptr;
}

// "Job ml/train" (the name may be empty for a pod made with generateName).
std::string Named(std::string_view kind, const std::string& ns, const std::string& name) {
  return std::string(kind) + " " + ns + "/" + name;
}

// Adds `key: value` to the labels of the object at `at` ("" for the root, "/spec/template"),
// whose metadata is `metadata` (null when absent).
void AddLabel(const std::string& at, const Json* metadata, const std::string& key,
              const std::string& value, Json* patch) {
  if (metadata == nullptr || !metadata->is_object()) {
    patch->push_back(
        {{"op", "add"}, {"path", at + "/metadata"}, {"value", {{"labels", {{key, value}}}}}});
  } else if (const Json* labels = JsonReader::Find(*metadata, "labels");
             labels == nullptr || !labels->is_object()) {
    patch->push_back({{"op", "add"}, {"path", at + "/metadata/labels"}, {"value", {{key, value}}}});
  } else {
    patch->push_back(
        {{"op", "add"}, {"path", at + "/metadata/labels/" + PointerToken(key)}, {"value", value}});
  }
}

// A pod asking for a share of a GPU (either annotation of gpu_share::ReadAsk present, read or
// not, so that a corrected value needs no new pod): every container, init containers too, takes
// NVIDIA_VISIBLE_DEVICES and the MPS thread limit (and, with GPU memory asked, the MPS memory
// limit) from the annotations chamberd writes through the binding (the Downward API resolves
// them as the kubelet starts the container, after the bind), replacing any value of its own;
// the pod is marked as given them (gpu_share::kEnvKey). Nothing for other pods.
void GiveShareEnvironment(const Json& pod, Json* patch) {
  const Json* meta = JsonReader::Find(pod, "metadata");
  const Json* annotations = meta != nullptr ? JsonReader::Find(*meta, "annotations") : nullptr;
  if (annotations == nullptr || !annotations->is_object()) return;
  const bool memory = annotations->contains(gpu_share::kMemoryKey);
  if (!annotations->contains(gpu_share::kFractionKey) && !memory) return;
  const Json* spec = JsonReader::Find(pod, "spec");
  for (const char* list : {"initContainers", "containers"}) {
    const Json* containers = spec != nullptr ? JsonReader::Find(*spec, list) : nullptr;
    if (containers == nullptr || !containers->is_array()) continue;
    for (size_t i = 0; i < containers->size(); ++i) {
      const std::string at = std::string("/spec/") + list + "/" + std::to_string(i) + "/env";
      const Json& c = (*containers)[i];
      const Json* env = c.is_object() ? JsonReader::Find(c, "env") : nullptr;
      const bool has_env = env != nullptr && env->is_array();
      Json added = Json::array();
      for (const gpu_share::EnvFromAnnotation& e : gpu_share::kShareEnv) {
        if (std::string_view(e.annotation) == gpu_share::kMpsMemoryKey && !memory) continue;
        Json var = {
            {"name", e.name},
            {"valueFrom",
             {{"fieldRef",
               {{"fieldPath", std::string("metadata.annotations['") + e.annotation + "']"}}}}}};
        size_t found = has_env ? env->size() : 0;
        for (size_t j = 0; has_env && j < env->size(); ++j)
          if ((*env)[j].is_object() && (*env)[j].value("name", "") == e.name) found = j;
        if (has_env && found < env->size())
          patch->push_back(
              {{"op", "replace"}, {"path", at + "/" + std::to_string(found)}, {"value", var}});
        else if (has_env)
          patch->push_back({{"op", "add"}, {"path", at + "/-"}, {"value", var}});
        else
          added.push_back(std::move(var));
      }
      if (!added.empty()) patch->push_back({{"op", "add"}, {"path", at}, {"value", added}});
    }
  }
  patch->push_back(
      {{"op", "add"},
       {"path", std::string("/metadata/annotations/") + PointerToken(gpu_share::kEnvKey)},
       {"value", gpu_share::kEnvGiven}});
}

// "Pod ml/train-0", "Pod ml/train-*" for a name yet to be generated.
std::string Where(const AdmissionRequest& r) {
  std::string name = r.name;
  if (const Json* meta = JsonReader::Find(r.object, "metadata"); meta && name.empty()) {
    if (const Json* n = JsonReader::Find(*meta, "name"); n && n->is_string())
      name = n->get<std::string>();
    else if (const Json* g = JsonReader::Find(*meta, "generateName"); g && g->is_string())
      name = g->get<std::string>() + "*";
  }
  return Named(r.kind.kind, r.namespace_name, name);
}

}  // namespace

std::string_view PodOutcomeName(PodOutcome outcome) {
  switch (outcome) {
    case PodOutcome::kMutate:
      return "mutated";
    case PodOutcome::kAlreadyChamber:
      return "already_chamber";
    case PodOutcome::kOtherScheduler:
      return "other_scheduler";
    case PodOutcome::kNotOptedIn:
      return "not_opted_in";
    case PodOutcome::kExcludedNamespace:
      return "excluded_namespace";
    case PodOutcome::kPlaced:
      return "placed";
    case PodOutcome::kNotPodCreate:
      return "not_pod_create";
  }
  return "unknown";
}

Result<PodDecision> DecidePod(const AdmissionRequest& request, const OptInPolicy& policy,
                              ObjectSource& source) {
  PodDecision d;
  if (request.kind.group != "" || request.kind.kind != "Pod" || request.operation != "CREATE" ||
      !request.sub_resource.empty()) {
    d.outcome = PodOutcome::kNotPodCreate;
    return d;
  }
  const std::string& ns = request.namespace_name;
  if (policy.excluded_namespaces.contains(ns)) {
    d.outcome = PodOutcome::kExcludedNamespace;
    return d;
  }
  const std::string where = Where(request);
  CHAMBER_ASSIGN_OR_RETURN(const kube::ObjectMeta meta, kube::DecodeMeta(request.object, where));
  const JsonReader r(where);
  const Json* spec = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(request.object, "spec", "", &spec));
  if (spec == nullptr) return r.Error("spec", "missing");
  std::string scheduler;
  CHAMBER_RETURN_IF_ERROR(r.String(*spec, "schedulerName", "spec", &scheduler));
  if (scheduler == policy.scheduler_name) {
    d.outcome = PodOutcome::kAlreadyChamber;
    GiveShareEnvironment(request.object, &d.patch);
    return d;
  }
  if (!scheduler.empty() && scheduler != kDefaultScheduler) {
    d.outcome = PodOutcome::kOtherScheduler;
    return d;
  }
  std::string node;
  CHAMBER_RETURN_IF_ERROR(r.String(*spec, "nodeName", "spec", &node));
  const kube::OwnerReference* controller = ControllerOf(meta);
  if (!node.empty() || (controller != nullptr && controller->kind == "DaemonSet" &&
                        controller->api_version.starts_with("apps/"))) {
    d.outcome = PodOutcome::kPlaced;
    return d;
  }

  bool label_pod = false;  // the queue came from an owner: the pod gets it as a label
  // The upstream group the pod names, read before its owners: the PodGroup of
  // spec.schedulingGroup.podGroupName in the newest version first (Kubernetes 1.37, then 1.36),
  // or the Workload of spec.workloadRef.name (1.35).
  std::string group_kind, group_name;
  std::vector<const char*> group_versions;
  const Json* group = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(*spec, "schedulingGroup", "spec", &group));
  if (group != nullptr)
    CHAMBER_RETURN_IF_ERROR(r.String(*group, "podGroupName", "spec.schedulingGroup", &group_name));
  if (!group_name.empty()) {
    group_kind = "PodGroup";
    group_versions = {"scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2"};
  } else {
    CHAMBER_RETURN_IF_ERROR(r.Object(*spec, "workloadRef", "spec", &group));
    if (group != nullptr)
      CHAMBER_RETURN_IF_ERROR(r.String(*group, "name", "spec.workloadRef", &group_name));
    group_kind = "Workload";
    group_versions = {"scheduling.k8s.io/v1alpha1"};
  }
  if (const std::string* q = QueueOf(meta, policy.queue_key)) {
    d.queue = *q;
    d.source = "the pod";
  }
  if (d.source.empty() && !group_name.empty()) {
    const std::string named = Named(group_kind, ns, group_name);
    for (const char* version : group_versions) {
      const kube::OwnerReference ref{version, group_kind, group_name, "", false};
      Result<kube::ObjectMeta> read = source.Owner(ns, ref);
      if (!read.ok()) {
        if (kube::IsNotFound(read.status())) continue;
        if (kube::IsForbidden(read.status())) {
          d.warnings.push_back("chamber: may not read " + named +
                               ", the pod's group, so its queue label is not seen");
          break;
        }
        return Status::Unavailable("reading " + named + ", the group of " + where + ": " +
                                   read.status().message());
      }
      if (const std::string* q = QueueOf(*read, policy.queue_key)) {
        d.queue = *q;
        d.source = named;
        label_pod = true;
      }
      break;
    }
  }
  if (d.source.empty()) {
    const kube::ObjectMeta* at = &meta;
    kube::ObjectMeta owner;
    for (int depth = 0; depth < policy.max_owner_depth; ++depth) {
      const kube::OwnerReference* ref = ControllerOf(*at);
      if (ref == nullptr) break;
      const kube::OwnerReference hop = *ref;
      Result<kube::ObjectMeta> read = source.Owner(ns, hop);
      if (!read.ok()) {
        if (kube::IsNotFound(read.status())) break;
        if (kube::IsForbidden(read.status())) {
          d.warnings.push_back("chamber: may not read " + Named(hop.kind, ns, hop.name) +
                               ", the pod's owner, so its queue label is not seen");
          break;
        }
        return Status::Unavailable("reading " + Named(hop.kind, ns, hop.name) + ", owner of " +
                                   where + ": " + read.status().message());
      }
      owner = std::move(*read);
      at = &owner;
      if (const std::string* q = QueueOf(owner, policy.queue_key)) {
        d.queue = *q;
        d.source = Named(hop.kind, ns, hop.name);
        label_pod = true;
        break;
      }
    }
  }
  if (d.source.empty()) {
    Result<kube::ObjectMeta> n = source.Namespace(ns);
    if (!n.ok() && !kube::IsNotFound(n.status()))
      return Status::Unavailable("reading namespace " + ns + " of " + where + ": " +
                                 n.status().message());
    if (n.ok()) {
      if (auto it = n->labels.find(policy.queue_key); it != n->labels.end()) {
        d.queue = it->second;
        d.source = "namespace " + ns;
      }
    }
  }
  if (d.source.empty()) {
    d.outcome = PodOutcome::kNotOptedIn;
    return d;
  }
  d.outcome = PodOutcome::kMutate;
  d.patch.push_back(
      {{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", policy.scheduler_name}});
  if (label_pod)
    AddLabel("", JsonReader::Find(request.object, "metadata"), policy.queue_key, d.queue, &d.patch);
  GiveShareEnvironment(request.object, &d.patch);
  return d;
}

namespace {

// A PodTemplateSpec: an object whose `spec` holds a list of containers.
bool IsPodTemplate(const Json& v) {
  if (!v.is_object()) return false;
  const Json* spec = JsonReader::Find(v, "spec");
  if (spec == nullptr || !spec->is_object()) return false;
  const Json* containers = JsonReader::Find(*spec, "containers");
  return containers != nullptr && containers->is_array();
}

// The JSON Pointers of the pod templates under `node` (at `at`), outermost only: a Job's
// spec.template, a CronJob's spec.jobTemplate.spec.template, each of a JobSet's
// spec.replicatedJobs[i].template.spec.template, a RayCluster's head and worker groups', ...
void FindPodTemplates(const Json& node, const std::string& at, int depth,
                      std::vector<std::string>* out) {
  if (depth > 12) return;
  if (node.is_object()) {
    for (const auto& [k, v] : node.items()) {
      const std::string path = at + "/" + PointerToken(k);
      if (IsPodTemplate(v))
        out->push_back(path);
      else
        FindPodTemplates(v, path, depth + 1, out);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i)
      FindPodTemplates(node[i], at + "/" + std::to_string(i), depth + 1, out);
  }
}

// "spec.replicatedJobs.0.template.spec.template" for errors.
std::string FieldOf(const std::string& pointer) {
  std::string field = pointer.substr(1);
  std::replace(field.begin(), field.end(), '/', '.');
  return field;
}

}  // namespace

Result<WorkloadDecision> DecideWorkload(const AdmissionRequest& request,
                                        const OptInPolicy& policy) {
  WorkloadDecision d;
  if (request.operation != "CREATE" || !request.sub_resource.empty() ||
      policy.excluded_namespaces.contains(request.namespace_name) ||
      (request.kind.group.empty() && request.kind.kind == "Pod"))
    return d;
  const std::string where = Where(request);
  CHAMBER_ASSIGN_OR_RETURN(const kube::ObjectMeta meta, kube::DecodeMeta(request.object, where));
  const std::string* q = QueueOf(meta, policy.queue_key);
  if (q == nullptr || ControllerOf(meta) != nullptr) return d;  // not opted in, or not top-level
  const Json* spec = JsonReader::Find(request.object, "spec");
  if (spec == nullptr) return d;

  const JsonReader r(where);
  std::vector<std::string> templates;
  FindPodTemplates(*spec, "/spec", 0, &templates);
  for (const std::string& path : templates) {
    const Json& tmpl = request.object[Json::json_pointer(path)];
    const Json* tmeta = JsonReader::Find(tmpl, "metadata");
    if (tmeta != nullptr) {
      const std::string field = FieldOf(path) + ".metadata";
      CHAMBER_RETURN_IF_ERROR(r.ObjectValue(*tmeta, field));
      std::map<std::string, std::string> labels;
      CHAMBER_RETURN_IF_ERROR(r.StringMap(*tmeta, "labels", field, &labels));
      if (labels.contains(policy.queue_key)) continue;  // this template names its own queue
    }
    d.template_paths.push_back(path);
    AddLabel(path, tmeta, policy.queue_key, *q, &d.patch);
  }
  d.mutate = !d.template_paths.empty();
  if (d.mutate) d.queue = *q;
  return d;
}

std::string GuessPlural(std::string_view kind) {
  std::string s;
  for (char c : kind) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.empty()) return s;
  if (s.back() == 's') return s + "es";
  if (s.back() == 'y') return s.substr(0, s.size() - 1) + "ies";
  return s + "s";
}

}  // namespace chamber::admission
