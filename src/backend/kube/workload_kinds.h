// Top-level workload kinds beyond batch/v1 Jobs that Chamber gangs, suspends and resumes as one
// workload (docs/workloads.md): what each kind's spec says about its gang, and where its
// suspend flag lives. Pure: reads the object as the API server returns it.
//
// A kind's pods reach its object through the controller owner chain: a JobSet's through the
// Jobs it creates (Pod -> Job -> JobSet), a PyTorchJob's directly (Pod -> PyTorchJob), a
// RayJob's through the RayCluster it creates (Pod -> RayCluster -> RayJob) and its submitter's
// Job (Pod -> Job -> RayJob), a TrainJob's through the JobSet the Trainer makes for it (Pod ->
// Job -> JobSet -> TrainJob). The topmost object of a known kind is the workload; the objects
// between are its parts. The gang comes from the top-level object's spec, not from counting
// pods, so that it is known before every pod exists; a TrainJob's from the spec of its JobSet,
// which the Trainer builds from the runtime before any pod exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"
#include "kube/types.h"

namespace chamber::backend {

// One set of identical pods of a top-level object (a JobSet's replicated job).
struct KindPodSet {
  std::string name;
  int32_t count = 0;        // pods still to run
  kube::Json pod_template;  // a PodTemplateSpec (metadata and spec)
};

// What a top-level object's spec and status say.
struct KindSpec {
  bool suspended = false;
  bool finished = false;  // completed or failed for good: holds nothing, waits for nothing
  // Its pods are created one set after the other, each once the last is ready (a JobSet's
  // startupPolicy InOrder): the gang is the pods that exist, as no later set appears before the
  // earlier ones run.
  bool in_order = false;
  std::vector<KindPodSet> pod_sets;
  // The fewest pods it starts with (a RayCluster's head and minimum workers, a training job's
  // schedulingPolicy.minAvailable); 0: all of them. `chamber.io/min-member` overrides it.
  int32_t min_pods = 0;
  // A gang per group rather than per object (a LeaderWorkerSet): `groups` groups of
  // `pod_sets` each, whose pods carry the group's index (kGroupIndexLabel); 0: one gang.
  int32_t groups = 0;
  // Whether its controller honours the suspend field for this object (KubeRay refuses to
  // suspend a RayJob without shutdownAfterJobFinishes); if not, it is preempted by evicting its
  // pods.
  bool suspendable = true;
  // Its gang is that of the object of a known kind it controls (a TrainJob's JobSet, which its
  // controller builds from a runtime the TrainJob only names): `pod_sets` is empty, and the
  // object waits until that part exists. `part_of` names what it waits for, for messages
  // ("its JobSet, from ClusterTrainingRuntime torch-distributed").
  bool gang_from_part = false;
  std::string part_of;
  int32_t Pods() const;
};

struct WorkloadKind {
  kube::ResourceType type;
  // The field that suspends it, from the root ({"spec", "suspend"}).
  std::vector<std::string> suspend_path;
  // Errors name the object and the field ("jobset ml/x: spec.replicatedJobs[1].replicas: ...").
  Result<KindSpec> (*read)(const kube::Json& object) = nullptr;

  // {"spec": {"suspend": <suspend>}}, along suspend_path.
  kube::Json SuspendPatch(bool suspend) const;
  // "jobset": how problems and logs name it.
  std::string LowerKind() const;
};

// "JobSet" -> "jobset": how problems and logs name a kind.
std::string LowerKind(std::string_view kind);

// Every kind Chamber knows besides batch/v1 Jobs.
const std::vector<WorkloadKind>& WorkloadKinds();
// The kind an owner reference or object names ("jobset.x-k8s.io/v1alpha2", "JobSet"), or null.
// Any version of the kind's group matches: the object is read the same.
const WorkloadKind* FindWorkloadKind(std::string_view api_version, std::string_view kind);

// The upstream gang API (scheduling.k8s.io PodGroup: Kubernetes 1.36 as v1alpha2, 1.37 as
// v1beta1, behind the GenericWorkload feature gate). A pod names its group in
// `spec.schedulingGroup.podGroupName`; the group says how its pods are scheduled.
struct UpstreamPodGroup {
  bool gang = false;                // spec.schedulingPolicy.gang; false: basic, each pod on its own
  int32_t min_count = 0;            // gang.minCount: the fewest pods that start together
  std::optional<int32_t> priority;  // spec.priority, filled from priorityClassName when admitted
  std::string priority_class_name;
};
// Errors name the object and the field ("podgroup ml/x: spec.schedulingPolicy: ...").
Result<UpstreamPodGroup> ReadPodGroup(const kube::Json& object);
// A batch/v1 Job's own scheduling policy (`spec.scheduling.schedulingPolicy`, Kubernetes 1.37
// with the WorkloadWithJob feature gate): what the Job controller gives the PodGroup it makes
// for the Job (a gang without minCount has min_count 0: all of its parallelism). Nothing when
// the Job sets none. Errors name the Job and the field
// ("job ml/x: spec.scheduling.schedulingPolicy: ...").
Result<std::optional<UpstreamPodGroup>> ReadJobSchedulingPolicy(const kube::Json& job);
// The PodGroup resource in the versions Chamber reads, newest first; the first one the API
// server serves is watched.
const std::vector<kube::ResourceType>& PodGroupTypes();

// The first upstream gang API (Kubernetes 1.35: scheduling.k8s.io/v1alpha1 Workload, behind
// the alpha GenericWorkload gate; 1.36 replaced it with the PodGroup above). A Workload lists
// its pod groups, each with a policy; a pod names its Workload, the group and, optionally, the
// group's replica in `spec.workloadRef`. Each replica of a group is scheduled as its policy says.
struct WorkloadPodGroup {
  std::string name;  // podGroups[].name
  UpstreamPodGroup group;
};
// Errors name the object and the field ("workload ml/x: spec.podGroups[1].policy: ...").
Result<std::vector<WorkloadPodGroup>> ReadWorkload(const kube::Json& object);
const kube::ResourceType& WorkloadV1alpha1Type();
// The name Chamber gives the group a pod's workloadRef names, within its namespace:
// "<workload>:<podGroup>", and ":<replicaKey>" after it for the replica's own gang. No part
// can hold a ':' (Kubernetes names and labels), so no two groups share a name, nor any group a
// name with another workload.
std::string WorkloadGroupName(const kube::Pod::WorkloadRef& ref, bool replica);

inline constexpr char kJobSetGroup[] = "jobset.x-k8s.io";
inline constexpr char kKubeflowGroup[] = "kubeflow.org";
inline constexpr char kRayGroup[] = "ray.io";
inline constexpr char kLwsGroup[] = "leaderworkerset.x-k8s.io";
inline constexpr char kTrainerGroup[] = "trainer.kubeflow.org";
inline constexpr char kSchedulingGroup[] = "scheduling.k8s.io";
// On a LeaderWorkerSet's pods (its controller sets them): the object's name and the group's index.
inline constexpr char kLwsNameLabel[] = "leaderworkerset.sigs.k8s.io/name";
inline constexpr char kLwsGroupIndexLabel[] = "leaderworkerset.sigs.k8s.io/group-index";

}  // namespace chamber::backend
