#include "backend/kube/workload_kinds.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace chamber::backend {
namespace {

// Reads fields of one object; errors name the object ("jobset ml/x") and the field's path.
class FieldReader {
 public:
  explicit FieldReader(std::string where) : where_(std::move(where)) {}

  Status Error(const std::string& field, const std::string& problem) const {
    return Status::InvalidArgument(where_ + ": " + field + ": " + problem);
  }

  // The object at `key` of `parent` (null when absent or null).
  Result<const kube::Json*> Object(const kube::Json& parent, const char* key,
                                   const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return static_cast<const kube::Json*>(nullptr);
    if (!it->is_object()) return Error(field, "must be an object");
    return &*it;
  }

  Result<const kube::Json*> Array(const kube::Json& parent, const char* key,
                                  const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return static_cast<const kube::Json*>(nullptr);
    if (!it->is_array()) return Error(field, "must be a list");
    return &*it;
  }

  // A non-negative 32-bit integer, or `fallback` when absent.
  Result<int32_t> Count(const kube::Json& parent, const char* key, const std::string& field,
                        int32_t fallback) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return fallback;
    if (!it->is_number_integer()) return Error(field, "must be an integer");
    const int64_t v = it->get<int64_t>();
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      return Error(field, std::to_string(v) + " is out of range");
    return static_cast<int32_t>(v);
  }

  Result<bool> Bool(const kube::Json& parent, const char* key, const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return false;
    if (!it->is_boolean()) return Error(field, "must be true or false");
    return it->get<bool>();
  }

  Result<std::string> String(const kube::Json& parent, const char* key,
                             const std::string& field) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return std::string();
    if (!it->is_string()) return Error(field, "must be a string");
    return it->get<std::string>();
  }

  // Whether status.conditions holds one of `types` with status "True".
  Result<bool> ConditionTrue(const kube::Json& status,
                             std::initializer_list<std::string_view> types,
                             const std::string& field) const {
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* conditions, Array(status, "conditions", field));
    if (conditions == nullptr) return false;
    for (const kube::Json& c : *conditions) {
      if (!c.is_object()) return Error(field, "each condition must be an object");
      const auto type = c.find("type"), value = c.find("status");
      if (type == c.end() || value == c.end() || !type->is_string() || !value->is_string())
        continue;
      if (value->get<std::string>() == "True" &&
          std::find(types.begin(), types.end(), type->get<std::string>()) != types.end())
        return true;
    }
    return false;
  }

 private:
  std::string where_;
};

std::string Where(std::string_view kind, const kube::Json& object) {
  std::string ns, name;
  if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
    if (auto n = m->find("namespace"); n != m->end() && n->is_string()) ns = *n;
    if (auto n = m->find("name"); n != m->end() && n->is_string()) name = *n;
  }
  return std::string(kind) + " " + ns + "/" + name;
}

// jobset.x-k8s.io/v1alpha2 JobSet: each replicated job is `replicas` Jobs of `parallelism` pods
// (fewer when `completions` is lower); Jobs that succeeded already need no pods.
Result<KindSpec> ReadJobSet(const kube::Json& object) {
  const FieldReader r(Where("jobset", object));
  KindSpec out;
  if (!object.is_object()) return r.Error("(object)", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(out.suspended, r.Bool(*spec, "suspend", "spec.suspend"));
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* startup,
                           r.Object(*spec, "startupPolicy", "spec.startupPolicy"));
  if (startup != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(
        const std::string order,
        r.String(*startup, "startupPolicyOrder", "spec.startupPolicy.startupPolicyOrder"));
    out.in_order = order == "InOrder";
  }
  // Jobs of each replicated job that succeeded, from the status.
  std::vector<std::pair<std::string, int32_t>> succeeded;
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* status, r.Object(object, "status", "status"));
  if (status != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(
        out.finished, r.ConditionTrue(*status, {"Completed", "Failed"}, "status.conditions"));
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* rjs, r.Array(*status, "replicatedJobsStatus",
                                                            "status.replicatedJobsStatus"));
    for (size_t i = 0; rjs != nullptr && i < rjs->size(); ++i) {
      const std::string field = "status.replicatedJobsStatus[" + std::to_string(i) + "]";
      const kube::Json& s = (*rjs)[i];
      if (!s.is_object()) return r.Error(field, "must be an object");
      CHAMBER_ASSIGN_OR_RETURN(std::string name, r.String(s, "name", field + ".name"));
      CHAMBER_ASSIGN_OR_RETURN(const int32_t n, r.Count(s, "succeeded", field + ".succeeded", 0));
      succeeded.emplace_back(std::move(name), n);
    }
  }
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* jobs,
                           r.Array(*spec, "replicatedJobs", "spec.replicatedJobs"));
  if (jobs == nullptr || jobs->empty()) return r.Error("spec.replicatedJobs", "is empty");
  for (size_t i = 0; i < jobs->size(); ++i) {
    const std::string field = "spec.replicatedJobs[" + std::to_string(i) + "]";
    const kube::Json& rj = (*jobs)[i];
    if (!rj.is_object()) return r.Error(field, "must be an object");
    KindPodSet set;
    CHAMBER_ASSIGN_OR_RETURN(set.name, r.String(rj, "name", field + ".name"));
    if (set.name.empty()) return r.Error(field + ".name", "is missing");
    CHAMBER_ASSIGN_OR_RETURN(const int32_t replicas,
                             r.Count(rj, "replicas", field + ".replicas", 1));
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* job_template,
                             r.Object(rj, "template", field + ".template"));
    if (job_template == nullptr) return r.Error(field + ".template", "is missing");
    const std::string job_field = field + ".template.spec";
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* job_spec,
                             r.Object(*job_template, "spec", job_field));
    if (job_spec == nullptr) return r.Error(job_field, "is missing");
    CHAMBER_ASSIGN_OR_RETURN(const int32_t parallelism,
                             r.Count(*job_spec, "parallelism", job_field + ".parallelism", 1));
    CHAMBER_ASSIGN_OR_RETURN(
        const int32_t completions,
        r.Count(*job_spec, "completions", job_field + ".completions", parallelism));
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* pod_template,
                             r.Object(*job_spec, "template", job_field + ".template"));
    if (pod_template == nullptr) return r.Error(job_field + ".template", "is missing");
    int32_t done = 0;
    for (const auto& [name, n] : succeeded)
      if (name == set.name) done = n;
    const int64_t pods =
        static_cast<int64_t>(std::max(replicas - done, 0)) * std::min(parallelism, completions);
    if (pods > std::numeric_limits<int32_t>::max())
      return r.Error(field, std::to_string(pods) + " pods are too many");
    set.count = static_cast<int32_t>(pods);
    set.pod_template = *pod_template;
    out.pod_sets.push_back(std::move(set));
  }
  return out;
}

// The replica specs of a Kubeflow training job (kubeflow.org/v1: PyTorchJob, TFJob, MPIJob,
// XGBoostJob, PaddleJob, MXJob, JAXJob): `spec.<field>` maps a replica type (Master, Worker,
// Launcher,
// ...) to {replicas, template}; `spec.runPolicy.suspend` suspends it; the replicas that
// succeeded (status.replicaStatuses) need no pods. The gang is every replica, or
// runPolicy.schedulingPolicy.minAvailable of them.
Result<KindSpec> ReadTrainingJob(const kube::Json& object, std::string_view kind,
                                 const char* replica_field) {
  const FieldReader r(Where(LowerKind(kind), object));
  KindSpec out;
  if (!object.is_object()) return r.Error("(object)", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* run, r.Object(*spec, "runPolicy", "spec.runPolicy"));
  if (run != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(out.suspended, r.Bool(*run, "suspend", "spec.runPolicy.suspend"));
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* policy,
                             r.Object(*run, "schedulingPolicy", "spec.runPolicy.schedulingPolicy"));
    if (policy != nullptr) {
      CHAMBER_ASSIGN_OR_RETURN(
          out.min_pods,
          r.Count(*policy, "minAvailable", "spec.runPolicy.schedulingPolicy.minAvailable", 0));
    }
  }
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* status, r.Object(object, "status", "status"));
  const kube::Json* replica_status = nullptr;
  if (status != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(
        out.finished, r.ConditionTrue(*status, {"Succeeded", "Failed"}, "status.conditions"));
    CHAMBER_ASSIGN_OR_RETURN(replica_status,
                             r.Object(*status, "replicaStatuses", "status.replicaStatuses"));
  }
  const std::string field = std::string("spec.") + replica_field;
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* replicas, r.Object(*spec, replica_field, field));
  if (replicas == nullptr || replicas->empty()) return r.Error(field, "is empty");
  for (const auto& [type, rs] : replicas->items()) {
    const std::string at = field + "." + type;
    if (!rs.is_object()) return r.Error(at, "must be an object");
    KindPodSet set;
    set.name = type;
    CHAMBER_ASSIGN_OR_RETURN(const int32_t n, r.Count(rs, "replicas", at + ".replicas", 1));
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* tmpl, r.Object(rs, "template", at + ".template"));
    if (tmpl == nullptr) return r.Error(at + ".template", "is missing");
    int32_t done = 0;
    if (replica_status != nullptr) {
      if (auto s = replica_status->find(type); s != replica_status->end() && s->is_object()) {
        CHAMBER_ASSIGN_OR_RETURN(
            done, r.Count(*s, "succeeded", "status.replicaStatuses." + type + ".succeeded", 0));
      }
    }
    set.count = std::max(n - done, 0);
    set.pod_template = *tmpl;
    out.pod_sets.push_back(std::move(set));
  }
  // An elastic PyTorchJob (spec.elasticPolicy) starts once minReplicas of its Workers can, with
  // its other replicas (a Master); schedulingPolicy.minAvailable, when set, decides instead.
  const kube::Json* elastic = nullptr;
  if (kind == "PyTorchJob") {
    CHAMBER_ASSIGN_OR_RETURN(elastic, r.Object(*spec, "elasticPolicy", "spec.elasticPolicy"));
  }
  if (elastic != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(
        const int32_t min, r.Count(*elastic, "minReplicas", "spec.elasticPolicy.minReplicas", -1));
    CHAMBER_ASSIGN_OR_RETURN(
        const int32_t max, r.Count(*elastic, "maxReplicas", "spec.elasticPolicy.maxReplicas", -1));
    if (min >= 0 && max >= 0 && min > max)
      return r.Error("spec.elasticPolicy.minReplicas",
                     std::to_string(min) + " is more than maxReplicas " + std::to_string(max));
    if (min > 0 && out.min_pods == 0) {
      int64_t others = 0, workers = 0;
      for (const KindPodSet& set : out.pod_sets)
        (set.name == "Worker" ? workers : others) += set.count;
      if (min < workers) out.min_pods = static_cast<int32_t>(others + min);
    }
  }
  return out;
}

template <const char* kKind, const char* kField>
Result<KindSpec> ReadTrainingJobOf(const kube::Json& object) {
  return ReadTrainingJob(object, kKind, kField);
}

// A RayCluster's spec (a RayCluster's own, or a RayJob's spec.rayClusterSpec at `field`): one
// head pod and, per worker group, `replicas` x `numOfHosts` pods (replicas held between
// minReplicas and maxReplicas, as KubeRay does); it starts with the head and each group's
// minReplicas. A worker group may be suspended on its own.
Status ReadRayClusterSpec(const FieldReader& r, const kube::Json& spec, const std::string& field,
                          KindSpec* out) {
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* head,
                           r.Object(spec, "headGroupSpec", field + ".headGroupSpec"));
  if (head == nullptr) return r.Error(field + ".headGroupSpec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* head_template,
                           r.Object(*head, "template", field + ".headGroupSpec.template"));
  if (head_template == nullptr) return r.Error(field + ".headGroupSpec.template", "is missing");
  out->pod_sets.push_back({"head", 1, *head_template});
  int64_t min_pods = 1;
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* groups,
                           r.Array(spec, "workerGroupSpecs", field + ".workerGroupSpecs"));
  for (size_t i = 0; groups != nullptr && i < groups->size(); ++i) {
    const std::string at = field + ".workerGroupSpecs[" + std::to_string(i) + "]";
    const kube::Json& g = (*groups)[i];
    if (!g.is_object()) return r.Error(at, "must be an object");
    KindPodSet set;
    CHAMBER_ASSIGN_OR_RETURN(set.name, r.String(g, "groupName", at + ".groupName"));
    if (set.name.empty()) return r.Error(at + ".groupName", "is missing");
    CHAMBER_ASSIGN_OR_RETURN(const bool suspended, r.Bool(g, "suspend", at + ".suspend"));
    CHAMBER_ASSIGN_OR_RETURN(const int32_t min, r.Count(g, "minReplicas", at + ".minReplicas", 0));
    CHAMBER_ASSIGN_OR_RETURN(const int32_t max, r.Count(g, "maxReplicas", at + ".maxReplicas",
                                                        std::numeric_limits<int32_t>::max()));
    CHAMBER_ASSIGN_OR_RETURN(const int32_t replicas, r.Count(g, "replicas", at + ".replicas", min));
    CHAMBER_ASSIGN_OR_RETURN(const int32_t hosts, r.Count(g, "numOfHosts", at + ".numOfHosts", 1));
    if (min > max)
      return r.Error(at + ".minReplicas",
                     std::to_string(min) + " is above maxReplicas " + std::to_string(max));
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* tmpl, r.Object(g, "template", at + ".template"));
    if (tmpl == nullptr) return r.Error(at + ".template", "is missing");
    if (suspended) continue;
    const int64_t pods = static_cast<int64_t>(std::clamp(replicas, min, max)) * hosts;
    if (pods > std::numeric_limits<int32_t>::max())
      return r.Error(at, std::to_string(pods) + " pods are too many");
    min_pods += static_cast<int64_t>(min) * hosts;
    set.count = static_cast<int32_t>(pods);
    set.pod_template = *tmpl;
    out->pod_sets.push_back(std::move(set));
  }
  out->min_pods =
      static_cast<int32_t>(std::min<int64_t>(min_pods, std::numeric_limits<int32_t>::max()));
  return Status::Ok();
}

// ray.io/v1 RayCluster: spec.suspend; long-running, it never finishes.
Result<KindSpec> ReadRayCluster(const kube::Json& object) {
  const FieldReader r(Where("raycluster", object));
  KindSpec out;
  if (!object.is_object()) return r.Error("(object)", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(out.suspended, r.Bool(*spec, "suspend", "spec.suspend"));
  CHAMBER_RETURN_IF_ERROR(ReadRayClusterSpec(r, *spec, "spec", &out));
  return out;
}

// ray.io/v1 RayJob: spec.suspend; its cluster from spec.rayClusterSpec (the RayCluster it
// creates is part of it), and the submitter pod that comes once the cluster runs; finished when
// status.jobDeploymentStatus is Complete or Failed. A RayJob that runs on an existing cluster
// (spec.clusterSelector) has only its submitter: the pods that exist are its gang. KubeRay
// suspends only a RayJob with shutdownAfterJobFinishes; another is preempted by eviction.
Result<KindSpec> ReadRayJob(const kube::Json& object) {
  const FieldReader r(Where("rayjob", object));
  KindSpec out;
  if (!object.is_object()) return r.Error("(object)", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(out.suspended, r.Bool(*spec, "suspend", "spec.suspend"));
  CHAMBER_ASSIGN_OR_RETURN(
      out.suspendable, r.Bool(*spec, "shutdownAfterJobFinishes", "spec.shutdownAfterJobFinishes"));
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* status, r.Object(object, "status", "status"));
  if (status != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(const std::string state, r.String(*status, "jobDeploymentStatus",
                                                               "status.jobDeploymentStatus"));
    out.finished = state == "Complete" || state == "Failed";
  }
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* cluster,
                           r.Object(*spec, "rayClusterSpec", "spec.rayClusterSpec"));
  if (cluster == nullptr) {
    out.in_order = true;
    return out;
  }
  CHAMBER_RETURN_IF_ERROR(ReadRayClusterSpec(r, *cluster, "spec.rayClusterSpec", &out));
  return out;
}

// leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: `replicas` groups, each a leader and `size` - 1
// workers (the leader from leaderTemplate, else workerTemplate), each group one gang. Its pods
// belong to it through StatefulSets (and a worker's through its leader pod), which chamberd does
// not watch: they are found by their labels. It has no suspend field: a group is preempted by
// evicting its pods, and the controller recreates the group.
Result<KindSpec> ReadLeaderWorkerSet(const kube::Json& object) {
  const FieldReader r(Where("leaderworkerset", object));
  KindSpec out;
  out.suspendable = false;
  if (!object.is_object()) return r.Error("(object)", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(out.groups, r.Count(*spec, "replicas", "spec.replicas", 1));
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* lwt,
                           r.Object(*spec, "leaderWorkerTemplate", "spec.leaderWorkerTemplate"));
  if (lwt == nullptr) return r.Error("spec.leaderWorkerTemplate", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(const int32_t size,
                           r.Count(*lwt, "size", "spec.leaderWorkerTemplate.size", 1));
  if (size < 1) return r.Error("spec.leaderWorkerTemplate.size", "must be at least 1");
  CHAMBER_ASSIGN_OR_RETURN(
      const kube::Json* worker,
      r.Object(*lwt, "workerTemplate", "spec.leaderWorkerTemplate.workerTemplate"));
  if (worker == nullptr) return r.Error("spec.leaderWorkerTemplate.workerTemplate", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(
      const kube::Json* leader,
      r.Object(*lwt, "leaderTemplate", "spec.leaderWorkerTemplate.leaderTemplate"));
  out.pod_sets.push_back({"leader", 1, leader != nullptr ? *leader : *worker});
  if (size > 1) out.pod_sets.push_back({"workers", size - 1, *worker});
  return out;
}

// trainer.kubeflow.org/v1alpha1 TrainJob (Kubeflow Trainer v2): spec.suspend; finished when its
// Complete or Failed condition is True (the Trainer copies them from its JobSet). Its pods come
// from a runtime (spec.runtimeRef: a TrainingRuntime or ClusterTrainingRuntime whose JobSet
// template spec.trainer overrides), which the Trainer turns into a JobSet of the TrainJob's
// name, owned by it, even while it is suspended: the gang is that JobSet's (gang_from_part).
// spec.trainer.numNodes is read to check it, but the JobSet's spec, with it applied, decides.
Result<KindSpec> ReadTrainJob(const kube::Json& object) {
  const FieldReader r(Where("trainjob", object));
  KindSpec out;
  out.gang_from_part = true;
  if (!object.is_object()) return r.Error("(object)", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(out.suspended, r.Bool(*spec, "suspend", "spec.suspend"));
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* ref, r.Object(*spec, "runtimeRef", "spec.runtimeRef"));
  if (ref == nullptr) return r.Error("spec.runtimeRef", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(const std::string runtime,
                           r.String(*ref, "name", "spec.runtimeRef.name"));
  if (runtime.empty()) return r.Error("spec.runtimeRef.name", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(std::string runtime_kind,
                           r.String(*ref, "kind", "spec.runtimeRef.kind"));
  if (runtime_kind.empty()) runtime_kind = "ClusterTrainingRuntime";  // the CRD's default
  out.part_of = "its JobSet, which the Trainer makes from " + runtime_kind + " " + runtime;
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* trainer, r.Object(*spec, "trainer", "spec.trainer"));
  if (trainer != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.Count(*trainer, "numNodes", "spec.trainer.numNodes", 1).status());
  }
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* status, r.Object(object, "status", "status"));
  if (status != nullptr) {
    CHAMBER_ASSIGN_OR_RETURN(out.finished,
                             r.ConditionTrue(*status, {"Complete", "Failed"}, "status.conditions"));
  }
  return out;
}

inline constexpr char kPyTorchJob[] = "PyTorchJob";
inline constexpr char kPyTorchPlural[] = "pytorchjobs";
inline constexpr char kPyTorchField[] = "pytorchReplicaSpecs";
inline constexpr char kTFJob[] = "TFJob";
inline constexpr char kTFPlural[] = "tfjobs";
inline constexpr char kTFField[] = "tfReplicaSpecs";
inline constexpr char kMPIJob[] = "MPIJob";
inline constexpr char kMPIPlural[] = "mpijobs";
inline constexpr char kMPIField[] = "mpiReplicaSpecs";
inline constexpr char kXGBoostJob[] = "XGBoostJob";
inline constexpr char kXGBoostPlural[] = "xgboostjobs";
inline constexpr char kXGBoostField[] = "xgbReplicaSpecs";
inline constexpr char kPaddleJob[] = "PaddleJob";
inline constexpr char kPaddlePlural[] = "paddlejobs";
inline constexpr char kPaddleField[] = "paddleReplicaSpecs";
inline constexpr char kMXJob[] = "MXJob";
inline constexpr char kMXPlural[] = "mxjobs";
inline constexpr char kMXField[] = "mxReplicaSpecs";
inline constexpr char kJAXJob[] = "JAXJob";
inline constexpr char kJAXPlural[] = "jaxjobs";
inline constexpr char kJAXField[] = "jaxReplicaSpecs";

// A Kubeflow training operator kind (kubeflow.org/v1), suspended at spec.runPolicy.suspend.
template <const char* kKind, const char* kPlural, const char* kField>
WorkloadKind TrainingKind() {
  return {.type = {.group = kKubeflowGroup,
                   .version = "v1",
                   .plural = kPlural,
                   .kind = kKind,
                   .namespaced = true},
          .suspend_path = {"spec", "runPolicy", "suspend"},
          .read = &ReadTrainingJobOf<kKind, kField>};
}

}  // namespace

int32_t KindSpec::Pods() const {
  int64_t n = 0;
  for (const KindPodSet& s : pod_sets) n += s.count;
  return static_cast<int32_t>(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
}

kube::Json WorkloadKind::SuspendPatch(bool suspend) const {
  kube::Json patch = suspend;
  for (auto it = suspend_path.rbegin(); it != suspend_path.rend(); ++it)
    patch = kube::Json{{*it, std::move(patch)}};
  return patch;
}

std::string LowerKind(std::string_view kind) {
  std::string out(kind);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string WorkloadKind::LowerKind() const { return backend::LowerKind(type.kind); }

const std::vector<WorkloadKind>& WorkloadKinds() {
  static const std::vector<WorkloadKind> kinds = {
      {.type = {.group = kJobSetGroup,
                .version = "v1alpha2",
                .plural = "jobsets",
                .kind = "JobSet",
                .namespaced = true},
       .suspend_path = {"spec", "suspend"},
       .read = &ReadJobSet},
      TrainingKind<kPyTorchJob, kPyTorchPlural, kPyTorchField>(),
      TrainingKind<kTFJob, kTFPlural, kTFField>(),
      TrainingKind<kMPIJob, kMPIPlural, kMPIField>(),
      TrainingKind<kXGBoostJob, kXGBoostPlural, kXGBoostField>(),
      TrainingKind<kPaddleJob, kPaddlePlural, kPaddleField>(),
      TrainingKind<kMXJob, kMXPlural, kMXField>(),
      TrainingKind<kJAXJob, kJAXPlural, kJAXField>(),
      {.type = {.group = kRayGroup,
                .version = "v1",
                .plural = "rayclusters",
                .kind = "RayCluster",
                .namespaced = true},
       .suspend_path = {"spec", "suspend"},
       .read = &ReadRayCluster},
      {.type = {.group = kRayGroup,
                .version = "v1",
                .plural = "rayjobs",
                .kind = "RayJob",
                .namespaced = true},
       .suspend_path = {"spec", "suspend"},
       .read = &ReadRayJob},
      {.type = {.group = kLwsGroup,
                .version = "v1",
                .plural = "leaderworkersets",
                .kind = "LeaderWorkerSet",
                .namespaced = true},
       .suspend_path = {},
       .read = &ReadLeaderWorkerSet},
      {.type = {.group = kTrainerGroup,
                .version = "v1alpha1",
                .plural = "trainjobs",
                .kind = "TrainJob",
                .namespaced = true},
       .suspend_path = {"spec", "suspend"},
       .read = &ReadTrainJob},
  };
  return kinds;
}

namespace {

// A scheduling policy at `path` (basic, or gang with its minCount), as a PodGroup and a Job's
// spec.scheduling hold it: sets g->gang and g->min_count. A PodGroup's gang must give its
// minCount; a Job's may leave it out, for all of its parallelism (min_count 0).
Status ReadSchedulingPolicy(const FieldReader& r, const kube::Json& policy, const std::string& path,
                            bool min_count_required, UpstreamPodGroup* g) {
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* basic, r.Object(policy, "basic", path + ".basic"));
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* gang, r.Object(policy, "gang", path + ".gang"));
  if ((basic == nullptr) == (gang == nullptr))
    return r.Error(path, "must set exactly one of basic and gang");
  if (gang != nullptr) {
    g->gang = true;
    CHAMBER_ASSIGN_OR_RETURN(g->min_count, r.Count(*gang, "minCount", path + ".gang.minCount", -1));
    if (g->min_count == -1 && !min_count_required) {
      g->min_count = 0;
    } else if (g->min_count < 1) {
      return r.Error(path + ".gang.minCount", "must be at least 1");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<UpstreamPodGroup>> ReadJobSchedulingPolicy(const kube::Json& job) {
  const FieldReader r(Where("job", job));
  if (!job.is_object()) return r.Error("", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(job, "spec", "spec"));
  if (spec == nullptr) return std::optional<UpstreamPodGroup>();
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* scheduling,
                           r.Object(*spec, "scheduling", "spec.scheduling"));
  if (scheduling == nullptr) return std::optional<UpstreamPodGroup>();
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* policy, r.Object(*scheduling, "schedulingPolicy",
                                                              "spec.scheduling.schedulingPolicy"));
  if (policy == nullptr) return std::optional<UpstreamPodGroup>();
  UpstreamPodGroup g;
  CHAMBER_RETURN_IF_ERROR(
      ReadSchedulingPolicy(r, *policy, "spec.scheduling.schedulingPolicy", false, &g));
  return std::optional<UpstreamPodGroup>(std::move(g));
}

Result<UpstreamPodGroup> ReadPodGroup(const kube::Json& object) {
  const FieldReader r(Where("podgroup", object));
  if (!object.is_object()) return r.Error("", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  UpstreamPodGroup g;
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* policy,
                           r.Object(*spec, "schedulingPolicy", "spec.schedulingPolicy"));
  if (policy == nullptr) return r.Error("spec.schedulingPolicy", "is missing");
  CHAMBER_RETURN_IF_ERROR(ReadSchedulingPolicy(r, *policy, "spec.schedulingPolicy", true, &g));
  auto priority = spec->find("priority");
  if (priority != spec->end() && !priority->is_null()) {
    if (!priority->is_number_integer()) return r.Error("spec.priority", "must be an integer");
    const int64_t v = priority->get<int64_t>();
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      return r.Error("spec.priority", std::to_string(v) + " is out of range");
    g.priority = static_cast<int32_t>(v);
  }
  CHAMBER_ASSIGN_OR_RETURN(g.priority_class_name,
                           r.String(*spec, "priorityClassName", "spec.priorityClassName"));
  return g;
}

Result<std::vector<WorkloadPodGroup>> ReadWorkload(const kube::Json& object) {
  const FieldReader r(Where("workload", object));
  if (!object.is_object()) return r.Error("", "must be an object");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* spec, r.Object(object, "spec", "spec"));
  if (spec == nullptr) return r.Error("spec", "is missing");
  CHAMBER_ASSIGN_OR_RETURN(const kube::Json* groups, r.Array(*spec, "podGroups", "spec.podGroups"));
  if (groups == nullptr || groups->empty()) return r.Error("spec.podGroups", "is missing");
  std::vector<WorkloadPodGroup> out;
  for (size_t i = 0; i < groups->size(); ++i) {
    const std::string at = "spec.podGroups[" + std::to_string(i) + "]";
    const kube::Json& g = (*groups)[i];
    if (!g.is_object()) return r.Error(at, "must be an object");
    WorkloadPodGroup w;
    CHAMBER_ASSIGN_OR_RETURN(w.name, r.String(g, "name", at + ".name"));
    if (w.name.empty()) return r.Error(at + ".name", "is missing");
    for (const WorkloadPodGroup& seen : out)
      if (seen.name == w.name) return r.Error(at + ".name", "\"" + w.name + "\" is named twice");
    CHAMBER_ASSIGN_OR_RETURN(const kube::Json* policy, r.Object(g, "policy", at + ".policy"));
    if (policy == nullptr) return r.Error(at + ".policy", "is missing");
    CHAMBER_RETURN_IF_ERROR(ReadSchedulingPolicy(r, *policy, at + ".policy", true, &w.group));
    out.push_back(std::move(w));
  }
  return out;
}

const kube::ResourceType& WorkloadV1alpha1Type() {
  static const kube::ResourceType type = {
      .group = kSchedulingGroup, .version = "v1alpha1", .plural = "workloads", .kind = "Workload"};
  return type;
}

std::string WorkloadGroupName(const kube::Pod::WorkloadRef& ref, bool replica) {
  std::string name = ref.workload + ":" + ref.pod_group;
  if (replica && !ref.replica_key.empty()) name += ":" + ref.replica_key;
  return name;
}

const std::vector<kube::ResourceType>& PodGroupTypes() {
  static const std::vector<kube::ResourceType> types = {
      {.group = kSchedulingGroup, .version = "v1beta1", .plural = "podgroups", .kind = "PodGroup"},
      {.group = kSchedulingGroup, .version = "v1alpha2", .plural = "podgroups", .kind = "PodGroup"},
  };
  return types;
}

const WorkloadKind* FindWorkloadKind(std::string_view api_version, std::string_view kind) {
  const std::string_view group = api_version.substr(0, api_version.find('/'));
  if (group.size() == api_version.size()) return nullptr;  // a core kind: no group
  for (const WorkloadKind& k : WorkloadKinds())
    if (k.type.kind == kind && k.type.group == group) return &k;
  return nullptr;
}

}  // namespace chamber::backend
