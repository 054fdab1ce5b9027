#include "common/kube_labels.h"

#include <string>

#include <gtest/gtest.h>

namespace chamber {
namespace {

TEST(KubeLabelsTest, ValuesAreUpTo63LabelCharactersAlphanumericAtBothEnds) {
  EXPECT_TRUE(IsLabelValue(""));
  EXPECT_TRUE(IsLabelValue("H100-SXM5-80GB"));
  EXPECT_TRUE(IsLabelValue("a.b_c-d"));
  EXPECT_TRUE(IsLabelValue(std::string(63, 'x')));
  EXPECT_FALSE(IsLabelValue(std::string(64, 'x')));
  EXPECT_FALSE(IsLabelValue("-a"));
  EXPECT_FALSE(IsLabelValue("a."));
  EXPECT_FALSE(IsLabelValue("a b"));
  EXPECT_FALSE(IsLabelValue("a/b"));
  EXPECT_FALSE(IsLabelValue("caf\xc3\xa9"));  // not ASCII
}

TEST(KubeLabelsTest, KeysAreANameAfterAnOptionalDnsSubdomainPrefix) {
  EXPECT_TRUE(IsLabelKey("pool"));
  EXPECT_TRUE(IsLabelKey("chamber.io/gpu.model"));
  EXPECT_TRUE(IsLabelKey("cloud.google.com/gke-accelerator"));
  EXPECT_FALSE(IsLabelKey(""));
  EXPECT_FALSE(IsLabelKey("chamber.io/"));
  EXPECT_FALSE(IsLabelKey("/name"));
  EXPECT_FALSE(IsLabelKey("Chamber.io/name"));  // the prefix is lower case
  EXPECT_FALSE(IsLabelKey("a/b/c"));
  EXPECT_FALSE(IsLabelKey("cloud.goog\xbc/x"));
  EXPECT_FALSE(IsLabelKey(std::string(254, 'a') + "/x"));
  EXPECT_TRUE(IsLabelKey(std::string(253, 'a') + "/x"));
}

}  // namespace
}  // namespace chamber
