#include "kube/types.h"

#include <gtest/gtest.h>

namespace chamber::kube {
namespace {

Json PodJson() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
                 "labels": {"chamber.io/queue": "research"},
                 "annotations": {"a": "b"},
                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                      "uid": "j-1", "controller": true}],
                 "deletionTimestamp": "2026-01-01T00:00:00Z",
                 "futureField": {"x": 1}},
    "spec": {"schedulerName": "chamber", "nodeName": "gpu-1", "priority": 50,
             "priorityClassName": "elastic",
             "containers": [
               {"name": "a", "image": "img", "resources": {"requests": {"cpu": "500m",
                 "memory": "16Gi", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": 4}}},
               {"name": "b", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}],
             "nodeSelector": {"pool": "a100"},
             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule",
                              "tolerationSeconds": 30}],
             "affinity": {"nodeAffinity": {"x": [1, 2]}}},
    "status": {"phase": "Running", "startTime": "2026-01-01T00:00:05Z",
               "nominatedNodeName": "gpu-2",
               "conditions": [{"type": "PodScheduled", "status": "True"}]}
  })");
}

TEST(PodTest, TimesAreKeptAsMillisecondsAndWrittenAsTheApiServerWritesThem) {
  Json j = PodJson();
  j["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z";
  j["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T01:00:00+01:00";
  j["status"]["startTime"] = "2026-01-01T00:00:02.250Z";
  Result<Pod> p = Pod::FromJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->metadata.creation_timestamp.unix_ms(), int64_t{1767225601000});
  EXPECT_EQ(p->metadata.creation_timestamp.Text(), "2026-01-01T00:00:01Z");
  EXPECT_EQ(p->conditions[0].last_transition_time.Text(), "2026-01-01T00:00:00Z");
  EXPECT_EQ(p->start_time.Text(), "2026-01-01T00:00:02.250Z");
  EXPECT_EQ(p->start_time, Timestamp(1767225602250));
  EXPECT_NE(p->start_time, p->metadata.creation_timestamp);
  j["metadata"].erase("deletionTimestamp");
  const Pod none = Pod::FromJson(j).value();
  EXPECT_TRUE(none.metadata.deletion_timestamp.empty());
  EXPECT_EQ(none.metadata.deletion_timestamp.unix_ms(), 0);
  EXPECT_EQ(none.metadata.deletion_timestamp.Text(), "");
}

TEST(PodTest, AnUnreadableMetadataTimeIsAnErrorThatNamesTheField) {
  Json j = PodJson();
  j["metadata"]["creationTimestamp"] = "yesterday";
  Result<Pod> p = Pod::FromJson(j);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("metadata.creationTimestamp"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("\"yesterday\" is not an RFC 3339 time"), std::string::npos)
      << p.status().message();
  j = PodJson();
  j["status"]["conditions"][0]["lastTransitionTime"] = "2026-13-01T00:00:00Z";
  p = Pod::FromJson(j);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("status.conditions[0].lastTransitionTime"), std::string::npos)
      << p.status().message();
}

TEST(PodTest, AStartTimeThatIsNotAStringReadsAsNone) {
  // The pod must still decode: a bound pod that disappeared would free the GPUs it holds.
  Json j = PodJson();
  j["status"]["startTime"] = 5;
  Result<Pod> p = Pod::FromJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->start_time.empty());
  EXPECT_EQ(p->phase, "Running");
  j["status"]["startTime"] = "soon";
  p = Pod::FromJson(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->start_time.empty());
}

TEST(PodTest, DecodesTheFieldsChamberUses) {
  Result<Pod> p = Pod::FromJson(PodJson());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->metadata.Key(), "ml/train-0");
  EXPECT_EQ(p->metadata.uid, "u-1");
  EXPECT_EQ(p->metadata.resource_version, "42");
  EXPECT_EQ(p->metadata.labels.at("chamber.io/queue"), "research");
  ASSERT_EQ(p->metadata.owner_references.size(), 1u);
  EXPECT_TRUE(p->metadata.owner_references[0].controller);
  EXPECT_EQ(p->metadata.deletion_timestamp.Text(), "2026-01-01T00:00:00Z");
  EXPECT_EQ(p->scheduler_name, "chamber");
  EXPECT_EQ(p->node_name, "gpu-1");
  EXPECT_EQ(p->priority, 50);
  EXPECT_EQ(p->priority_class_name, "elastic");
  EXPECT_EQ(p->node_selector.at("pool"), "a100");
  ASSERT_EQ(p->tolerations.size(), 1u);
  EXPECT_EQ(p->tolerations[0].toleration_seconds, 30);
  EXPECT_EQ(p->affinity["nodeAffinity"]["x"][1], 2);
  EXPECT_EQ(p->phase, "Running");
  EXPECT_EQ(p->start_time.Text(), "2026-01-01T00:00:05Z");
  EXPECT_EQ(p->start_time.unix_ms(), int64_t{1767225605000});
  EXPECT_EQ(p->nominated_node_name, "gpu-2");
  ASSERT_EQ(p->conditions.size(), 1u);
  EXPECT_EQ(p->conditions[0].type, "PodScheduled");
  const ResourceList r = p->Requests();
  EXPECT_EQ(r.Get("cpu"), 1500);
  EXPECT_EQ(r.Get("memory"), int64_t{16} << 30);
  EXPECT_EQ(r.Get("nvidia.com/gpu"), 6);
  EXPECT_EQ(p->Request("nvidia.com/gpu"), 6);
  EXPECT_EQ(p->Request("cpu"), 1500);
  EXPECT_EQ(p->Request("ephemeral-storage"), 0);
  EXPECT_EQ(p->containers[0].limits.Get("nvidia.com/gpu"), 4);
}

TEST(PodTest, RoundTripKeepsUnknownFields) {
  Result<Pod> p = Pod::FromJson(PodJson());
  ASSERT_TRUE(p.ok());
  Pod pod = *p;
  pod.metadata.labels["extra"] = "1";
  const Json out = pod.ToJson();
  EXPECT_EQ(out["metadata"]["futureField"]["x"], 1);
  EXPECT_EQ(out["metadata"]["labels"]["extra"], "1");
  EXPECT_EQ(out["spec"]["affinity"], PodJson()["spec"]["affinity"]);
  Json expected = PodJson();
  expected["metadata"]["labels"]["extra"] = "1";
  EXPECT_EQ(out, expected);
}

TEST(PodTest, ErrorsNameTheObjectAndField) {
  Json j = PodJson();
  j["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "fast";
  Result<Pod> p = Pod::FromJson(j);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("Pod ml/train-0"), std::string::npos);
  EXPECT_NE(p.status().message().find("spec.containers[1].resources.requests.cpu"),
            std::string::npos)
      << p.status().message();
  j = PodJson();
  j["metadata"]["labels"]["n"] = 3;
  p = Pod::FromJson(j);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("metadata.labels.n: expected a string"), std::string::npos);
  EXPECT_FALSE(Pod::FromJson(Json::array()).ok());
  EXPECT_FALSE(Pod::FromJson(Json{{"kind", "Pod"}}).ok());  // no metadata
}

TEST(PodTest, TrimmedKeepsWhatChamberReadsAndDropsTheRest) {
  Json j = PodJson();
  j["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
      std::string(4096, 'x');
  j["metadata"]["annotations"]["chamber.io/checkpoint-grace-seconds"] = "30";
  j["metadata"]["labels"]["app.kubernetes.io/name"] = "trainer";
  j["status"]["conditions"].push_back({{"type", "Ready"}, {"status", "True"}});
  j["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:03Z";
  Pod pod = Pod::FromJson(j).value();
  const Pod whole = pod;
  TrimPod(pod);
  EXPECT_TRUE(pod.raw.is_null());
  EXPECT_EQ(pod.metadata.annotations,
            (std::map<std::string, std::string>{{"chamber.io/checkpoint-grace-seconds", "30"}}));
  EXPECT_EQ(pod.metadata.labels,
            (std::map<std::string, std::string>{{"chamber.io/queue", "research"}}));
  // One container with the sum of the requests, nothing else of them.
  ASSERT_EQ(pod.containers.size(), 1u);
  EXPECT_EQ(pod.containers[0].name, "");
  EXPECT_EQ(pod.containers[0].image, "");
  EXPECT_TRUE(pod.containers[0].limits.values.empty());
  EXPECT_EQ(pod.Requests().values, whole.Requests().values);
  EXPECT_EQ(pod.Request("nvidia.com/gpu"), 6);
  EXPECT_EQ(pod.Request("cpu"), 1500);
  // A bound pod keeps no conditions, but when it was scheduled.
  EXPECT_EQ(whole.conditions.size(), 2u);
  EXPECT_TRUE(pod.conditions.empty());
  EXPECT_EQ(pod.scheduled_time.Text(), "2026-01-01T00:00:03Z");
  // Everything else decoded stays.
  EXPECT_EQ(pod.metadata.uid, whole.metadata.uid);
  EXPECT_EQ(pod.metadata.owner_references.size(), 1u);
  EXPECT_EQ(pod.node_name, "gpu-1");
  EXPECT_EQ(pod.nominated_node_name, "gpu-2");
  EXPECT_EQ(pod.node_selector, whole.node_selector);
  EXPECT_EQ(pod.tolerations.size(), 1u);
  EXPECT_EQ(pod.affinity, whole.affinity);
  EXPECT_EQ(pod.start_time, whole.start_time);
  EXPECT_TRUE(pod.has_status);
  // A pending pod keeps every condition, in its order, and has no scheduled time.
  Json pending = j;
  pending["spec"].erase("nodeName");
  pending["status"]["conditions"][0]["status"] = "False";
  Pod waiting = Pod::FromJson(pending).value();
  TrimPod(waiting);
  ASSERT_EQ(waiting.conditions.size(), 2u);
  EXPECT_EQ(waiting.conditions[0].type, "PodScheduled");
  EXPECT_EQ(waiting.conditions[1].type, "Ready");
  EXPECT_TRUE(waiting.scheduled_time.empty());
  // A status with no field is none; a missing one too.
  j["status"] = Json::object();
  EXPECT_FALSE(Pod::FromJson(j).value().has_status);
  j.erase("status");
  EXPECT_FALSE(Pod::FromJson(j).value().has_status);
}

TEST(PodTest, PodsOfTheSameShapeShareTheirTolerationsAndTrimmedContainers) {
  Json j = PodJson();
  Pod a = Pod::FromJson(j).value();
  j["metadata"]["name"] = "train-1";
  j["metadata"]["uid"] = "u-2";
  j["spec"]["containers"][0]["image"] = "img:2";  // another image, the same requests
  Pod b = Pod::FromJson(j).value();
  EXPECT_EQ(a.tolerations.get(), b.tolerations.get());
  EXPECT_NE(a.containers.get(), b.containers.get());
  TrimPod(a);
  TrimPod(b);
  EXPECT_EQ(a.containers.get(), b.containers.get());
  EXPECT_EQ(a.Request("nvidia.com/gpu"), 6);
  // Different tolerations are not shared.
  j["spec"]["tolerations"][0]["tolerationSeconds"] = 60;
  const Pod c = Pod::FromJson(j).value();
  EXPECT_NE(c.tolerations.get(), a.tolerations.get());
  ASSERT_EQ(c.tolerations.size(), 1u);
  EXPECT_EQ(c.tolerations[0].toleration_seconds, 60);
  EXPECT_EQ(a.tolerations[0].toleration_seconds, 30);
}

TEST(PodTest, APendingTrimmedPodKeepsEveryConditionInOrder) {
  // chamberd patches a pending pod's PodScheduled condition by its index.
  Json j = PodJson();
  j["spec"].erase("nodeName");
  j["status"]["conditions"] = Json::parse(
      R"([{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "False"}])");
  Pod pod = Pod::FromJson(j).value();
  TrimPod(pod);
  ASSERT_EQ(pod.conditions.size(), 2u);
  EXPECT_EQ(pod.conditions[0].type, "Ready");
  EXPECT_EQ(pod.conditions[1].type, "PodScheduled");
}

TEST(NodeTest, TrimmedKeepsTheDecodedFieldsAndWritesThemBack) {
  Json j = Json::parse(R"({
    "metadata": {"name": "gpu-1", "uid": "n-1", "resourceVersion": "7",
                 "labels": {"pool": "h100"}, "annotations": {"a": "1"},
                 "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
    "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
    "status": {"capacity": {"nvidia.com/gpu": "8"},
               "conditions": [{"type": "MemoryPressure", "status": "False"},
                              {"type": "Ready", "status": "True", "reason": "KubeletReady",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}],
               "images": [{"names": ["registry.example/train:1"], "sizeBytes": 1}]}})");
  Node n = Node::FromJson(j).value();
  TrimNode(n);
  EXPECT_TRUE(n.raw.is_null());
  EXPECT_EQ(n.capacity.Get("nvidia.com/gpu"), 8);
  const Json back = n.ToJson();
  EXPECT_EQ(back["metadata"]["name"], "gpu-1");
  EXPECT_EQ(back["metadata"]["uid"], "n-1");
  EXPECT_EQ(back["metadata"]["resourceVersion"], "7");
  EXPECT_EQ(back["metadata"]["labels"], j["metadata"]["labels"]);
  EXPECT_EQ(back["metadata"]["annotations"], j["metadata"]["annotations"]);
  EXPECT_EQ(back["spec"]["taints"], j["spec"]["taints"]);
  EXPECT_EQ(back["status"]["conditions"], j["status"]["conditions"]);
  EXPECT_FALSE(back["metadata"].contains("managedFields"));
  EXPECT_FALSE(back["status"].contains("images"));
}

TEST(NodeTest, DecodesCapacityTaintsAndConditions) {
  Result<Node> n = Node::FromJson(Json::parse(R"({
    "metadata": {"name": "gpu-1", "labels": {"pool": "h100"}},
    "spec": {"unschedulable": true, "taints": [{"key": "chamber.io/gpu-unhealthy",
                                                "effect": "NoSchedule"}]},
    "status": {"capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
               "allocatable": {"cpu": "63500m", "nvidia.com/gpu": "8"},
               "conditions": [{"type": "Ready", "status": "True"}],
               "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}})"));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->metadata.Key(), "gpu-1");
  EXPECT_TRUE(n->unschedulable);
  ASSERT_EQ(n->taints.size(), 1u);
  EXPECT_EQ(n->taints[0].key, "chamber.io/gpu-unhealthy");
  EXPECT_EQ(n->capacity.Get("nvidia.com/gpu"), 8);
  EXPECT_EQ(n->allocatable.Get("cpu"), 63500);
  EXPECT_TRUE(n->Ready());
  EXPECT_EQ(n->addresses[0].address, "10.0.0.5");
  Node changed = *n;
  changed.taints.clear();
  changed.unschedulable = false;
  const Json out = changed.ToJson();
  EXPECT_FALSE(out["spec"].contains("taints"));
  EXPECT_FALSE(out["spec"].contains("unschedulable"));
  EXPECT_EQ(out["status"]["capacity"]["memory"], "512Gi");
}

TEST(JobTest, DecodesSpecAndStatus) {
  Result<Job> j = Job::FromJson(Json::parse(R"({
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"parallelism": 4, "completions": 4, "suspend": true,
             "template": {"spec": {"schedulerName": "chamber"}}},
    "status": {"active": 2, "succeeded": 1, "failed": 0,
               "conditions": [{"type": "Suspended", "status": "True"}]}})"));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->parallelism, 4);
  EXPECT_EQ(j->completions, 4);
  EXPECT_TRUE(j->suspend);
  EXPECT_EQ(j->template_spec["spec"]["schedulerName"], "chamber");
  EXPECT_EQ(j->active, 2);
  EXPECT_EQ(j->succeeded, 1);
  EXPECT_EQ(j->conditions[0].type, "Suspended");
  Job resumed = *j;
  resumed.suspend = false;
  EXPECT_EQ(resumed.ToJson()["spec"]["suspend"], false);
  EXPECT_EQ(resumed.ToJson()["spec"]["template"], j->template_spec);
}

TEST(OtherTypesTest, LeaseEventPriorityClassPdbNamespaceObject) {
  Result<Lease> l = Lease::FromJson(Json::parse(R"({"metadata": {"name": "l", "namespace": "n"},
    "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 3,
             "renewTime": "2026-01-01T00:00:00.000000Z"}})"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->holder_identity, "a");
  EXPECT_EQ(l->lease_duration_seconds, 15);
  EXPECT_EQ(l->lease_transitions, 3);
  Lease released = *l;
  released.holder_identity.clear();
  EXPECT_FALSE(released.ToJson()["spec"].contains("holderIdentity"));
  EXPECT_EQ(released.ToJson()["spec"]["leaseTransitions"], 3);

  Result<Event> e = Event::FromJson(Json::parse(R"({"metadata": {"name": "e", "namespace": "n"},
    "involvedObject": {"kind": "Pod", "name": "p", "uid": "u"}, "reason": "Preempted",
    "message": "m", "type": "Warning", "count": 2})"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->involved_kind, "Pod");
  EXPECT_EQ(e->reason, "Preempted");
  EXPECT_EQ(e->count, 2);

  Result<PriorityClass> pc = PriorityClass::FromJson(
      Json::parse(R"({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true})"));
  ASSERT_TRUE(pc.ok());
  EXPECT_EQ(pc->value, 1000);
  EXPECT_TRUE(pc->global_default);

  Result<PodDisruptionBudget> pdb = PodDisruptionBudget::FromJson(Json::parse(
      R"({"metadata": {"name": "b", "namespace": "n"}, "spec": {"minAvailable": "50%",
      "selector": {"matchLabels": {"app": "x"}}}, "status": {"disruptionsAllowed": 0,
      "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}})"));
  ASSERT_TRUE(pdb.ok());
  EXPECT_EQ(pdb->min_available, "50%");
  EXPECT_TRUE(pdb->max_unavailable.is_null());
  EXPECT_EQ(pdb->match_labels.at("app"), "x");
  EXPECT_EQ(pdb->current_healthy, 2);

  Result<Namespace> ns =
      Namespace::FromJson(Json::parse(R"({"metadata": {"name": "ml"}, "status": {"phase":
      "Active"}})"));
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ(ns->phase, "Active");

  Result<Object> cr = Object::FromJson(Json::parse(
      R"({"apiVersion": "chamber.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"},
      "spec": {"priority": 5}})"));
  ASSERT_TRUE(cr.ok());
  EXPECT_EQ(cr->metadata.name, "q");
  EXPECT_EQ(cr->raw["spec"]["priority"], 5);
  Result<Object> bad = Object::FromJson(Json::parse(R"({"kind": "Queue", "metadata": 3})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Queue"), std::string::npos);
}

}  // namespace
}  // namespace chamber::kube
