#include "kubesim/nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chamber::kubesim {
namespace {

using ::testing::HasSubstr;

TEST(KubesimFakeNodeObject, CapacityLabelsTaintsAndReady) {
  NodePoolSpec spec;
  spec.prefix = "h100";
  spec.gpus = 4;
  spec.labels["topology.kubernetes.io/zone"] = "zone-a";
  spec.taints.push_back({"dedicated", "ml", "NoSchedule"});
  const kube::Json obj = FakeNodeObject(spec, 300);
  Result<kube::Node> node = kube::Node::FromJson(obj);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->metadata.name, "h100-300");
  EXPECT_EQ(node->capacity.Get(kGpuResource), 4);
  EXPECT_EQ(node->allocatable.Get(kGpuResource), 4);
  EXPECT_EQ(node->allocatable.Get("cpu"), 96'000);
  EXPECT_EQ(node->allocatable.Get("pods"), 110);
  EXPECT_EQ(node->metadata.labels.at(kFakeNodeLabel), "true");
  EXPECT_EQ(node->metadata.labels.at(kGpuProductLabel), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(node->metadata.labels.at("topology.kubernetes.io/zone"), "zone-a");
  ASSERT_EQ(node->taints.size(), 1u);
  EXPECT_EQ(node->taints[0].effect, "NoSchedule");
  EXPECT_TRUE(node->Ready());
  EXPECT_EQ(node->conditions.size(), 4u);
  EXPECT_EQ(node->addresses[0].address, "10.64.1.44");
}

TEST(KubesimFakeNodeAddress, Distinct) {
  EXPECT_EQ(FakeNodeAddress(0), "10.64.0.0");
  EXPECT_EQ(FakeNodeAddress(65536 + 258), "10.65.1.2");
  EXPECT_NE(FakeNodeAddress(4999), FakeNodeAddress(5000));
}

TEST(KubesimValidate, NamesTheField) {
  NodePoolSpec spec;
  EXPECT_TRUE(Validate(spec).ok());
  spec.prefix = "Bad_Prefix";
  EXPECT_THAT(Validate(spec).message(), HasSubstr("field prefix: \"Bad_Prefix\""));
  spec = {};
  spec.cpu = "lots";
  EXPECT_THAT(Validate(spec).message(), HasSubstr("field cpu: \"lots\""));
  spec = {};
  spec.gpus = -1;
  EXPECT_THAT(Validate(spec).message(), HasSubstr("field gpus"));
  spec = {};
  spec.taints.push_back({"k", "", "Sometimes"});
  EXPECT_THAT(Validate(spec).message(), HasSubstr("effect \"Sometimes\""));
}

TEST(KubesimParseLabelAndTaint, GoodAndBad) {
  auto label = ParseLabel("topology.kubernetes.io/zone=a", "--label");
  ASSERT_TRUE(label.ok());
  EXPECT_EQ(label->first, "topology.kubernetes.io/zone");
  EXPECT_EQ(label->second, "a");
  EXPECT_THAT(ParseLabel("novalue", "--label").status().message(),
              HasSubstr("--label: \"novalue\" is not key=value"));

  auto taint = ParseTaint("gpu=broken:NoExecute", "--taint");
  ASSERT_TRUE(taint.ok());
  EXPECT_EQ(taint->key, "gpu");
  EXPECT_EQ(taint->value, "broken");
  EXPECT_EQ(taint->effect, "NoExecute");
  auto bare = ParseTaint("dedicated:NoSchedule", "--taint");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->value, "");
  EXPECT_THAT(ParseTaint("gpu=x", "--taint").status().message(), HasSubstr("key[=value]:Effect"));
  EXPECT_THAT(ParseTaint("gpu:Never", "--taint").status().message(), HasSubstr("\"Never\""));
  EXPECT_THAT(ParseTaint("=x:NoSchedule", "--taint").status().message(), HasSubstr("empty key"));
}

}  // namespace
}  // namespace chamber::kubesim
