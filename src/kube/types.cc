#include "kube/types.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/json_reader.h"
#include "common/quantity.h"
#include "common/time.h"

namespace chamber::kube {
namespace {

// The JSON reader with Kubernetes' own shapes: resource lists and conditions.
class Reader : public JsonReader {
 public:
  using JsonReader::JsonReader;

  Status Resources(const Json& obj, std::string_view key, std::string_view path,
                   ResourceList* out) const {
    const Json* m = nullptr;
    CHAMBER_RETURN_IF_ERROR(Object(obj, key, path, &m));
    if (m == nullptr) return Status::Ok();
    for (const auto& [name, v] : m->items()) {
      std::string text;
      if (v.is_string()) {
        text = v.get<std::string>();
      } else if (v.is_number_integer()) {
        text = std::to_string(v.get<int64_t>());
      } else {
        return Error(Join(Join(path, key), name), "expected a quantity");
      }
      Result<int64_t> q = name == "cpu" ? ParseCpuMilli(text) : ParseBytes(text);
      if (!q.ok()) return Error(Join(Join(path, key), name), q.status().message());
      out->values[name] = *q;
    }
    return Status::Ok();
  }
  // A Kubernetes Time; absent or null reads as empty.
  Status Time(const Json& obj, std::string_view key, std::string_view path, Timestamp* out) const {
    std::string text;
    CHAMBER_RETURN_IF_ERROR(String(obj, key, path, &text));
    if (text.empty()) return Status::Ok();
    Result<Timestamp> t = Timestamp::Parse(text);
    if (!t.ok()) return Error(Join(path, key), t.status().message());
    *out = *t;
    return Status::Ok();
  }
  Status Conditions(const Json& obj, std::string_view path, std::vector<Condition>* out) const {
    const Json* list = nullptr;
    CHAMBER_RETURN_IF_ERROR(Array(obj, "conditions", path, &list));
    if (list == nullptr) return Status::Ok();
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string p = Join(path, "conditions") + "[" + std::to_string(i) + "]";
      const Json& c = (*list)[i];
      if (!c.is_object()) return Error(p, "expected an object");
      Condition cond;
      CHAMBER_RETURN_IF_ERROR(String(c, "type", p, &cond.type));
      CHAMBER_RETURN_IF_ERROR(String(c, "status", p, &cond.status));
      CHAMBER_RETURN_IF_ERROR(String(c, "reason", p, &cond.reason));
      CHAMBER_RETURN_IF_ERROR(String(c, "message", p, &cond.message));
      CHAMBER_RETURN_IF_ERROR(Time(c, "lastTransitionTime", p, &cond.last_transition_time));
      out->push_back(std::move(cond));
    }
    return Status::Ok();
  }
};

std::string Where(std::string_view kind, const Json& raw) {
  std::string name = "?";
  if (raw.is_object() && raw.contains("metadata") && raw["metadata"].is_object()) {
    const Json& m = raw["metadata"];
    if (m.contains("name") && m["name"].is_string()) name = m["name"].get<std::string>();
    if (m.contains("namespace") && m["namespace"].is_string())
      name = m["namespace"].get<std::string>() + "/" + name;
  }
  return std::string(kind) + " " + name;
}

const Json& Sub(const Json& obj, std::string_view key) {
  static const Json kNull;
  const Json* v = Reader::Find(obj, key);
  return v == nullptr ? kNull : *v;
}

void WriteMeta(const ObjectMeta& m, Json* raw) {
  Json& meta = (*raw)["metadata"];
  if (m.labels.empty()) {
    if (meta.is_object()) meta.erase("labels");
  } else {
    meta["labels"] = m.labels;
  }
  if (m.annotations.empty()) {
    if (meta.is_object()) meta.erase("annotations");
  } else {
    meta["annotations"] = m.annotations;
  }
}

}  // namespace

Result<Timestamp> Timestamp::Parse(std::string_view text) {
  CHAMBER_ASSIGN_OR_RETURN(const std::chrono::system_clock::time_point t, ParseRfc3339(text));
  return Timestamp(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

std::string Timestamp::Text() const {
  return empty() ? std::string() : FormatRfc3339Ms(unix_ms_, TimeFraction::kMillisWhenNonZero);
}

Result<ObjectMeta> DecodeMeta(const Json& object, std::string_view where) {
  Reader r{std::string(where)};
  if (!object.is_object()) return r.Error("(object)", "expected a JSON object");
  const Json* meta = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(object, "metadata", "", &meta));
  if (meta == nullptr) return r.Error("metadata", "missing");
  ObjectMeta m;
  const std::string p = "metadata";
  CHAMBER_RETURN_IF_ERROR(r.String(*meta, "name", p, &m.name));
  CHAMBER_RETURN_IF_ERROR(r.String(*meta, "namespace", p, &m.namespace_name));
  CHAMBER_RETURN_IF_ERROR(r.String(*meta, "uid", p, &m.uid));
  CHAMBER_RETURN_IF_ERROR(r.String(*meta, "resourceVersion", p, &m.resource_version));
  CHAMBER_RETURN_IF_ERROR(r.Integer(*meta, "generation", p, &m.generation));
  CHAMBER_RETURN_IF_ERROR(r.Time(*meta, "creationTimestamp", p, &m.creation_timestamp));
  CHAMBER_RETURN_IF_ERROR(r.Time(*meta, "deletionTimestamp", p, &m.deletion_timestamp));
  CHAMBER_RETURN_IF_ERROR(r.StringMap(*meta, "labels", p, &m.labels));
  CHAMBER_RETURN_IF_ERROR(r.StringMap(*meta, "annotations", p, &m.annotations));
  const Json* owners = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Array(*meta, "ownerReferences", p, &owners));
  if (owners != nullptr) {
    for (size_t i = 0; i < owners->size(); ++i) {
      const std::string op = p + ".ownerReferences[" + std::to_string(i) + "]";
      const Json& o = (*owners)[i];
      if (!o.is_object()) return r.Error(op, "expected an object");
      OwnerReference ref;
      CHAMBER_RETURN_IF_ERROR(r.String(o, "apiVersion", op, &ref.api_version));
      CHAMBER_RETURN_IF_ERROR(r.String(o, "kind", op, &ref.kind));
      CHAMBER_RETURN_IF_ERROR(r.String(o, "name", op, &ref.name));
      CHAMBER_RETURN_IF_ERROR(r.String(o, "uid", op, &ref.uid));
      CHAMBER_RETURN_IF_ERROR(r.Bool(o, "controller", op, &ref.controller));
      m.owner_references.push_back(std::move(ref));
    }
  }
  return m;
}

Result<Pod> Pod::FromJson(Json raw) {
  const std::string where = Where("Pod", raw);
  Reader r(where);
  Pod pod;
  CHAMBER_ASSIGN_OR_RETURN(pod.metadata, DecodeMeta(raw, where));
  const Json* spec = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "spec", "", &spec));
  if (spec != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.String(*spec, "schedulerName", "spec", &pod.scheduler_name));
    CHAMBER_RETURN_IF_ERROR(r.String(*spec, "nodeName", "spec", &pod.node_name));
    CHAMBER_RETURN_IF_ERROR(r.String(*spec, "priorityClassName", "spec", &pod.priority_class_name));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*spec, "priority", "spec", &pod.priority));
    const Json* group = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Object(*spec, "schedulingGroup", "spec", &group));
    if (group != nullptr)
      CHAMBER_RETURN_IF_ERROR(
          r.String(*group, "podGroupName", "spec.schedulingGroup", &pod.pod_group_name));
    const Json* ref = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Object(*spec, "workloadRef", "spec", &ref));
    if (ref != nullptr) {
      Pod::WorkloadRef& w = pod.workload_ref;
      CHAMBER_RETURN_IF_ERROR(r.String(*ref, "name", "spec.workloadRef", &w.workload));
      CHAMBER_RETURN_IF_ERROR(r.String(*ref, "podGroup", "spec.workloadRef", &w.pod_group));
      CHAMBER_RETURN_IF_ERROR(
          r.String(*ref, "podGroupReplicaKey", "spec.workloadRef", &w.replica_key));
    }
    CHAMBER_RETURN_IF_ERROR(r.StringMap(*spec, "nodeSelector", "spec", &pod.node_selector));
    const Json* containers = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Array(*spec, "containers", "spec", &containers));
    std::vector<Container> cts;
    if (containers != nullptr) {
      for (size_t i = 0; i < containers->size(); ++i) {
        const std::string p = "spec.containers[" + std::to_string(i) + "]";
        const Json& c = (*containers)[i];
        if (!c.is_object()) return r.Error(p, "expected an object");
        Container ct;
        CHAMBER_RETURN_IF_ERROR(r.String(c, "name", p, &ct.name));
        CHAMBER_RETURN_IF_ERROR(r.String(c, "image", p, &ct.image));
        const Json* res = nullptr;
        CHAMBER_RETURN_IF_ERROR(r.Object(c, "resources", p, &res));
        if (res != nullptr) {
          CHAMBER_RETURN_IF_ERROR(r.Resources(*res, "requests", p + ".resources", &ct.requests));
          CHAMBER_RETURN_IF_ERROR(r.Resources(*res, "limits", p + ".resources", &ct.limits));
        }
        cts.push_back(std::move(ct));
      }
    }
    pod.containers = Interned(std::move(cts));
    const Json* tols = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Array(*spec, "tolerations", "spec", &tols));
    std::vector<Toleration> tolerations;
    if (tols != nullptr) {
      for (size_t i = 0; i < tols->size(); ++i) {
        const std::string p = "spec.tolerations[" + std::to_string(i) + "]";
        const Json& t = (*tols)[i];
        if (!t.is_object()) return r.Error(p, "expected an object");
        Toleration tol;
        CHAMBER_RETURN_IF_ERROR(r.String(t, "key", p, &tol.key));
        CHAMBER_RETURN_IF_ERROR(r.String(t, "operator", p, &tol.op));
        CHAMBER_RETURN_IF_ERROR(r.String(t, "value", p, &tol.value));
        CHAMBER_RETURN_IF_ERROR(r.String(t, "effect", p, &tol.effect));
        CHAMBER_RETURN_IF_ERROR(r.Integer(t, "tolerationSeconds", p, &tol.toleration_seconds));
        tolerations.push_back(std::move(tol));
      }
    }
    pod.tolerations = Interned(std::move(tolerations));
    pod.affinity = Sub(*spec, "affinity");
  }
  const Json* status = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "status", "", &status));
  if (status != nullptr) {
    pod.has_status = !status->empty();
    CHAMBER_RETURN_IF_ERROR(r.String(*status, "phase", "status", &pod.phase));
    CHAMBER_RETURN_IF_ERROR(
        r.String(*status, "nominatedNodeName", "status", &pod.nominated_node_name));
    // Lenient: an unreadable start time must not make a bound pod, and the GPUs it holds,
    // disappear from the informer. It reads as none.
    if (const Json* start = r.Find(*status, "startTime"); start != nullptr && start->is_string())
      if (Result<Timestamp> t = Timestamp::Parse(start->get_ref<const std::string&>()); t.ok())
        pod.start_time = *t;
    CHAMBER_RETURN_IF_ERROR(r.Conditions(*status, "status", &pod.conditions));
    for (const Condition& c : pod.conditions)
      if (c.type == "PodScheduled" && c.status == "True")
        pod.scheduled_time = c.last_transition_time;
  }
  pod.raw = std::move(raw);
  return pod;
}

void TrimPod(Pod& pod) {
  pod.raw = Json();
  // Chamber's own keys, and the labels that place a LeaderWorkerSet's pod in its group.
  static constexpr std::string_view kKept[] = {"leaderworkerset.sigs.k8s.io/name",
                                               "leaderworkerset.sigs.k8s.io/group-index"};
  for (auto* map : {&pod.metadata.labels, &pod.metadata.annotations})
    std::erase_if(*map, [](const auto& kv) {
      return !kv.first.starts_with("chamber.io/") &&
             std::find(std::begin(kKept), std::end(kKept), kv.first) == std::end(kKept);
    });
  // One container holding the sum of the requests.
  if (pod.containers.size() != 1 || !pod.containers[0].name.empty() ||
      !pod.containers[0].image.empty() || !pod.containers[0].limits.values.empty()) {
    Container sum;
    sum.requests = pod.Requests();
    pod.containers = Interned(std::vector<Container>{std::move(sum)});
  }
  // Conditions are patched on pending pods only; a bound pod's scheduled_time is decoded.
  if (!pod.node_name.empty()) pod.conditions.clear();
  pod.conditions.shrink_to_fit();
}

void TrimNode(Node& node) { node.raw = Json(); }

ResourceList Pod::Requests() const {
  ResourceList sum;
  for (const Container& c : containers)
    for (const auto& [name, v] : c.requests.values) sum.values[name] += v;
  return sum;
}

int64_t Pod::Request(const std::string& name) const {
  int64_t sum = 0;
  for (const Container& c : containers) sum += c.requests.Get(name);
  return sum;
}

Json Pod::ToJson() const {
  Json out = raw;
  WriteMeta(metadata, &out);
  if (!node_name.empty()) out["spec"]["nodeName"] = node_name;
  return out;
}

Result<Node> Node::FromJson(Json raw) {
  const std::string where = Where("Node", raw);
  Reader r(where);
  Node node;
  CHAMBER_ASSIGN_OR_RETURN(node.metadata, DecodeMeta(raw, where));
  const Json* spec = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "spec", "", &spec));
  if (spec != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.Bool(*spec, "unschedulable", "spec", &node.unschedulable));
    const Json* taints = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Array(*spec, "taints", "spec", &taints));
    if (taints != nullptr) {
      for (size_t i = 0; i < taints->size(); ++i) {
        const std::string p = "spec.taints[" + std::to_string(i) + "]";
        const Json& t = (*taints)[i];
        if (!t.is_object()) return r.Error(p, "expected an object");
        Taint taint;
        CHAMBER_RETURN_IF_ERROR(r.String(t, "key", p, &taint.key));
        CHAMBER_RETURN_IF_ERROR(r.String(t, "value", p, &taint.value));
        CHAMBER_RETURN_IF_ERROR(r.String(t, "effect", p, &taint.effect));
        node.taints.push_back(std::move(taint));
      }
    }
  }
  const Json* status = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "status", "", &status));
  if (status != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.Resources(*status, "capacity", "status", &node.capacity));
    CHAMBER_RETURN_IF_ERROR(r.Resources(*status, "allocatable", "status", &node.allocatable));
    CHAMBER_RETURN_IF_ERROR(r.Conditions(*status, "status", &node.conditions));
    const Json* addrs = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Array(*status, "addresses", "status", &addrs));
    if (addrs != nullptr) {
      for (size_t i = 0; i < addrs->size(); ++i) {
        const std::string p = "status.addresses[" + std::to_string(i) + "]";
        const Json& a = (*addrs)[i];
        if (!a.is_object()) return r.Error(p, "expected an object");
        NodeAddress na;
        CHAMBER_RETURN_IF_ERROR(r.String(a, "type", p, &na.type));
        CHAMBER_RETURN_IF_ERROR(r.String(a, "address", p, &na.address));
        node.addresses.push_back(std::move(na));
      }
    }
  }
  node.raw = std::move(raw);
  return node;
}

bool Node::Ready() const {
  for (const Condition& c : conditions)
    if (c.type == "Ready") return c.status == "True";
  return false;
}

Json Node::ToJson() const {
  Json out = raw;
  if (!raw.is_object()) {
    // A trimmed node: what the typed fields hold, conditions in their order (a JSON patch
    // names a condition by its index).
    out = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", metadata.name}}}};
    if (!metadata.uid.empty()) out["metadata"]["uid"] = metadata.uid;
    if (!metadata.resource_version.empty())
      out["metadata"]["resourceVersion"] = metadata.resource_version;
    Json list = Json::array();
    for (const Condition& c : conditions) {
      Json j = {{"type", c.type}, {"status", c.status}};
      if (!c.reason.empty()) j["reason"] = c.reason;
      if (!c.message.empty()) j["message"] = c.message;
      if (!c.last_transition_time.empty()) j["lastTransitionTime"] = c.last_transition_time.Text();
      list.push_back(std::move(j));
    }
    if (!list.empty()) out["status"]["conditions"] = std::move(list);
  }
  WriteMeta(metadata, &out);
  if (unschedulable) {
    out["spec"]["unschedulable"] = true;
  } else if (out.contains("spec") && out["spec"].is_object()) {
    out["spec"].erase("unschedulable");
  }
  Json taint_list = Json::array();
  for (const Taint& t : taints) {
    Json j = {{"key", t.key}, {"effect", t.effect}};
    if (!t.value.empty()) j["value"] = t.value;
    taint_list.push_back(std::move(j));
  }
  if (!taint_list.empty()) {
    out["spec"]["taints"] = std::move(taint_list);
  } else if (out.contains("spec") && out["spec"].is_object()) {
    out["spec"].erase("taints");
  }
  return out;
}

Result<Namespace> Namespace::FromJson(Json raw) {
  const std::string where = Where("Namespace", raw);
  Reader r(where);
  Namespace ns;
  CHAMBER_ASSIGN_OR_RETURN(ns.metadata, DecodeMeta(raw, where));
  CHAMBER_RETURN_IF_ERROR(r.String(Sub(raw, "status"), "phase", "status", &ns.phase));
  ns.raw = std::move(raw);
  return ns;
}

Json Namespace::ToJson() const {
  Json out = raw;
  WriteMeta(metadata, &out);
  return out;
}

Result<Job> Job::FromJson(Json raw) {
  const std::string where = Where("Job", raw);
  Reader r(where);
  Job job;
  CHAMBER_ASSIGN_OR_RETURN(job.metadata, DecodeMeta(raw, where));
  const Json* spec = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "spec", "", &spec));
  if (spec != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.Integer(*spec, "parallelism", "spec", &job.parallelism));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*spec, "completions", "spec", &job.completions));
    CHAMBER_RETURN_IF_ERROR(r.Bool(*spec, "suspend", "spec", &job.suspend));
    job.template_spec = Sub(*spec, "template");
  }
  const Json* status = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "status", "", &status));
  if (status != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.Integer(*status, "active", "status", &job.active));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*status, "succeeded", "status", &job.succeeded));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*status, "failed", "status", &job.failed));
    CHAMBER_RETURN_IF_ERROR(r.Conditions(*status, "status", &job.conditions));
  }
  job.raw = std::move(raw);
  return job;
}

Json Job::ToJson() const {
  Json out = raw;
  WriteMeta(metadata, &out);
  out["spec"]["suspend"] = suspend;
  if (parallelism) out["spec"]["parallelism"] = *parallelism;
  return out;
}

Result<Lease> Lease::FromJson(Json raw) {
  const std::string where = Where("Lease", raw);
  Reader r(where);
  Lease lease;
  CHAMBER_ASSIGN_OR_RETURN(lease.metadata, DecodeMeta(raw, where));
  const Json* spec = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "spec", "", &spec));
  if (spec != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.String(*spec, "holderIdentity", "spec", &lease.holder_identity));
    CHAMBER_RETURN_IF_ERROR(
        r.Integer(*spec, "leaseDurationSeconds", "spec", &lease.lease_duration_seconds));
    CHAMBER_RETURN_IF_ERROR(r.String(*spec, "acquireTime", "spec", &lease.acquire_time));
    CHAMBER_RETURN_IF_ERROR(r.String(*spec, "renewTime", "spec", &lease.renew_time));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*spec, "leaseTransitions", "spec", &lease.lease_transitions));
  }
  lease.raw = std::move(raw);
  return lease;
}

Json Lease::ToJson() const {
  Json out = raw;
  out["apiVersion"] = "coordination.k8s.io/v1";
  out["kind"] = "Lease";
  out["metadata"]["name"] = metadata.name;
  if (!metadata.namespace_name.empty()) out["metadata"]["namespace"] = metadata.namespace_name;
  if (!metadata.resource_version.empty())
    out["metadata"]["resourceVersion"] = metadata.resource_version;
  WriteMeta(metadata, &out);
  Json& spec = out["spec"];
  if (holder_identity.empty()) {
    spec.erase("holderIdentity");
  } else {
    spec["holderIdentity"] = holder_identity;
  }
  if (lease_duration_seconds) spec["leaseDurationSeconds"] = *lease_duration_seconds;
  if (!acquire_time.empty()) spec["acquireTime"] = acquire_time;
  if (!renew_time.empty()) spec["renewTime"] = renew_time;
  spec["leaseTransitions"] = lease_transitions;
  return out;
}

Result<Event> Event::FromJson(Json raw) {
  const std::string where = Where("Event", raw);
  Reader r(where);
  Event ev;
  CHAMBER_ASSIGN_OR_RETURN(ev.metadata, DecodeMeta(raw, where));
  const Json* inv = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "involvedObject", "", &inv));
  if (inv != nullptr) {
    CHAMBER_RETURN_IF_ERROR(r.String(*inv, "kind", "involvedObject", &ev.involved_kind));
    CHAMBER_RETURN_IF_ERROR(r.String(*inv, "namespace", "involvedObject", &ev.involved_namespace));
    CHAMBER_RETURN_IF_ERROR(r.String(*inv, "name", "involvedObject", &ev.involved_name));
    CHAMBER_RETURN_IF_ERROR(r.String(*inv, "uid", "involvedObject", &ev.involved_uid));
  }
  CHAMBER_RETURN_IF_ERROR(r.String(raw, "reason", "", &ev.reason));
  CHAMBER_RETURN_IF_ERROR(r.String(raw, "message", "", &ev.message));
  CHAMBER_RETURN_IF_ERROR(r.String(raw, "type", "", &ev.type));
  CHAMBER_RETURN_IF_ERROR(r.Integer(raw, "count", "", &ev.count));
  ev.raw = std::move(raw);
  return ev;
}

Json Event::ToJson() const {
  Json out = raw;
  WriteMeta(metadata, &out);
  return out;
}

Result<PriorityClass> PriorityClass::FromJson(Json raw) {
  const std::string where = Where("PriorityClass", raw);
  Reader r(where);
  PriorityClass pc;
  CHAMBER_ASSIGN_OR_RETURN(pc.metadata, DecodeMeta(raw, where));
  CHAMBER_RETURN_IF_ERROR(r.Integer(raw, "value", "", &pc.value));
  CHAMBER_RETURN_IF_ERROR(r.Bool(raw, "globalDefault", "", &pc.global_default));
  CHAMBER_RETURN_IF_ERROR(r.String(raw, "preemptionPolicy", "", &pc.preemption_policy));
  pc.raw = std::move(raw);
  return pc;
}

Json PriorityClass::ToJson() const {
  Json out = raw;
  WriteMeta(metadata, &out);
  return out;
}

Result<PodDisruptionBudget> PodDisruptionBudget::FromJson(Json raw) {
  const std::string where = Where("PodDisruptionBudget", raw);
  Reader r(where);
  PodDisruptionBudget pdb;
  CHAMBER_ASSIGN_OR_RETURN(pdb.metadata, DecodeMeta(raw, where));
  const Json* spec = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "spec", "", &spec));
  if (spec != nullptr) {
    pdb.min_available = Sub(*spec, "minAvailable");
    pdb.max_unavailable = Sub(*spec, "maxUnavailable");
    const Json* sel = nullptr;
    CHAMBER_RETURN_IF_ERROR(r.Object(*spec, "selector", "spec", &sel));
    if (sel != nullptr)
      CHAMBER_RETURN_IF_ERROR(r.StringMap(*sel, "matchLabels", "spec.selector", &pdb.match_labels));
  }
  const Json* status = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(raw, "status", "", &status));
  if (status != nullptr) {
    CHAMBER_RETURN_IF_ERROR(
        r.Integer(*status, "disruptionsAllowed", "status", &pdb.disruptions_allowed));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*status, "currentHealthy", "status", &pdb.current_healthy));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*status, "desiredHealthy", "status", &pdb.desired_healthy));
    CHAMBER_RETURN_IF_ERROR(r.Integer(*status, "expectedPods", "status", &pdb.expected_pods));
  }
  pdb.raw = std::move(raw);
  return pdb;
}

Json PodDisruptionBudget::ToJson() const {
  Json out = raw;
  WriteMeta(metadata, &out);
  return out;
}

Result<Object> Object::FromJson(Json raw) {
  Object o;
  CHAMBER_ASSIGN_OR_RETURN(
      o.metadata,
      DecodeMeta(raw, Where(raw.is_object() && raw.contains("kind") && raw["kind"].is_string()
                                ? raw["kind"].get<std::string>()
                                : "object",
                            raw)));
  o.raw = std::move(raw);
  return o;
}

}  // namespace chamber::kube
