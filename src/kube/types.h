// Typed views of the Kubernetes objects Chamber reads. Each decodes the fields Chamber needs and
// keeps the whole object in `raw`, so writing it back (ToJson) loses no field this code does not
// know about. Custom resources stay plain JSON (kube::Json).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/interned.h"
#include "common/status.h"

namespace chamber::kube {

using Json = nlohmann::json;

// Resources by name: "cpu" in millicores, every other resource as a count (the quantities of
// common/quantity.h: ParseCpuMilli and ParseBytes).
struct ResourceList {
  std::map<std::string, int64_t> values;
  int64_t Get(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? 0 : it->second;
  }
  auto operator<=>(const ResourceList&) const = default;
};

// A Kubernetes Time (metadata.creationTimestamp, status.startTime, a condition's
// lastTransitionTime) as milliseconds since the Unix epoch: 8 bytes where its text took 32 and a
// heap block, in every cached pod. Empty when the object has none.
class Timestamp {
 public:
  Timestamp() = default;
  explicit Timestamp(int64_t unix_ms) : unix_ms_(unix_ms) {}
  // RFC 3339 (common/time.h); the error quotes the text.
  static Result<Timestamp> Parse(std::string_view text);

  bool empty() const { return unix_ms_ == kNone; }
  int64_t unix_ms() const { return empty() ? 0 : unix_ms_; }  // 0 when empty
  // As the API server writes it ("2026-01-02T03:04:05Z", milliseconds only when it has any);
  // "" when empty.
  std::string Text() const;
  friend bool operator==(const Timestamp&, const Timestamp&) = default;

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  int64_t unix_ms_ = kNone;
};

struct OwnerReference {
  std::string api_version, kind, name, uid;
  bool controller = false;
};

struct ObjectMeta {
  std::string name, namespace_name, uid, resource_version;
  int64_t generation = 0;
  std::map<std::string, std::string> labels, annotations;
  std::vector<OwnerReference> owner_references;
  Timestamp creation_timestamp;
  Timestamp deletion_timestamp;  // empty while the object is not being deleted

  // "namespace/name", or "name" for cluster-scoped objects (the informer key).
  std::string Key() const { return namespace_name.empty() ? name : namespace_name + "/" + name; }
};

struct Condition {
  std::string type, status, reason, message;
  Timestamp last_transition_time;
};

struct Toleration {
  std::string key, op, value, effect;
  std::optional<int64_t> toleration_seconds;
  auto operator<=>(const Toleration&) const = default;
};

struct Taint {
  std::string key, value, effect;
};

struct Container {
  std::string name, image;
  ResourceList requests, limits;
  auto operator<=>(const Container&) const = default;
};

struct Pod {
  ObjectMeta metadata;
  std::string scheduler_name, node_name, priority_class_name;
  // spec.schedulingGroup.podGroupName: the upstream PodGroup (scheduling.k8s.io, Kubernetes
  // 1.36 and later) the pod belongs to; empty when it names none.
  std::string pod_group_name;
  // spec.workloadRef (Kubernetes 1.35, scheduling.k8s.io/v1alpha1): the Workload, the pod group
  // in it, and the replica of that group the pod belongs to; `workload` empty when it names none.
  struct WorkloadRef {
    std::string workload, pod_group, replica_key;
    auto operator<=>(const WorkloadRef&) const = default;
  } workload_ref;
  std::optional<int32_t> priority;
  // Shared with every pod of the same containers, and of the same tolerations (Interned).
  Interned<std::vector<Container>> containers;
  std::map<std::string, std::string> node_selector;
  Interned<std::vector<Toleration>> tolerations;
  Json affinity;  // null when absent
  std::string phase;
  std::string nominated_node_name;  // status.nominatedNodeName: where a preemptor will run
  Timestamp start_time;  // status.startTime; empty before the kubelet starts the pod (or when
                         // it is not an RFC 3339 time)
  std::vector<Condition> conditions;
  // When the pod was bound: its PodScheduled=True condition's lastTransitionTime; empty when it
  // has none. Kept apart so that a trimmed bound pod needs no conditions.
  Timestamp scheduled_time;
  bool has_status = false;  // status is an object with at least one field
  Json raw;                 // null in a trimmed pod (TrimPod)

  // Sum of the containers' requests (init containers are not counted).
  ResourceList Requests() const;
  // The same sum for one resource, without building the list.
  int64_t Request(const std::string& name) const;
  static Result<Pod> FromJson(Json raw);
  Json ToJson() const;
};

// What a cache that only schedules keeps of a Pod: not the raw object (which is most of a pod's
// memory); of the labels and annotations, only Chamber's own (`chamber.io/`) and the two that
// place a LeaderWorkerSet's pod in its group (`leaderworkerset.sigs.k8s.io/name`,
// `.../group-index`); one container
// holding the sum of the containers' requests, without name, image or limits; and no conditions
// for a bound pod (its scheduled_time stays; a pending pod keeps all, in their order, for a JSON
// patch of one by index). Everything else decoded stays. A trimmed pod cannot be written back whole
// (ToJson): read the pod from the API server first.
void TrimPod(Pod& pod);

struct NodeAddress {
  std::string type, address;
};

struct Node {
  ObjectMeta metadata;
  bool unschedulable = false;
  std::vector<Taint> taints;
  ResourceList capacity, allocatable;
  std::vector<Condition> conditions;
  std::vector<NodeAddress> addresses;
  Json raw;  // null in a trimmed node (TrimNode)

  bool Ready() const;
  static Result<Node> FromJson(Json raw);
  Json ToJson() const;
};

// What a cache keeps of a Node: the decoded fields, not the raw object (which grows with the
// node's life: managedFields, images). ToJson of a trimmed node gives its name, uid,
// resourceVersion, labels, annotations, taints and conditions: enough to patch it.
void TrimNode(Node& node);

struct Namespace {
  ObjectMeta metadata;
  std::string phase;
  Json raw;
  static Result<Namespace> FromJson(Json raw);
  Json ToJson() const;
};

struct Job {
  ObjectMeta metadata;
  std::optional<int32_t> parallelism, completions;
  bool suspend = false;
  Json template_spec;  // spec.template
  int32_t active = 0, succeeded = 0, failed = 0;
  std::vector<Condition> conditions;
  Json raw;
  static Result<Job> FromJson(Json raw);
  Json ToJson() const;
};

struct Lease {
  ObjectMeta metadata;
  std::string holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::string acquire_time, renew_time;  // RFC 3339 MicroTime, as the server stores them
  int32_t lease_transitions = 0;
  Json raw;
  static Result<Lease> FromJson(Json raw);
  Json ToJson() const;
};

struct Event {
  ObjectMeta metadata;
  std::string involved_kind, involved_namespace, involved_name, involved_uid;
  std::string reason, message, type;
  int32_t count = 0;
  Json raw;
  static Result<Event> FromJson(Json raw);
  Json ToJson() const;
};

struct PriorityClass {
  ObjectMeta metadata;
  int32_t value = 0;
  bool global_default = false;
  std::string preemption_policy;
  Json raw;
  static Result<PriorityClass> FromJson(Json raw);
  Json ToJson() const;
};

struct PodDisruptionBudget {
  ObjectMeta metadata;
  Json min_available, max_unavailable;  // int or "50%"; null when absent
  std::map<std::string, std::string> match_labels;
  int32_t disruptions_allowed = 0, current_healthy = 0, desired_healthy = 0, expected_pods = 0;
  Json raw;
  static Result<PodDisruptionBudget> FromJson(Json raw);
  Json ToJson() const;
};

// A custom resource (or any object) as JSON with its metadata decoded.
struct Object {
  ObjectMeta metadata;
  Json raw;
  static Result<Object> FromJson(Json raw);
  Json ToJson() const { return raw; }
};

// Decodes metadata; the error names `where` and the field.
Result<ObjectMeta> DecodeMeta(const Json& object, std::string_view where);

}  // namespace chamber::kube
