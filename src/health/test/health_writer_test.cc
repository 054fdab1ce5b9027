#include "health/health_writer.h"

#include <gtest/gtest.h>

namespace chamber::health {
namespace {

using kube::Json;

Json Node(Json annotations = Json::object(), Json taints = nullptr, Json conditions = nullptr) {
  Json j = {{"metadata", {{"name", "n1"}, {"resourceVersion", "42"}, {"annotations", annotations}}},
            {"spec", Json::object()},
            {"status", Json::object()}};
  if (!taints.is_null()) j["spec"]["taints"] = taints;
  if (!conditions.is_null()) j["status"]["conditions"] = conditions;
  return j;
}

DesiredNode Fenced(std::vector<int> gpus, TaintEffect effect = TaintEffect::kNoSchedule) {
  DesiredNode d;
  d.node = "n1";
  d.unhealthy_gpus = std::move(gpus);
  d.taint = effect;
  d.condition = {"False", "GpuFault", "GPU 1 fatal"};
  return d;
}

DesiredNode Healthy() {
  DesiredNode d;
  d.node = "n1";
  d.condition = {"True", "GpusHealthy", "every GPU passes its health checks"};
  return d;
}

TEST(HealthWriter, FencePatchSetsAnnotationAndTaintAndKeepsOtherTaints) {
  Json other = {{"key", "dedicated"}, {"value", "ml"}, {"effect", "NoSchedule"}};
  std::optional<Json> p = NodePatch(Node(Json::object(), Json::array({other})), Fenced({1, 5}));
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["metadata"]["annotations"]["chamber.io/unhealthy-gpus"], "1,5");
  EXPECT_EQ((*p)["metadata"]["resourceVersion"], "42");
  EXPECT_EQ((*p)["spec"]["taints"],
            Json::array({other, {{"key", "chamber.io/gpu-unhealthy"}, {"effect", "NoSchedule"}}}));
  EXPECT_FALSE((*p)["metadata"]["annotations"].contains("chamber.io/gpu-health-hold"));
}

TEST(HealthWriter, NothingToWriteWhenTheNodeMatches) {
  Json fenced = Node({{"chamber.io/unhealthy-gpus", "1,5"}},
                     Json::array({{{"key", "chamber.io/gpu-unhealthy"},
                                   {"effect", "NoSchedule"},
                                   {"timeAdded", "2026-01-01T00:00:00Z"}}}));
  EXPECT_FALSE(NodePatch(fenced, Fenced({1, 5})).has_value());
  EXPECT_FALSE(NodePatch(Node(), Healthy()).has_value());
}

TEST(HealthWriter, UnfencePatchRemovesAnnotationAndOnlyOurTaint) {
  Json other = {{"key", "dedicated"}, {"effect", "NoSchedule"}};
  Json node =
      Node({{"chamber.io/unhealthy-gpus", "1"}, {"chamber.io/gpu-health-hold", "true"}},
           Json::array({other, {{"key", "chamber.io/gpu-unhealthy"}, {"effect", "NoExecute"}}}));
  std::optional<Json> p = NodePatch(node, Healthy());
  ASSERT_TRUE(p);
  EXPECT_TRUE((*p)["metadata"]["annotations"]["chamber.io/unhealthy-gpus"].is_null());
  EXPECT_TRUE((*p)["metadata"]["annotations"]["chamber.io/gpu-health-hold"].is_null());
  EXPECT_EQ((*p)["spec"]["taints"], Json::array({other}));
}

TEST(HealthWriter, EffectChangeReplacesTheTaint) {
  Json node = Node({{"chamber.io/unhealthy-gpus", "1"}},
                   Json::array({{{"key", "chamber.io/gpu-unhealthy"}, {"effect", "NoSchedule"}}}));
  std::optional<Json> p = NodePatch(node, Fenced({1}, TaintEffect::kNoExecute));
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["spec"]["taints"],
            Json::array({{{"key", "chamber.io/gpu-unhealthy"}, {"effect", "NoExecute"}}}));
  EXPECT_FALSE((*p)["metadata"].contains("annotations"));
}

TEST(HealthWriter, ConditionPatchTestsTheResourceVersionAndKeepsOtherConditions) {
  Json ready = {{"type", "Ready"}, {"status", "True"}};
  std::optional<Json> p =
      ConditionPatch(Node(Json::object(), nullptr, Json::array({ready})), Fenced({1}), "T1");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0],
            (Json{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", "42"}}));
  EXPECT_EQ((*p)[1]["op"], "add");
  EXPECT_EQ((*p)[1]["path"], "/status/conditions/-");
  EXPECT_EQ((*p)[1]["value"]["type"], "ChamberGPUHealthy");
  EXPECT_EQ((*p)[1]["value"]["status"], "False");
  EXPECT_EQ((*p)[1]["value"]["lastTransitionTime"], "T1");

  Json ours = {{"type", "ChamberGPUHealthy"},
               {"status", "False"},
               {"reason", "GpuFault"},
               {"message", "old"},
               {"lastTransitionTime", "T0"}};
  p = ConditionPatch(Node(Json::object(), nullptr, Json::array({ready, ours})), Fenced({1}), "T2");
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)[1]["op"], "replace");
  EXPECT_EQ((*p)[1]["path"], "/status/conditions/1");
  EXPECT_EQ((*p)[1]["value"]["lastTransitionTime"], "T0");  // same status: no transition
  ours["message"] = "GPU 1 fatal";
  EXPECT_FALSE(
      ConditionPatch(Node(Json::object(), nullptr, Json::array({ready, ours})), Fenced({1}), "T3"));
}

using Labels = std::map<std::string, std::string>;

Json Labeled(Json labels) {
  Json j = Node();
  j["metadata"]["labels"] = std::move(labels);
  return j;
}

DesiredNode WithLabels(Labels labels) {
  DesiredNode d = Healthy();
  d.labels = std::move(labels);
  return d;
}

TEST(HealthWriter, LabelPatchAddsChangesAndRemovesOnlyAgentLabels) {
  const Json foreign = {{"kubernetes.io/hostname", "n1"},
                        {"chamber.io/queue", "team-a"},
                        {"chamber.io/gpu", "keep"},  // not under the agent's prefix
                        {"nvidia.com/gpu.product", "H100"}};
  Json have = foreign;
  have["chamber.io/gpu.count"] = "4";            // changes
  have["chamber.io/gpu.driver"] = "535.104.05";  // stays
  have["chamber.io/gpu.mig"] = "enabled";        // no longer reported: removed
  std::optional<Json> p =
      NodePatch(Labeled(have), WithLabels({{"chamber.io/gpu.count", "8"},
                                           {"chamber.io/gpu.driver", "535.104.05"},
                                           {"chamber.io/gpu.model", "NVIDIA-H200"}}));
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["metadata"]["labels"], (Json{{"chamber.io/gpu.count", "8"},
                                              {"chamber.io/gpu.model", "NVIDIA-H200"},
                                              {"chamber.io/gpu.mig", nullptr}}));
  EXPECT_EQ((*p)["metadata"]["resourceVersion"], "42");  // a conflict fails the write
  EXPECT_FALSE(p->contains("spec"));
  EXPECT_FALSE((*p)["metadata"].contains("annotations"));

  // A node with no labels at all gets them added.
  p = NodePatch(Node(), WithLabels(Labels{{"chamber.io/gpu.count", "0"}}));
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["metadata"]["labels"], (Json{{"chamber.io/gpu.count", "0"}}));
}

TEST(HealthWriter, NoLabelWriteWhenTheyMatchOrTheAgentSendsNone) {
  Json have = {{"kubernetes.io/hostname", "n1"},
               {"chamber.io/gpu.count", "8"},
               {"chamber.io/gpu.model", "NVIDIA-H200"}};
  EXPECT_FALSE(NodePatch(Labeled(have), WithLabels({{"chamber.io/gpu.count", "8"},
                                                    {"chamber.io/gpu.model", "NVIDIA-H200"}}))
                   .has_value());
  EXPECT_FALSE(NodePatch(Labeled(have), Healthy()).has_value());  // nullopt: left alone
  // An empty set removes every agent label, and only those.
  std::optional<Json> p = NodePatch(Labeled(have), WithLabels({}));
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["metadata"]["labels"],
            (Json{{"chamber.io/gpu.count", nullptr}, {"chamber.io/gpu.model", nullptr}}));
}

TEST(HealthWriter, LabelsAndFenceGoInOnePatch) {
  DesiredNode d = Fenced({2});
  d.labels = Labels{{"chamber.io/gpu.count", "8"}};
  std::optional<Json> p = NodePatch(Node(), d);
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["metadata"]["labels"]["chamber.io/gpu.count"], "8");
  EXPECT_EQ((*p)["metadata"]["annotations"]["chamber.io/unhealthy-gpus"], "2");
  EXPECT_EQ((*p)["spec"]["taints"].size(), 1u);
}

TEST(HealthWriter, ObserveFenceReadsTheAnnotations) {
  EXPECT_FALSE(ObserveFence(Node()).has_value());
  std::optional<ObservedFence> f = ObserveFence(
      Node({{"chamber.io/unhealthy-gpus", "0,3"}, {"chamber.io/gpu-health-hold", "true"}}));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->gpus, (std::vector<int>{0, 3}));
  EXPECT_TRUE(f->held);
  EXPECT_FALSE(ObserveFence(Node({{"chamber.io/unhealthy-gpus", "nope"}})).has_value());
}

TEST(HealthWriter, FaultHistoryIsWrittenReadBackAndRemovedWhenEmpty) {
  DesiredNode d = Healthy();
  d.fault_history = {{1, {1764500000.7, 1764503600}}, {5, {1764510000}}};
  std::optional<Json> p = NodePatch(Node(), d);
  ASSERT_TRUE(p);
  const std::string text = (*p)["metadata"]["annotations"]["chamber.io/gpu-fault-history"];
  EXPECT_EQ(text, "1:1764500000,1764503600;5:1764510000");
  EXPECT_FALSE(NodePatch(Node({{"chamber.io/gpu-fault-history", text}}), d).has_value());
  // Read back by a new leader: the history alone is reason enough to restore the node.
  std::optional<ObservedFence> f = ObserveFence(Node({{"chamber.io/gpu-fault-history", text}}));
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->gpus.empty());
  EXPECT_EQ(f->history, (FaultHistory{{1, {1764500000, 1764503600}}, {5, {1764510000}}}));
  EXPECT_EQ(f->history_error, "");
  p = NodePatch(Node({{"chamber.io/gpu-fault-history", text}}), Healthy());
  ASSERT_TRUE(p);
  EXPECT_TRUE((*p)["metadata"]["annotations"]["chamber.io/gpu-fault-history"].is_null());
}

TEST(HealthWriter, GpuUuidsFollowTheAgentsInventory) {
  DesiredNode d = Healthy();
  EXPECT_FALSE(NodePatch(Node({{"chamber.io/gpu-uuids", "set-by-hand"}}), d).has_value())
      << "no GPUs reported: left alone";
  d.gpu_uuids = {"GPU-a", "", "GPU-c"};  // GPU 1 missing from the inventory
  std::optional<Json> p = NodePatch(Node(), d);
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)["metadata"]["annotations"]["chamber.io/gpu-uuids"], "GPU-a,,GPU-c");
  EXPECT_FALSE(NodePatch(Node({{"chamber.io/gpu-uuids", "GPU-a,,GPU-c"}}), d).has_value());
}

TEST(HealthWriter, BadFaultHistoryNamesTheEntryAndKeepsTheFence) {
  EXPECT_EQ(ParseFaultHistory("").value(), FaultHistory{});
  EXPECT_EQ(ParseFaultHistory("3:20,10").value(), (FaultHistory{{3, {10, 20}}}));
  const std::pair<const char*, const char*> bad[] = {
      {"1", "entry \"1\": expected <gpu index>:<times>"},
      {"x:1", "entry \"x:1\": the GPU index is not a number from 0 to 1023"},
      {"2000:1", "the GPU index is not a number from 0 to 1023"},
      {"1:5;1:6", "entry \"1:6\": GPU index listed twice"},
      {"1:", "\"\" is not a time in unix seconds"},
      {"1:5,,6", "\"\" is not a time in unix seconds"},
      {"1:-5", "\"-5\" is not a time in unix seconds"},
      {"1:5.5", "\"5.5\" is not a time in unix seconds"},
      {"1:5;", "entry \"\": expected <gpu index>:<times>"},
  };
  for (const auto& [text, why] : bad) {
    Result<FaultHistory> r = ParseFaultHistory(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("chamber.io/gpu-fault-history"), std::string::npos);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
  std::optional<ObservedFence> f = ObserveFence(
      Node({{"chamber.io/unhealthy-gpus", "2"}, {"chamber.io/gpu-fault-history", "2:x"}}));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->gpus, std::vector<int>{2});
  EXPECT_TRUE(f->history.empty());
  EXPECT_NE(f->history_error.find("\"x\" is not a time"), std::string::npos) << f->history_error;
}

}  // namespace
}  // namespace chamber::health
