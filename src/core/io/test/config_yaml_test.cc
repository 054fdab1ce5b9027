#include "core/io/config_yaml.h"

#include <gtest/gtest.h>

namespace chamber::core::io {
namespace {

TEST(EngineConfigYaml, EmptyMeansDefaults) {
  Result<EngineConfig> c = ParseEngineConfig("", "c.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->min_runtime, EngineConfig{}.min_runtime);
  EXPECT_EQ(c->max_preemptions_per_window, 3);
}

TEST(EngineConfigYaml, ReadsEveryField) {
  Result<EngineConfig> c = ParseEngineConfig(R"(
queueOrder: DominantShare
fairShare: {usageHalfLife: 2h, usageWeight: 0.5}
queueing: StrictFIFO
preemption:
  reclaim: false
  priority: true
  minRuntime: 10m
  maxPerWindow: 2
  window: 30m
  checkpointGraceSeconds: 120
  onUnhealthyGpu: false
cyclePeriod: 500ms
)",
                                             "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->queue_order, QueueOrder::kDominantShare);
  EXPECT_EQ(c->usage_half_life, std::chrono::hours(2));
  EXPECT_DOUBLE_EQ(c->usage_weight, 0.5);
  EXPECT_EQ(c->default_queueing, QueueingStrategy::kStrictFifo);
  EXPECT_FALSE(c->reclaim_enabled);
  EXPECT_TRUE(c->priority_preemption_enabled);
  EXPECT_EQ(c->min_runtime, std::chrono::minutes(10));
  EXPECT_EQ(c->max_preemptions_per_window, 2);
  EXPECT_EQ(c->preemption_window, std::chrono::minutes(30));
  EXPECT_EQ(c->default_checkpoint_grace_seconds, 120);
  EXPECT_FALSE(c->preempt_on_unhealthy_gpu);
  EXPECT_EQ(c->cycle_period, Duration(500));
}

TEST(EngineConfigYaml, RoundTripsThroughItsOwnOutput) {
  EngineConfig c;
  c.usage_half_life = std::chrono::hours(6);
  c.min_runtime = std::chrono::minutes(3);
  c.default_queueing = QueueingStrategy::kStrictFifo;
  c.queue_order = QueueOrder::kOldestHead;
  Result<EngineConfig> back = ParseEngineConfig(EngineConfigToYaml(c), "roundtrip");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(EngineConfigToYaml(*back), EngineConfigToYaml(c));
}

struct BadConfig {
  const char* yaml;
  const char* expected;
};

class EngineConfigErrors : public testing::TestWithParam<BadConfig> {};

TEST_P(EngineConfigErrors, NameTheField) {
  Result<EngineConfig> c = ParseEngineConfig(GetParam().yaml, "chamber.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EngineConfigErrors,
    testing::Values(
        BadConfig{
            "preemption:\n  minRuntime: 5 minutes\n",
            "chamber.yaml:2:15: field preemption.minRuntime: \"5 minutes\" is not a duration"},
        BadConfig{"preemption:\n  maxPerWindow: 0\n", "field preemption.maxPerWindow: must be"},
        BadConfig{"preemption:\n  minRuntme: 5m\n", "field preemption.minRuntme: unknown field"},
        BadConfig{"queueing: fifo\n", "field queueing: expected BestEffort or StrictFIFO"},
        BadConfig{"queueOrder: drf\n", "field queueOrder: expected FairShare"},
        BadConfig{"cyclePeriod: 1ms\n", "field cyclePeriod: must be at least 10ms"},
        BadConfig{"fairShare: 3\n", "field fairShare: expected a mapping"},
        BadConfig{"preemption: {reclaim: yes}\n",
                  "field preemption.reclaim: expected true or false"}));

TEST(EngineConfigYaml, ReadsItsFieldsOfTheSharedFile) {
  Result<ConfigFile> f = ConfigFile::Parse(
      "cyclePeriod: 2s\nhealth:\n  enabled: false\npricing:\n  currency: EUR\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  Result<EngineConfig> c = ReadEngineConfig(*f);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cycle_period, Duration(2000));
  // No file: the defaults.
  c = ReadEngineConfig(ConfigFile());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cycle_period, EngineConfig{}.cycle_period);
}

}  // namespace
}  // namespace chamber::core::io
